"""Worker pods on lost Kubernetes nodes, end to end: the real Kubernetes with three
real nodes whose kubelets run the worker pods as containers (real k8sbridge-worker
and slurmd in them, harness.cluster.PodCluster), the rig's slurmctld running
k8sbridge-power, and a k8sbridge-sync daemon.

- A lost node (its kubelet stopped, for longer than the node controller's grace
  period and the pods' tolerations; the containers run on): the Slurm node of the
  job's pod goes DOWN with a k8sbridge: reason naming the node, within
  SyncPollInterval + 2 s of the node's Ready transition to Unknown; the job
  requeues; the next resume of that Slurm node gets a running pod on another node
  at once (RetryDeadline is far beyond the test's time-outs, so waiting for the
  stuck pod would fail it); when the kubelet is started again, it finishes the
  stuck pod, and everything powers down (no down~, no orphan pod).
- kubectl drain of the node under a running job's pod: the Slurm node goes DOWN with
  a k8sbridge: reason, the job is requeued and runs again on a pod on another node,
  no pod is made on the drained node, and after kubectl uncordon the node is used
  again.
"""

import calendar
import math
import os
import re
import shutil
import sys
import tempfile
import time
import unittest
from pathlib import Path

from harness.cluster import SHORT_TOLERATIONS as TOLERATIONS, PodCluster
from harness.paths import SYNC
from harness.rig import NodeSpec, free_tcp_port, wait_for
from harness.sync import Daemon
from harness.testcase import RigTestCase, main

POLL = 0.25  # SyncPollInterval below, in seconds
NODES = [NodeSpec("w-0"), NodeSpec("w-1")]
GROUPS = [("w", "w-[0-1]", "")]


def seconds(rfc3339: str) -> int:
    return calendar.timegm(time.strptime(rfc3339[:19], "%Y-%m-%dT%H:%M:%S"))


