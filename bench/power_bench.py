#!/usr/bin/python3
"""Resumes N CLOUD nodes (default 1000) in ONE call of the real ResumeProgram,
`k8sbridge-power resume w-[0-N-1]`, against the Kubernetes stand-in, then suspends
them in one call, and in the same run has kubectl create and delete the same N
rendered pods from one file (the peer). Prints:

  - wall time until all pods exist (the resume call returns after every create
    was answered; the bench then lists them) and until all are deleted;
  - CPU time and peak memory of each program (its os.wait4 rusage, taken by a
    small launcher so that this script's own memory is not counted);
  - API requests per node by verb and resource (kubesim's /kubesim/stats);
  - kubectl's wall time, CPU and memory for `create -f` and `delete -f`, and the
    ratios;
  - the floor: kubesim's raw pod-create rate, the same pod bodies POSTed by wrk (a
    load generator, bench/wrk_create.lua) over as many keep-alive connections as
    Concurrency, with the same bearer token, and each client's create rate as a
    fraction of it; from the second round on wrk also runs right before the resume
    (with the last round's pods), and the round's floor is the mean of the two;
  - TCP connections (TLS handshakes) each step opened (kubesim's /kubesim/stats).

    /usr/bin/python3 bench/power_bench.py [--nodes 1000] [--qps 500] [--burst 2000]
        [--concurrency 8] [--repeat 3] [--build-root BUILD]
    meson compile -C BUILD power_bench      # the same, with the defaults

wrk is /usr/bin/wrk (scripts/setup.sh), or $BENCH_WRK: a wrapper, for example one
that runs it under strace or perf.

QPS, Burst and Concurrency are k8sbridge.conf's keys: the bench writes them as an
admin would. kubesim runs with HTTPS, no scheduler and no kubelet, so pods stay
unbound and a delete removes them at once (for both clients alike). There is no
slurmctld: the node group sets `Gpus=8`, so no Gres is read; slurm.conf points at a
port where nothing listens. A fake SLURM_RESUME_FILE puts one job on all nodes, so
pods carry the job label, a feature nodeSelector and the placement pod affinity.

kubectl runs with `--validate=false` (no OpenAPI download), `delete --wait=false`
(k8sbridge does not wait either), and a warm discovery cache, which is kubectl's
fastest way. Goal (issue 5): resume at least 5x faster than `kubectl create`, with
at most one create and one delete request per node.
"""

import argparse
import json
import os
import time
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

LEAF = "network.topology.nvidia.com/leaf"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
JOB_ID = 4242
WRK = os.environ.get("BENCH_WRK") or shutil.which("wrk") or "/usr/bin/wrk"
WRK_SCRIPT = ROOT / "bench" / "wrk_create.lua"

TEMPLATE = """\
kind: PodTemplate
template:
  metadata:
    labels: {team: hpc}
  spec:
    terminationGracePeriodSeconds: 30
    containers:
    - name: slurmd
      image: registry.example/slurm-worker:24.11
      resources:
        requests: {cpu: "1", memory: 1Gi}
"""

# Fields the server sets; kubectl's manifest leaves them out, as a user's would.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                   "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")


# Forks and execs the program from a small fresh interpreter and reports its wait4
# rusage: a child forked by this script directly would count this script's own
# resident memory (the pods it holds) in ru_maxrss, which spans the exec.
LAUNCHER = r"""
import json, os, sys, time
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - start
with open(sys.argv[1], "w") as f:
    json.dump([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0,
               os.waitstatus_to_exitcode(status)], f)
"""


