#!/usr/bin/python3
"""Resumes N CLOUD nodes (default 1000) in ONE call of the real ResumeProgram,
`k8sbridge-power resume w-[0-N-1]`, against a real Kubernetes API server
(harness.kube.KubeCluster: etcd, kube-apiserver, the controllers and kwok's fake
nodes), then suspends them in one call, and in the same run has kubectl create and
delete the same N rendered pods from one file (the peer). Prints:

  - wall time until all pods exist (the resume call returns after every create
    was answered; the bench then lists them) and until all are deleted;
  - CPU time and peak memory of each program (its os.wait4 rusage, taken by a
    small launcher so that this script's own memory is not counted);
  - API requests per node by verb and resource, as the API server's audit log has
    them (only the bench's user, whose bearer token all the clients use, is audited);
  - kubectl's wall time, CPU and memory for `create -f` and `delete -f`, and the
    ratios;
  - the floor: the API server's raw pod-create rate, the same pod bodies POSTed by wrk (a
    load generator, bench/wrk_create.lua) over as many keep-alive connections as
    Concurrency, with the same bearer token, and each client's create rate as a
    fraction of it; from the second round on wrk also runs right before the resume
    (with the last round's pods), and the round's floor is the mean of the two;
  - TCP connections (TLS handshakes) each step opened to the API server: those open
    at its end (`ss`) or closed during it (`ss -E`, which reports each socket the
    kernel destroys) that were not open at its start; other clients' connections
    (the controllers', kwok's) last and are not counted;
  - the API server's own CPU time in each step (/proc/PID/stat of kube-apiserver).

    /usr/bin/python3 bench/power_bench.py [--nodes 1000] [--qps 500] [--burst 2000]
        [--concurrency 8] [--repeat 3] [--build-root BUILD]
    meson compile -C BUILD power_bench      # the same, with the defaults

wrk is /usr/bin/wrk (scripts/setup.sh), or $BENCH_WRK: a wrapper, for example one
that runs it under strace or perf.

QPS, Burst and Concurrency are k8sbridge.conf's keys: the bench writes them as an
admin would. The cluster runs no scheduler, so pods stay unbound (kwok runs none
of them) and a delete removes them at once (for both clients alike); every client
speaks TLS with the bearer token of one cluster-admin ServiceAccount. There is no
slurmctld: the node group sets `Gpus=8`, so no Gres is read; slurm.conf points at a
port where nothing listens. A fake SLURM_RESUME_FILE puts one job on all nodes, so
pods carry the job label, a feature nodeSelector and the placement pod affinity.

kubectl runs with `--validate=false` (no OpenAPI download), `delete --wait=false`
(k8sbridge does not wait either), and a warm discovery cache, which is kubectl's
fastest way; it is the kubectl built with the cluster (harness.kube.kubectl_program).
Goal (issue 5): resume at least 5x faster than `kubectl create`, with at most one
create and one delete request per node.
"""

import argparse
import datetime
import json
import os
import time
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

LEAF = "network.topology.nvidia.com/leaf"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
JOB_ID = 4242
WRK = os.environ.get("BENCH_WRK") or shutil.which("wrk") or "/usr/bin/wrk"
WRK_SCRIPT = ROOT / "bench" / "wrk_create.lua"


def bench_user() -> str:
    """The user of every measured client: the cluster's admin ServiceAccount
    (harness.kube.ADMIN_SA), the only one the bench's audit policy logs."""
    from harness.kube import ADMIN_SA
    return "system:serviceaccount:{}:{}".format(*ADMIN_SA)


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
# What the API server's defaulting and admission (ServiceAccount, Priority,
# DefaultTolerationSeconds) add to a pod that sets none of them, as TEMPLATE's pods
# set none: taken out again, so that kubectl and wrk send the body k8sbridge-power
# sent. as_sent() checks that the server makes the same pod of what is left.
SERVER_SPEC = ("dnsPolicy", "enableServiceLinks", "schedulerName", "securityContext",
               "serviceAccountName", "serviceAccount", "tolerations", "priority",
               "preemptionPolicy")
SERVER_CONTAINER = ("terminationMessagePath", "imagePullPolicy")


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


def live_pods(kube, names=None):
    """The pods not being deleted; with `names`, only those of these names."""
    status, _, body = kube.request("GET", "/api/v1/namespaces/default/pods", timeout=120)
    if status != 200:
        raise SystemExit(f"listing pods: {status} {body}")
    return [p for p in body["items"] if not p["metadata"].get("deletionTimestamp")
            and (names is None or p["metadata"]["name"] in names)]


