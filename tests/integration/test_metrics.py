"""The metrics of sync, power and health (docs/sync.md, "Metrics"), scraped by
Debian's Prometheus, and the deployed form that serves them (docs/deploy.md,
"Metrics").

- MetricsScrape: a rig (real slurmctld and slurmd), a real Kubernetes and
  k8sbridge-sync. A job resumes a node through k8sbridge-power, then
  k8sbridge-health finds an InfiniBand port down on that node and drains it, and
  sync cordons its Kubernetes node.
  Prometheus scrapes sync's endpoint and holds sync's own metrics, the power
  programs' counts of that resume and health's drain; every metric the shipped
  Grafana dashboard queries is among them.
- MetricsManifests: in every overlay, k8sbridge.conf's SyncMetricsListen is on the
  pod's address at the sync container's port "metrics", the Service
  k8sbridge-metrics selects the controller pod on that port, PowerMetricsFile is
  in a volume that both the slurmctld and the sync container mount, and the
  ServiceMonitor of deploy/components/servicemonitor selects that Service.
"""

import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import yaml

from harness.kube import kubectl_program
from harness.paths import SLURM_BUILD, SOURCE_ROOT
from harness.prometheus import (PROMETHEUS, Prometheus, dashboard_metrics, declared_metrics,
                                static_scrape)
from harness.rig import wait_for
from harness.sync import SyncRigTestCase
from harness.testcase import main

DEPLOY = SOURCE_ROOT / "deploy"
DASHBOARD = DEPLOY / "dashboards" / "k8sbridge.json"
HEALTH = SLURM_BUILD / "programs" / "health" / "k8sbridge-health"
OVERLAYS = ["base", "overlays/demo", "overlays/example-gpu"]