def run_measured(argv, env):
    """Runs argv; returns (wall s, cpu s, peak RSS MiB, output) of that program alone."""
    with tempfile.NamedTemporaryFile(prefix="power-bench-usage-") as usage:
        proc = subprocess.run(["/usr/bin/python3", "-S", "-c", LAUNCHER, usage.name, *argv],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        text = proc.stdout.decode(errors="replace")
        try:
            wall, cpu, rss, code = json.loads(Path(usage.name).read_text())
        except ValueError:
            raise SystemExit(f"measuring {argv[0]} failed ({proc.returncode}):\n{text[-3000:]}")
    if code != 0:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed ({code}):\n{text[-3000:]}")
    return wall, cpu, rss, text


def live_pods(sim, names=None):
    """The pods not being deleted; with `names`, only those of these names."""
    status, _, body = sim.request("GET", "/api/v1/namespaces/default/pods", timeout=120)
    if status != 200:
        raise SystemExit(f"listing pods: {status} {body}")
    return [p for p in body["items"] if not p["metadata"].get("deletionTimestamp")
            and (names is None or p["metadata"]["name"] in names)]


class Meter:
    """What kubesim saw of one step: its requests by verb and resource, the TCP
    connections (TLS handshakes) it accepted and its own CPU seconds (utime +
    stime of /proc/PID/stat), each since the last take()."""

    def __init__(self, sim):
        self.sim = sim
        self.cpu = self.sim_cpu()

    def sim_cpu(self):
        fields = Path(f"/proc/{self.sim.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def settle(self, window=0.2, busy=0.02, limit=10.0):
        """Waits (up to `limit` s) until kubesim spends under `busy` CPU s in a
        `window`: what the last step left it to do (deletions, watch fan-out) is done,
        so that each measured step meets a server at rest."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            before = self.sim_cpu()
            time.sleep(window)
            if self.sim_cpu() - before < busy:
                return

    def take(self):
        """({(verb, resource): count}, connections, CPU s, create s); resets the
        counters. create s: from the first pod create answered 201 to the last, as
        kubesim saw them (the client's create rate, without its start and its reads
        before; None without creates). The connection of this call's own GET is not
        counted (each admin request is a connection of its own; the DELETE's came
        before the reset)."""
        cpu, before = self.sim_cpu(), self.cpu
        stats = self.sim.admin("GET", "stats")
        self.sim.admin("DELETE", "stats")
        self.cpu = self.sim_cpu()
        counts, creating = {}, None
        for r in stats["requests"]:
            key = (r["verb"], r["resource"])
            counts[key] = counts.get(key, 0) + r["count"]
            if key == ("create", "pods") and r["code"] == 201:
                creating = r["seconds"]
        return counts, stats["connections"] - 1, cpu - before, creating


def floor_of(run, pick):
    """`pick` of the round's floor: the mean of the floor measured right after the
    client and, from the second round on, the one right before it (the same load
    on either side; a load that grows or shrinks through the round cancels)."""
    floors = [run[k] for k in ("floor", "floor_before") if run.get(k)]
    return statistics.fmean(pick(f) for f in floors)


def create_rate_fraction(run, step):
    """`step`'s pod create rate in one round as a fraction of the floor's (wrk's),
    both from kubesim's window of their creates: what the issue's floor compares.
    The wall-clock fraction beside it also counts each program's start and reads."""
    return floor_of(run, lambda f: f[4]) / run[step][4]


def wall_fraction(run, step):
    """The same from the wall clock: 1000 / wall, each program's start included."""
    return floor_of(run, lambda f: f[0][0]) / run[step][0][0]


def per_node(counts, n):
    return ", ".join(f"{verb} {resource or '(discovery)'} {count / n:.3f}"
                     for (verb, resource), count in sorted(counts.items())) or "none"


def floor_create(sim, pods, concurrency, env, d, wrap=list):
    """kubesim's raw create rate, the floor under any client: wrk POSTs each of
    `pods` once (bench/wrk_create.lua) over `concurrency` keep-alive connections,
    one thread each, with the bearer token k8sbridge-power's kubeconfig holds. wrk
    verifies no certificate (kubesim's CA is not checked: one verification per
    connection). Returns run_measured's tuple once every answer was a 201."""
    bodies, done = d / "bodies.jsonl", d / "wrk-done"
    bodies.write_text("".join(json.dumps(dict(p, apiVersion="v1", kind="Pod")) + "\n"
                              for p in pods))
    done.unlink(missing_ok=True)
    argv = [WRK, f"-t{concurrency}", f"-c{concurrency}", "-d300s",
            "-H", f"Authorization: Bearer {sim.token}", "-H", "Content-Type: application/json",
            "-H", "Accept: application/json", "-H", "User-Agent: wrk/4.1.0",
            "-s", str(WRK_SCRIPT), f"{sim.url}/api/v1/namespaces/default/pods",
            "--", str(bodies), str(concurrency), str(done)]
    measured = run_measured(wrap(argv), env)
    codes = {}
    for line in measured[3].splitlines():
        if line.startswith("wrk_create "):
            for code, count in json.loads(line.split(" ", 1)[1])["codes"].items():
                codes[code] = codes.get(code, 0) + count
    if codes != {"201": len(pods)}:
        raise SystemExit(f"wrk did not create {len(pods)} pods: {codes}\n{measured[3][-3000:]}")
    return measured


def one_round(meter, n, hostlist, power_argv, kubectl, env, d, concurrency, names=None,
              wrap=list, floor_pods=None):
    """k8sbridge-power resume and suspend, wrk's create of the same pods (the floor),
    then kubectl create and delete of them; returns {step: ((wall, cpu, rss,
    output), {(verb, resource): count}, connections, kubesim's CPU s)}, and "pods",
    the rendered pods. `floor_pods` (the last round's "pods"): wrk creates them before
    the resume too ("floor_before"; floor_of averages the two).
    `names`: the pods of hostlist, when other pods exist beside them (bench/scale.py).
    `wrap`: what power_argv was run through (bench/scale.py: the rig's mount
    namespace), for wrk and kubectl too, so that every client pays the same start."""
    sim = meter.sim
    before = floor_step(meter, floor_pods, concurrency, env, d, wrap, names, n) if floor_pods else None
    meter.settle()
    meter.take()
    resume = run_measured(power_argv + ["resume", hostlist],
                          dict(env, SLURM_RESUME_FILE=str(d / "resume.json")))
    resume_counts = meter.take()
    pods = live_pods(sim, names)
    if len(pods) != n:
        raise SystemExit(f"after resume {len(pods)} pods exist, expected {n}")
    sample = next(p for p in pods if p["metadata"]["name"] == "w-0")
    assert sample["metadata"]["labels"]["k8sbridge.io/job"] == str(JOB_ID), sample
    assert "podAffinity" in sample["spec"]["affinity"], sample

    # The same rendered pods for kubectl, as a user would write them.
    for p in pods:
        p.pop("status", None)
        for key in SERVER_METADATA:
            p["metadata"].pop(key, None)
    manifest = d / "pods.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))

    meter.settle()
    meter.take()
    suspend = run_measured(power_argv + ["suspend", hostlist], env)
    suspend_counts = meter.take()
    left = len(live_pods(sim, names))
    if left != 0:
        raise SystemExit(f"after suspend {left} pods are left")

    # The floor right after k8sbridge-power (and before it, above), so that both meet
    # the same load.
    after = floor_step(meter, pods, concurrency, env, d, wrap, names, n)

    meter.settle()
    meter.take()
    create = run_measured(wrap(kubectl + ["create", "--validate=false", "-f", str(manifest)]),
                          env)
    create_counts = meter.take()
    created = len(live_pods(sim, names))
    meter.settle()
    meter.take()
    delete = run_measured(wrap(kubectl + ["delete", "--wait=false", "-f", str(manifest)]), env)
    delete_counts = meter.take()
    left_kubectl = len(live_pods(sim, names))
    if created != n or left_kubectl != 0:
        raise SystemExit(f"kubectl created {created} of {n} pods, left {left_kubectl}")

    return {"resume": (resume, *resume_counts), "suspend": (suspend, *suspend_counts),
            "create": (create, *create_counts), "delete": (delete, *delete_counts),
            "floor": after, "floor_before": before, "pods": pods}


def floor_step(meter, pods, concurrency, env, d, wrap, names, n):
    """wrk's creates of `pods` at a kubesim at rest, checked, then deleted again:
    (run_measured's tuple, *Meter.take())."""
    sim = meter.sim
    meter.settle()
    meter.take()
    floor = floor_create(sim, pods, concurrency, env, d, wrap)
    counts = meter.take()
    if len(live_pods(sim, names)) != n:
        raise SystemExit(f"after wrk {len(live_pods(sim, names))} pods exist, expected {n}")
    # Only the measured job's pods (bench/scale.py keeps a full cluster beside them).
    status, _, body = sim.request(
        "DELETE", f"/api/v1/namespaces/default/pods?labelSelector=k8sbridge.io/job%3D{JOB_ID}",
        timeout=120)
    if status != 200 or live_pods(sim, names):
        raise SystemExit(f"deleting wrk's pods: {status} {str(body)[:300]}")
    return (floor, *counts)


def start_munged(d: Path) -> Path:
    """A munged of the bench's own: resume encodes one munge check credential per
    pod (MungeCheck=yes, the default), and that cost belongs in the figures."""
    key, socket = d / "munge.key", d / "munge.socket"
    subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
    key.chmod(0o600)
    subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={socket}",
                    f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed",
                    f"--log-file={d}/munged.log"], check=True)
    return socket


def stop_munged(d: Path) -> None:
    pid_file = d / "munged.pid"
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, ValueError, IndexError):
        return
    deadline = time.monotonic() + 10  # it writes its seed file on the way out
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--qps", type=int, default=500, help="k8sbridge.conf QPS=")
    parser.add_argument("--burst", type=int, default=2000, help="k8sbridge.conf Burst=")
    parser.add_argument("--concurrency", type=int, default=8, help="k8sbridge.conf Concurrency=")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of all four steps; medians are printed")
    parser.add_argument("--build-root",
                        default=os.environ.get("K8SBRIDGE_BUILD_ROOT", str(ROOT / "build")))
    args = parser.parse_args()
    os.environ["K8SBRIDGE_BUILD_ROOT"] = args.build_root
    from harness.kubesim import KUBECTL, KubeSim  # noqa: E402  (reads K8SBRIDGE_BUILD_ROOT)

    power = Path(args.build_root) / "programs" / "power" / "k8sbridge-power"
    if not power.exists():
        raise SystemExit(f"{power} does not exist: meson compile -C {args.build_root} "
                         "k8sbridge-power")
    n = args.nodes
    if n < args.concurrency:
        raise SystemExit("--nodes must be at least --concurrency (wrk gives each "
                         "connection its share of the pods)")
    if not Path(WRK).exists():
        raise SystemExit(f"{WRK} does not exist: apt-get install wrk (scripts/setup.sh)")
    hostlist = f"w-[0-{n - 1}]"
    with KubeSim("--fake-nodes", "4", "--gpus-per-node", "8", "--gpu-product", PRODUCT,
                 "--ib-leaves", "2") as sim, \
            tempfile.TemporaryDirectory(prefix="power-bench-") as tmp:
        d = Path(tmp)
        (d / "worker.yaml").write_text(TEMPLATE)
        (d / "slurm.conf").write_text(
            "ClusterName=hpc1\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
            f"MessageTimeout=2\nNodeName={hostlist} State=CLOUD\n")
        settings = f"QPS={args.qps} Burst={args.burst} Concurrency={args.concurrency}"
        munge_socket = start_munged(d)
        (d / "k8sbridge.conf").write_text(
            f"ClusterName=hpc1\nKubeconfig={sim.kubeconfig}\nNamespace=default\n"
            f"MungeSocket={munge_socket}\n"
            f"{settings}\nRetryDeadline=60\nPlacementLabel={LEAF}\n"
            f"NodeGroup=gpu Nodes={hostlist} PodTemplate=worker.yaml Gpus=8\n"
            f"Feature=h100 Selector=nvidia.com/gpu.product={PRODUCT}\n")
        (d / "resume.json").write_text(json.dumps({"all_nodes_resume": hostlist, "jobs": [
            {"extra": None, "job_id": JOB_ID, "features": "h100", "nodes_alloc": hostlist,
             "nodes_resume": hostlist, "oversubscribe": "OK", "partition": "gpu",
             "reservation": None}]}))
        env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"), HOME=tmp)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        power_argv = [str(power), "--config", str(d / "k8sbridge.conf")]

        kubectl = [KUBECTL, "--kubeconfig", sim.kubeconfig]
        run_measured(kubectl + ["get", "pods"], env)  # warms kubectl's discovery cache
        try:
            runs = []
            for _ in range(args.repeat):
                runs.append(one_round(Meter(sim), n, hostlist, power_argv, kubectl, env, d,
                                      args.concurrency,
                                      floor_pods=runs[-1]["pods"] if runs else None))
        finally:
            stop_munged(d)

    report(runs, n, settings, args.repeat, args.concurrency)


