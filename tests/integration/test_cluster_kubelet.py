"""harness.cluster's kubelet choice on PodCluster: with kubelet="real" (the default)
real Kubernetes nodes run k8sbridge-power's pods as containers (containerd and runc
under each node's kubelet), k8sbridge-worker and slurmd in them, and the pods'
GPUs are advertised on the nodes. With the real Kubernetes (harness.kube.KubeCluster)
and kwok's fake nodes: with kubelet="test" the test's kubelet (TestKubelet) starts a
node's slurmd in the rig once k8sbridge-power's pod is bound (kwok reports the pod
Running), and stops slurmd when Slurm's power-down deletes the pod; with
kubelet=None no slurmd runs for the pods."""

from pathlib import Path

from harness.cluster import GPU_PRODUCT, GPU_RESOURCE, LEAF_LABEL, WORKER_IMAGE, PodCluster
from harness.kube import GPU_PRODUCT_LABEL
from harness.paths import WORKER
from harness.rig import NodeSpec, alive
from harness.testcase import RigTestCase, main

NODES = [NodeSpec("w-0"), NodeSpec("w-1")]
GROUPS = [("g", "w-[0-1]", "")]


class ClusterKubelet(RigTestCase):
    def test_real_kubelets_run_the_worker_pods_as_containers(self):
        with PodCluster(NODES, GROUPS, fake_nodes=2, suspend_time=5) as c:
            self.child_rig_ids += c.rig_ids
            self.assertEqual(c.k8s_nodes, ["real-0", "real-1"])
            for name, leaf in zip(c.k8s_nodes, ("leaf-0", "leaf-1")):
                node = c.k8s_node(name)
                self.assertEqual(node["metadata"]["labels"][LEAF_LABEL], leaf)
                self.assertEqual(node["metadata"]["labels"][GPU_PRODUCT_LABEL], GPU_PRODUCT)
                self.assertEqual(node["status"]["capacity"][GPU_RESOURCE], "8")
                self.assertEqual(node["status"]["allocatable"][GPU_RESOURCE], "8")
                self.assertTrue(node["status"]["nodeInfo"]["containerRuntimeVersion"]
                                .startswith("containerd://"), node["status"]["nodeInfo"])
            out = c.rig.workdir / "job.out"
            job = c.rig.sbatch("#!/bin/sh\nsrun hostname\n", ["-N2", "-o", str(out)])
            c.wait_job(job, timeout=180)
            self.assertEqual(sorted(out.read_text().split()), ["w-0", "w-1"])
            nodes = c.rig.nodes()
            tasks = []
            for name in ("w-0", "w-1"):
                pod = c.pod(name)
                status = pod["status"]
                self.assertEqual(status.get("phase"), "Running")
                self.assertEqual(nodes[name]["NodeAddr"], status["podIP"])
                container = status["containerStatuses"][0]
                self.assertEqual(container["image"], WORKER_IMAGE)
                self.assertTrue(container["containerID"].startswith("containerd://"))
                # containerd's shim runs k8sbridge-worker as the container's first
                # process, in the node's cgroupRoot; its output is the container's log.
                node = c.real_node(pod["spec"]["nodeName"])
                pid = node.tasks()[container["containerID"][len("containerd://"):]]
                tasks.append(pid)
                self.assertEqual(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0],
                                 str(WORKER).encode())
                self.assertIn(f":memory:{node.cgroup_root}/kubepods/",
                              Path(f"/proc/{pid}/cgroup").read_text())
                log = c.pod_log(pod)
                self.assertIn("munge key matches the controller's", log)
                self.assertIn(f"slurmd -D -b -N {name}", log)
            c.wait_powered_down(["w-0", "w-1"], timeout=120)
            c.wait(lambda: not any(alive(pid) for pid in tasks), 30,
                   "the containers' processes to end")
        self.assertNoLeftovers()

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
        for choice in ("kubelet", "fake"):
            with self.assertRaises(ValueError):
                PodCluster(NODES, GROUPS, kubelet=choice)


if __name__ == "__main__":
    main()
