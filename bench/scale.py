#!/usr/bin/python3
"""The scale run (issue 21): k8sbridge at 1000 and at 10000 nodes. Needs root (the rig).

For each cluster size N (--sizes, default 1000,10000):

  power: the rig's slurmctld with N CLOUD nodes w-[0-N-1] in 10 NodeGroups (one
    NodeName line and one NodeGroup line per group) and a real Kubernetes
    (harness.kube.KubeCluster: etcd, kube-apiserver with TLS, the controllers, no
    scheduler, so pods stay unbound) with N kwok nodes. Beyond the first --resume nodes, the
    rest of the cluster gets its pods first (one k8sbridge-power resume call, timed
    too), so the measured calls see a full cluster. Then, as bench/power_bench.py
    does: `k8sbridge-power resume w-[0-999]` (ONE call; a SLURM_RESUME_FILE puts one
    job with a feature on them), `suspend w-[0-999]`, and in the same run `kubectl
    create -f` / `kubectl delete -f` of the same 1000 rendered pods; medians of
    --repeat rounds and the ratios;
  sync: bench/sync_bench.py's measure() with N non-CLOUD Slurm nodes and N pods, one
    per Kubernetes node (N kwok nodes): idle CPU and RSS of k8sbridge-sync, drain
    latency p50/p99 both ways.

It then prints how each figure grows from the smallest size to the largest.

    /usr/bin/python3 bench/scale.py [--sizes 1000,10000] [--resume 1000] [--groups 10]
        [--repeat 3] [--samples 100] [--idle 30] [--build-root BUILD]

Each round also times wrk's creates of the same pods (the floor, as bench/power_bench.py
does), and the resume's create rate is printed as a fraction of it: both rates from
the API server's window of the creates (first 201 to last, the answer times of its
audit log, which logs only the bench's user), the goal's figure, and the wall
times end to end beside it (those include each program's start and, for k8sbridge-power,
its reads before the first create). k8sbridge-power runs
as the rig runs Slurm clients (Rig.host_command: a mount namespace with the rig's
resolver files), and so do wrk and kubectl, so that each pays the same start.

Goals (issue 21): resume >= 5x faster than kubectl create at both sizes and within
10% of the floor (suspend against kubectl delete is printed beside it);
k8sbridge-sync at 10000: idle CPU < 2% of one core, RSS < 200 MB, drain p99 < 1 s
both ways. Run it on a quiet machine: the two cores serve the API server, etcd, kwok,
slurmctld and the program measured alike. Everything it starts is stopped on exit, SIGTERM included.
"""

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package
sys.path.insert(0, str(ROOT / "bench"))  # power_bench, sync_bench

import power_bench  # noqa: E402
import sync_bench  # noqa: E402

PRODUCT = power_bench.PRODUCT
LEAF = power_bench.LEAF
# A cluster's pods before the measured calls: one call, without the per-call limits
# of the measured ones (they would only stretch the set-up).
PREFILL_SETTINGS = "QPS=5000 Burst=20000 Concurrency=8"


def group_ranges(size, groups):
    """[(name, first, last)] of `groups` equal node groups over w-[0-size-1]."""
    if size % groups:
        raise SystemExit(f"--sizes: {size} is not a multiple of --groups {groups}")
    per = size // groups
    return [(f"g{g}", g * per, (g + 1) * per - 1) for g in range(groups)]


def write_confs(d, rig, kubeconfig, ranges, settings):
    """k8sbridge.conf for the measured calls and prefill.conf for the set-up."""
    (d / "worker.yaml").write_text(power_bench.TEMPLATE)
    groups = "".join(f"NodeGroup={name} Nodes=w-[{a}-{b}] PodTemplate=worker.yaml Gpus=8\n"
                     for name, a, b in ranges)
    for file, qps in (("k8sbridge.conf", settings), ("prefill.conf", PREFILL_SETTINGS)):
        (d / file).write_text(
            f"ClusterName=hpc1\nKubeconfig={kubeconfig}\nNamespace=default\n"
            f"MungeSocket={rig.munge_socket}\n{qps}\nRetryDeadline=60\nPlacementLabel={LEAF}\n"
            f"{groups}Feature=h100 Selector=nvidia.com/gpu.product={PRODUCT}\n")


