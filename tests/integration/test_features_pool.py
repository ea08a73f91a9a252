"""One pool of CLOUD nodes w-[0-7] (Features=h100,a100 in slurm.conf) becomes any GPU
type on demand (node_features/k8s + power_k8s + the real Kubernetes with 2 H100 and 2
A100 kwok nodes, one GPU each; the test plays the kubelet, see harness/features.py):

- `sbatch -N2 -C h100`: two pods on the H100 nodes, and scontrol lists h100 as an
  active feature of both Slurm nodes;
- `sbatch -C a100` then runs on an A100 node from the same pool;
- `-C h100` while both H100 nodes are busy: the resumed node fails fast with a
  "k8sbridge: no Kubernetes node offers ..." reason, the job stays pending, and it
  never runs (in particular not on an A100);
- with the API unreachable from the node (its packets to the API server dropped, a
  network partition), slurmd registers from the label cache within
  FeatureLabelTimeout and its log says the cache was used;
- after power-down the nodes' active features are reset;
- on a fresh slurmctld, a job without -C resumes a pool node whose pod lands on an
  H100 node: k8sbridge-power drops the changeable features from the node's active
  ones first, so the registration (h100 alone) is accepted, the job runs once, and
  the node has h100 active and not a100;
- with k8sbridge-sync running, relabelling the Kubernetes node under a running
  Slurm node changes that node's features within 5 s, without a reconfigure.
"""

from harness.features import A100, FeaturesRigCase, H100, KUBE_NODES, features_of
from harness.paths import SYNC
from harness.rig import wait_for
from harness.sync import Daemon
from harness.testcase import main



