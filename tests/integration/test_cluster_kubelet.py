"""harness.cluster's kubelet choice on PodCluster, with the real Kubernetes
(harness.kube.KubeCluster) and kwok's fake nodes: with kubelet="test" the test's
kubelet (TestKubelet) starts a node's slurmd in the rig once k8sbridge-power's pod
is bound (kwok reports the pod Running), and stops slurmd when Slurm's power-down
deletes the pod; with kubelet=None no slurmd runs for the pods."""

from harness.cluster import PodCluster
from harness.rig import NodeSpec
from harness.testcase import RigTestCase, main

NODES = [NodeSpec("w-0"), NodeSpec("w-1")]
GROUPS = [("g", "w-[0-1]", "")]


class ClusterKubelet(RigTestCase):
    def test_the_test_kubelet_runs_bound_pods_until_they_go(self):
        with PodCluster(NODES, GROUPS, kubelet="test", fake_nodes=2, suspend_time=5) as c:
            out = c.rig.workdir / "job.out"
            job = c.rig.sbatch("#!/bin/sh\nsrun hostname\n", ["-N2", "-o", str(out)])
            c.wait_job(job, timeout=180)
            self.assertEqual(sorted(out.read_text().split()), ["w-0", "w-1"])
            for name in ("w-0", "w-1"):
                self.assertEqual(c.pod(name)["status"].get("phase"), "Running")
            c.wait_powered_down(["w-0", "w-1"], timeout=120)
            c.wait(lambda: not c.test_kubelet.started, 30, "the kubelet to stop both slurmd")
        self.assertNoLeftovers()

    def test_without_a_kubelet_nobody_runs_the_pods(self):
        with PodCluster(NODES[:1], [("g", "w-0", "")], kubelet=None, fake_nodes=1) as c:
            self.assertIsNone(c.test_kubelet)
            self.assertIn("POWERED_DOWN", c.rig.node("w-0")["State"])
        self.assertNoLeftovers()

    def test_an_unknown_choice_is_refused(self):
        with self.assertRaises(ValueError):
            PodCluster(NODES, GROUPS, kubelet="kubelet")


if __name__ == "__main__":
    main()
