"""Slurm's own metrics (Slurm 25.11 and later; the version suite runs this on
26.05.5): slurmctld serves them over HTTP on SlurmctldPort once slurm.conf names a
metrics plugin. What a site adds, the slurm.conf lines and the ServiceMonitor and
NetworkPolicy, is read from docs/deploy.md, "Slurm's own metrics". Scraped by
Debian's Prometheus from a rig of real slurmctld and slurmd.

- test_prometheus_scrapes_every_slurmctld_endpoint: with the documented lines
  beside a PrivateData, Prometheus scrapes the ServiceMonitor's paths, which are
  every endpoint slurmctld's index lists, and holds the rig's nodes, a drain, a
  running job on its nodes, per partition and per user, and the scheduler's
  counts; every slurm_ metric the Grafana dashboard queries is served.
- test_the_documented_objects_select_the_base_controller: the ServiceMonitor
  selects the base's Service slurmctld at its port to slurmctld, and the
  NetworkPolicy the controller pod at that port.
- test_private_data_without_ignore_private_data_refuses_the_scrape: PrivateData
  alone closes the endpoints to a Prometheus without a Slurm token (401).
- test_without_metrics_type_the_endpoints_are_empty: without MetricsType the
  endpoints answer 200 with nothing, so the target is up and holds no slurm_ series.
"""

import re
import textwrap
import urllib.request

import yaml

from harness.prometheus import (PROMETHEUS, Prometheus, dashboard_metrics, declared_metrics,
                                static_scrape)
from harness.paths import SOURCE_ROOT
from harness.rig import Rig, RigConfig, slurm_version, wait_for
from harness.testcase import RigTestCase, main

DEPLOY = SOURCE_ROOT / "deploy"
DASHBOARD = DEPLOY / "dashboards" / "k8sbridge.json"
PRIVATE_DATA = "PrivateData=jobs,nodes,partitions,usage,users\n"
# slurmctld's port when slurm.conf names none, as in deploy/base.
DEFAULT_SLURMCTLD_PORT = 6817


def doc_blocks():
    """The indented code blocks of docs/deploy.md's section "Slurm's own metrics"."""
    text = (SOURCE_ROOT / "docs" / "deploy.md").read_text()
    section = text.split("\n### Slurm's own metrics", 1)[1].split("\n### ", 1)[0]
    blocks, block = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
        elif block:
            blocks.append(textwrap.dedent("\n".join(block)).strip() + "\n")
            block = []
    return blocks


def site_lines():
    """The slurm.conf lines the section tells a site to add."""
    return next(b for b in doc_blocks() if b.startswith("MetricsType="))


def site_objects():
    """{kind: object} of the section's manifests (a ServiceMonitor, a NetworkPolicy)."""
    block = next(b for b in doc_blocks() if "kind: ServiceMonitor" in b)
    return {o["kind"]: o for o in yaml.safe_load_all(block) if o}


def endpoint_paths():
    return sorted(e["path"] for e in site_objects()["ServiceMonitor"]["spec"]["endpoints"])