class FeaturePool(FeaturesRigCase):
    def job_nodes(self, rig, job):
        out = rig.check_output(["scontrol", "show", "hostnames", rig.job(job)["NodeList"]])
        return out.split()

    def test_pool_takes_the_gpu_type_each_job_asks_for(self):
        rig = self.make_rig(suspend_time=15)
        with rig:
            self.start_kube(rig)
            self.start_kubelet(rig)
            self.addCleanup(self.stop_kubelet)
            try:
                self.pool_steps(rig)
            finally:
                self.stop_kubelet()
        self.assertRigGone(rig)

    def pool_steps(self, rig):
        # -N2 -C h100: both pods on the H100 nodes, h100 active on both Slurm nodes.
        big = rig.sbatch("#!/bin/sh\nsleep 600\n", ["-N2", "-C", "h100"])
        wait_for(lambda: rig.job(big)["JobState"] == "RUNNING", 120,
                 lambda: f"the -N2 -C h100 job to run; power.log:\n{self.power_log()}")
        h100_nodes = self.job_nodes(rig, big)
        self.assertEqual(len(h100_nodes), 2)
        for name in h100_nodes:
            self.assertEqual(KUBE_NODES[self.pod(name)["spec"]["nodeName"]], H100)
            self.assertIn("h100", features_of(rig.node(name), "ActiveFeatures"))
            self.assertNotIn("a100", features_of(rig.node(name), "ActiveFeatures"))

        # -C a100 from the same pool lands on an A100 node.
        small = rig.sbatch("#!/bin/sh\nsleep 20\n", ["-N1", "-C", "a100"])
        wait_for(lambda: rig.job(small)["JobState"] == "RUNNING", 120,
                 lambda: f"the -C a100 job to run; power.log:\n{self.power_log()}")
        [a100_node] = self.job_nodes(rig, small)
        a100_host = self.pod(a100_node)["spec"]["nodeName"]
        self.assertEqual(KUBE_NODES[a100_host], A100)
        self.assertIn("a100", features_of(rig.node(a100_node), "ActiveFeatures"))
        self.assertNotIn("h100", features_of(rig.node(a100_node), "ActiveFeatures"))

        # -C h100 with both H100 nodes busy: a fast "k8sbridge:" failure, job pending.
        waiting = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-C", "h100"])

        def failed_fast():
            for name, node in rig.nodes().items():
                if "no Kubernetes node offers" in node.get("Reason", ""):
                    return name, node
            return None
        failed, node = wait_for(
            failed_fast, 60,
            lambda: f"a resumed node to fail fast; power.log:\n{self.power_log()}")
        self.assertTrue(node["Reason"].startswith("k8sbridge:"), node["Reason"])
        self.assertIsNone(self.pod(failed))
        # Requeued and pending; the node's reason says why (between tries it may be
        # configuring on the next pool node, which fails the same way).
        job = wait_for(lambda: (lambda j: j if j["JobState"] == "PENDING" else None)(
            rig.job(waiting)), 60, "the -C h100 job to be pending")
        self.assertGreaterEqual(int(job.get("Restarts", "0")), 1, job)
        rig.check_output(["scancel", str(waiting)])
        # It never ran: no pod of it was ever bound, on an A100 node or any other.
        for name in rig.workers:
            pod = self.pod(name)
            if pod:
                ids = pod["metadata"].get("annotations", {}).get("k8sbridge.io/job-ids", "")
                self.assertNotIn(str(waiting), ids.split(","), pod["metadata"])

        # The A100 job finishes. Its node powers down; cordon the other A100 node so
        # the next a100 pod lands on the same Kubernetes node as before (its cache).
        rig.wait_job(small, timeout=120)
        wait_for(lambda: "POWERED_DOWN" in rig.node(a100_node)["State"], 120,
                 lambda: f"{a100_node} to power down; power.log:\n{self.power_log()}")
        self.assertFalse(features_of(rig.node(a100_node), "ActiveFeatures") & {"a100", "h100"})
        other = next(n for n, p in KUBE_NODES.items() if p == A100 and n != a100_host)
        status, _, body = self.kube.request("PATCH", f"/api/v1/nodes/{other}",
                                           {"spec": {"unschedulable": True}},
                                           content_type="application/merge-patch+json")
        self.assertEqual(status, 200, body)

        # The node cannot reach the API server: the next registration uses the cache.
        self.cut_off_api(rig, a100_node)
        again = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", a100_node, "-C", "a100"])
        rig.wait_job(again, timeout=120)
        self.assertEqual(self.pod(a100_node)["spec"]["nodeName"], a100_host)
        log = (rig.logdir / f"slurmd-{a100_node}.log").read_text()
        self.assertIn(f"could not read Kubernetes node {a100_host} within 2000 ms", log)
        self.assertIn("using the label cache", log)
        self.assertIn("a100", features_of(rig.node(a100_node), "ActiveFeatures"))
        self.reconnect_api(rig, a100_node)

        # Power-down resets the active features of the H100 nodes.
        rig.check_output(["scancel", str(big)])
        for name in h100_nodes:
            wait_for(lambda n=name: "POWERED_DOWN" in rig.node(n)["State"], 120,
                     lambda: f"{name} to power down; power.log:\n{self.power_log()}")
            active = features_of(rig.node(name), "ActiveFeatures")
            self.assertNotIn("h100", active)
            self.assertNotIn("a100", active)

    def test_a_job_without_constraint_runs_on_a_fresh_slurmctld(self):
        rig = self.make_rig()
        with rig:
            self.start_kube(rig)
            # Only the H100 nodes take pods: the pod is on hardware that has h100
            # and not a100, both of which slurm.conf lists as the node's features.
            for name, product in KUBE_NODES.items():
                if product == A100:
                    status, _, body = self.kube.request(
                        "PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}},
                        content_type="application/merge-patch+json")
                    self.assertEqual(status, 200, body)
            self.start_kubelet(rig)
            self.addCleanup(self.stop_kubelet)
            job = rig.sbatch("#!/bin/sh\nsleep 5\n", ["-N1"])
            wait_for(lambda: rig.job(job)["JobState"] == "RUNNING", 120,
                     lambda: f"the job without -C to run; power.log:\n{self.power_log()}")
            [node] = self.job_nodes(rig, job)
            self.assertEqual(KUBE_NODES[self.pod(node)["spec"]["nodeName"]], H100)
            state = rig.node(node)
            self.assertNotIn("DOWN", state["State"], state)
            self.assertIn("h100", features_of(state, "ActiveFeatures"), state)
            self.assertNotIn("a100", features_of(state, "ActiveFeatures"), state)
            self.assertIn("active features h100,a100 -> (none)", self.power_log())
            done = rig.wait_job(job, timeout=120)
            self.assertEqual(done.get("Restarts", "0"), "0", done)
            self.assertNotIn("DOWN", rig.node(node)["State"])
            self.stop_kubelet()
        self.assertRigGone(rig)

    def test_relabel_changes_features_of_a_running_node(self):
        if not SYNC.exists():
            self.skipTest(f"{SYNC} is not built")
        rig = self.make_rig()
        with rig:
            self.start_kube(rig)
            self.start_kubelet(rig)
            self.addCleanup(self.stop_kubelet)
            job = rig.sbatch("#!/bin/sh\nsleep 300\n", ["-N1", "-C", "h100"])
            wait_for(lambda: rig.job(job)["JobState"] == "RUNNING", 120,
                     lambda: f"the -C h100 job to run; power.log:\n{self.power_log()}")
            [node] = self.job_nodes(rig, job)
            host = self.pod(node)["spec"]["nodeName"]
            # kwok reports the nodes Ready and the pod Running, as their kubelets would.
            conf = self.dir / "sync.conf"
            conf.write_text((rig.etc / "k8sbridge.conf").read_text() +
                            "SyncMetricsListen=127.0.0.1:0\n")
            self.daemon = Daemon.for_rig(rig, conf, self.dir)
            self.addCleanup(self.daemon.stop)
            # The daemon marks the pod with what the labels give now.
            self.wait_with_log(lambda: "h100" in self.pod(node)["metadata"].get(
                "annotations", {}).get("k8sbridge.io/label-features", "").split(","), 60,
                f"k8sbridge-sync to mark pod {node}")
            self.assertIn("h100", features_of(rig.node(node), "ActiveFeatures"))

            status, _, body = self.kube.request(
                "PATCH", f"/api/v1/nodes/{host}",
                {"metadata": {"labels": {"nvidia.com/gpu.product": A100}}},
                content_type="application/merge-patch+json")
            self.assertEqual(status, 200, body)

            def follows():
                n = rig.node(node)
                return n if "a100" in features_of(n, "ActiveFeatures") else None
            n = self.wait_with_log(follows, 5, f"{node}'s features to follow the relabel")
            self.assertNotIn("h100", features_of(n, "ActiveFeatures"))
            self.assertIn("a100", features_of(n, "AvailableFeatures"))
            self.assertNotIn("h100", features_of(n, "AvailableFeatures"))
            rig.check_output(["scancel", str(job)])
            self.stop_kubelet()
        self.assertRigGone(rig)

    def wait_with_log(self, predicate, timeout, what):
        try:
            return wait_for(predicate, timeout, what)
        except Exception as e:  # the daemon's log says why
            raise AssertionError(f"{e}\nsync.log:\n{self.sync_log()}") from None

    def sync_log(self):
        return "\n".join(self.daemon.log().splitlines()[-20:])


if __name__ == "__main__":
    main()
