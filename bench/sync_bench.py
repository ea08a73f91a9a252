#!/usr/bin/python3
"""k8sbridge-sync at N Slurm nodes and N pods (default 1000): how fast a change
crosses over, and what the daemon costs when nothing happens. Needs root (the rig).

Set-up: a rig's slurmctld with N extra non-CLOUD nodes `b-00000..` (no slurmd: they
are never powered down, so their pods are not orphans) and a real Kubernetes
(harness.kube.KubeCluster: etcd, kube-apiserver, controllers, scheduler, no audit
log) with N / --per-knode kwok nodes holding N worker pods with k8sbridge's
ownership labels (--per-knode on each, default 10; kwok reports them Running). The
daemon acts as the deploy RBAC's k8sbridge-controller ServiceAccount
(deploy/base/rbac.yaml), as it does in a cluster.

  1. Slurm -> Kubernetes: `scontrol update nodename=b-XXXXX state=drain`, one node at
     a time, until the drain annotation is on its pod (seen through a watch);
  2. Kubernetes -> Slurm: a Kubernetes node cordoned (by "someone else"), until each of
     its Slurm nodes is drained with a k8sbridge: reason (polled with
     `scontrol -o show node` every 50 ms: the figures include that polling delay);
  3. idle: the daemon's CPU over --idle seconds (default 30) with nothing changing,
     and its RSS.

    /usr/bin/python3 bench/sync_bench.py [--nodes 1000] [--per-knode 10] [--samples 100]
        [--idle 30] [--build-root BUILD]

bench/scale.py runs this at 1000 and 10000 nodes (`measure`). Peer: soperator polls
drained nodes every 3 minutes (and waits 15 minutes on a NotReady node), so a change
waits on average half a poll: p50 90 s, p99 178 s (uniform arrival within the poll,
no soperator run here). Goals (issues 6 and 21): p99 under 1 s both ways, idle CPU
under 2% of one core.
"""

import argparse
import faulthandler
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

SOPERATOR_POLL = 180.0
POLL_INTERVAL = 0.5  # the daemon's SyncPollInterval (its default; --poll sets it)
DRAIN_ANNOTATION = "k8sbridge.io/slurm-drain-reason"


def percentile(values, p):
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def idle_cost(pid, seconds):
    """(% of one core, RSS MiB) of process `pid` over `seconds` of nothing happening."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    cpu = (cpu_seconds(pid) - c0) / (time.monotonic() - t0) * 100
    return cpu, rss_mib(pid)


def create_objects(kube, path, bodies, threads=4):
    """POSTs every body to `path` over `threads` kept-alive HTTPS connections (one
    connection per object would spend the time on TLS handshakes), as the cluster's
    admin (its bearer token)."""
    url = urllib.parse.urlsplit(kube.url)
    chunks = [bodies[i::threads] for i in range(threads)]
    errors = []

    def post_all(chunk):
        conn = http.client.HTTPSConnection(url.hostname, url.port,
                                           context=kube.ssl_context(client_cert=False),
                                           timeout=60)
        headers = {"Authorization": f"Bearer {kube.token}", "Content-Type": "application/json"}
        try:
            for body in chunk:
                conn.request("POST", path, json.dumps(body), headers)
                r = conn.getresponse()
                text = r.read()
                if r.status != 201:
                    errors.append(f"{r.status} {text[:300]!r}")
                    return
        finally:
            conn.close()
    workers = [threading.Thread(target=post_all, args=(c,)) for c in chunks]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise RuntimeError(f"creating {path}: {errors[0]}")


def owned_pod(name, knode, cluster="rig"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {
                "app.kubernetes.io/managed-by": "k8sbridge", "k8sbridge.io/cluster": cluster,
                "k8sbridge.io/node": name}},
            "spec": {"nodeName": knode, "containers": [{"name": "slurmd", "image": "x"}]}}


class AnnotationWatch:
    """Records when each pod first carries the drain annotation (a watch from now)."""

    def __init__(self, kube):
        self.seen = {}
        self.stop = threading.Event()
        rv = kube.request("GET", "/api/v1/namespaces/default/pods?limit=1")[2][
            "metadata"]["resourceVersion"]
        req = urllib.request.Request(
            kube.url + "/api/v1/namespaces/default/pods?watch=1&resourceVersion=" + rv)
        req.add_header("Authorization", f"Bearer {kube.token}")
        self.stream = urllib.request.urlopen(req, context=kube.ssl_context(client_cert=False))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.stream:
            if self.stop.is_set():
                return
            event = json.loads(line)
            if event.get("type") not in ("ADDED", "MODIFIED"):
                continue
            obj = event["object"]
            name = obj["metadata"]["name"]
            if DRAIN_ANNOTATION in obj["metadata"].get("annotations", {}) \
                    and name not in self.seen:
                self.seen[name] = time.monotonic()

    def close(self):
        # The reader ends at its next event; closing the stream under it could block.
        self.stop.set()


def slurm_to_kube(rig, kube, names):
    """Seconds from `scontrol drain` to the pod's annotation, for each of `names`."""
    from harness.rig import wait_for
    watch = AnnotationWatch(kube)
    try:
        sent = {}
        for name in names:
            # Changes come at random times: a drain sent right after the last one's
            # annotation would be phase-locked to the daemon's Slurm poll.
            time.sleep(random.uniform(0, POLL_INTERVAL))
            sent[name] = time.monotonic()
            rig.check_output(["scontrol", "update", f"nodename={name}", "state=drain",
                              "reason=bench maintenance"])
            wait_for(lambda: name in watch.seen, 30, f"{name}'s annotation", interval=0.01)
        return [watch.seen[n] - sent[n] for n in sent]
    finally:
        watch.close()


