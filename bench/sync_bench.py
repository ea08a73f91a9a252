#!/usr/bin/python3
"""k8sbridge-sync at 1000 Slurm nodes and 1000 pods: how fast a change crosses over,
and what the daemon costs when nothing happens. Needs root (the rig).

Set-up: a rig's slurmctld with 1000 extra non-CLOUD nodes `b-0000..b-0999` (no
slurmd: they are never powered down, so their pods are not orphans) and kubesim with
100 nodes holding 1000 worker pods with k8sbridge's ownership labels (10 per node).

  1. Slurm -> Kubernetes: `scontrol update nodename=b-XXXX state=drain`, one node at a
     time, until the drain annotation is on its pod (seen through a watch);
  2. Kubernetes -> Slurm: a Kubernetes node cordoned (by "someone else"), until each of
     its 10 Slurm nodes is drained with a k8sbridge: reason (polled with
     `scontrol -o show node` every 50 ms: the figures include that polling delay);
  3. idle: the daemon's CPU over 30 s with nothing changing, and its RSS.

    /usr/bin/python3 bench/sync_bench.py [--samples 100] [--build-root BUILD]

Peer: soperator polls drained nodes every 3 minutes (and waits 15 minutes on a
NotReady node), so a change waits on average half a poll: p50 90 s, p99 178 s
(uniform arrival within the poll, no soperator run here). Goals (issue 6): p99 under
2 s both ways, idle CPU under 2% of one core.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

SLURM_NODES = 1000
PER_KNODE = 10
SOPERATOR_POLL = 180.0


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--build-root", default=os.environ.get("K8SBRIDGE_BUILD_ROOT",
                                                          str(ROOT / "build")))
    args = ap.parse_args()
    os.environ["K8SBRIDGE_BUILD_ROOT"] = args.build_root
    from harness.kubesim import KubeSim
    from harness.rig import Rig, free_tcp_port, wait_for

    sync_bin = Path(args.build_root) / "programs" / "sync" / "k8sbridge-sync"
    names = [f"b-{i:04d}" for i in range(SLURM_NODES)]
    extra = (f"NodeName=b-[0000-{SLURM_NODES - 1:04d}] NodeAddr=127.0.0.1 CPUs=1 "
             "RealMemory=1000\n")
    with KubeSim("--fake-nodes", str(SLURM_NODES // PER_KNODE)) as sim, \
            Rig(nodes=1, start_slurmd=False, slurm_conf_extra=extra) as rig:
        t = time.monotonic()
        for i, name in enumerate(names):
            code, _, body = sim.request("POST", "/api/v1/namespaces/default/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {
                    "app.kubernetes.io/managed-by": "k8sbridge", "k8sbridge.io/cluster": "rig",
                    "k8sbridge.io/node": name}},
                "spec": {"nodeName": f"node-{i // PER_KNODE}",
                         "containers": [{"name": "slurmd", "image": "x"}]}})
            assert code == 201, body
        print(f"set-up: {SLURM_NODES} Slurm nodes, {SLURM_NODES} pods on "
              f"{SLURM_NODES // PER_KNODE} Kubernetes nodes ({time.monotonic() - t:.1f} s)")

        port = free_tcp_port()
        conf = rig.workdir / "k8sbridge.conf"
        conf.write_text(f"ClusterName=rig\nKubeconfig={sim.kubeconfig}\nNamespace=default\n"
                        f"SyncMetricsListen=127.0.0.1:{port}\n")
        log = open(rig.workdir / "sync.log", "wb")
        daemon = subprocess.Popen(rig.host_command([str(sync_bin), "--config", str(conf),
                                                    "--identity", "bench"]),
                                  env=dict(os.environ, SLURM_CONF=str(rig.slurm_conf)),
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            def leading():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
                        return "k8sbridge_sync_leader 1" in r.read().decode()
                except OSError:
                    return False
            wait_for(leading, 60, "the daemon to lead")

            # Idle first, on a settled cluster.
            time.sleep(5)
            c0, t0 = cpu_seconds(daemon.pid), time.monotonic()
            time.sleep(30)
            idle_cpu = (cpu_seconds(daemon.pid) - c0) / (time.monotonic() - t0) * 100
            rss = rss_mib(daemon.pid)

            # 1. Slurm -> Kubernetes, through a watch on the pods.
            seen = {}
            stop = threading.Event()
            start_rv = sim.request("GET", "/api/v1/namespaces/default/pods?limit=1")[2][
                "metadata"]["resourceVersion"]

            def watch():
                req = urllib.request.Request(
                    sim.url + "/api/v1/namespaces/default/pods?watch=1&resourceVersion="
                    + start_rv)
                req.add_header("Authorization", f"Bearer {sim.token}")
                with urllib.request.urlopen(req, context=sim.ssl_context()) as r:
                    for line in r:
                        if stop.is_set():
                            return
                        obj = json.loads(line)["object"]
                        ann = obj["metadata"].get("annotations", {})
                        name = obj["metadata"]["name"]
                        if "k8sbridge.io/slurm-drain-reason" in ann and name not in seen:
                            seen[name] = time.monotonic()
            threading.Thread(target=watch, daemon=True).start()
            time.sleep(0.5)
            sent = {}
            for name in names[:args.samples]:
                sent[name] = time.monotonic()
                rig.check_output(["scontrol", "update", f"nodename={name}", "state=drain",
                                  "reason=bench maintenance"])
                wait_for(lambda: name in seen, 30, f"{name}'s annotation")
            stop.set()
            s2k = [seen[n] - sent[n] for n in sent]

            # 2. Kubernetes -> Slurm: cordon nodes 50.. (Slurm nodes b-0500..).
            k2s = []
            for k in range(50, 50 + max(1, args.samples // PER_KNODE)):
                group = names[k * PER_KNODE:(k + 1) * PER_KNODE]
                t_cordon = time.monotonic()
                sim.kubectl("cordon", f"node-{k}")
                pending = set(group)
                while pending:
                    out = rig.check_output(["scontrol", "-o", "show", "node",
                                            f"{group[0]},{','.join(group[1:])}"])
                    now = time.monotonic()
                    for line in out.splitlines():
                        node = line.split()[0].partition("=")[2]
                        reason = line.partition(" Reason=")[2]
                        if node in pending and reason.startswith("k8sbridge:"):
                            pending.discard(node)
                            k2s.append(now - t_cordon)
                    if now - t_cordon > 60:
                        raise RuntimeError(f"not drained after 60 s: {sorted(pending)}")
                    time.sleep(0.05)
            busy_cpu = cpu_seconds(daemon.pid)
            # The floor under both: what one `scontrol show node` (slurm_load_node)
            # costs on this slurmctld, in the same run.
            floor = []
            for i in range(args.samples):
                t = time.monotonic()
                rig.check_output(["scontrol", "-o", "show", "node", names[i]])
                floor.append(time.monotonic() - t)
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
            log.close()
            slow = [line for line in (rig.workdir / "sync.log").read_text().splitlines()
                    if "took" in line or "warning" in line]
            print(f"daemon warnings: {len(slow)}", *slow[-10:], sep="\n")

    def row(what, values):
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(f"{what:<34} n={len(values):<4} p50 {p50 * 1000:7.0f} ms   p99 {p99 * 1000:7.0f} ms"
              f"   soperator (3-min poll) p50 {SOPERATOR_POLL / 2:.0f} s, p99 "
              f"{SOPERATOR_POLL * 0.99:.0f} s: {SOPERATOR_POLL / 2 / p50:,.0f}x / "
              f"{SOPERATOR_POLL * 0.99 / p99:,.0f}x faster")
    row("scontrol drain -> pod annotation", s2k)
    row("Kubernetes cordon -> Slurm drain", k2s)
    print(f"{'scontrol show node (Slurm RPC floor)':<34} n={len(floor):<4} p50 "
          f"{percentile(floor, 50) * 1000:7.0f} ms   p99 {percentile(floor, 99) * 1000:7.0f} ms"
          f"   (max {max(floor) * 1000:.0f} ms)")
    print(f"idle CPU: {idle_cpu:.2f}% of one core over 30 s (goal < 2%); RSS {rss:.1f} MiB; "
          f"CPU over the whole run {busy_cpu:.1f} s")
    print(f"goals: p99 < 2 s both ways: "
          f"{'met' if max(percentile(s2k, 99), percentile(k2s, 99)) < 2 else 'NOT met'}; "
          f"idle CPU < 2%: {'met' if idle_cpu < 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