STEPS = (("k8sbridge-power resume", "resume"), ("k8sbridge-power suspend", "suspend"),
         ("kubectl create -f (same pods)", "create"), ("kubectl delete -f", "delete"),
         ("wrk POST, the floor (same pods)", "floor"))


def report(runs, n, settings, repeat, concurrency):
    def median(step, i):
        return statistics.median(r[step][0][i] for r in runs)

    def counts(step):
        return max((r[step][1] for r in runs), key=lambda c: sum(c.values()))

    m = {step: tuple(median(step, i) for i in range(3)) for _, step in STEPS}
    resume, suspend, create, delete, floor = (m[step] for _, step in STEPS)
    print(f"{n} nodes, one resume and one suspend call of k8sbridge-power against kubesim "
          f"(HTTPS, no scheduler, no kubelet); k8sbridge.conf: {settings}; "
          f"median of {repeat} rounds")
    print(f"{'step':<34} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'conns':>6} "
          f"{'kubesim cpu s':>13}  requests per node (most in a round)")
    for name, step in STEPS:
        conns = max(r[step][2] for r in runs)
        sim_cpu = statistics.median(r[step][3] for r in runs)
        print(f"{name:<34} {m[step][0]:8.2f} {m[step][1]:8.2f} {m[step][2]:9.1f} {conns:6d} "
              f"{sim_cpu:13.2f}  {per_node(counts(step), n)}")
    walls = {step: " ".join(f"{r[step][0][0]:.2f}" for r in runs) for _, step in STEPS}
    print("wall s of each round: " + "; ".join(f"{k} {v}" for k, v in walls.items()))
    print(f"resume: all {n} pods exist after {resume[0]:.2f} s; suspend: all deleted after "
          f"{suspend[0]:.2f} s")
    print(f"kubectl create / k8sbridge resume: wall {create[0] / resume[0]:.1f}x, "
          f"cpu {create[1] / resume[1]:.1f}x, peak memory {create[2] / resume[2]:.1f}x")
    print(f"kubectl delete / k8sbridge suspend: wall {delete[0] / suspend[0]:.1f}x, "
          f"cpu {delete[1] / suspend[1]:.1f}x, peak memory {delete[2] / suspend[2]:.1f}x")
    # The floor: what kubesim itself sustains for these creates over as many
    # connections; a client's rate over it is the share of the server it gets.
    fraction = {step: " ".join(f"{wall_fraction(r, step):.2f}" for r in runs)
                for step in ("resume", "create")}
    rate = {step: [create_rate_fraction(r, step) for r in runs] for step in ("resume", "create")}
    print(f"floor: wrk creates the {n} pods in {floor[0]:.2f} s over {concurrency} connections, "
          f"{n / floor[0]:.0f} pods/s; k8sbridge-power resume {n / resume[0]:.0f} pods/s = "
          f"{floor[0] / resume[0]:.2f} of the floor end to end (rounds {fraction['resume']}); "
          f"kubectl create {n / create[0]:.0f} pods/s = {floor[0] / create[0]:.2f} "
          f"(rounds {fraction['create']})")
    print("create rate as kubesim saw it, first create to last, as a fraction of wrk's: "
          + "; ".join(f"{step} {statistics.median(v):.2f} (rounds "
                      + " ".join(f"{x:.2f}" for x in v) + ")" for step, v in rate.items()))
    creates = sum(c for (verb, res), c in counts("resume").items()
                  if verb == "create" and res == "pods")
    deletes = sum(c for (verb, res), c in counts("suspend").items()
                  if verb == "delete" and res == "pods")
    fast = create[0] / resume[0] >= 5
    print(f"goal: resume >= 5x faster than kubectl create: {'met' if fast else 'NOT met'}; "
          f"creates per node {creates / n:.2f}, deletes per node {deletes / n:.2f} "
          f"(goal <= 1 each): {'met' if creates <= n and deletes <= n else 'NOT met'}")


if __name__ == "__main__":
    main()
