"""k8sbridge-health as real slurmd's HealthCheckProgram on the rig, with a
scripted NVML library and a fake InfiniBand sysfs per node. Its verdicts reach the
real Kubernetes (harness.kube.KubeCluster on the rig's bridge address, two kwok
nodes) as a node condition and an Event, and through k8sbridge-sync as a cordon."""

import json
import os

from harness.gpu_toolkit import FAKE_NVML, healthy_gpu
from harness.kube import KubeCluster
from harness.paths import SLURM_BUILD, SYNC
from harness.rig import Rig, RigConfig, wait_for
from harness.sync import Daemon
from harness.testcase import RigTestCase, main

HEALTH = SLURM_BUILD / "programs" / "health" / "k8sbridge-health"
XID_REASON = "[hardware] k8sbridge-health: GPU 1 XID 79 (GPU has fallen off the bus)"


class HealthRigTest(RigTestCase):
    def setUp(self):
        super().setUp()
        for p in (HEALTH, FAKE_NVML):
            if not p.exists():
                self.fail(f"{p} is not built: run meson compile first")

    def start_rig(self) -> Rig:
        self.rig = Rig(nodes=2, config=RigConfig(slurm_conf_extra=""))
        self.health_dir = self.rig.workdir / "health"
        wrapper = self.rig.workdir / "health-check"
        # slurmd runs HealthCheckProgram with only SLURMD_NODENAME set, so the
        # wrapper supplies what an admin's install would have at fixed paths.
        wrapper.write_text(
            "#!/bin/sh\n"
            f"export SLURM_CONF={self.rig.slurm_conf}\n"
            f"export FAKE_NVML_SCRIPT={self.health_dir}/nvml-$SLURMD_NODENAME.json\n"
            f"exec {HEALTH} --config {self.health_dir}/$SLURMD_NODENAME.conf\n")
        wrapper.chmod(0o755)
        self.rig.config.slurm_conf_extra = (f"HealthCheckProgram={wrapper}\nHealthCheckInterval=1\n"
                                            "HealthCheckNodeState=ANY")
        self.health_dir.mkdir(parents=True)
        for node in ("w-0", "w-1"):
            self.write_conf(node)
            self.set_gpus(node, [healthy_gpu(0x3b), healthy_gpu(0x3c)])
            self.set_ib_port(node, "4: ACTIVE", "5: LinkUp")
        self.rig.__enter__()
        self.addCleanup(self.rig.__exit__, None, None, None)
        self.rig.wait_nodes_idle()
        return self.rig

    def write_conf(self, node, extra=""):
        (self.health_dir / f"{node}.conf").write_text(
            f"NvmlLibrary={FAKE_NVML}\nGpuCount=2\nKmsgPath={self.health_dir}/no-kmsg\n"
            f"XidEventWait=100ms\nIbSysfsRoot={self.health_dir}/ib-{node}\n"
            f"StateDir={self.health_dir}/state\nResumeAfterCleanRuns=2\n"
            f"CheckTimeout=2s TotalTimeout=20s\n{extra}")

    def set_gpus(self, node, gpus):
        path = self.health_dir / f"nvml-{node}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"devices": gpus}))
        os.replace(tmp, path)

    def set_ib_port(self, node, state, phys):
        port = self.health_dir / f"ib-{node}" / "mlx5_0" / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "state").write_text(state + "\n")
        (port / "phys_state").write_text(phys + "\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")

    def clean_runs(self, node) -> int:
        p = self.health_dir / "state" / f"{node}.state"
        if not p.exists():
            return 0
        fields = dict(line.split() for line in p.read_text().splitlines() if line.strip())
        return int(fields.get("clean_runs", 0))

    def wait_reason(self, node, predicate, what, timeout=60):
        """Polls `node` until predicate(node fields) holds; returns the fields."""
        def check():
            fields = self.rig.node(node)
            return fields if predicate(fields) else None
        return wait_for(check, timeout, f"{node}: {what}")

    def test_xid_drains_and_clean_runs_resume(self):
        rig = self.start_rig()
        self.set_gpus("w-0", [healthy_gpu(0x3b), dict(healthy_gpu(0x3c), xid_events=[79])])
        node = self.wait_reason("w-0", lambda n: n.get("Reason", "").startswith(XID_REASON),
                                "drained with the XID reason")
        self.assertIn("DRAIN", node["State"])
        self.assertEqual(node["Reason"].split(" [")[0], XID_REASON)
        # w-1 stays healthy all along.
        self.assertNotIn("DRAIN", rig.node("w-1")["State"])

        self.set_gpus("w-0", [healthy_gpu(0x3b), healthy_gpu(0x3c)])
        self.wait_reason("w-0", lambda n: "DRAIN" not in n["State"], "resumed after clean runs")
        self.assertGreaterEqual(self.clean_runs("w-0"), 2)

    def test_admin_drain_is_never_resumed(self):
        rig = self.start_rig()
        rig.check_output(["scontrol", "update", "nodename=w-1", "state=drain",
                          "reason=admin maintenance"])
        start = self.clean_runs("w-1")
        wait_for(lambda: self.clean_runs("w-1") >= start + 4, 60, "four clean runs on w-1")
        node = rig.node("w-1")
        self.assertIn("DRAIN", node["State"])
        self.assertTrue(node["Reason"].startswith("admin maintenance"), node["Reason"])

    def wait_runs(self, node, runs, timeout=60):
        """Waits until k8sbridge-health has run `runs` more times on `node` (each run
        rewrites its state file, whatever it found)."""
        path = self.health_dir / "state" / f"{node}.state"
        seen = []

        def ran():
            stamp = path.stat().st_mtime_ns if path.exists() else None
            if stamp is not None and (not seen or seen[-1] != stamp):
                seen.append(stamp)
            return len(seen) > runs
        wait_for(ran, timeout, f"{runs} more health runs on {node}")

    def test_a_failing_check_keeps_an_admins_fail_reason(self):
        # FAIL (out of service, not drained) rather than DOWN: the rig's
        # ReturnToService=2 returns a DOWN node to service at its next ping.
        rig = self.start_rig()
        rig.check_output(["scontrol", "update", "nodename=w-1", "state=fail",
                          "reason=admin: bad cable"])
        before = rig.node("w-1")["Reason"]
        self.set_gpus("w-1", [healthy_gpu(0x3b), dict(healthy_gpu(0x3c), xid_events=[79])])
        self.wait_runs("w-1", 2)
        node = rig.node("w-1")
        self.assertIn("FAIL", node["State"])
        self.assertNotIn("DRAIN", node["State"])
        self.assertEqual(node["Reason"], before)

    def test_an_admin_drain_over_ours_is_never_resumed(self):
        rig = self.start_rig()
        self.set_gpus("w-0", [healthy_gpu(0x3b), dict(healthy_gpu(0x3c), xid_events=[79])])
        self.wait_reason("w-0", lambda n: n.get("Reason", "").startswith(XID_REASON),
                         "drained with the XID reason")
        # The admin takes the node over with a reason of their own, then the GPU is
        # healthy again: the drain is the admin's now, and stays.
        rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                          "reason=admin: RMA for GPU 1"])
        before = rig.node("w-0")["Reason"]
        self.set_gpus("w-0", [healthy_gpu(0x3b), healthy_gpu(0x3c)])
        start = self.clean_runs("w-0")
        wait_for(lambda: self.clean_runs("w-0") >= start + 4, 60, "four clean runs on w-0")
        node = rig.node("w-0")
        self.assertIn("DRAIN", node["State"])
        self.assertEqual(node["Reason"], before)

    def test_hanging_nvml_is_reported_and_the_run_ends(self):
        rig = self.start_rig()
        self.set_gpus("w-0", [healthy_gpu(0x3b),
                              dict(healthy_gpu(0x3c), hang_in="nvmlDeviceGetRemappedRows")])
        node = self.wait_reason(
            "w-0", lambda n: "NVML call hung" in n.get("Reason", ""), "drained for a hung NVML call")
        self.assertTrue(node["Reason"].startswith(
            "[hardware] k8sbridge-health: NVML call hung: nvmlDeviceGetRemappedRows on GPU 1 "
            "did not return within 2s"), node["Reason"])
        # The program itself ended: more runs follow (each rewrites the state file,
        # which a run writes after its drain reaches Slurm) and find the same.
        self.wait_runs("w-0", 2)
        self.assertEqual(self.clean_runs("w-0"), 0)
        self.assertIn("NVML call hung", rig.node("w-0")["Reason"])
        log = (rig.logdir / "slurmd-w-0.log").read_text()
        self.assertNotIn("health_check killed by signal", log)

    def test_infiniband_port_down_drains(self):
        rig = self.start_rig()
        self.set_ib_port("w-1", "1: DOWN", "3: Disabled")
        node = self.wait_reason("w-1", lambda n: n.get("Reason", "").startswith(
            "[hardware] k8sbridge-health: mlx5_0 port 1 state 1: DOWN"), "drained for the IB port")
        self.assertIn("DRAIN", node["State"])
        self.assertNotIn("DRAIN", rig.node("w-0")["State"])

    def test_result_is_published_to_kubernetes(self):
        rig = self.start_rig()
        # The nodes' network namespaces reach the host only on the rig's bridge: the
        # API server listens there, its certificate names that address.
        kube = KubeCluster(nodes=2, address=rig.bridge_address, scheduler=False)
        self.addCleanup(kube.close)
        # As in a worker pod: the deployment's k8sbridge-worker ServiceAccount.
        kube.apply_deploy_rbac("default")
        kubeconfig = kube.service_account_kubeconfig("default", "k8sbridge-worker")
        self.write_conf("w-0", f"KubePublish=yes Kubeconfig={kubeconfig} KubeNode=node-0\n")

        def condition():
            node = kube.kubectl_json("get", "node", "node-0")
            for c in node["status"].get("conditions", []):
                if c["type"] == "K8sbridgeHealthProblem":
                    return c
            return None
        healthy = wait_for(condition, 60, "the condition on node-0")
        self.assertEqual(healthy["status"], "False")
        self.assertEqual(healthy["reason"], "HealthCheckPassed")

        self.set_gpus("w-0", [healthy_gpu(0x3b), dict(healthy_gpu(0x3c), xid_events=[79])])
        bad = wait_for(lambda: (c := condition()) and c["status"] == "True" and c, 60,
                       "the condition to turn True")
        self.assertEqual(bad["reason"], "HealthCheckFailed")
        self.assertEqual(bad["message"], XID_REASON)
        # Ready and the other conditions are untouched.
        types = [c["type"] for c in kube.kubectl_json("get", "node", "node-0")["status"]["conditions"]]
        self.assertIn("Ready", types)

        def warning():
            events = kube.kubectl_json("get", "events", "--field-selector",
                                      "involvedObject.name=node-0")["items"]
            return [e for e in events if e.get("reason") == "HealthCheckFailed"]
        event = wait_for(warning, 30, "a HealthCheckFailed event on node-0")[0]
        self.assertEqual(event["type"], "Warning")
        self.assertIn("XID 79", event["message"])

    def test_hardware_drain_cordons_the_kubernetes_node_through_sync(self):
        if not SYNC.exists():
            self.skipTest(f"{SYNC} is not built")
        rig = self.start_rig()
        kube = KubeCluster(nodes=2, address=rig.bridge_address, scheduler=False)
        self.addCleanup(kube.close)
        kube.apply_deploy_rbac("default")  # k8sbridge-sync: the controller's ServiceAccount
        controller = kube.service_account_kubeconfig("default", "k8sbridge-controller")
        # w-0's worker pod, as k8sbridge-power makes it, on Kubernetes node node-0.
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "w-0", "labels": {
                   "app.kubernetes.io/managed-by": "k8sbridge",
                   "k8sbridge.io/cluster": "rig", "k8sbridge.io/node": "w-0"}},
               "spec": {"nodeName": "node-0",
                        "containers": [{"name": "slurmd", "image": "x"}]}}
        status, _, body = kube.request("POST", "/api/v1/namespaces/default/pods", pod)
        self.assertEqual(status, 201, body)
        # kwok, node-0's kubelet, reports it Running.
        wait_for(lambda: kube.kubectl_json("get", "pod", "w-0")["status"].get("phase") ==
                 "Running", 60, "kwok to report pod w-0 Running")
        (self.health_dir / "worker.yaml").write_text(
            "spec:\n  containers:\n  - {name: slurmd, image: x}\n")
        conf = self.health_dir / "k8sbridge.conf"
        conf.write_text(f"ClusterName=rig\nKubeconfig={controller}\nNamespace=default\n"
                        "SyncMetricsListen=127.0.0.1:0\n"
                        "NodeGroup=w Nodes=w-[0-1] PodTemplate=worker.yaml\n")
        daemon = Daemon.for_rig(rig, conf, self.health_dir)
        self.addCleanup(daemon.stop)

        self.set_gpus("w-0", [healthy_gpu(0x3b), dict(healthy_gpu(0x3c), xid_events=[79])])
        self.wait_reason("w-0", lambda n: n.get("Reason", "").startswith(XID_REASON),
                         "drained with the XID reason")

        def cordoned():
            node = kube.kubectl_json("get", "node", "node-0")
            spec = node.get("spec", {})  # absent until something sets it
            taints = spec.get("taints", [])
            if spec.get("unschedulable") and any(
                    t["key"] == "k8sbridge.io/hardware" for t in taints):
                return node
            return None
        try:
            node = wait_for(cordoned, 60, "node-0 to be cordoned and tainted")
        except Exception as e:  # the daemon's log says why
            raise AssertionError(f"{e}\nsync.log:\n{daemon.log()}") from None
        self.assertEqual(node["metadata"]["annotations"]["k8sbridge.io/cordoned-by"], "rig")
        self.assertFalse(kube.kubectl_json("get", "node", "node-1").get("spec", {})
                         .get("unschedulable"))
        annotations = kube.kubectl_json("get", "pod", "w-0")["metadata"]["annotations"]
        self.assertTrue(annotations["k8sbridge.io/slurm-drain-reason"].startswith(XID_REASON))


if __name__ == "__main__":
    main()