class CtldMetrics(RigTestCase):

    def setUp(self):
        super().setUp()
        if not PROMETHEUS.exists():
            self.skipTest(f"{PROMETHEUS} is not there (scripts/setup.sh installs prometheus)")
        if slurm_version() < (25, 11, 0):
            self.skipTest(f"Slurm {slurm_version()} serves no metrics (25.11 and later do)")

    def rig(self, slurm_conf_extra, nodes=2) -> Rig:
        return Rig(nodes=nodes, config=RigConfig(slurm_conf_extra=slurm_conf_extra))

    def url(self, rig, path):
        return f"http://{rig.bridge_address}:{rig.ctld_port}{path}"

    def prometheus(self, rig) -> Prometheus:
        """Prometheus with a scrape job per path of the documented ServiceMonitor, on
        slurmctld's port."""
        address = f"{rig.bridge_address}:{rig.ctld_port}"
        prom = Prometheus([static_scrape(f"slurmctld{path.replace('/', '-')}", [address], path)
                           for path in endpoint_paths()])
        self.addCleanup(prom.close)
        return prom

    def test_prometheus_scrapes_every_slurmctld_endpoint(self):
        with self.rig(PRIVATE_DATA + site_lines(), nodes=3) as rig:
            self.scrape_every_endpoint(rig)
        self.assertNoLeftovers()

    def scrape_every_endpoint(self, rig):
        rig.wait_nodes_idle()
        with urllib.request.urlopen(self.url(rig, "/metrics"), timeout=10) as r:
            index = r.read().decode()
        self.assertEqual(sorted(re.findall(r"'(/metrics/[^']+)'", index)), endpoint_paths(),
                         "the ServiceMonitor scrapes what slurmctld's index lists")
        prom = self.prometheus(rig)
        prom.wait_targets_up(len(endpoint_paths()))
        served = prom.wait_value
        served("slurm_nodes", 3)
        served("slurm_nodes_idle", 3)
        served('slurm_node_cpus{node="w-2"}', 1)
        served("slurm_partitions", 1)
        rig.check_output(["scontrol", "update", "NodeName=w-2", "State=DRAIN", "Reason=metrics"])
        job = rig.sbatch("#!/bin/sh\nsleep 600\n", ["-N2"])
        rig.wait_job(job, states=("RUNNING",))
        served("slurm_nodes_drain", 1)
        served("slurm_nodes_alloc", 2)
        served("slurm_jobs_running", 1)
        served('slurm_partition_jobs_running{partition="main"}', 1)
        served('slurm_user_jobs_running{username="root"}', 1)
        served("slurm_sdiag_jobs_submitted", 1)
        rig.check_output(["scancel", str(job)])
        served("slurm_jobs_cancelled", 1)
        served("slurm_jobs_running", 0)

        declared = set()
        for path in endpoint_paths():
            declared |= declared_metrics(self.url(rig, path))
        missing = sorted(dashboard_metrics(DASHBOARD, prefix="slurm_") - declared)
        self.assertEqual(missing, [], "the dashboard queries Slurm metrics slurmctld does not serve")

    def test_private_data_without_ignore_private_data_refuses_the_scrape(self):
        with self.rig(PRIVATE_DATA + "MetricsType=metrics/openmetrics\n") as rig:
            prom = self.prometheus(rig)

            def refused():
                targets = prom.targets()
                return len(targets) == len(endpoint_paths()) and all(
                    t["health"] == "down" and "401" in t["lastError"] for t in targets)
            wait_for(refused, 60, lambda: f"every target refused with 401; {prom.targets()}")
        self.assertNoLeftovers()

    def test_without_metrics_type_the_endpoints_are_empty(self):
        with self.rig("") as rig:
            prom = self.prometheus(rig)
            # "up": every endpoint answered 200, and that answer held no sample.
            prom.wait_targets_up(len(endpoint_paths()))
            self.assertEqual({n for n in prom.names() if n.startswith("slurm_")}, set())
        self.assertNoLeftovers()

    def test_the_documented_objects_select_the_base_controller(self):
        base = [o for o in yaml.safe_load_all((DEPLOY / "base" / "controller.yaml").read_text())
                if o]
        service = next(o for o in base if o["kind"] == "Service" and
                       o["metadata"]["name"] == "slurmctld")
        pod_labels = next(o for o in base if o["kind"] == "StatefulSet")[
            "spec"]["template"]["metadata"]["labels"]
        namespace = re.search(r"namespace: (\S+)",
                              (DEPLOY / "base" / "kustomization.yaml").read_text()).group(1)
        objects = site_objects()
        monitor, policy = objects["ServiceMonitor"], objects["NetworkPolicy"]
        self.assertEqual({monitor["metadata"]["namespace"], policy["metadata"]["namespace"]},
                         {namespace})
        self.assertLessEqual(monitor["spec"]["selector"]["matchLabels"].items(),
                             service["metadata"]["labels"].items())
        target_ports = {p["name"]: p["targetPort"] for p in service["spec"]["ports"]}
        self.assertEqual({target_ports.get(e["port"]) for e in monitor["spec"]["endpoints"]},
                         {DEFAULT_SLURMCTLD_PORT})
        self.assertLessEqual(policy["spec"]["podSelector"]["matchLabels"].items(),
                             pod_labels.items())
        self.assertEqual([p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]],
                         [DEFAULT_SLURMCTLD_PORT])


if __name__ == "__main__":
    main()
