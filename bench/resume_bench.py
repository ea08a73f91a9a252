#!/usr/bin/python3
"""What a user waits for: `sbatch -N<n>` on powered-down CLOUD nodes until the job is
RUNNING, for 1, 8, 32 and 64 nodes, beside the time the last of its pods was
Running. Needs root (the rig).

Set-up (harness.cluster.PodCluster): real slurmctld and slurmd (Slurm 24.11.5, or
26.05.5 with K8SBRIDGE_SLURM_ROOT as in scripts/test.sh), the real Kubernetes
(harness.kube.KubeCluster: its scheduler, kwok's fake nodes, which report the pods
Running), k8sbridge-power as ResumeProgram/SuspendProgram, and the test's kubelet,
which starts a node's slurmd in the rig as soon as its pod is bound. Each size runs
on powered-down nodes w-[0-n-1]; after the job the nodes power down again
(SuspendTime=5) before the next size. With --kubelet real the pods are containers on
four real Kubernetes nodes instead (kubelet, containerd, runc: PodCluster's
default), k8sbridge-worker and slurmd in them: the figures then include what a
kubelet takes to start a pod.

Two runs, the same in all but one line of slurm.conf:
  - k8sbridge: PrologSlurmctld=k8sbridge-prolog, which ends once the job's nodes are
    up, and slurmctld then starts the job (prolog_running_decr);
  - peer: Slurm alone, which starts a CONFIGURING job at its next periodic check
    (job_time_limit, every PERIODIC_TIMEOUT = 30 s).
Time 0 is just before sbatch; squeue and the pods are polled every 50 ms (the
figures include up to that delay).

    /usr/bin/python3 bench/resume_bench.py [--sizes 1,8,32,64] [--runs 1]
        [--kubelet test|real] [--build-root BUILD]

Goal (issue 21): a 32-node job RUNNING under 5 s after sbatch on this machine.
"""

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

POLL = 0.05


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,8,32,64", help="job sizes in nodes, comma-separated")
    ap.add_argument("--runs", type=int, default=1, help="jobs per size and mode (median shown)")
    ap.add_argument("--kubelet", choices=("test", "real"), default="test",
                    help="who runs the pods: the test's kubelet (slurmd in the rig as soon "
                         "as a pod is bound) or four real nodes (containers)")
    ap.add_argument("--build-root", help="the meson build directory (default: build/)")
    return ap.parse_args()


def running_pods(cluster, job) -> int:
    status, _, body = cluster.sim.request(
        "GET", f"/api/v1/namespaces/default/pods?labelSelector=k8sbridge.io/job%3D{job}")
    items = body.get("items", []) if status == 200 else []
    return sum(1 for p in items if p.get("status", {}).get("phase") == "Running")


def one_job(cluster, n: int) -> tuple:
    """(seconds to the last pod Running, seconds to RUNNING) of one n-node job."""
    rig = cluster.rig
    names = f"w-[0-{n - 1}]" if n > 1 else "w-0"
    start = time.monotonic()
    job = rig.sbatch("#!/bin/sh\nsleep 1\n", ["-N", str(n), "-w", names, "-o", "/dev/null"])
    pods_at = run_at = None
    deadline = start + 300
    while (pods_at is None or run_at is None) and time.monotonic() < deadline:
        now = time.monotonic()
        if pods_at is None and running_pods(cluster, job) >= n:
            pods_at = now - start
        if run_at is None:
            state = rig.run(["squeue", "-h", "-j", str(job), "-o", "%T"]).stdout.strip()
            if state in ("RUNNING", "COMPLETING", "COMPLETED") or (state == "" and pods_at):
                run_at = now - start
        time.sleep(POLL)
    if pods_at is None or run_at is None:
        raise RuntimeError(f"job {job} ({n} nodes) did not start:\n{cluster.describe()}")
    cluster.wait_job(job, timeout=120)
    cluster.wait_powered_down([f"w-{i}" for i in range(n)], timeout=180)
    return pods_at, run_at


def measure(sizes, runs, prolog: bool, kubelet: str = "test") -> dict:
    from harness.cluster import PodCluster
    from harness.rig import NodeSpec
    most = max(sizes)
    nodes = [NodeSpec(f"w-{i}", cpus=1) for i in range(most)]
    groups = [("w", f"w-[0-{most - 1}]", "")]
    out = {}
    # Real nodes: a rig slot's pod network has room for four (60 pods each).
    with PodCluster(nodes, groups, fake_nodes=16 if kubelet == "test" else 4,
                    suspend_time=5, kubelet=kubelet, prolog=prolog) as cluster:
        cluster.wait_powered_down([n.name for n in nodes], timeout=120)
        for n in sizes:
            samples = [one_job(cluster, n) for _ in range(runs)]
            out[n] = (statistics.median(s[0] for s in samples),
                      statistics.median(s[1] for s in samples))
            print(f"  {'k8sbridge' if prolog else 'peer':9} {n:3} nodes: last pod Running "
                  f"{out[n][0]:6.2f} s, job RUNNING {out[n][1]:6.2f} s", flush=True)
    return out


def main():
    args = parse_args()
    # A SIGTERM unwinds the clusters (their rigs and Kubernetes) instead of leaving them.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if os.geteuid() != 0:
        sys.exit("resume_bench: needs root (the rig's network namespaces)")
    if args.build_root:
        os.environ["K8SBRIDGE_BUILD_ROOT"] = str(Path(args.build_root).resolve())
    sizes = [int(s) for s in args.sizes.split(",") if s]
    from harness.rig import slurm_version
    print(f"resume_bench: Slurm {slurm_version()}, sizes {sizes}, {args.runs} run(s) each, "
          f"the pods run by the {args.kubelet} kubelet")
    ours = measure(sizes, args.runs, prolog=True, kubelet=args.kubelet)
    peer = measure(sizes, args.runs, prolog=False, kubelet=args.kubelet)
    print("\nnodes | last pod Running | RUNNING, k8sbridge-prolog | RUNNING, Slurm alone | "
          "ratio (Slurm alone / k8sbridge)")
    for n in sizes:
        print(f"{n:5} | {ours[n][0]:14.2f} s | {ours[n][1]:22.2f} s | {peer[n][1]:17.2f} s | "
              f"{peer[n][1] / ours[n][1]:5.1f}x")


if __name__ == "__main__":
    main()