def reason_time(reason: str) -> int:
    """The time slurmctld set a node's reason, from `scontrol -o`'s [user@time]."""
    m = re.search(r"\[[^@\]]*@(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\]\s*$", reason)
    if not m:
        raise AssertionError(f"no time in the reason {reason!r}")
    return int(time.mktime(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")))  # local time


class LostNodeTestCase(RigTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("needs root")
        if not SYNC.exists():
            self.skipTest(f"{SYNC} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="lost-node-"))
        self.dir.chmod(0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        port = free_tcp_port()
        self.cluster = PodCluster(
            NODES, GROUPS, fake_nodes=3, suspend_time=20, retry_deadline=3600,
            conf_extra=("SyncPollInterval=250ms SyncLeaseDuration=6s SyncOrphanGrace=10s "
                        f"SyncMetricsListen=127.0.0.1:{port}"),
            # A requeued job may start again after about 11 s instead of 121 s. With
            # Slurm's default ReturnToService=1 (a later line wins over the rig's 2)
            # slurmctld does not return the DOWN node itself when the old pod's slurmd
            # answers: k8sbridge-sync must.
            slurm_conf_extra=lambda rig: (f"AuthInfo=socket={rig.munge_socket},cred_expire=10\n"
                                          "ReturnToService=1\n"),
            extra_templates={"worker.yaml": lambda c: c.template() + TOLERATIONS})
        self.cluster.__enter__()
        self.addCleanup(self.cluster.close)
        self.child_rig_ids += self.cluster.rig_ids
        self.rig, self.sim = self.cluster.rig, self.cluster.sim
        self.daemon = Daemon({"path": str(self.cluster.conf_path), "port": port},
                             self.rig.slurm_conf, "lost", self.dir, wrap=self.rig.host_command)
        self.addCleanup(self._stop_daemon)
        wait_for(lambda: self.daemon.metric("k8sbridge_sync_leader") == 1, 60,
                 lambda: f"k8sbridge-sync to lead; log:\n{self.daemon.log()[-3000:]}")

    def _stop_daemon(self):
        if self.daemon.proc.returncode is not None:
            return
        self.daemon.stop()
        if self.daemon.proc.returncode not in (0, -9) or os.environ.get("SYNC_TEST_LOGS"):
            print(f"--- k8sbridge-sync:\n{self.daemon.log()[-6000:]}", file=sys.stderr)

    def finish(self):
        """Stops the daemon and the cluster, then looks for what they left."""
        self._stop_daemon()
        self.cluster.close()
        self.assertNoLeftovers()

    def explain(self) -> str:
        return f"{self.cluster.describe()}\nsync log:\n{self.daemon.log()[-3000:]}"

    def wait(self, predicate, timeout, what):
        try:
            return wait_for(predicate, timeout, what)
        except Exception as e:  # noqa: BLE001 - add the cluster's state
            raise AssertionError(f"{e}\n{self.explain()}") from None

    def pods_of(self, node):
        """The pods of Slurm node `node`, by its label (a replacement has another name)."""
        status, _, body = self.sim.request(
            "GET", f"/api/v1/namespaces/default/pods?labelSelector=k8sbridge.io/node%3D{node}")
        self.assertEqual(status, 200, body)
        return body["items"]

    def live_pod(self, node):
        for pod in self.pods_of(node):
            if not pod["metadata"].get("deletionTimestamp") and \
                    pod.get("status", {}).get("phase") == "Running":
                return pod
        return None

    def start_job(self):
        """A job on w-0 whose first run waits to be killed and whose rerun ends."""
        marker = self.rig.workdir / f"first-run-{time.monotonic_ns()}"
        out = self.rig.workdir / f"job-{time.monotonic_ns()}.out"
        job = self.rig.sbatch(
            f"#!/bin/sh\nif [ -e {marker} ]; then hostname; exit 0; fi\n"
            f"touch {marker}\nsleep 600\n", ["-N1", "-w", "w-0", "--requeue", "-o", str(out)])
        self.wait(lambda: self.rig.job(job)["JobState"] == "RUNNING" and marker.exists(), 240,
                  "the job's first run on w-0")
        pod = self.live_pod("w-0")
        self.assertIsNotNone(pod, self.explain())
        return job, out, pod

    def wait_rerun(self, job, out, old_host):
        self.wait(lambda: int(self.rig.job(job).get("Restarts", "0")) >= 1, 60,
                  "the job to be requeued")
        self.wait(lambda: self.rig.job(job)["JobState"] == "COMPLETED", 240,
                  "the requeued job to complete")
        self.assertEqual(out.read_text().split(), ["w-0"])
        pod = self.live_pod("w-0") or {}
        host = pod.get("spec", {}).get("nodeName")
        self.assertIsNotNone(host, self.explain())
        self.assertNotEqual(host, old_host, self.explain())
        return pod

    def wait_all_powered_down(self):
        def quiet():
            nodes = self.rig.nodes()
            states = {n: nodes[n]["State"] for n in ("w-0", "w-1")}
            status, _, pods = self.sim.request("GET", "/api/v1/namespaces/default/pods")
            left = [p["metadata"]["name"] for p in pods.get("items", [])]
            ok = all(s.startswith("IDLE") and "POWERED_DOWN" in s for s in states.values())
            return (states, left) if ok and not left else None
        return self.wait(quiet, 180, "w-0 and w-1 IDLE+POWERED_DOWN with no pod left")


class SyncLostNode(LostNodeTestCase):

    def test_lost_node_downs_at_once_and_the_next_resume_does_not_wait(self):
        job, out, pod = self.start_job()
        host = pod["spec"]["nodeName"]
        # The node is lost: its kubelet stops (the cluster's close ends the rest).
        self.cluster.stop_kubelet(host)

        # The node controller marks the node Unknown once its Lease is older than
        # --node-monitor-grace-period (50 s by default), noticed within its 5 s period.
        prefix = f"k8sbridge: Kubernetes node {host} lost"
        node = self.wait(lambda: (lambda n: n if n.get("Reason", "").startswith(prefix) else None)(
            self.rig.node("w-0")), 120, f"w-0 DOWN with a reason starting {prefix!r}")
        self.assertIn("DOWN", node["State"])
        self.assertIn("Kubelet stopped posting node status", node["Reason"])
        ready = next(c for c in self.cluster.k8s_node(host)["status"]["conditions"]
                     if c["type"] == "Ready")
        self.assertEqual(ready["status"], "Unknown")
        # The bound, from the two clocks' whole seconds: Kubernetes' Ready
        # transition and slurmctld's time of the DOWN's reason (both this host's).
        late = reason_time(node["Reason"]) - seconds(ready["lastTransitionTime"])
        print(f"NotReady -> DOWN: {late} s (whole seconds)", file=sys.stderr)
        self.assertLessEqual(late, math.ceil(POLL + 2), node)

        pod = self.wait_rerun(job, out, host)
        self.assertNotEqual(pod["metadata"]["name"], "w-0", "a replacement under a fresh name")
        self.assertNotIn("still there when RetryDeadline", self.cluster.power_log.read_text())

        # The node comes back: its kubelet stops the stuck pod's container and
        # finishes its deletion.
        self.cluster.start_kubelet(host)
        self.wait(lambda: all(p["spec"].get("nodeName") != host for p in self.pods_of("w-0")),
                  60, f"the stuck pod on {host} to go")
        self.wait_all_powered_down()
        self.assertIn("sync: resume w-0: back to service", self.daemon.log())
        self.finish()



class SyncDrainedNode(LostNodeTestCase):

    def test_kubectl_drain_downs_requeues_elsewhere_and_uncordon_restores(self):
        job, out, pod = self.start_job()
        host = pod["spec"]["nodeName"]
        self.addCleanup(self.sim.kubectl, "uncordon", host, check=False)
        self.sim.kubectl("drain", host, "--ignore-daemonsets", "--force",
                         "--delete-emptydir-data", "--timeout=120s", timeout=180)

        # The cordon drains w-0, the eviction fails it: DOWN, with our reason.
        node = self.wait(lambda: (lambda n: n if n.get("Reason", "").startswith(
            "k8sbridge: pod ") and "DOWN" in n["State"] else None)(self.rig.node("w-0")), 60,
            "w-0 DOWN with a k8sbridge: reason")
        self.assertIn("evicted", node["Reason"])
        pod = self.wait_rerun(job, out, host)
        # No pod was made on the drained node.
        status, _, pods = self.sim.request("GET", "/api/v1/namespaces/default/pods")
        self.assertEqual([p["metadata"]["name"] for p in pods["items"]
                          if p["spec"].get("nodeName") == host], [], self.explain())
        self.assertTrue(self.cluster.k8s_node(host)["spec"].get("unschedulable"))

        self.sim.kubectl("uncordon", host)
        self.assertFalse(self.cluster.k8s_node(host)["spec"].get("unschedulable"))
        # Both Slurm nodes serve again, and nothing is left drained or down.
        out2 = self.rig.workdir / "after.out"
        nxt = self.rig.sbatch("#!/bin/sh\nsrun hostname | sort\n",
                              ["-N2", "-w", "w-[0-1]", "-o", str(out2)])
        self.wait(lambda: self.rig.job(nxt)["JobState"] == "COMPLETED", 240,
                  "a job on both nodes after the uncordon")
        self.assertEqual(out2.read_text().split(), ["w-0", "w-1"])
        hosts = {p["spec"].get("nodeName") for n in ("w-0", "w-1") for p in self.pods_of(n)}
        print(f"after the uncordon the pods ran on {sorted(hosts)} (drained: {host})",
              file=sys.stderr)
        for name, n in self.rig.nodes().items():
            self.assertNotIn("DRAIN", n["State"], name)
        self.wait_all_powered_down()
        self.finish()

if __name__ == "__main__":
    main()