def bench_cluster(**kw):
    """A KubeCluster for the benches: only the requests of the bench's user
    (bench_user(), whose token every measured client uses) are audited, with their
    times, so that the log costs the server the same for each client and nothing for
    the rest (kwok's leases at 10,000 nodes, the controllers)."""
    from harness.kube import KubeCluster

    return KubeCluster(audit=[bench_user()], **kw)


def bench_kubeconfig(kube):
    """(kubeconfig, bearer token) of bench_user(): a token of the cluster's admin
    ServiceAccount, for k8sbridge-power, kubectl and wrk alike."""
    from harness.kube import ADMIN_SA
    path = kube.service_account_kubeconfig(*ADMIN_SA, expiration_seconds=24 * 3600)
    return str(path), yaml.safe_load(Path(path).read_text())["users"][0]["user"]["token"]


def process_cpu(pid):
    """utime + stime of process `pid`, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(kube, window=0.2, windows=5):
    """The API server's CPU seconds per `window` with nothing measured going on: the
    least of `windows` (kwok's node leases keep a large cluster from ever being idle)."""
    pid = kube.procs["kube-apiserver"].pid
    least = None
    for _ in range(windows):
        before = process_cpu(pid)
        time.sleep(window)
        spent = process_cpu(pid) - before
        least = spent if least is None else min(least, spent)
    return least


def client_ends(lines, server):
    """The client ends (address:port) of the TCP connections to `server` (address:port)
    in lines of `ss -Htn` (state, queues, local, peer): on loopback both ends of a
    connection are listed, and both give the same client end."""
    ends = set()
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        local, peer = fields[3], fields[4]
        if peer == server:
            ends.add(local)
        elif local == server and not peer.endswith(":*"):
            ends.add(peer)
    return ends


class Connections:
    """The TCP connections to the API server, by their client ends: open() those
    open now, and closed(), those closed since its last call (`ss -E` reports each
    socket as the kernel destroys it, also one reset). A connection opened between
    two takes is in the second open() or closed() and not in the first open()."""

    def __init__(self, kube):
        self.server = kube.url.rsplit("//", 1)[1]
        self.filter = "( dport = :{0} or sport = :{0} )".format(self.server.rsplit(":", 1)[1])
        self.lock = threading.Lock()
        self.gone = set()
        self.events = subprocess.Popen(["stdbuf", "-oL", "ss", "-EHtn", self.filter],
                                       stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        time.sleep(0.1)  # ss has subscribed

    def _read(self):
        for line in self.events.stdout:
            ends = client_ends([line], self.server)
            with self.lock:
                self.gone |= ends

    def open(self):
        out = subprocess.run(["ss", "-Htn", self.filter], capture_output=True, text=True,
                             check=True).stdout
        return client_ends(out.splitlines(), self.server)

    def closed(self):
        with self.lock:
            gone, self.gone = self.gone, set()
        return gone

    def close(self):
        self.events.terminate()
        self.events.wait()


def answered_at(stamp):
    """Seconds since the epoch of an audit event's RFC 3339 time."""
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Meter:
    """What the API server saw of one step, each since the last take(): the requests
    of the bench's user by verb and resource (its audit log), the TCP connections
    (TLS handshakes) opened to it (Connections) and its own CPU seconds (utime +
    stime of /proc/PID/stat of kube-apiserver). A context manager: one for a run."""

    def __init__(self, kube, idle=0.0):
        self.kube = kube
        self.pid = kube.procs["kube-apiserver"].pid
        self.idle = idle  # idle_cpu(): what settle() counts as at rest
        self.connections = Connections(kube)
        self.cpu = self.server_cpu()
        self.conns = self.connections.open()
        self.connections.closed()
        kube.clear_requests()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.connections.close()

    def server_cpu(self):
        return process_cpu(self.pid)

    def settle(self, window=0.2, busy=0.02, limit=10.0):
        """Waits (up to `limit` s) until the API server spends under `busy` CPU s in a
        `window` beyond its idle rate: what the last step left it to do (deletions,
        watch fan-out to the controllers) is done, so that each measured step meets a
        server at rest."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            before = self.server_cpu()
            time.sleep(window)
            if self.server_cpu() - before < busy + self.idle:
                return

    def take(self):
        """({(verb, resource): count}, connections, CPU s, create s); resets the
        counters. create s: from the first pod create answered 201 to the last, as
        the API server's audit log times their answers (the client's create rate,
        without its start and its reads before; None without creates)."""
        cpu, before = self.server_cpu(), self.cpu
        # A response can reach its client just before the server logs it, and ss
        # reports a closed connection just after.
        time.sleep(0.05)
        conns = self.connections.open()
        opened = len((conns | self.connections.closed()) - self.conns)
        requests = self.kube.requests_log() if self.kube.audit_log.exists() else []
        self.kube.clear_requests()
        self.cpu, self.conns = self.server_cpu(), conns
        counts, answers = {}, []
        for r in requests:
            key = (r["verb"], r["resource"])
            counts[key] = counts.get(key, 0) + 1
            if key == ("create", "pods") and r["code"] == 201 and not r["subresource"]:
                answers.append(answered_at(r["answered"]))
        creating = max(answers) - min(answers) if answers else None
        return counts, opened, cpu - before, creating


def floor_of(run, pick):
    """`pick` of the round's floor: the mean of the floor measured right after the
    client and, from the second round on, the one right before it (the same load
    on either side; a load that grows or shrinks through the round cancels)."""
    floors = [run[k] for k in ("floor", "floor_before") if run.get(k)]
    return statistics.fmean(pick(f) for f in floors)


def create_rate_fraction(run, step):
    """`step`'s pod create rate in one round as a fraction of the floor's (wrk's),
    both from the API server's window of their creates (its audit log's answer
    times): what the issue's floor compares.
    The wall-clock fraction beside it also counts each program's start and reads."""
    return floor_of(run, lambda f: f[4]) / run[step][4]


def wall_fraction(run, step):
    """The same from the wall clock: 1000 / wall, each program's start included."""
    return floor_of(run, lambda f: f[0][0]) / run[step][0][0]


def per_node(counts, n):
    return ", ".join(f"{verb} {resource or '(discovery)'} {count / n:.3f}"
                     for (verb, resource), count in sorted(counts.items())) or "none"


def floor_create(kube, token, pods, concurrency, env, d, wrap=list):
    """The API server's raw create rate, the floor under any client: wrk POSTs each
    of `pods` once (bench/wrk_create.lua) over `concurrency` keep-alive connections,
    one thread each, with `token`, the bearer token k8sbridge-power's kubeconfig
    holds. wrk verifies no certificate (the cluster's CA is not checked: one
    verification per connection). Returns run_measured's tuple once every answer
    was a 201."""
    bodies, done = d / "bodies.jsonl", d / "wrk-done"
    bodies.write_text("".join(json.dumps(dict(p, apiVersion="v1", kind="Pod")) + "\n"
                              for p in pods))
    done.unlink(missing_ok=True)
    argv = [WRK, f"-t{concurrency}", f"-c{concurrency}", "-d300s",
            "-H", f"Authorization: Bearer {token}", "-H", "Content-Type: application/json",
            "-H", "Accept: application/json", "-H", "User-Agent: wrk/4.1.0",
            "-s", str(WRK_SCRIPT), f"{kube.url}/api/v1/namespaces/default/pods",
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


def one_round(meter, n, hostlist, power_argv, kubectl, token, env, d, concurrency, names=None,
              wrap=list, floor_pods=None):
    """k8sbridge-power resume and suspend, wrk's create of the same pods (the floor),
    then kubectl create and delete of them; returns {step: ((wall, cpu, rss,
    output), {(verb, resource): count}, connections, the API server's CPU s, create
    s)}, and "pods", the rendered pods as sent. `token`: the bearer token of
    power_argv's and kubectl's kubeconfig, for wrk. `floor_pods` (the last round's
    "pods"): wrk creates them before the resume too ("floor_before"; floor_of
    averages the two).
    `names`: the pods of hostlist, when other pods exist beside them (bench/scale.py).
    `wrap`: what power_argv was run through (bench/scale.py: the rig's mount
    namespace), for wrk and kubectl too, so that every client pays the same start."""
    kube = meter.kube
    before = floor_step(meter, floor_pods, token, concurrency, env, d, wrap, names, n) \
        if floor_pods else None
    meter.settle()
    meter.take()
    resume = run_measured(power_argv + ["resume", hostlist],
                          dict(env, SLURM_RESUME_FILE=str(d / "resume.json")))
    resume_counts = meter.take()
    pods = live_pods(kube, names)
    if len(pods) != n:
        raise SystemExit(f"after resume {len(pods)} pods exist, expected {n}")
    sample = next(p for p in pods if p["metadata"]["name"] == "w-0")
    assert sample["metadata"]["labels"]["k8sbridge.io/job"] == str(JOB_ID), sample
    assert "podAffinity" in sample["spec"]["affinity"], sample

    # The same rendered pods for kubectl, as a user would write them.
    pods = [as_sent(kube, p) for p in pods]
    manifest = d / "pods.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))

    meter.settle()
    meter.take()
    suspend = run_measured(power_argv + ["suspend", hostlist], env)
    suspend_counts = meter.take()
    left = len(live_pods(kube, names))
    if left != 0:
        raise SystemExit(f"after suspend {left} pods are left")

    # The floor right after k8sbridge-power (and before it, above), so that both meet
    # the same load.
    after = floor_step(meter, pods, token, concurrency, env, d, wrap, names, n)

    meter.settle()
    meter.take()
    create = run_measured(wrap(kubectl + ["create", "--validate=false", "-f", str(manifest)]),
                          env)
    create_counts = meter.take()
    created = len(live_pods(kube, names))
    meter.settle()
    meter.take()
    delete = run_measured(wrap(kubectl + ["delete", "--wait=false", "-f", str(manifest)]), env)
    delete_counts = meter.take()
    left_kubectl = len(live_pods(kube, names))
    if created != n or left_kubectl != 0:
        raise SystemExit(f"kubectl created {created} of {n} pods, left {left_kubectl}")

    return {"resume": (resume, *resume_counts), "suspend": (suspend, *suspend_counts),
            "create": (create, *create_counts), "delete": (delete, *delete_counts),
            "floor": after, "floor_before": before, "pods": pods}


def without_server_fields(pod):
    """`pod` as its client sent it: no status, SERVER_METADATA, SERVER_SPEC or
    SERVER_CONTAINER; with the apiVersion and kind that a list's items leave out."""
    pod = json.loads(json.dumps(pod))
    pod.pop("status", None)
    for key in SERVER_METADATA:
        pod["metadata"].pop(key, None)
    for key in SERVER_SPEC:
        pod["spec"].pop(key, None)
    for container in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
        for key in SERVER_CONTAINER:
            container.pop(key, None)
    return dict({"apiVersion": "v1", "kind": "Pod"}, **pod)


def as_sent(kube, pod):
    """without_server_fields(pod), once checked for w-0: the API server makes the same
    spec of it (a dry-run create under another name), so no field the client set was
    taken out."""
    sent = without_server_fields(pod)
    if pod["metadata"]["name"] == "w-0":
        probe = json.loads(json.dumps(sent))
        probe["metadata"]["name"] = "power-bench-probe"
        status, _, made = kube.request(
            "POST", "/api/v1/namespaces/default/pods?dryRun=All", probe)
        if status != 201 or made["spec"] != pod["spec"]:
            raise SystemExit(f"the pod without the server's fields is another pod: {status} "
                             f"{json.dumps(made)[:2000]}\nnot\n{json.dumps(pod)[:2000]}")
    return sent


def floor_step(meter, pods, token, concurrency, env, d, wrap, names, n):
    """wrk's creates of `pods` at an API server at rest, checked, then deleted again:
    (run_measured's tuple, *Meter.take())."""
    kube = meter.kube
    meter.settle()
    meter.take()
    floor = floor_create(kube, token, pods, concurrency, env, d, wrap)
    counts = meter.take()
    if len(live_pods(kube, names)) != n:
        raise SystemExit(f"after wrk {len(live_pods(kube, names))} pods exist, expected {n}")
    # Only the measured job's pods (bench/scale.py keeps a full cluster beside them).
    status, _, body = kube.request(
        "DELETE", f"/api/v1/namespaces/default/pods?labelSelector=k8sbridge.io/job%3D{JOB_ID}",
        timeout=120)
    if status != 200 or live_pods(kube, names):
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
    from harness.kube import kubectl_program  # noqa: E402  (reads K8SBRIDGE_BUILD_ROOT)

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
    with bench_cluster(nodes=4, gpus_per_node=8, gpu_product=PRODUCT, ib_leaves=2,
                       scheduler=False) as kube, \
            tempfile.TemporaryDirectory(prefix="power-bench-") as tmp:
        d = Path(tmp)
        kubeconfig, token = bench_kubeconfig(kube)
        (d / "worker.yaml").write_text(TEMPLATE)
        (d / "slurm.conf").write_text(
            "ClusterName=hpc1\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
            f"MessageTimeout=2\nNodeName={hostlist} State=CLOUD\n")
        settings = f"QPS={args.qps} Burst={args.burst} Concurrency={args.concurrency}"
        munge_socket = start_munged(d)
        (d / "k8sbridge.conf").write_text(
            f"ClusterName=hpc1\nKubeconfig={kubeconfig}\nNamespace=default\n"
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

        kubectl = [str(kubectl_program()), "--kubeconfig", kubeconfig]
        run_measured(kubectl + ["get", "pods"], env)  # warms kubectl's discovery cache
        idle = idle_cpu(kube)
        try:
            runs = []
            with Meter(kube, idle) as meter:
                for _ in range(args.repeat):
                    runs.append(one_round(meter, n, hostlist, power_argv, kubectl, token, env,
                                          d, args.concurrency,
                                          floor_pods=runs[-1]["pods"] if runs else None))
        finally:
            stop_munged(d)

        version = kube.version()

    report(runs, n, settings, args.repeat, args.concurrency, version)


STEPS = (("k8sbridge-power resume", "resume"), ("k8sbridge-power suspend", "suspend"),
         ("kubectl create -f (same pods)", "create"), ("kubectl delete -f", "delete"),
         ("wrk POST, the floor (same pods)", "floor"))


def report(runs, n, settings, repeat, concurrency, version):
    def median(step, i):
        return statistics.median(r[step][0][i] for r in runs)

    def counts(step):
        return max((r[step][1] for r in runs), key=lambda c: sum(c.values()))

    m = {step: tuple(median(step, i) for i in range(3)) for _, step in STEPS}
    resume, suspend, create, delete, floor = (m[step] for _, step in STEPS)
    print(f"{n} nodes, one resume and one suspend call of k8sbridge-power against "
          f"kube-apiserver ({version}, TLS, no scheduler: the pods stay unbound); "
          f"k8sbridge.conf: {settings}; median of {repeat} rounds")
    print(f"{'step':<34} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'conns':>6} "
          f"{'apiserver cpu s':>15}  requests per node (most in a round)")
    for name, step in STEPS:
        conns = max(r[step][2] for r in runs)
        server_cpu = statistics.median(r[step][3] for r in runs)
        print(f"{name:<34} {m[step][0]:8.2f} {m[step][1]:8.2f} {m[step][2]:9.1f} {conns:6d} "
              f"{server_cpu:15.2f}  {per_node(counts(step), n)}")
    walls = {step: " ".join(f"{r[step][0][0]:.2f}" for r in runs) for _, step in STEPS}
    print("wall s of each round: " + "; ".join(f"{k} {v}" for k, v in walls.items()))
    print(f"resume: all {n} pods exist after {resume[0]:.2f} s; suspend: all deleted after "
          f"{suspend[0]:.2f} s")
    print(f"kubectl create / k8sbridge resume: wall {create[0] / resume[0]:.1f}x, "
          f"cpu {create[1] / resume[1]:.1f}x, peak memory {create[2] / resume[2]:.1f}x")
    print(f"kubectl delete / k8sbridge suspend: wall {delete[0] / suspend[0]:.1f}x, "
          f"cpu {delete[1] / suspend[1]:.1f}x, peak memory {delete[2] / suspend[2]:.1f}x")
    # The floor: what the API server itself sustains for these creates over as many
    # connections; a client's rate over it is the share of the server it gets.
    fraction = {step: " ".join(f"{wall_fraction(r, step):.2f}" for r in runs)
                for step in ("resume", "create")}
    rate = {step: [create_rate_fraction(r, step) for r in runs] for step in ("resume", "create")}
    print(f"floor: wrk creates the {n} pods in {floor[0]:.2f} s over {concurrency} connections, "
          f"{n / floor[0]:.0f} pods/s; k8sbridge-power resume {n / resume[0]:.0f} pods/s = "
          f"{floor[0] / resume[0]:.2f} of the floor end to end (rounds {fraction['resume']}); "
          f"kubectl create {n / create[0]:.0f} pods/s = {floor[0] / create[0]:.2f} "
          f"(rounds {fraction['create']})")
    print("create rate as the API server saw it (its audit log), first create to last, as "
          "a fraction of wrk's: "
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
