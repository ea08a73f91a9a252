"""k8sbridge-sync with a real slurmctld/slurmd (the rig) and a real Kubernetes
(KubeCluster, kwok's nodes): safety.

- With the control plane down for 60 s (kube-apiserver stopped: every request fails,
  its connection refused), nothing is deleted, drained or downed; the metrics say
  Kubernetes cannot be read; once the API server is back the daemon recovers by
  itself and then does what it could not do meanwhile.
- Two daemons: only the leader acts; killed, the other takes over within the lease
  duration.
"""

import signal
import sys
import time

from harness.rig import wait_for
from harness.sync import SyncRigTestCase
from harness.testcase import main

LEASE = 6  # SyncLeaseDuration in SyncRigTestCase.sync_keys
RETRY = 1  # the daemons retry the lease every lease/7 s, at least 1 s
OUTAGE = 60
FRESH_K8S = 'k8sbridge_sync_source_fresh{side="kubernetes"}'


class SyncApiDown(SyncRigTestCase):

    def test_api_down_does_nothing_destructive_and_recovers(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            self.power_up(rig, ["w-0", "w-1"])
            d = self.start_daemon(rig)
            self.wait_leader(d)
            uids = {n: self.pod(n)["metadata"]["uid"] for n in ("w-0", "w-1")}

            # The control plane's machine goes down: its API server, and its
            # controller-manager with it. (One that lived through the outage would
            # have seen no node Lease renewed for longer than its grace period and
            # could mark the kwok nodes Unknown as the API server comes back: a lost
            # node, which is test_sync_lost_node.py's.)
            self.kube.stop("kube-controller-manager")
            self.kube.stop("kube-apiserver")
            self.assertFalse(self.kube.answers())
            start = time.monotonic()
            saw_unreadable = False
            drained_meanwhile = False
            while time.monotonic() - start < OUTAGE:
                for name, node in rig.nodes().items():
                    self.assertNotIn("DOWN", node["State"], f"{name}: {node}")
                    self.assertFalse(node.get("Reason", "").startswith("k8sbridge:"), node)
                m = d.metrics()
                if m.get(FRESH_K8S) == 0 and m.get("k8sbridge_sync_leader") == 0:
                    saw_unreadable = True
                if saw_unreadable and not drained_meanwhile:
                    # Work for later: an admin's hardware drain while the API is away.
                    rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                                      "reason=[hardware] xid 48"])
                    drained_meanwhile = True
                time.sleep(1)  # the outage has a length; this only paces the checks
            self.assertTrue(saw_unreadable, f"metrics never said so; log:\n{d.log()[-3000:]}")
            self.assertIn("Kubernetes cannot be read", d.log())

            self.kube.start("kube-apiserver")  # returns once it is ready
            self.kube.start("kube-controller-manager")
            wait_for(lambda: d.metric(FRESH_K8S) == 1 and
                     d.metric("k8sbridge_sync_leader") == 1, 60,
                     lambda: f"the daemon to recover; log:\n{d.log()[-3000:]}")
            # What it could not do meanwhile, it does now.
            wait_for(lambda: self.knode("node-0")["spec"].get("unschedulable"), 30,
                     "node-0 cordoned after the outage")
            for name in ("w-0", "w-1"):
                self.assertEqual(self.pod(name)["metadata"]["uid"], uids[name])
            self.assertNotIn("DOWN", rig.node("w-1")["State"])
            self.assertNotIn("DRAIN", rig.node("w-1")["State"])
        self.assertNoLeftovers()


class SyncTwoDaemons(SyncRigTestCase):

    def test_only_the_leader_acts_and_the_other_takes_over(self):
        with self.make_rig() as rig:
            self.kubelet(rig, names=("w-0",))
            self.power_up(rig, ["w-0"])
            a = self.start_daemon(rig, "a")
            self.wait_leader(a)
            b = self.start_daemon(rig, "b", conf=self.write_conf("k8sbridge-b.conf"))
            wait_for(lambda: "k8sbridge_sync_leader" in b.metrics(), 30, "b's metrics")

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              "reason=maintenance"])
            wait_for(lambda: self.pod("w-0")["metadata"].get("annotations", {}).get(
                "k8sbridge.io/slurm-drain-reason") == "maintenance", 30, "the drain mirrored")
            self.assertEqual(b.metric("k8sbridge_sync_leader"), 0)
            self.assertEqual(b.actions(), 0, b.log())
            self.assertGreaterEqual(a.actions(), 1)

            a.stop(signal.SIGKILL)  # no release: b must wait for the lease to run out
            killed = time.monotonic()
            wait_for(lambda: b.metric("k8sbridge_sync_leader") == 1, LEASE + RETRY + 1,
                     lambda: f"b to lead within the lease duration; log:\n{b.log()[-3000:]}")
            print(f"takeover after {time.monotonic() - killed:.1f} s (lease {LEASE} s)",
                  file=sys.stderr)
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=resume"])
            wait_for(lambda: "k8sbridge.io/slurm-drain-reason" not in self.pod("w-0")[
                "metadata"].get("annotations", {}), 30, "b to clear the mirror")
            self.assertGreaterEqual(b.actions(), 1)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
