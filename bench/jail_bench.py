#!/usr/bin/python3
"""Step launch cost of spank_jail, against no plugin and against Slurm's own
job_container/tmpfs (the peer), measured in the same run on the test rig.

Four one-node rigs run side by side, each with one allocation (`salloc
--no-shell`): no plugin; an empty SPANK plugin (bench/spank_noop.c, the floor
under any SPANK plugin); spank_jail; job_container/tmpfs. The last three have
PrologFlags=Contain. A fifth mode runs srun against the empty plugin's rig with
an empty plugstack.conf of its own, which splits that floor between srun and
slurmstepd. The script launches N `srun -N1 true` steps into each
allocation, interleaving the modes round-robin (rotating which goes first), so
a busy machine slows every mode alike instead of whichever ran last. It prints
p50/p99 per step and what each mode adds over no plugin: the difference of the
p50s, and the median of the per-round differences with a bootstrap 95%
confidence interval (each round's steps met the same machine load). It also
prints spank_jail against the peer and against the empty plugin, and the
plugin's own time per step and per task from its debug log lines, which is
free of scheduling noise.

    sudo /usr/bin/python3 bench/jail_bench.py [--steps 400] [--build-root BUILD]

Needs root, the rig (tests/harness/), the cached jail (scripts/make-jail.sh) and a
build of spank_jail.so, bench/spank_noop.so and k8sbridge-jail-prepare. Goal (issue 7): spank_jail adds
under 5 ms at p50 over no plugin, and no more than job_container/tmpfs adds.
"""

import argparse
import contextlib
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

NOOP = "empty SPANK plugin"
# The same rig and allocation as NOOP, but srun reads an empty plugstack.conf:
# how much of the floor is srun's (slurmstepd still loads the plugin).
NOOP_STEPD = "  ... in slurmstepd only"
MODES = ("no plugin", NOOP, NOOP_STEPD, "spank_jail", "job_container/tmpfs")


def percentile(values, p):
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))
    return values[k]


@contextlib.contextmanager
def job_container_base(rig_id):
    """BasePath for job_container/tmpfs, outside the rig's /tmp workdir (its
    namespace files must sit on a mount of the node's own namespace); unmounted
    and removed afterwards."""
    base = Path(f"/run/k8sbridge-bench-{rig_id}")
    base.mkdir()
    try:
        yield base
    finally:
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f if line.split()[4].startswith(str(base))]
        for p in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", p], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


# ioctl(NS_GET_MNTNS_ID) on a /proc/PID/ns/mnt file: _IOR(0xb7, 5, __u64), Linux 6.8+.
NS_GET_MNTNS_ID = 0x8008B705
PRINT_MOUNT_NS_ID = ("import fcntl, os, struct; fd = os.open('/proc/self/ns/mnt', os.O_RDONLY); "
                     "print(struct.unpack('Q', fcntl.ioctl(fd, 0x8008B705, bytes(8)))[0])")


