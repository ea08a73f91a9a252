"""k8sbridge-sync with a real slurmctld/slurmd (the rig) and a real Kubernetes
(KubeCluster, its nodes played by kwok): drains in both directions.

- An admin's hardware drain cordons and taints the Kubernetes node and annotates the
  pod; a resume undoes both. A cordon made by someone else is left alone (and drains
  the Slurm node with a k8sbridge: reason until it is lifted). `--once` does one pass,
  and refuses while a daemon holds the Lease.
- A Kubernetes node NotReady (Ready False, posted as its kubelet while its Lease is
  still renewed) drains its Slurm node with a k8sbridge: reason; when it is Ready
  again the drain is undone, and an admin drain on another node is untouched.
"""

import os
import subprocess

from harness.paths import SYNC
from harness.rig import in_slurm_root, wait_for
from harness.sync import SyncRigTestCase
from harness.testcase import main

TAINT = "k8sbridge.io/hardware"


def taint_keys(node):
    return [t["key"] for t in node["spec"].get("taints", [])]


class SyncDrains(SyncRigTestCase):

    def test_hardware_drain_cordons_and_resume_undoes_only_ours(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            self.power_up(rig, ["w-0", "w-1"])
            d = self.start_daemon(rig)
            self.wait_leader(d)

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              "reason=[hardware] xid 79"])

            def cordoned():
                n = self.knode("node-0")
                pod = self.pod("w-0")
                ann = pod["metadata"].get("annotations", {})
                return (n["spec"].get("unschedulable") and TAINT in taint_keys(n) and
                        ann.get("k8sbridge.io/slurm-drain-reason") == "[hardware] xid 79")
            wait_for(cordoned, 30, lambda: f"node-0 cordoned and tainted; log:\n{d.log()[-3000:]}")
            n = self.knode("node-0")
            self.assertEqual(n["metadata"]["annotations"]["k8sbridge.io/cordoned-by"], "rig")
            self.assertEqual(n["metadata"]["annotations"]["k8sbridge.io/hardware-drains"], "w-0")
            ann = self.pod("w-0")["metadata"]["annotations"]
            self.assertEqual(ann["k8sbridge.io/slurm-drain-user"], "root")
            self.assertTrue(ann["k8sbridge.io/slurm-drain-time"].endswith("Z"))
            # The other node is untouched.
            self.assertFalse(self.knode("node-1")["spec"].get("unschedulable"))
            # An Event on the pod says so.
            events = self.kube.kubectl_json("get", "events", "-n", "default")["items"]
            self.assertIn("SlurmNodeDrained", [e.get("reason") for e in events])

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=resume"])

            def undone():
                n = self.knode("node-0")
                ann = self.pod("w-0")["metadata"].get("annotations", {})
                return (not n["spec"].get("unschedulable") and TAINT not in taint_keys(n) and
                        "k8sbridge.io/slurm-drain-reason" not in ann and
                        "k8sbridge.io/cordoned-by" not in n["metadata"].get("annotations", {}))
            wait_for(undone, 30, lambda: f"node-0 uncordoned; log:\n{d.log()[-3000:]}")

            # Someone else cordons node-0: w-0 is drained with our reason ...
            self.kube.kubectl("cordon", "node-0")
            wait_for(lambda: rig.node("w-0").get("Reason", "").startswith(
                     "k8sbridge: Kubernetes node node-0 cordoned"), 30, "w-0 drained by us")
            self.assertIn("DRAIN", rig.node("w-0")["State"])
            # ... an admin then drains it for hardware: our taint, but no cordon marker.
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              "reason=[hardware] ecc"])
            wait_for(lambda: TAINT in taint_keys(self.knode("node-0")), 30, "our taint")
            self.assertNotIn("k8sbridge.io/cordoned-by",
                             self.knode("node-0")["metadata"].get("annotations", {}))
            # Resume: our taint goes, their cordon stays, and w-0 is drained again for it.
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=resume"])
            wait_for(lambda: TAINT not in taint_keys(self.knode("node-0")), 30,
                     "our taint removed")
            wait_for(lambda: rig.node("w-0").get("Reason", "").startswith(
                     "k8sbridge: Kubernetes node node-0 cordoned"), 30, "w-0 drained again")
            self.assertTrue(self.knode("node-0")["spec"].get("unschedulable"))
            # Lifted by its owner: our drain is undone.
            self.kube.kubectl("uncordon", "node-0")
            wait_for(lambda: "DRAIN" not in rig.node("w-0")["State"], 30, "w-0 undrained")

            # --once while the daemon leads: refused (it takes the Lease to act), and
            # nothing done.
            once = subprocess.run(
                in_slurm_root([str(SYNC), "--config", self.conf["path"], "--once"]),
                env=dict(os.environ, SLURM_CONF=str(rig.slurm_conf)),
                capture_output=True, text=True, timeout=60)
            self.assertEqual(once.returncode, 1, once.stderr)
            self.assertIn("is held by a", once.stderr)
            self.assertNotIn("one pass", once.stderr)
            # --once: one pass without the daemon (it takes the Lease the daemon released).
            d.stop()
            rig.check_output(["scontrol", "update", "nodename=w-1", "state=drain",
                              "reason=NVLink errors"])
            once = subprocess.run(
                in_slurm_root([str(SYNC), "--config", self.conf["path"], "--once"]),
                env=dict(os.environ, SLURM_CONF=str(rig.slurm_conf)),
                capture_output=True, text=True, timeout=60)
            self.assertEqual(once.returncode, 0, once.stderr)
            self.assertIn("cordon node-1", once.stderr)
            n = self.knode("node-1")
            self.assertTrue(n["spec"].get("unschedulable"))
            self.assertIn(TAINT, taint_keys(n))
        self.assertNoLeftovers()

    def test_not_ready_node_drains_and_recovery_undrains_only_ours(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            self.power_up(rig, ["w-0", "w-1"])
            d = self.start_daemon(rig)
            self.wait_leader(d)
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              "reason=admin: fan replacement"])

            # Ready False: the kubelet posts NotReady (a lost node, Ready Unknown, is
            # test_sync_lost_node.py's).
            self.set_ready("node-1", "False")

            node = rig.wait_reason("w-1", "k8sbridge:", 30,
                                   lambda: f"w-1 drained; log:\n{d.log()[-3000:]}")
            self.assertIn("DRAIN", node["State"])
            self.assertIn("Kubernetes node node-1 NotReady (False)", node["Reason"])
            self.assertIn("container runtime network not ready", node["Reason"])
            # Mirrored back onto the pod, like any drain.
            wait_for(lambda: self.pod("w-1")["metadata"].get("annotations", {}).get(
                "k8sbridge.io/slurm-drain-reason", "").startswith("k8sbridge:"), 30,
                "w-1's drain mirrored")

            self.set_ready("node-1", "True")
            wait_for(lambda: "DRAIN" not in rig.node("w-1")["State"], 30,
                     lambda: f"w-1 undrained; log:\n{d.log()[-3000:]}")
            w0 = rig.node("w-0")
            self.assertIn("DRAIN", w0["State"])
            self.assertTrue(w0["Reason"].startswith("admin: fan replacement"), w0["Reason"])
            wait_for(lambda: "k8sbridge.io/slurm-drain-reason" not in self.pod("w-1")[
                "metadata"].get("annotations", {}), 30, "w-1's mirror cleared")
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
