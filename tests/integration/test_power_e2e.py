"""power_k8s end to end: Slurm's power saving makes worker pods in a real Kubernetes
whose real nodes (kubelet, containerd, runc) run k8sbridge-worker and real slurmd in
them as containers (harness.cluster.PodCluster): four nodes of 8 GPUs, two leaves.

One cluster for the class; the tests run in order and use their own Slurm nodes:
- w-[0-3]: `sbatch -N4 -C h100` resumes four pods (selectors, GPUs, ownership labels), the
  slurmd register with their pod IPs, the job's output names the four pods, and
  after SuspendTime the pods are deleted and the nodes POWERED_DOWN again;
- c-[0-1]: `--constraint fast` (mapped to a label two Kubernetes nodes carry, one in
  each leaf) lands the pods only on those nodes;
- p-[0-1]: a 2-node job with a placement label lands both pods under one leaf;
- w-0 again: 429 and 503 answers to the pod's creation (an admission webhook's) are
  retried;
- r-0: a template the API rejects (422) sets the node DOWN/POWER_DOWN with a reason
  quoting the field within 10 s of the resume, and the job is requeued;
- b-0: a pod with the wrong munge key fails with a message naming the mismatch.
"""

import os
import unittest

from harness.cluster import GPU_PRODUCT, LEAF_LABEL, PodCluster
from harness.paths import WORKER
from harness.rig import NodeSpec
from harness.testcase import RigTestCase

FAST_LABEL = "k8sbridge.test/fast"


def reject_template(cluster):
    # A request above its limit: the API refuses the pod with 422.
    return cluster.template(container_extra=(
        "      resources: {requests: {cpu: \"2\"}, limits: {cpu: \"1\"}}\n"))


def wrong_key_template(cluster):
    return cluster.template(secret="munge-key-wrong")


