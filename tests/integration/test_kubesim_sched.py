"""kubesim's scheduler, driven through the real kubectl: GPUs, nodeSelector, pod affinity
on an InfiniBand leaf, kube-scheduler's Unschedulable message, cordon and taints.

The stand-in starts with 4 generated nodes of 8 nvidia.com/gpu each, node-0 and node-1
on InfiniBand leaf-0, node-2 and node-3 on leaf-1. No kubelet runs: bound pods stay
Pending, which is all the scheduler needs.
"""

import json
import subprocess
import unittest

from harness.kubesim import KUBESIM, KubeSim, wait_for

LEAF = "network.topology.nvidia.com/leaf"


class SchedulingKubeSim(KubeSim):
    """KubeSim with its scheduler running (the shared harness turns it off)."""

    def __init__(self, *args):
        super().__init__(*args, scheduler=True)


def pod(name, gpus=0, node_selector=None, affinity=None, labels=None, tolerations=None):
    spec = {"containers": [{"name": "c", "image": "registry.example/train:1",
                            "command": ["sleep", "3600"]}]}
    if gpus:
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": labels or {}},
            "spec": spec}


class SchedulerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not KUBESIM.exists():
            raise unittest.SkipTest(f"{KUBESIM} is not built")
        cls.sim = SchedulingKubeSim("--fake-nodes", "4", "--gpus-per-node", "8",
                                    "--ib-leaves", "2")

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()

    def tearDown(self):
        self.sim.kubectl("delete", "pods", "--all", "--grace-period=0", "--force",
                         check=False)
        for node in ("node-0", "node-1", "node-2", "node-3"):
            self.sim.kubectl("uncordon", node, check=False)
            self.sim.kubectl("taint", "nodes", node, "maint-", check=False)
        wait_for(lambda: not self.sim.kubectl_json("get", "pods")["items"],
                 what="pods to be gone")

    def apply(self, *objs):
        for o in objs:
            r = subprocess.run(
                ["/usr/bin/kubectl", "--kubeconfig", self.sim.kubeconfig, "apply", "-f", "-"],
                input=json.dumps(o), capture_output=True, text=True, timeout=60,
                env={"HOME": str(self.sim.dir), "PATH": "/usr/bin:/bin"})
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def node_of(self, name):
        return wait_for(lambda: self.sim.kubectl_json("get", "pod", name)["spec"].get("nodeName"),
                        what=f"{name} to be bound")

    def scheduled_condition(self, name):
        def cond():
            p = self.sim.kubectl_json("get", "pod", name)
            for c in p.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c["status"] == "False":
                    return c
            return None
        return wait_for(cond, what=f"{name} to be marked unschedulable")

    def test_eight_gpu_pod_lands_only_where_eight_are_free_and_the_next_is_unschedulable(self):
        # Use some GPUs on node-0, node-1 and node-3; only node-2 keeps all 8 free.
        for i, (node, gpus) in enumerate([("node-0", 1), ("node-1", 4), ("node-3", 2)]):
            self.apply(pod(f"filler-{i}", gpus, node_selector={"kubernetes.io/hostname": node}))
            self.assertEqual(self.node_of(f"filler-{i}"), node)
        self.apply(pod("big", 8))
        self.assertEqual(self.node_of("big"), "node-2")

        self.apply(pod("big-2", 8))
        cond = self.scheduled_condition("big-2")
        self.assertEqual(cond["reason"], "Unschedulable")
        self.assertEqual(cond["message"],
                         "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
        self.assertNotIn("nodeName", self.sim.kubectl_json("get", "pod", "big-2")["spec"])
        # kubectl get events shows kube-scheduler's FailedScheduling warning.
        events = self.sim.kubectl("get", "events").stdout
        self.assertIn("FailedScheduling", events)

        # Freeing a node retries the pending pod.
        self.sim.kubectl("delete", "pod", "filler-0", "--grace-period=0", "--force")
        self.assertEqual(self.node_of("big-2"), "node-0")

    def test_node_selector_and_pod_affinity_on_the_infiniband_leaf(self):
        self.apply(pod("anchor", 8, node_selector={LEAF: "leaf-1"}, labels={"job": "j7"}))
        anchor_node = self.node_of("anchor")
        self.assertIn(anchor_node, ("node-2", "node-3"))

        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"job": "j7"}}, "topologyKey": LEAF}]}}
        self.apply(pod("follower", 8, affinity=affinity, labels={"job": "j7"}))
        follower_node = self.node_of("follower")
        self.assertIn(follower_node, ("node-2", "node-3"))
        self.assertNotEqual(follower_node, anchor_node)

        # A third 8-GPU member has no room left on leaf-1: the message names both reasons.
        self.apply(pod("third", 8, affinity=affinity, labels={"job": "j7"}))
        self.assertEqual(self.scheduled_condition("third")["message"],
                         "0/4 nodes are available: 2 Insufficient nvidia.com/gpu, "
                         "2 node(s) didn't match pod affinity rules.")

        # A nodeSelector that no node satisfies.
        self.apply(pod("nowhere", 0, node_selector={LEAF: "leaf-9"}))
        self.assertEqual(self.scheduled_condition("nowhere")["message"],
                         "0/4 nodes are available: 4 node(s) didn't match Pod's node "
                         "affinity/selector.")

    def test_cordon_and_taint_through_kubectl(self):
        for node in ("node-0", "node-1", "node-2"):
            self.sim.kubectl("cordon", node)
        self.sim.kubectl("taint", "nodes", "node-3", "maint=now:NoSchedule")
        self.apply(pod("p", 1))
        self.assertEqual(self.scheduled_condition("p")["message"],
                         "0/4 nodes are available: 1 node(s) had untolerated taint "
                         "{maint: now}, 3 node(s) were unschedulable.")
        self.apply(pod("tolerant", 1, tolerations=[{"key": "maint", "operator": "Exists",
                                                    "effect": "NoSchedule"}]))
        self.assertEqual(self.node_of("tolerant"), "node-3")
        self.sim.kubectl("uncordon", "node-1")
        self.assertEqual(self.node_of("p"), "node-1")


if __name__ == "__main__":
    unittest.main(verbosity=2)