def lowest_mount_ns_cpu():
    """The CPU on which a new mount namespace gets the lowest id, or None where
    ids cannot be read.

    job_container/tmpfs pins each job's mount namespace, made by a child of
    slurmstepd, by bind-mounting /proc/CHILD/ns/mnt onto a file; the kernel
    refuses that with EINVAL ("_create_ns: ns base mount failed: Invalid
    argument") unless the child's namespace id is larger than the caller's
    (mnt_ns_loop). Recent kernels (6.18 here) hand out namespace ids from per-CPU
    batches, so a namespace made on one CPU can have a larger id than one made
    later on another: the rig's slurmd, in its own namespace, then fails every
    job whose namespace is made on a CPU with a lower batch. Made on the CPU with
    the lowest batch, slurmd's namespace has an id below every later one."""
    ids = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        r = subprocess.run(["taskset", "-c", str(cpu), "unshare", "--mount", "--",
                            sys.executable, "-c", PRINT_MOUNT_NS_ID],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None  # no NS_GET_MNTNS_ID: older kernels used one global sequence
        ids[cpu] = int(r.stdout)
    return min(ids, key=ids.get)


def make_tmpfs_rig(**kw):
    """A Rig whose slurmd mount namespaces are made on lowest_mount_ns_cpu(); slurmd
    itself then runs on every CPU again."""
    from harness.rig import Rig

    class TmpfsRig(Rig):
        def slurmd_command(self, node):
            cmd = super().slurmd_command(node)
            cpu = lowest_mount_ns_cpu()
            if cpu is None:
                return cmd
            every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
            split = cmd.index("--") + 1  # unshare's own arguments end here
            return ["taskset", "-c", str(cpu), *cmd[:split], "taskset", "-c", every, *cmd[split:]]

    return TmpfsRig(**kw)


def start_rig(stack, mode, fixture):
    from harness.jail import jail_rig
    from harness.rig import NodeSpec, Rig
    nodes = [NodeSpec("w-0", cpus=2)]
    if mode == "spank_jail":
        rig = jail_rig(fixture, nodes=nodes)
    elif mode == "job_container/tmpfs":
        rig = make_tmpfs_rig(nodes=nodes,
                             slurm_conf_extra="JobContainerType=job_container/tmpfs\n"
                                              "PrologFlags=Contain\n")
        base = stack.enter_context(job_container_base(rig.id))
        # Dirs= makes /var/tmp and /dev/shm private per job: the same work as
        # spank_jail's private /tmp. /tmp itself must stay shared, because the
        # rig keeps slurm.conf, the munge socket and the spool there.
        rig.config.extra_files = {"job_container.conf":
                                  f"AutoBasePath=true\nBasePath={base}\nDirs=/var/tmp,/dev/shm\n"}
    elif mode == NOOP:
        # The floor under spank_jail: what loading and calling any SPANK plugin
        # costs srun and slurmstepd (bench/spank_noop.c).
        # PrologFlags=Contain as for spank_jail, so the two differ only in the plugin.
        rig = Rig(nodes=nodes, slurm_conf_extra="PrologFlags=Contain\n")
        noop = Path(os.environ["K8SBRIDGE_BUILD_ROOT"]).resolve() / "bench" / "spank_noop.so"
        if not noop.exists():
            raise SystemExit(f"{noop} is missing: build it (ninja -C BUILD bench/spank_noop.so)")
        rig.config.plugstack_lines = [f"required {noop}"]
    else:
        rig = Rig(nodes=nodes)
    stack.enter_context(rig)
    rig.wait_nodes_idle()
    return rig


def allocate(rig):
    try:
        r = rig.run(["salloc", "--no-shell", "-N1", "-n1"], timeout=30)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"Granted job allocation (\d+)", r.stderr + r.stdout)
    return m.group(1) if m else None


def start_allocated(stack, mode, fixture):
    """A rig for `mode` with one allocation. An allocation that does not start
    (for job_container/tmpfs, a namespace id race that lowest_mount_ns_cpu() should
    have ruled out) tears the rig down and retries the mode on a fresh one."""
    for attempt in range(3):
        sub = contextlib.ExitStack()
        try:
            rig = start_rig(sub, mode, fixture)
            job = allocate(rig)
        except BaseException:
            sub.close()
            raise
        if job is not None:
            stack.enter_context(sub)
            return rig, job
        print(f"{mode}: allocation did not start (attempt {attempt + 1}); retrying on a new rig",
              flush=True)
        sub.close()
    raise SystemExit(f"{mode}: no allocation after three rigs")


def srun_without_plugins(rig):
    """Environment for an srun that reads an empty plugstack.conf (its own copy of
    slurm.conf); slurmd, and so slurmstepd, keep the rig's."""
    empty = rig.workdir / "plugstack-empty.conf"
    empty.write_text("")
    conf = re.sub(r"^PlugStackConfig=.*$", f"PlugStackConfig={empty}",
                  (rig.etc / "slurm.conf").read_text(), flags=re.M)
    alt = rig.etc / "slurm-srun-without-plugins.conf"
    alt.write_text(conf)
    return {"SLURM_CONF": str(alt)}


def step(rig, job, env=None):
    t0 = time.monotonic()
    r = rig.run(["srun", f"--jobid={job}", "-N1", "-n1", "true"], cwd=rig.workdir, timeout=60,
                env=env)
    elapsed = (time.monotonic() - t0) * 1000
    return elapsed, r