class MetricsScrape(SyncRigTestCase):

    def setUp(self):
        super().setUp()
        for path in (PROMETHEUS, HEALTH):
            if not path.exists():
                self.skipTest(f"{path} is not there (scripts/setup.sh installs prometheus)")

    def write_conf(self, name="k8sbridge.conf", extra=""):
        power = self.dir / "power"
        power.mkdir(exist_ok=True)
        power.chmod(0o777)  # SlurmUser's, as the controller pod's emptyDir
        self.counters = power / "counters"
        return super().write_conf(name, f"{extra} PowerMetricsFile={self.counters}")

    def prometheus(self, port):
        prom = Prometheus([static_scrape("k8sbridge-sync", [f"127.0.0.1:{port}"])])
        self.addCleanup(prom.close)
        prom.wait_targets_up(1)
        return prom

    def run_health(self, rig, node):
        """k8sbridge-health on `node`, as slurmd runs it, with port 1 of a fake
        mlx5_0 down: it drains the node with its own [hardware] reason."""
        port = self.dir / "ib" / "mlx5_0" / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text("1: DOWN\n")
        (port / "phys_state").write_text("3: Disabled\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
        conf = self.dir / "health.conf"
        conf.write_text(f"CheckGpus=no\nIbSysfsRoot={self.dir / 'ib'}\n"
                        f"StateDir={self.dir / 'health-state'}\n")
        env = dict(os.environ, SLURM_CONF=str(rig.slurm_conf), SLURMD_NODENAME=node)
        done = subprocess.run(rig.host_command([str(HEALTH), "--config", str(conf)]), env=env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        return rig.wait_reason(node, "[hardware] k8sbridge-health:", 30)

    def test_prometheus_scrapes_sync_power_and_health(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            job = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0"])
            rig.wait_job(job, timeout=180)
            wait_for(lambda: self.counters.exists(), 30,
                     lambda: f"the power programs' counts; power.log:\n{self.power_log()}")
            # w-0 still has its pod: sync cordons that pod's Kubernetes node.
            self.run_health(rig, "w-0")

            prom = self.prometheus(d.port)

            served = prom.wait_value

            served("k8sbridge_sync_leader", 1)
            served('k8sbridge_sync_source_fresh{side="kubernetes"}', 1)
            served('k8sbridge_power_calls_total{subcommand="resume",result="ok"}', 1)
            served('k8sbridge_power_nodes_total{subcommand="resume",result="ok"}', 1)
            served('k8sbridge_power_call_seconds_count{subcommand="resume"}', 1)
            served("k8sbridge_power_metrics_file_readable", 1)
            served('k8sbridge_health_drained_nodes{hardware="true"}', 1)
            served('k8sbridge_sync_actions_total{kind="cordon",result="ok"}', 1)
            served('k8sbridge_health_drained_nodes{hardware="false"}', 0)
            # Families without a sample yet (no API error so far) are declared all
            # the same, and Prometheus holds only what has samples: ask the endpoint.
            declared = declared_metrics(f"http://127.0.0.1:{d.port}/metrics")
            self.assertTrue({n for n in prom.names() if n.startswith("k8sbridge_")} <= declared)
            missing = sorted(dashboard_metrics(DASHBOARD) - declared)
            self.assertEqual(missing, [], f"the dashboard queries metrics nobody serves; "
                             f"served: {sorted(declared)}")
        self.assertNoLeftovers()


def render(kustomization_dir):
    out = subprocess.run([str(kubectl_program()), "kustomize", str(kustomization_dir)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"kubectl kustomize {kustomization_dir}: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def conf_keys(text):
    """The global key=value pairs of a k8sbridge.conf (comments and records aside)."""
    keys = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line and not line.startswith(("NodeGroup=", "Feature=")):
            key, value = line.split("=", 1)
            keys[key] = value
    return keys


def one(objects, kind, name, namespace=None):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name and
             namespace in (None, o["metadata"].get("namespace"))]
    if len(found) != 1:
        raise AssertionError(f"{len(found)} {kind} {name} rendered")
    return found[0]


class MetricsManifests(unittest.TestCase):

    def check_overlay(self, objects, where):
        controller = one(objects, "StatefulSet", "slurmctld")
        # slurm-conf is in both namespaces (deploy/components/worker-conf): the
        # controller reads its own namespace's.
        conf = conf_keys(one(objects, "ConfigMap", "slurm-conf",
                             controller["metadata"]["namespace"])["data"]["k8sbridge.conf"])
        pod = controller["spec"]["template"]
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        ports = {p["name"]: p["containerPort"] for p in containers["sync"].get("ports", [])}
        self.assertIn("metrics", ports, f"{where}: the sync container names no port metrics")
        self.assertEqual(conf.get("SyncMetricsListen"), f"0.0.0.0:{ports['metrics']}",
                         f"{where}: sync must listen on the pod's address at its port")

        service = one(objects, "Service", "k8sbridge-metrics")
        selector = service["spec"]["selector"]
        self.assertTrue(selector.items() <= pod["metadata"]["labels"].items(),
                        f"{where}: {selector} does not select the controller pod")
        self.assertEqual([p["targetPort"] for p in service["spec"]["ports"]], ["metrics"])

        counters = Path(conf["PowerMetricsFile"])

        def mount_of(container):
            mounts = [m for m in container.get("volumeMounts", [])
                      if counters.parent == Path(m["mountPath"])]
            self.assertEqual(len(mounts), 1,
                             f"{where}: {container['name']} mounts no {counters.parent}")
            return mounts[0]["name"]

        self.assertEqual(mount_of(containers["slurmctld"]), mount_of(containers["sync"]),
                         f"{where}: power writes {counters} where sync does not read it")

    def test_every_overlay_serves_the_metrics_on_a_service(self):
        for overlay in OVERLAYS:
            with self.subTest(overlay=overlay):
                self.check_overlay(render(DEPLOY / overlay), overlay)

    def test_the_servicemonitor_component_selects_the_service(self):
        with tempfile.TemporaryDirectory(dir=DEPLOY / "overlays") as site:
            (Path(site) / "kustomization.yaml").write_text(yaml.safe_dump({
                "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                "resources": ["../example-gpu"],
                "components": ["../../components/servicemonitor"]}))
            objects = render(site)
        monitor = one(objects, "ServiceMonitor", "k8sbridge")
        service = one(objects, "Service", "k8sbridge-metrics")
        self.assertEqual(monitor["metadata"]["namespace"], service["metadata"]["namespace"])
        self.assertTrue(monitor["spec"]["selector"]["matchLabels"].items() <=
                        service["metadata"]["labels"].items())
        self.assertEqual([e["port"] for e in monitor["spec"]["endpoints"]],
                         [p["name"] for p in service["spec"]["ports"]])
        # Without the component nothing needs the operator's CRD.
        self.assertNotIn("ServiceMonitor",
                         {o["kind"] for o in render(DEPLOY / "overlays" / "example-gpu")})


if __name__ == "__main__":
    main()