def resume_file(path, job_id, hostlist):
    path.write_text(json.dumps({"all_nodes_resume": hostlist, "jobs": [
        {"extra": None, "job_id": job_id, "features": "h100", "nodes_alloc": hostlist,
         "nodes_resume": hostlist, "oversubscribe": "OK", "partition": "cloud",
         "reservation": None}]}))


def power_at(size, args, settings):
    """The power figures of one cluster size: {step: (wall, cpu, rss)} medians, the
    requests per node, and the prefill call's wall time."""
    from harness.kube import kubectl_program
    from harness.rig import Rig
    ranges = group_ranges(size, args.groups)
    n = args.resume
    hostlist = f"w-[0-{n - 1}]"
    extra = "".join(f"NodeName=w-[{a}-{b}] State=CLOUD CPUs=1 RealMemory=1000 Feature=h100\n"
                    for _, a, b in ranges) + f"PartitionName=cloud Nodes=w-[0-{size - 1}]\n"
    t = time.monotonic()
    with power_bench.bench_cluster(nodes=size, gpus_per_node=8, gpu_product=PRODUCT,
                                   ib_leaves=2, scheduler=False) as kube, \
            Rig(nodes=1, node_prefix="rig-", start_slurmd=False, slurm_conf_extra=extra) as rig, \
            tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        print(f"  power set-up: slurmctld with {size} CLOUD nodes in {len(ranges)} groups and "
              f"Kubernetes ({kube.version()}) with {size} kwok nodes up after "
              f"{time.monotonic() - t:.1f} s", flush=True)
        d = Path(tmp)
        kubeconfig, token = power_bench.bench_kubeconfig(kube)
        write_confs(d, rig, kubeconfig, ranges, settings)
        env = rig.env({"HOME": tmp})
        env.pop("KUBERNETES_SERVICE_HOST", None)
        power = [str(args.power)]
        prefill = None
        if size > n:
            rest = f"w-[{n}-{size - 1}]"
            resume_file(d / "prefill.json", 4243, rest)
            prefill = power_bench.run_measured(
                rig.host_command(power + ["--config", str(d / "prefill.conf"), "resume", rest]),
                dict(env, SLURM_RESUME_FILE=str(d / "prefill.json")))
            print(f"  the rest of the cluster: {size - n} pods in one resume call, "
                  f"{prefill[0]:.2f} s", flush=True)
        resume_file(d / "resume.json", power_bench.JOB_ID, hostlist)
        kubectl = [str(kubectl_program()), "--kubeconfig", kubeconfig]
        power_bench.run_measured(kubectl + ["get", "pods", "-l", "none=none"], env)  # warm cache
        names = {f"w-{i}" for i in range(n)}
        # kwok's node leases keep the API server of a large cluster busy: "at rest" is
        # its rate with nothing measured.
        idle = power_bench.idle_cpu(kube)
        print(f"  the API server at rest: {idle / 0.2 * 100:.0f}% of one core", flush=True)
        runs = []
        with power_bench.Meter(kube, idle) as meter:
            for r in range(args.repeat):
                runs.append(power_bench.one_round(
                    meter, n, hostlist,
                    rig.host_command(power + ["--config", str(d / "k8sbridge.conf")]),
                    kubectl, token, env, d, args.concurrency, names, wrap=rig.host_command,
                    floor_pods=runs[-1]["pods"] if runs else None))
                last = runs[-1]
                before = last["floor_before"]
                print("  round {}: resume {:.2f} s (its creates {:.2f} s), suspend {:.2f} s, "
                      "kubectl create {:.2f} s, delete {:.2f} s, wrk create (the floor) "
                      "{}{:.2f} s (its creates {}{:.2f} s)".format(
                          r + 1, last["resume"][0][0], last["resume"][4],
                          last["suspend"][0][0], last["create"][0][0], last["delete"][0][0],
                          f"{before[0][0]:.2f} before, " if before else "",
                          last["floor"][0][0], f"{before[4]:.2f} and " if before else "",
                          last["floor"][4]),
                      flush=True)
    steps = ("resume", "suspend", "create", "delete", "floor")
    med = {s: tuple(statistics.median(r[s][0][i] for r in runs) for i in range(3)) for s in steps}
    counts = {s: max((r[s][1] for r in runs), key=lambda c: sum(c.values())) for s in steps}
    # Each round's resume as a fraction of that round's floor (wrk's creates of the same
    # pods seconds later: the same load), the fairer figure on a busy machine.
    fractions = [power_bench.wall_fraction(r, "resume") for r in runs]
    rates = [power_bench.create_rate_fraction(r, "resume") for r in runs]
    return {"median": med, "counts": counts, "prefill": prefill[0] if prefill else None,
            "floor_fractions": fractions, "rate_fractions": rates}