def plugin_cost(log):
    text = log.read_text(errors="replace")
    out = []
    for what, pattern in (("init_post_opt (job namespace or probe, checks)",
                           r"step prepared in (\d+) us"),
                          ("  of which opening the job namespace (or the probe)",
                           r"step prepared in \d+ us \(probe (\d+) us"),
                          ("task_init_privileged (enter the jail)",
                           r"entered the jail in (\d+) us")):
        us = [int(v) for v in re.findall(pattern, text)]
        if us:
            out.append(f"  spank_jail {what}: p50 {statistics.median(us) / 1000:.2f} ms, "
                       f"p99 {percentile(us, 99) / 1000:.2f} ms over {len(us)}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--build-root",
                    default=os.environ.get("K8SBRIDGE_BUILD_ROOT", str(ROOT / "build")))
    args = ap.parse_args()
    os.environ["K8SBRIDGE_BUILD_ROOT"] = args.build_root
    from harness.jail import JailFixture

    times = {m: [] for m in MODES}
    with contextlib.ExitStack() as stack:
        fixture = stack.enter_context(JailFixture())
        rigs, jobs, envs = {}, {}, {}
        for m in MODES:
            if m != NOOP_STEPD:
                rigs[m], jobs[m] = start_allocated(stack, m, fixture)
        rigs[NOOP_STEPD], jobs[NOOP_STEPD] = rigs[NOOP], jobs[NOOP]
        envs[NOOP_STEPD] = srun_without_plugins(rigs[NOOP])
        for m in MODES:  # one warm-up step each (first-step costs: plugin loads, caches)
            step(rigs[m], jobs[m], envs.get(m))
        for i in range(args.steps):
            order = MODES[i % len(MODES):] + MODES[:i % len(MODES)]
            for m in order:
                elapsed, r = step(rigs[m], jobs[m], envs.get(m))
                if r.returncode != 0:
                    raise SystemExit(f"{m}: step {i} failed: {r.stderr[-1000:]}")
                times[m].append(elapsed)
        cost = plugin_cost(rigs["spank_jail"].logdir / "slurmd-w-0.log")
        for m in MODES:
            if m != NOOP_STEPD:
                rigs[m].run(["scancel", jobs[m]])

    base50 = statistics.median(times["no plugin"])
    print(f"{args.steps} x `srun -N1 true` per mode, interleaved, one-node rigs; ms per step:")
    print(f"{'mode':<22}{'p50':>9}{'p99':>9}{'p50 added':>12}{'paired, 95% CI':>26}")
    added = {}
    for m in MODES:
        t = times[m]
        p50 = statistics.median(t)
        added[m] = paired(times[m], times["no plugin"])
        mid, lo, hi = added[m]
        ci = f"{mid:+.2f} [{lo:+.2f}, {hi:+.2f}]" if m != "no plugin" else ""
        print(f"{m:<22}{p50:>9.2f}{percentile(t, 99):>9.2f}{p50 - base50:>+12.2f}{ci:>26}")
    print("steps over 1 s (slurmctld answered srun's step request after about 5 s): "
          + ", ".join(f"{m} {sum(t > 1000 for t in times[m])}" for m in MODES))
    for line in cost:
        print(line)
    vs_peer = paired(times["spank_jail"], times["job_container/tmpfs"])
    vs_noop = paired(times["spank_jail"], times[NOOP])
    print(f"spank_jail adds {added['spank_jail'][0]:+.2f} ms at p50 (goal: under 5 ms); "
          f"job_container/tmpfs adds {added['job_container/tmpfs'][0]:+.2f} ms")
    print(f"spank_jail - job_container/tmpfs: {vs_peer[0]:+.2f} ms, 95% CI "
          f"[{vs_peer[1]:+.2f}, {vs_peer[2]:+.2f}] (goal: at most 0)")
    print(f"spank_jail - {NOOP}: {vs_noop[0]:+.2f} ms, 95% CI [{vs_noop[1]:+.2f}, "
          f"{vs_noop[2]:+.2f}] (spank_jail's own work; the rest is any SPANK plugin's)")
    in_srun = paired(times[NOOP], times[NOOP_STEPD])
    print(f"of the empty plugin's cost, srun's share: {in_srun[0]:+.2f} ms, 95% CI "
          f"[{in_srun[1]:+.2f}, {in_srun[2]:+.2f}] (job_container plugins are never loaded by srun)")


def paired(a, b, resamples=2000):
    """Median of the per-round differences a[i] - b[i] (the same round of the
    interleaved loop, so both met the same machine load), with a bootstrap 95%
    confidence interval."""
    diffs = [x - y for x, y in zip(a, b)]
    rng = random.Random(7)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    return statistics.median(diffs), meds[int(0.025 * resamples)], meds[int(0.975 * resamples)]


if __name__ == "__main__":
    main()