class PowerEndToEnd(RigTestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        nodes = ([NodeSpec(f"w-{i}", features=["h100"]) for i in range(4)] +
                 [NodeSpec(f"c-{i}", features=["fast"]) for i in range(2)] +
                 [NodeSpec(f"p-{i}") for i in range(2)] +
                 [NodeSpec("r-0"), NodeSpec("b-0")])
        groups = [("w", "w-[0-3]", "Gpus=8"),
                  ("c", "c-[0-1]", ""),
                  ("p", "p-[0-1]", f"Gpus=4 PlacementLabel={LEAF_LABEL}"),
                  ("r", "r-0", "PodTemplate=reject.yaml"),
                  ("b", "b-0", "PodTemplate=wrong-key.yaml")]
        cls.cluster = PodCluster(
            nodes, groups, fake_nodes=4, suspend_time=15,
            conf_extra=(f"Feature=fast Selector={FAST_LABEL}=true\n"
                        f"Feature=h100 Selector=nvidia.com/gpu.product={GPU_PRODUCT}"),
            extra_templates={"reject.yaml": reject_template, "wrong-key.yaml": wrong_key_template})
        cls.cluster.__enter__()
        cls.cluster.create_munge_secret("munge-key-wrong", os.urandom(1024))
        cls.rig = cls.cluster.rig
        cls.sim = cls.cluster.sim

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_1_four_node_job_runs_in_pods_and_powers_down(self):
        c = self.cluster
        out = self.rig.workdir / "n4.out"
        job = self.rig.sbatch("#!/bin/sh\nsrun hostname | sort\n",
                              ["-N4", "-C", "h100", "-w", "w-[0-3]", "-o", str(out)])
        c.wait_job(job, timeout=240)
        self.assertEqual(out.read_text().split(), ["w-0", "w-1", "w-2", "w-3"])
        nodes = self.rig.nodes()
        for name in ("w-0", "w-1", "w-2", "w-3"):
            pod = c.pod(name)
            self.assertIsNotNone(pod, f"{name} has no pod\n{c.describe()}")
            labels = pod["metadata"]["labels"]
            self.assertEqual(labels["app.kubernetes.io/managed-by"], "k8sbridge")
            self.assertEqual(labels["k8sbridge.io/cluster"], "rig")
            self.assertEqual(labels["k8sbridge.io/node"], name)
            self.assertEqual(labels["k8sbridge.io/job"], str(job))
            container = pod["spec"]["containers"][0]
            self.assertEqual(container["resources"]["requests"]["nvidia.com/gpu"], "8")
            self.assertEqual(container["command"], [str(WORKER)])
            self.assertEqual(pod["spec"]["nodeSelector"], {"nvidia.com/gpu.product": GPU_PRODUCT})
            # slurmd registered with the pod's address.
            self.assertEqual(nodes[name]["NodeAddr"], pod["status"]["podIP"])
            env = {e["name"]: e.get("value") for e in container["env"]}
            self.assertTrue(env["K8SBRIDGE_MUNGE_CHECK"].startswith("MUNGE:"))
        # Idle for SuspendTime: the pods go, the nodes are powered down again.
        c.wait_powered_down(["w-0", "w-1", "w-2", "w-3"], timeout=180)

    def test_2_constraint_places_pods_on_labelled_nodes(self):
        c = self.cluster
        # Two of the four nodes, one in each leaf: the others fit the pods as well.
        fast = [c.k8s_nodes[1], c.k8s_nodes[3]]
        self.sim.kubectl("label", "node", *fast, f"{FAST_LABEL}=true")
        out = self.rig.workdir / "fast.out"
        job = self.rig.sbatch("#!/bin/sh\nsrun hostname | sort\n",
                              ["-N2", "-C", "fast", "-o", str(out)])
        c.wait_job(job, timeout=240)
        self.assertEqual(out.read_text().split(), ["c-0", "c-1"])
        placed = {c.pod(n)["spec"]["nodeName"] for n in ("c-0", "c-1")}
        self.assertLessEqual(placed, set(fast))
        self.assertEqual(c.pod("c-0")["spec"]["nodeSelector"], {FAST_LABEL: "true"})

    def test_3_two_node_job_stays_in_one_leaf(self):
        c = self.cluster
        # Leave one node schedulable in the first node's leaf, so a pod placed without
        # the affinity would go to the emptier other leaf.
        first = c.k8s_nodes[0]
        leaf_of = {n: c.k8s_node(n)["metadata"]["labels"][LEAF_LABEL] for n in c.k8s_nodes}
        first_leaf = leaf_of[first]
        cordoned = [n for n, leaf in leaf_of.items() if leaf == first_leaf and n != first]
        self.sim.kubectl("cordon", *cordoned)
        self.addCleanup(self.sim.kubectl, "uncordon", *cordoned)
        out = self.rig.workdir / "leaf.out"
        job = self.rig.sbatch("#!/bin/sh\nsrun hostname | sort\n",
                              ["-N2", "-w", "p-[0-1]", "-o", str(out)])
        c.wait_job(job, timeout=240)
        self.assertEqual(out.read_text().split(), ["p-0", "p-1"])
        leaves = {leaf_of[c.pod(n)["spec"]["nodeName"]] for n in ("p-0", "p-1")}
        self.assertEqual(len(leaves), 1, c.describe())

    def test_4_throttled_and_unavailable_answers_are_retried(self):
        c = self.cluster
        c.wait_powered_down(["w-0"], timeout=180)
        f429 = self.sim.add_fault("pods", "create", 429, times=2, message="too many requests")
        f503 = self.sim.add_fault("pods", "create", 503, times=2, message="unavailable")
        self.addCleanup(self.sim.clear_faults)
        out = self.rig.workdir / "retry.out"
        job = self.rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0", "-o", str(out)])
        c.wait_job(job, timeout=240)
        self.assertEqual(out.read_text().split(), ["w-0"])
        self.assertIsNone(self.sim.fault_hits(f429))  # used up: both answers were sent
        self.assertIsNone(self.sim.fault_hits(f503))

    def test_5_rejected_template_fails_the_node_fast(self):
        c = self.cluster
        job = self.rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "r-0"])
        c.wait(lambda: "resume r-0" in (c.power_log.read_text() if c.power_log.exists() else ""),
               60, "slurmctld to run the ResumeProgram for r-0")

        def downed():
            node = self.rig.node("r-0")
            return node if node.get("Reason", "").startswith("k8sbridge:") else None
        # The bound is the poll's deadline: DOWN within 10 s of the resume.
        node = c.wait(downed, 10, "r-0 to be set DOWN with a k8sbridge reason")
        self.assertIn("spec.containers[0].resources.requests", node["Reason"])
        self.assertIn("must be less than or equal to cpu limit of 1", node["Reason"])
        self.assertIn("DOWN", node["State"])
        self.assertIn("POWER", node["State"])
        c.wait(lambda: self.rig.job(job)["JobState"] == "PENDING" and
               int(self.rig.job(job).get("Restarts", "0")) >= 1, 30, "the job to be requeued")
        self.assertIsNone(c.pod("r-0"))
        self.rig.run(["scancel", str(job)])

    def test_6_wrong_munge_key_fails_the_pod_with_a_clear_message(self):
        c = self.cluster
        job = self.rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "b-0"])

        def failed():
            pod = c.pod("b-0")
            return pod if pod and pod.get("status", {}).get("phase") == "Failed" else None
        pod = c.wait(failed, 60, "pod b-0 to fail")
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertNotEqual(terminated["exitCode"], 0)
        self.assertIn("munge key mismatch", terminated["message"])
        self.assertIn("POWERING_UP", self.rig.node("b-0")["State"])  # slurmd never started
        self.rig.run(["scancel", str(job)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