def print_power(size, p, n):
    med = p["median"]
    print(f"{size} nodes in the cluster, {n} resumed and suspended in one call each:")
    for name, step in (("k8sbridge-power resume", "resume"),
                       ("k8sbridge-power suspend", "suspend"),
                       ("kubectl create -f (same pods)", "create"), ("kubectl delete -f", "delete"),
                       ("wrk POST, the floor (same pods)", "floor")):
        m = med[step]
        print(f"  {name:<32} wall {m[0]:6.2f} s  cpu {m[1]:6.2f} s  peak {m[2]:6.1f} MiB  "
              f"{power_bench.per_node(p['counts'][step], n)}")
    print(f"  kubectl create / k8sbridge resume: {med['create'][0] / med['resume'][0]:.1f}x; "
          f"kubectl delete / k8sbridge suspend: {med['delete'][0] / med['suspend'][0]:.1f}x")
    rounds = " ".join(f"{f:.2f}" for f in p["rate_fractions"])
    print(f"  resume's create rate as a fraction of the floor's (the API server's window of "
          f"the creates): {statistics.median(p['rate_fractions']):.2f} (rounds {rounds})")
    rounds = " ".join(f"{f:.2f}" for f in p["floor_fractions"])
    print(f"  end to end (wall, start and reads included): "
          f"{statistics.median(p['floor_fractions']):.2f} (rounds {rounds}); kubectl create's: "
          f"{med['floor'][0] / med['create'][0]:.2f}")