def kube_to_slurm(rig, kube, knodes, slurm_nodes_of):
    """Seconds from a cordon of each of `knodes` to the drain of each of its Slurm nodes."""
    out = []
    for k in knodes:
        group = slurm_nodes_of(k)
        time.sleep(random.uniform(0, POLL_INTERVAL))  # as above
        t_cordon = time.monotonic()
        kube.kubectl("cordon", k)
        pending = set(group)
        while pending:
            lines = rig.check_output(["scontrol", "-o", "show", "node", ",".join(group)])
            now = time.monotonic()
            for line in lines.splitlines():
                node = line.split()[0].partition("=")[2]
                reason = line.partition(" Reason=")[2]
                if node in pending and reason.startswith("k8sbridge:"):
                    pending.discard(node)
                    out.append(now - t_cordon)
            if now - t_cordon > 60:
                raise RuntimeError(f"not drained after 60 s: {sorted(pending)}")
            time.sleep(0.05)
    return out


def start_daemon(rig, kube, sync_bin):
    from harness.rig import free_tcp_port, wait_for
    port = free_tcp_port()
    kube.apply_deploy_rbac("default")
    kubeconfig = kube.service_account_kubeconfig("default", "k8sbridge-controller",
                                                 expiration_seconds=24 * 3600)
    conf = rig.workdir / "k8sbridge.conf"
    conf.write_text(f"ClusterName=rig\nKubeconfig={kubeconfig}\nNamespace=default\n"
                    f"SyncMetricsListen=127.0.0.1:{port}\n"
                    f"SyncPollInterval={round(POLL_INTERVAL * 1000)}ms\n")
    with open(rig.workdir / "sync.log", "wb") as log:
        daemon = subprocess.Popen(rig.host_command([str(sync_bin), "--config", str(conf),
                                                    "--identity", "bench"]),
                                  env=dict(os.environ, SLURM_CONF=str(rig.slurm_conf)),
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def leading():
        if daemon.poll() is not None:
            raise SystemExit(f"k8sbridge-sync exited {daemon.returncode}:\n"
                             f"{(rig.workdir / 'sync.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return "k8sbridge_sync_leader 1" in r.read().decode()
        except OSError:
            return False
    try:
        wait_for(leading, 300, "the daemon to lead")
    except BaseException:
        stop_daemon(daemon)
        raise
    return daemon


def stop_daemon(daemon):
    if daemon.poll() is None:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()


def measure(nodes=1000, per_knode=10, samples=100, idle_seconds=30.0, build_root=None,
            log=print):
    """Runs the benchmark at `nodes` Slurm nodes and pods; returns its figures."""
    from harness.kube import KubeCluster, wait_for_condition
    from harness.rig import Rig
    sync_bin = Path(build_root or os.environ.get("K8SBRIDGE_BUILD_ROOT", ROOT / "build")) / \
        "programs" / "sync" / "k8sbridge-sync"
    if not sync_bin.exists():
        raise SystemExit(f"{sync_bin} does not exist: meson compile k8sbridge-sync")
    if nodes % per_knode or samples > nodes:
        raise SystemExit(f"--nodes {nodes} must be a multiple of --per-knode {per_knode} and "
                         f"at least --samples {samples}")
    knodes = nodes // per_knode
    names = [f"b-{i:05d}" for i in range(nodes)]
    # SlurmdTimeout=0: these nodes never run slurmd; slurmctld must not set them DOWN
    # ("Not responding") in the middle of the run. A later line wins over the rig's.
    extra = (f"SlurmdTimeout=0\nNodeName=b-[00000-{nodes - 1:05d}] NodeAddr=127.0.0.1 CPUs=1 "
             "RealMemory=1000\n")
    r = {"nodes": nodes, "knodes": knodes}
    with KubeCluster(nodes=knodes, audit=False) as kube, \
            Rig(nodes=1, start_slurmd=False, slurm_conf_extra=extra) as rig:
        # The ServiceAccount admission refuses pods until "default" has its account.
        wait_for_condition(lambda: kube.request(
            "GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, 60,
            "the default ServiceAccount of namespace default")
        t = time.monotonic()
        create_objects(kube, "/api/v1/namespaces/default/pods",
                       [owned_pod(name, f"node-{i // per_knode}") for i, name in enumerate(names)])
        r["setup_s"] = time.monotonic() - t
        log(f"  sync set-up: {nodes} Slurm nodes, {nodes} pods on {knodes} Kubernetes nodes "
            f"({r['setup_s']:.1f} s to create the pods)")
        t = time.monotonic()
        daemon = start_daemon(rig, kube, sync_bin)
        r["lead_s"] = time.monotonic() - t
        try:
            time.sleep(5)  # idle first, on a settled cluster
            r["idle_cpu"], r["rss"] = idle_cost(daemon.pid, idle_seconds)
            log(f"  idle: {r['idle_cpu']:.2f}% of one core, RSS {r['rss']:.1f} MiB")
            r["s2k"] = slurm_to_kube(rig, kube, names[:samples])
            log(f"  Slurm -> Kubernetes: p99 {percentile(r['s2k'], 99) * 1000:.0f} ms")
            # Cordons from the middle of the Kubernetes nodes (Slurm nodes not drained above).
            first = max(knodes // 2, -(-samples // per_knode))
            cordoned = [f"node-{k}" for k in range(first, first + max(1, samples // per_knode))]
            r["k2s"] = kube_to_slurm(
                rig, kube, cordoned,
                lambda k: names[int(k[5:]) * per_knode:(int(k[5:]) + 1) * per_knode])
            log(f"  Kubernetes -> Slurm: p99 {percentile(r['k2s'], 99) * 1000:.0f} ms")
            r["busy_cpu"] = cpu_seconds(daemon.pid)
            r["rss_after"] = rss_mib(daemon.pid)
            # The floor under both: one `scontrol show node` (slurm_load_node) on this
            # slurmctld, in the same run.
            r["floor"] = []
            for name in names[:samples]:
                t = time.monotonic()
                rig.check_output(["scontrol", "-o", "show", "node", name])
                r["floor"].append(time.monotonic() - t)
        finally:
            stop_daemon(daemon)
            log_path = rig.workdir / "sync.log"  # gone if a `rigctl cleanup` swept the rig
            text = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
            r["warnings"] = [line for line in text if "took" in line or "warning" in line]
    return r


def row(what, values):
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return (f"{what:<36} n={len(values):<4} p50 {p50 * 1000:7.0f} ms   p99 {p99 * 1000:7.0f} ms"
            f"   soperator (3-min poll) p50 {SOPERATOR_POLL / 2:.0f} s, p99 "
            f"{SOPERATOR_POLL * 0.99:.0f} s: {SOPERATOR_POLL / 2 / p50:,.0f}x / "
            f"{SOPERATOR_POLL * 0.99 / p99:,.0f}x faster")


def report(r):
    print(f"daemon warnings: {len(r['warnings'])}", *r["warnings"][-10:], sep="\n")
    print(f"{r['nodes']} Slurm nodes, {r['nodes']} pods on {r['knodes']} Kubernetes nodes")
    print(row("scontrol drain -> pod annotation", r["s2k"]))
    print(row("Kubernetes cordon -> Slurm drain", r["k2s"]))
    floor = r["floor"]
    print(f"{'scontrol show node (Slurm RPC floor)':<36} n={len(floor):<4} p50 "
          f"{percentile(floor, 50) * 1000:7.0f} ms   p99 {percentile(floor, 99) * 1000:7.0f} ms"
          f"   (max {max(floor) * 1000:.0f} ms)")
    print(f"idle CPU: {r['idle_cpu']:.2f}% of one core (goal < 2%); RSS {r['rss']:.1f} MiB "
          f"({r['rss_after']:.1f} after the drains); CPU over the whole run "
          f"{r['busy_cpu']:.1f} s")
    worst = max(percentile(r["s2k"], 99), percentile(r["k2s"], 99))
    print(f"goals: p99 < 1 s both ways: {'met' if worst < 1 else 'NOT met'}; "
          f"idle CPU < 2%: {'met' if r['idle_cpu'] < 2 else 'NOT met'}")


def main():
    global POLL_INTERVAL
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000, help="Slurm nodes, one pod each")
    ap.add_argument("--per-knode", type=int, default=10, help="pods per Kubernetes node")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of the idle measurement")
    ap.add_argument("--poll", type=float, default=POLL_INTERVAL,
                    help="the daemon's SyncPollInterval, seconds")
    ap.add_argument("--build-root", default=os.environ.get("K8SBRIDGE_BUILD_ROOT",
                                                          str(ROOT / "build")))
    args = ap.parse_args()
    # A SIGTERM unwinds the cluster, the rig and the daemon instead of leaving them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    faulthandler.register(signal.SIGUSR1)  # where it is, when it seems stuck
    if os.geteuid() != 0:
        sys.exit("sync_bench: needs root (the rig)")
    os.environ["K8SBRIDGE_BUILD_ROOT"] = args.build_root
    POLL_INTERVAL = args.poll
    report(measure(args.nodes, args.per_knode, args.samples, args.idle, args.build_root))


if __name__ == "__main__":
    main()
