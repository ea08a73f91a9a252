#!/usr/bin/python3
"""The chaos suite's long variant (issue 21): 200 jobs and every fault kind at least 5
times on the world of tests/chaos/chaos.py, with the long run's fault durations (a
60 s API outage, kubelets stopped for 90 s). Prints the report: jobs run, faults
injected by kind with recovery p50/p99, and every invariant's count; exits 1 if any
invariant was violated. Needs root and a build (meson compile -C BUILD).

    /usr/bin/python3 bench/chaos.py [--seed 7] [--jobs 200] [--repeat 5]
        [--window SECONDS] [--kinds K1,K2] [--short-faults] [--ctld-sigkill]
        [--json FILE]

The window (default: 25 s per fault) is the time over which the schedule's jobs
arrive and faults are injected; faults that outlast it get more jobs (at least two
pending or running) until the last one; the run then waits for every job and for the
world to be at rest.
"""

import argparse
import json
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package
sys.path.insert(0, str(ROOT / "tests" / "chaos"))

import chaos  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5, help="times each fault kind is injected")
    ap.add_argument("--window", type=float, help="seconds of jobs and faults")
    ap.add_argument("--kinds", help="only these fault kinds, comma-separated (default: all)")
    ap.add_argument("--short-faults", action="store_true",
                    help="the CI variant's fault durations (a 15 s outage), not the long ones")
    ap.add_argument("--ctld-sigkill", action="store_true",
                    help="slurmctld restarts are also SIGKILLs (crashes: Slurm loses what it "
                         "had not saved, jobs included), not only SIGTERMs (a pod restart)")
    ap.add_argument("--json", help="also write the report here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/chaos.py: run as root (the rig needs network namespaces and munge)")
    kinds = tuple(args.kinds.split(",")) if args.kinds else tuple(chaos.FAULTS)
    unknown = [k for k in kinds if k not in chaos.FAULTS]
    if unknown:
        sys.exit(f"bench/chaos.py: --kinds: unknown {unknown}; the kinds are "
                 f"{', '.join(chaos.FAULTS)}")
    window = args.window or 25.0 * args.repeat * len(kinds)
    plan = chaos.Plan(seed=args.seed, jobs=args.jobs, window=window,
                      long_faults=not args.short_faults,
                      repeat=args.repeat, settle=600.0, recovery_wait=180.0, kinds=kinds,
                      ctld_sigkill=args.ctld_sigkill)
    # The rig and the cluster are torn down on SIGTERM too (the harness raises on it).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = chaos.run(plan)
    if args.json:
        Path(args.json).write_text(json.dumps({k: v for k, v in report.items()
                                               if k != "world"}, indent=1))
    if any(report["violations"].values()):
        print(report["world"])
        sys.exit(1)


if __name__ == "__main__":
    main()