def print_summary(sizes, power, sync, n):
    """The figures by size and the goals; `power` or `sync` is empty when --skip left
    that part out."""
    lo, hi = sizes[0], sizes[-1]
    print("\n=== scale: figures by cluster size ===")
    print(f"{'':46}" + "".join(f"{s:>12}" for s in sizes) + f"{'growth':>10}")

    def line(what, values, fmt="{:12.2f}"):
        growth = values[-1] / values[0] if values[0] else float("inf")
        print(f"{what:<46}" + "".join(fmt.format(v) for v in values) + f"{growth:9.2f}x")
    goals = []
    if power:
        for step, what in (("resume", f"resume {n} nodes, k8sbridge s"),
                           ("create", "  kubectl create -f s"),
                           ("floor", "  wrk create, the floor s"),
                           ("suspend", f"suspend {n} nodes, k8sbridge s"),
                           ("delete", "  kubectl delete -f s")):
            line(what, [power[s]["median"][step][0] for s in sizes])
        ratio = {s: (power[s]["median"]["create"][0] / power[s]["median"]["resume"][0],
                     power[s]["median"]["delete"][0] / power[s]["median"]["suspend"][0])
                 for s in sizes}
        floor = {s: statistics.median(power[s]["rate_fractions"]) for s in sizes}
        wall = {s: statistics.median(power[s]["floor_fractions"]) for s in sizes}
        line("ratio kubectl create / resume", [ratio[s][0] for s in sizes], "{:11.1f}x")
        line("resume / floor create rate (median of rounds)", [floor[s] for s in sizes])
        line("resume / floor, end to end wall", [wall[s] for s in sizes])
        line("ratio kubectl delete / suspend", [ratio[s][1] for s in sizes], "{:11.1f}x")
        met = all(ratio[s][0] >= 5 for s in sizes)
        goals.append(f"resume >= 5x kubectl create at every size: {'met' if met else 'NOT met'}")
        met = all(floor[s] >= 0.9 for s in sizes)
        goals.append(f"resume within 10% of the floor at every size: {'met' if met else 'NOT met'}")
    if sync:
        pct = sync_bench.percentile
        line("sync idle CPU % of one core", [sync[s]["idle_cpu"] for s in sizes])
        line("sync RSS MiB", [sync[s]["rss"] for s in sizes], "{:12.1f}")
        for key, what in (("s2k", "Slurm drain -> pod annotation"),
                          ("k2s", "Kubernetes cordon -> Slurm drain")):
            line(f"{what} p50 ms", [pct(sync[s][key], 50) * 1000 for s in sizes], "{:12.0f}")
            line(f"{what} p99 ms", [pct(sync[s][key], 99) * 1000 for s in sizes], "{:12.0f}")
        line("scontrol show node (floor) p99 ms",
             [pct(sync[s]["floor"], 99) * 1000 for s in sizes], "{:12.0f}")
        s_hi = sync[hi]
        p99 = max(pct(s_hi["s2k"], 99), pct(s_hi["k2s"], 99))
        goals.append(f"at {hi}: idle CPU < 2%: {'met' if s_hi['idle_cpu'] < 2 else 'NOT met'}, "
                     f"RSS < 200 MB: {'met' if s_hi['rss'] * 1.048576 < 200 else 'NOT met'}, "
                     f"drain p99 < 1 s both ways: {'met' if p99 < 1 else 'NOT met'}")
    print("goals: " + "; ".join(goals) + f" (growth from {lo} to {hi} in the last column)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="cluster sizes, comma-separated")
    ap.add_argument("--resume", type=int, default=1000, help="nodes per measured call")
    ap.add_argument("--groups", type=int, default=10, help="node groups (NodeGroup lines)")
    ap.add_argument("--repeat", type=int, default=3, help="power rounds per size (medians)")
    ap.add_argument("--qps", type=int, default=500, help="k8sbridge.conf QPS=")
    ap.add_argument("--burst", type=int, default=2000, help="k8sbridge.conf Burst=")
    ap.add_argument("--concurrency", type=int, default=8, help="k8sbridge.conf Concurrency=")
    ap.add_argument("--samples", type=int, default=100, help="drains each way per size")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds of the idle measurement")
    ap.add_argument("--skip", choices=("power", "sync"), help="leave one part out")
    ap.add_argument("--build-root",
                    default=os.environ.get("K8SBRIDGE_BUILD_ROOT", str(ROOT / "build")))
    args = ap.parse_args()
    # A SIGTERM unwinds the clusters, the rigs and the daemons instead of leaving them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        sys.exit("scale: needs root (the rig)")
    try:
        sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    except ValueError:
        sys.exit(f"--sizes {args.sizes!r}: give node counts separated by commas, e.g. 1000,10000")
    if not sizes or sizes[0] < args.resume:
        sys.exit(f"--sizes {args.sizes}: every size must be at least --resume {args.resume}")
    os.environ["K8SBRIDGE_BUILD_ROOT"] = args.build_root
    args.power = Path(args.build_root) / "programs" / "power" / "k8sbridge-power"
    if not args.power.exists():
        sys.exit(f"{args.power} does not exist: meson compile -C {args.build_root}")
    settings = f"QPS={args.qps} Burst={args.burst} Concurrency={args.concurrency}"
    print(f"scale: sizes {sizes}, {args.resume} nodes per call, {args.groups} node groups, "
          f"k8sbridge.conf {settings}; load average {os.getloadavg()[0]:.2f}", flush=True)
    power, sync = {}, {}
    for size in sizes:
        if args.skip != "power":
            power[size] = power_at(size, args, settings)
            print_power(size, power[size], args.resume)
        if args.skip != "sync":
            sync[size] = sync_bench.measure(size, 1, args.samples, args.idle, args.build_root)
            sync_bench.report(sync[size])
        print(f"  load average after size {size}: {os.getloadavg()[0]:.2f}", flush=True)
    print_summary(sizes, power, sync, args.resume)


if __name__ == "__main__":
    main()
