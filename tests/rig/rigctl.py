#!/usr/bin/python3
"""Command line for the k8sbridge test rig.

  rigctl.py smoke [--nodes N]   start a rig, run the smoke jobs, print their output, stop
  rigctl.py up [--nodes N]      start a rig and keep it until Ctrl-C (prints how to use it)
  rigctl.py leftovers [ID...]   list namespaces, bridges, daemons, mounts and cgroups rigs left
                                (every rig's, or only those of the rigs named)
  rigctl.py cleanup             remove everything any rig left behind
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the harness package
from harness.rig import Rig, RigError, cleanup_all, leftovers  # noqa: E402


def smoke(rig: Rig) -> int:
    nodes = rig.wait_nodes_idle()
    print("sinfo:")
    print(rig.check_output(["sinfo", "-N", "-o", "%N %T %o"]))
    for name, n in nodes.items():
        print(f"node {name} registered from {n.get('NodeAddr')}")
    print("$ srun -N2 hostname (with its address)")
    print(rig.check_output(["srun", "-N2", "sh", "-c", 'echo "$(hostname) $(hostname -I)"']))
    out = rig.workdir / "smoke-%j.out"
    job = rig.sbatch("#!/bin/sh\nsrun sh -c 'echo \"$(hostname) $(hostname -I)\"'\n",
                     ["-N2", "-o", str(out)])
    rig.wait_job(job)
    print(f"$ sbatch -N2 (job {job}) output:")
    print(Path(str(out).replace("%j", str(job))).read_text())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["smoke", "up", "leftovers", "cleanup"])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("ids", nargs="*", help="rig ids (leftovers only)")
    args = ap.parse_args()
    if args.ids and args.command != "leftovers":
        ap.error("rig ids go with leftovers only")
    if args.command == "leftovers":
        print(json.dumps(leftovers(args.ids or None), indent=2))
        return 0
    if args.command == "cleanup":
        print(json.dumps(cleanup_all(), indent=2))
        return 0
    try:
        with Rig(nodes=args.nodes) as rig:
            if args.command == "smoke":
                return smoke(rig)
            rig.wait_nodes_idle()
            print(f"rig {rig.id} is up. In another shell:\n  export SLURM_CONF={rig.slurm_conf} "
                  f"PATH={rig.prefix}/bin:$PATH\n  sinfo; srun -N{args.nodes} hostname\n"
                  "Ctrl-C stops it and removes everything.", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except RigError as e:
        print(f"rigctl: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
