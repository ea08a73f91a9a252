"""Debian's Prometheus (/usr/bin/prometheus, the package `prometheus`) for the tests
that scrape k8sbridge's metrics endpoints (docs/sync.md, "Metrics"): started with a
scrape configuration, asked through its HTTP API, stopped at the end.

`service_monitor_scrape` turns a ServiceMonitor of the shipped manifests into the
scrape jobs the prometheus-operator makes of it, with the targets its service
discovery would find (the shipped Service's ready endpoints), so that a test
against a real cluster scrapes through the shipped Service as a site's Prometheus
does."""

import json
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from harness.rig import free_tcp_port, wait_for

PROMETHEUS = Path("/usr/bin/prometheus")


def static_scrape(job, targets, path="/metrics", interval="1s"):
    """A scrape job of fixed `targets` ("host:port")."""
    return {"job_name": job, "metrics_path": path, "scrape_interval": interval,
            "scrape_timeout": interval, "static_configs": [{"targets": list(targets)}]}


def service_monitor_scrape(monitor, kubectl_json, interval="1s"):
    """The scrape jobs the prometheus-operator makes of ServiceMonitor `monitor` (a
    dict), with the targets its Kubernetes service discovery finds: the ready
    endpoints of the Services its selector matches in its namespace, at their port
    of the endpoint's name. Debian's Prometheus is built without Kubernetes service
    discovery, so the targets are read here, from the Services' EndpointSlices
    (`kubectl_json(*args)`: `kubectl get ... -o json` against the cluster)."""
    namespace = monitor["metadata"]["namespace"]
    labels = monitor["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{k}={v}" for k, v in labels.items())
    services = [s["metadata"]["name"] for s in
                kubectl_json("-n", namespace, "get", "services", "-l", selector)["items"]]
    jobs = []
    for i, endpoint in enumerate(monitor["spec"]["endpoints"]):
        targets = []
        for service in services:
            slices = kubectl_json("-n", namespace, "get", "endpointslices", "-l",
                                  f"kubernetes.io/service-name={service}")["items"]
            for sl in slices:
                ports = [p["port"] for p in sl.get("ports") or []
                         if p.get("name") == endpoint["port"]]
                for ep in sl.get("endpoints") or []:
                    if ep.get("conditions", {}).get("ready", True):
                        targets += [f"{address}:{port}" for address in ep["addresses"]
                                    for port in ports]
        job = static_scrape(f"serviceMonitor/{namespace}/{monitor['metadata']['name']}/{i}",
                            targets, path=endpoint.get("path", "/metrics"), interval=interval)
        jobs.append(job)
    return jobs


def dashboard_metrics(path, prefix="k8sbridge_"):
    """The metric names starting with `prefix` that the queries of Grafana dashboard
    `path` use (k8sbridge's own; "slurm_": slurmctld's, Slurm 25.11 and later)."""
    exprs = []

    def walk(panels):
        for p in panels:
            exprs.extend(t["expr"] for t in p.get("targets", []) if "expr" in t)
            walk(p.get("panels", []))

    walk(json.loads(Path(path).read_text())["panels"])
    names = set()
    for expr in exprs:
        names.update(re.findall(rf"\b({re.escape(prefix)}[a-z0-9_]+)", expr))
    return names


def declared_metrics(url):
    """The metric names the endpoint at `url` declares (its `# TYPE` lines, a
    histogram's and a summary's series included), whether or not a family has a
    sample yet (a counter of errors that never happened)."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            if kind in ("histogram", "summary"):
                names.update({f"{name}_sum", f"{name}_count"})
            if kind == "histogram":
                names.add(f"{name}_bucket")
    return names


class Prometheus:
    """One Prometheus server on 127.0.0.1 with `scrape_configs`, its data and log in a
    directory of its own; close() stops it and removes them."""

    def __init__(self, scrape_configs, program=PROMETHEUS):
        self.dir = Path(tempfile.mkdtemp(prefix="k8sbridge-prometheus-"))
        self.port = free_tcp_port()
        config = self.dir / "prometheus.yml"
        config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s"},
                                          "scrape_configs": scrape_configs}))
        self.log_path = self.dir / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(program), f"--config.file={config}",
                 f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or self._ready(), 60,
                 lambda: f"Prometheus to be ready; log:\n{self.log()[-3000:]}")
        if self.proc.poll() is not None:
            raise RuntimeError(f"Prometheus exited {self.proc.returncode}:\n{self.log()[-3000:]}")

    def _ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    def api(self, path, **params):
        """The `data` of one API answer."""
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise RuntimeError(f"{url}: {body}")
        return body["data"]

    def query(self, expr):
        """{labels as a sorted tuple of pairs (without __name__): value} of an instant query."""
        out = {}
        for sample in self.api("query", query=expr)["result"]:
            labels = tuple(sorted((k, v) for k, v in sample["metric"].items() if k != "__name__"))
            out[labels] = float(sample["value"][1])
        return out

    def value(self, expr):
        """The single value of `expr`, or None when it has none."""
        values = list(self.query(expr).values())
        return values[0] if len(values) == 1 else None

    def wait_value(self, expr, value, timeout=60):
        """Waits until `expr` has the single value `value`."""
        wait_for(lambda: self.value(expr) == value, timeout,
                 lambda: f"{expr} == {value} in Prometheus; it is {self.query(expr)}")

    def targets(self):
        return self.api("targets")["activeTargets"]

    def wait_targets_up(self, count, timeout=60):
        """Waits until `count` targets are found and every one was scraped."""
        def up():
            targets = self.targets()
            return len(targets) == count and all(t["health"] == "up" for t in targets)
        wait_for(up, timeout, lambda: f"{count} targets up; they are {self.targets()}")

    def names(self):
        """Every metric name Prometheus holds."""
        return set(self.api("label/__name__/values"))

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
