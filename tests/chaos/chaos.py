"""The chaos driver: the whole system under the faults a real cluster has, while jobs
flow, and the promises checked all along (issue 21).

The world (World): the rig's real slurmctld with 16 CLOUD nodes (w-[0-11] plain,
w-[12-15] with the feature `gpu`), the real Kubernetes (etcd, kube-apiserver,
controller-manager, scheduler) with four real nodes of 8 GPUs each, whose kubelets
run the pods as containers (containerd, runc) with k8sbridge-worker and real slurmd
in them (harness.cluster.PodCluster), k8sbridge-power as the power programs and
k8sbridge-prolog, two k8sbridge-sync daemons sharing one Lease, and slurmdbd on a
MariaDB (harness.accounting).

A seeded schedule (Schedule) submits a stream of jobs (1-8 nodes, short and long,
some `--requeue`, some `-C gpu`, whose pods ask for GPUs) and injects one fault at a
time, each for a while, then clears it (FAULTS: API, pod, node, control-plane and
admin faults, each made the real way: API Priority and Fairness, etcd stopped, the
API server paused, restarted or its connections reset, a kubelet stopped, an image
gone from a node's containerd, signals to a container's processes, kubectl, slurmdbd
killed, its database restarted or frozen). A monitor thread (Monitor) samples Slurm, the pods and the daemons
every half second and counts the violations of each promise (INVARIANTS); the end
(Driver.finish) waits until the jobs are done and the world is at rest, and checks
again. The report gives jobs run, faults by kind, recovery time per kind
(p50/p99: from the fault's end, or its injection for one that is a single act, until
no node is out of service but by an admin and no orphan pod is left) and every
invariant's count.

Used by tests/chaos/test_chaos.py (CI: a fixed seed, about 5 minutes) and
bench/chaos.py (the long variant). Needs root.
"""

import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.accounting import Accounting
from harness.cluster import PodCluster
from harness.kubelet_node import BUSYBOX_IMAGE
from harness.rig import NodeSpec, RigError, free_tcp_port, kill_and_wait, wait_for
from harness.sync import Daemon

NODES = [NodeSpec(f"w-{i}") for i in range(12)] + \
    [NodeSpec(f"w-{i}", features=["gpu"]) for i in range(12, 16)]
GROUPS = [("cpu", "w-[0-11]", ""), ("gpu", "w-[12-15]", "PodTemplate=gpu.yaml")]
GPU_NODES = [f"w-{i}" for i in range(12, 16)]
NODE_NAMES = [spec.name for spec in NODES]
K8S_NODE_COUNT = 4  # real nodes: real-0 ... real-3
CONTROLLER_SA = ("default", "k8sbridge-controller")  # the daemons' and programs' identity
# The pods KubeCluster.throttle's seat-holding dry-runs name: not k8sbridge's requests.
SEAT_HOLDER_PREFIX = "apf-seat-holder-"
# What the World restarts when it exits, as the kubelet does a static pod (the faults
# stop etcd and kube-apiserver on purpose: those they start again themselves).
SUPERVISED = ("kube-scheduler", "kube-controller-manager")
GPUS_PER_NODE = 8
GPUS_PER_POD = 2
SUSPEND_TIME = 15
ORPHAN_GRACE = 10  # SyncOrphanGrace
LEASE = 6  # SyncLeaseDuration, seconds
GPU_LIMITS = f"      resources: {{limits: {{nvidia.com/gpu: {GPUS_PER_POD}}}}}\n"
# How long a node may stay out of service, k8sbridge's doing, after the last fault
# ended (the longest path: a failed pod's node DOWN, POWER_DOWN, SuspendTimeout 10 s,
# returned by k8sbridge-sync, resumed by the next job; or a requeued job's credential
# hold, 10 s), with room for a loaded machine.
STUCK_BOUND = 120
ORPHAN_BOUND = ORPHAN_GRACE + 30  # seconds of a working API an orphan may live
INVARIANTS = (
    "jobs not completed",
    "jobs run twice at once",
    "orphan pods past the grace",
    "nodes stuck out of service",
    "admin reasons changed or cleared",
    "Slurm nodes with two live pods",
    "pods deleted under a running job without a fault",
    "two daemons leading at once",
    "actions without the lease",
    "jobs missing from accounting",
)
# Until sacct lists every job once the world is at rest: slurmctld sends the records
# it queued during the accounting faults (docs/accounting.md).
ACCOUNTING_BOUND = 180


def now() -> float:
    return time.monotonic()


def expand(rig, hostlist: str) -> list:
    if not hostlist or hostlist in ("(null)", "None"):
        return []
    out = rig.run(["scontrol", "show", "hostnames", hostlist], timeout=30).stdout
    return out.split()


# ---- the world ---------------------------------------------------------------------

class World:
    """PodCluster + two k8sbridge-sync daemons. Use as a context manager."""

    def __init__(self, log_root=None):
        self.dir = Path(tempfile.mkdtemp(prefix="chaos-"))
        self.dir.chmod(0o755)
        self.ports = [free_tcp_port(), free_tcp_port()]
        # The circuit breaker's cool-down is 30 s (10 min by default): the GPU fault
        # opens it, and its nodes must come back within the stuck-node bound.
        sync_keys = (f"SyncPollInterval=250ms SyncLeaseDuration={LEASE}s "
                     f"SyncOrphanGrace={ORPHAN_GRACE}s SyncUnschedulableGrace=10s "
                     "SyncRegistrationGrace=30s "
                     "SyncCircuitBreakerCooldown=30s")
        # slurmdbd on its MariaDB (harness.accounting), for the accounting faults; the
        # jobs are root's, whose association registering the cluster makes.
        self.accounting = Accounting(users=(), account="chaos")
        self.cluster = PodCluster(
            NODES, GROUPS, services=[self.accounting], fake_nodes=K8S_NODE_COUNT, gpus_per_node=GPUS_PER_NODE,
            suspend_time=SUSPEND_TIME, retry_deadline=20, log_root=log_root,
            conf_extra=f"{sync_keys} SyncMetricsListen=127.0.0.1:{self.ports[0]}",
            # A requeued job may start again after about 11 s, not 121 s; deploy/'s
            # ReturnToService=1 (a later line wins over the rig's 2); MinJobAge long
            # enough to see every job's end.
            slurm_conf_extra=lambda rig: (f"AuthInfo=socket={rig.munge_socket},"
                                          "cred_expire=10\nReturnToService=1\n"
                                          "MinJobAge=7200\n"),
            # The pods get what every pod gets (DefaultTolerationSeconds: 300 s on a
            # not-ready or unreachable node), as deploy/'s do: shorter ones would have
            # Kubernetes evict the pods of a node it marks lost in the wake of an API
            # fault, which k8sbridge is to ride out.
            extra_templates={
                "worker.yaml": lambda c: c.template(),
                "gpu.yaml": lambda c: c.template(container_extra=GPU_LIMITS)})
        self.daemons = {}
        self.jobdir = None
        # Control-plane components that exited, restarted as a kubelet restarts its
        # static pods (the scheduler exits on purpose when its cache disagrees with
        # the API, after a bind that succeeded but whose answer it lost): name -> count.
        self.control_plane_restarts = {}
        # slurmctld, too, is started again when it dies (a crash: its controller pod's
        # container would be restarted); the lock keeps that from racing a restart
        # a fault makes, and `on_slurmctld_crash` tells the monitor what a crash may
        # cost (what it had not saved).
        self.slurmctld_lock = threading.Lock()
        self.on_slurmctld_crash = lambda: None
        self._supervising = threading.Event()
        self._supervisor = None

    def __enter__(self):
        try:
            self.cluster.__enter__()
            self.rig, self.sim = self.cluster.rig, self.cluster.sim
            self._supervisor = threading.Thread(target=self._supervise, daemon=True)
            self._supervisor.start()
            self.jobdir = self.rig.workdir / "chaos-jobs"
            self.jobdir.mkdir(mode=0o777)
            conf = self.cluster.conf_path.read_text()
            second = self.dir / "k8sbridge-b.conf"
            second.write_text(conf.replace(f"127.0.0.1:{self.ports[0]}",
                                           f"127.0.0.1:{self.ports[1]}"))
            self.confs = {"a": (str(self.cluster.conf_path), self.ports[0]),
                          "b": (str(second), self.ports[1])}
            for identity in self.confs:
                self.start_daemon(identity)
            wait_for(lambda: self.leader() is not None, 60, "a k8sbridge-sync daemon to lead")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _supervise(self):
        """Starts SUPERVISED components again once they exit: at once the first time,
        then after 10 s, doubling up to 5 minutes, as the kubelet's back-off."""
        down_since = {}
        while not self._supervising.wait(1):
            for name in SUPERVISED:
                proc = self.sim.procs.get(name)
                if proc is None or proc.poll() is None:
                    continue
                restarts = self.control_plane_restarts.get(name, 0)
                since = down_since.setdefault(name, now())
                if now() - since < (min(300, 10 * 2 ** (restarts - 1)) if restarts else 0):
                    continue
                print(f"chaos: {name} exited ({proc.returncode}): started again", flush=True)
                self.control_plane_restarts[name] = restarts + 1
                del down_since[name]
                self.sim.start(name)
            self._restart_crashed_slurmctld()

    def _restart_crashed_slurmctld(self):
        with self.slurmctld_lock:
            proc = self.rig.slurmctld
            if proc is None or proc.poll() is None:
                return
            print(f"chaos: slurmctld exited ({proc.returncode}): started again", flush=True)
            self.control_plane_restarts["slurmctld"] = \
                self.control_plane_restarts.get("slurmctld", 0) + 1
            self.on_slurmctld_crash()
            try:
                self.rig.restart_slurmctld()
            except Exception as e:  # noqa: BLE001 - tried again at the next look
                print(f"chaos: slurmctld did not start again: {e}", flush=True)

    def close(self):
        self._supervising.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=30)
        for d in self.daemons.values():
            d.stop()
        self.keep_logs()
        self.cluster.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def keep_logs(self):
        """The daemons', the power programs' and Kubernetes' logs (the control plane's,
        each node's kubelet and containerd) go with the rig's daemon logs, which the
        rig keeps (/tmp/k8sbridge-rig-logs/rig-ID): a violation in a 40-minute run
        must be explained from them afterwards."""
        rig = getattr(self.cluster, "rig", None)
        if rig is None or not rig.logdir.exists():
            return
        logs = [(log, f"chaos-{log.name}") for log in self.dir.glob("sync-*.log")]
        logs.append((self.cluster.power_log, "chaos-power.log"))
        real = getattr(self.cluster, "real", None)
        if real is not None and real.kube is not None:
            logs += [(real.kube.dir / f"{name}.log", f"chaos-{name}.log") for name in
                     ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")]
            for node in real.nodes:
                logs += [(node.dir / f"{name}.log", f"chaos-{node.name}-{name}.log")
                         for name in ("kubelet", "containerd")]
        for log, name in logs:
            try:
                shutil.copy2(log, rig.logdir / name)
            except OSError:
                pass  # not written (a world that failed to start)

    def start_daemon(self, identity):
        path, port = self.confs[identity]
        old = self.daemons.get(identity)
        if old is not None:
            old.stop()
        # One log over restarts: unleased_actions() starts afresh at each mark.
        with open(self.dir / f"sync-{identity}.log", "a") as log:
            log.write(f"=== chaos: start k8sbridge-sync {identity}\n")
        self.daemons[identity] = Daemon({"path": path, "port": port}, self.rig.slurm_conf,
                                        identity, self.dir, wrap=self.rig.host_command,
                                        slurm_bin=self.rig.prefix / "bin")

    def leader(self):
        for identity, d in self.daemons.items():
            if d.proc.poll() is None and d.metric("k8sbridge_sync_leader") == 1:
                return identity
        return None

    def pods(self):
        """Our pods, or None when the API does not answer (a fault)."""
        try:
            status, _, body = self.sim.request(
                "GET", "/api/v1/namespaces/default/pods?labelSelector="
                "app.kubernetes.io%2Fmanaged-by%3Dk8sbridge", timeout=5)
        except OSError:
            return None
        return body["items"] if status == 200 else None

    def pod_of(self, node):
        for pod in self.pods() or []:
            if pod["metadata"]["labels"].get("k8sbridge.io/node") == node and \
                    not pod["metadata"].get("deletionTimestamp"):
                return pod
        return None

    def admin_request(self, method, path, body=None, content_type="application/json"):
        """A request of the driver itself: retried through the API faults it injects."""
        deadline = now() + 120
        while True:
            try:
                status, _, answer = self.sim.request(method, path, body, timeout=10,
                                                     content_type=content_type)
                if status < 500 and status != 429:
                    return status, answer
            except OSError:
                pass
            if now() > deadline:
                raise RuntimeError(f"{method} {path}: the API did not answer for 120 s")
            time.sleep(0.5)

    @property
    def k8s_nodes(self):
        return self.cluster.k8s_nodes

    def k8sbridge_pids(self):
        """k8sbridge's processes that talk to the API server: the sync daemons, and the
        power programs (resume, suspend, prolog) this world's slurmctld runs."""
        pids = [d.proc.pid for d in self.daemons.values() if d.proc.poll() is None]
        mine = f"SLURM_CONF={self.rig.slurm_conf}".encode()
        for entry in os.listdir("/proc"):
            try:
                if not entry.isdigit() or \
                        Path(f"/proc/{entry}/comm").read_text().strip() != "k8sbridge-power":
                    continue
                if mine in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    pids.append(int(entry))
            except OSError:
                continue
        return pids

    def kubectl(self, *args):
        for _ in range(60):
            r = self.sim.kubectl(*args, check=False, timeout=60)
            if r.returncode == 0 or "NotFound" in r.stderr or "not found" in r.stderr:
                return r
            time.sleep(1)
        raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr}")


# ---- jobs --------------------------------------------------------------------------

@dataclass
class JobSpec:
    at: float  # seconds after the start
    nodes: int
    seconds: int
    requeue: bool
    gpu: bool
    where: str = ""  # -w: this node


JOB_SCRIPT = """#!/bin/sh
# A run holds the job's lock: a second run of the same job while the first lives
# (a node or pod that was not really stopped) finds it held and says so.
exec 9>>{dir}/$SLURM_JOB_ID.lock
if ! flock -n 9; then echo "$SLURM_JOB_ID $SLURM_RESTART_COUNT" >> {dir}/double; exit 1; fi
echo "$SLURM_JOB_ID ${{SLURM_RESTART_COUNT:-0}} $(hostname)" >> {dir}/runs
sleep {seconds}
"""


# ---- faults ------------------------------------------------------------------------

@dataclass
class Fault:
    kind: str
    at: float  # seconds after the start
    hold: float  # seconds it lasts (0: a single act)
    target: str = ""  # the Slurm or Kubernetes node it hit
    started: float = 0.0
    cleared: float = 0.0
    recovered: float = 0.0
    undo: object = None  # what clears it
    note: str = ""


# kind -> (needs a running job's node, how long it lasts in the short and long runs)
FAULTS = {
    "api-429": (False, (6, 15)),
    "api-5xx": (False, (6, 15)),
    "api-reset": (False, (5, 10)),
    "watch-reset": (False, (5, 10)),
    "watch-410": (False, (5, 10)),
    "api-outage": (False, (15, 60)),
    "api-restart": (False, (8, 30)),
    "token-rotation": (False, (0, 0)),
    "pod-delete": (True, (0, 0)),
    "worker-kill": (True, (0, 0)),
    "worker-oom": (True, (0, 0)),
    "pod-evict": (True, (0, 0)),
    "gpu-unschedulable": (False, (25, 40)),
    "image-pull-error": (False, (20, 40)),
    # Longer than the node controller's grace period (50 s).
    "kubelet-stop": (True, (65, 90)),
    "k8s-cordon": (True, (8, 20)),
    "kubectl-drain": (True, (8, 20)),
    "sync-leader-kill": (False, (0, 0)),
    "slurmctld-restart": (False, (0, 0)),
    "admin-drain": (False, (10, 30)),
    "admin-down": (True, (8, 20)),
    # Accounting: jobs start and end on while slurmctld queues their records.
    "slurmdbd-kill": (False, (5, 20)),
    "db-restart": (False, (5, 20)),
    "db-unreachable": (False, (15, 60)),
}


class Injector:
    """Injects and clears the faults of FAULTS."""

    def __init__(self, world: World, monitor, rng: random.Random, ctld_sigkill=False):
        self.w = world
        self.monitor = monitor
        self.rng = rng
        self.plan_kill = ctld_sigkill
        self.admin_count = 0

    def running_node(self):
        """A node of a running job, with a live pod, or None."""
        nodes = [n for n in self.monitor.running_nodes() if self.w.pod_of(n)]
        return self.rng.choice(sorted(nodes)) if nodes else None

    def job_node(self):
        """A node of a running job: one of the stream's, else one of a job of its own
        (the fault is aimed at work in progress)."""
        node = self.running_node()
        if node is None:
            self.monitor.schedule.submit_now(JobSpec(0, 2, 45, True, False))
            deadline = now() + 90
            while node is None and now() < deadline:
                time.sleep(0.5)
                node = self.running_node()
        return node

    def inject(self, f: Fault) -> bool:
        needs_node, _ = FAULTS[f.kind]
        node = self.job_node() if needs_node else None
        if needs_node and node is None:
            return False
        f.started = now()
        getattr(self, "_" + f.kind.replace("-", "_"))(f, node)
        return True

    def clear(self, f: Fault):
        if f.undo is not None:
            f.undo()
        f.cleared = now()

    # ---- API faults
    def _controller_codes(self):
        """The answers the API server gave k8sbridge's ServiceAccount since the last
        KubeCluster.clear_requests() (the audit log), by code; not those of the
        api-429 fault's own requests."""
        user = "system:serviceaccount:{}:{}".format(*CONTROLLER_SA)
        codes = {}
        for r in self.w.sim.requests_log():
            if r["user"] == user and not (r["name"] or "").startswith(SEAT_HOLDER_PREFIX):
                codes[r["code"]] = codes.get(r["code"], 0) + 1
        return dict(sorted(codes.items()))

    def _noting_codes(self, f, undo, what):
        """f.undo: `undo`, then a note of `what` (a string or a function giving one)
        and of the answers the controller's requests got meanwhile."""
        self.w.sim.clear_requests()

        def undo_and_note():
            undo()
            said = what() if callable(what) else what
            f.note = f"{said}; the controller's requests got {self._controller_codes()}"
        f.undo = undo_and_note

    def _remove_fault_webhook(self):
        """No fault webhook on the cluster's writes for the rest of the run
        (KubeCluster.add_fault registers it again when asked)."""
        self.w.admin_request("DELETE", "/apis/admissionregistration.k8s.io/v1/"
                             "validatingwebhookconfigurations/k8sbridge-test-faults")

    def _repeat(self, f, every, act, what):
        """Does `act` at once and every `every` seconds until the fault is cleared."""
        stop = threading.Event()
        count = [0]

        def loop():
            while True:
                try:
                    count[0] += act() or 0
                except Exception as e:  # noqa: BLE001 - the next one may work
                    print(f"chaos: {f.kind}: {e}", flush=True)
                if stop.wait(every):
                    return
        thread = threading.Thread(target=loop, daemon=True)
        thread.start()

        def undo():
            stop.set()
            thread.join(timeout=60)
        self._noting_codes(f, undo, lambda: f"{what}: {count[0]} connections reset")

    def _api_429(self, f, _):
        # API Priority and Fairness (KubeCluster.throttle): a FlowSchema sends the
        # ServiceAccount's requests to a priority level of one seat that rejects
        # instead of queueing, and that seat is kept taken by one of the account's
        # own writes that the fault webhook holds: k8sbridge's requests get 429 with
        # Retry-After.
        self.w.sim.throttle(*CONTROLLER_SA)

        def undo():
            self.w.sim.unthrottle(*CONTROLLER_SA)
            self._remove_fault_webhook()
        self._noting_codes(f, undo, "APF: the account's one seat held, the rest 429")

    def _api_5xx(self, f, _):
        # etcd goes away (stopped, or frozen), so requests that need it wait and the
        # API server answers 504 to those that outlive its time-outs; and the
        # writes, which admission sees before storage, are refused with a 500 or 503
        # by an admission webhook, as a policy webhook that depends on the broken
        # store would refuse them.
        kube = self.w.sim
        code = self.rng.choice([500, 503])
        how = self.rng.choice(["stop", "pause"])
        kube.add_fault("*", "*", code, times=0, message="chaos: the store is unavailable")
        (kube.stop if how == "stop" else kube.pause)("etcd")

        def undo():
            (kube.start if how == "stop" else kube.resume)("etcd")
            kube.clear_faults()
            self._remove_fault_webhook()
        self._noting_codes(f, undo, f"etcd {'stopped' if how == 'stop' else 'frozen'}, "
                                    f"every write {code}")

    def _api_reset(self, f, _):
        # Every TCP connection of k8sbridge (the daemons, the power programs) to the
        # API server reset, twice a second, as a load balancer that drops its state:
        # requests fail before or after the server acted.
        def reset():
            return sum(self.w.sim.reset_connections(pid=pid) for pid in self.w.k8sbridge_pids())
        self._repeat(f, 0.5, reset, "k8sbridge's connections reset twice a second")

    def _watch_reset(self, f, _):
        # The k8sbridge-sync daemons' connections, their watches among them, reset
        # every second or two.
        def reset():
            return sum(self.w.sim.reset_connections(pid=d.proc.pid)
                       for d in self.w.daemons.values() if d.proc.poll() is None)
        every = self.rng.uniform(1, 2)
        self._repeat(f, every, reset, f"the daemons' connections reset every {every:.1f} s")

    def _watch_410(self, f, _):
        # etcd's history compacted and the API server restarted (a new watch cache):
        # a watch resumed from an older resourceVersion gets 410 Gone.
        kube = self.w.sim
        revision = kube.compact_etcd()
        kube.restart("kube-apiserver")
        f.note = f"etcd compacted at revision {revision}, kube-apiserver restarted"

    def _api_outage(self, f, _):
        # The API server frozen (SIGSTOP): connections open and requests hang.
        self.w.sim.pause("kube-apiserver")
        self._noting_codes(f, lambda: self.w.sim.resume("kube-apiserver"),
                           "kube-apiserver frozen")

    def _api_restart(self, f, _):
        # kube-apiserver stopped (connections refused, every watch cut) and started
        # again after the hold over the same etcd: a new watch cache.
        self.w.sim.stop("kube-apiserver")
        f.note = "connections refused, then a new watch cache"
        # The fault ends when the new server answers (start() waits for it).
        f.undo = lambda: self.w.sim.start("kube-apiserver")

    def _token_rotation(self, f, _):
        # Every token of the daemons' and programs' ServiceAccount stops working (as
        # after a signing-key rotation) and a new one is in their tokenFile.
        self.w.sim.rotate_service_account_token("default", "k8sbridge-controller",
                                                expiration_seconds=24 * 3600)
        f.target = "k8sbridge-controller"
        f.note = "old tokens 401, new one in the tokenFile"

    # ---- pod faults
    def _pod(self, f, node):
        f.target = node
        self.monitor.expect_pod_loss(node)
        return self.w.pod_of(node)

    def _pod_delete(self, f, node):
        self._pod(f, node)
        self.w.kubectl("delete", "pod", node, "--wait=false")

    def _kill(self, f, node, sig):
        # Every process of the pod's container (k8sbridge-worker, munged, slurmd,
        # the job's): the container ends, and the kubelet reports it.
        pod = self._pod(f, node)
        pids = self.w.cluster.container_pids(pod) if pod else []
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        f.note = f"{signal.Signals(sig).name} to the container's {len(pids)} processes"

    def _worker_kill(self, f, node):
        self._kill(f, node, signal.SIGTERM)

    def _worker_oom(self, f, node):
        # A SIGKILL the kubelet did not send, as the kernel's OOM killer's (the
        # kubelet reports OOMKilled only for a kill its cgroup's OOM event names:
        # this one it reports as an Error with exit code 137).
        self._kill(f, node, signal.SIGKILL)

    def _pod_evict(self, f, node):
        self._pod(f, node)
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": node, "namespace": "default"}}
        status, answer = self.w.admin_request(
            "POST", f"/api/v1/namespaces/default/pods/{node}/eviction", body)
        f.note = f"eviction {status}"

    def _gpu_unschedulable(self, f, _):
        """Someone else's pods take every free GPU, and a job asks for a powered-down
        GPU node: its pod cannot be scheduled (Insufficient nvidia.com/gpu) until they
        go."""
        used = {}
        for node, terminating, host in self.monitor.pods.values():
            if node in GPU_NODES and host and not terminating:
                used[host] = used.get(host, 0) + GPUS_PER_POD
        names = []
        for k8s_node in self.w.k8s_nodes:
            free = GPUS_PER_NODE - used.get(k8s_node, 0)
            if free <= 0:
                continue
            name = f"gpu-hog-{k8s_node}-{int(now() * 1000) % 100000}"
            # A busybox the nodes have (no registry can be reached).
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"nodeSelector": {"kubernetes.io/hostname": k8s_node},
                             "terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "hog", "image": BUSYBOX_IMAGE,
                                             "imagePullPolicy": "Never",
                                             "command": ["sleep", "3600"],
                                             "resources": {"limits": {
                                                 "nvidia.com/gpu": free}}}]}}
            status, _ = self.w.admin_request("POST", "/api/v1/namespaces/default/pods", body)
            if status == 201:
                names.append(name)

        def undo():
            for name in names:
                self.w.admin_request("DELETE", f"/api/v1/namespaces/default/pods/{name}"
                                     "?gracePeriodSeconds=0")
        f.undo = undo
        target = self.powered_down_gpu_node()
        f.target = target or "-"
        f.note = f"{len(names)} pods hold the GPUs"
        if target:  # a job that needs a new GPU pod now
            self.monitor.schedule.submit_now(JobSpec(0, 1, 3, True, True, where=target))

    def _image_pull_error(self, f, _):
        """The worker image is gone from every Kubernetes node's containerd and its
        registry is out of reach (no node has a route off the machine): the kubelets'
        pulls fail (ErrImagePull, ImagePullBackOff), and a job asks for a powered-down
        node: its new pod cannot start until the image is back (imported again, as a
        pull that works again would bring it)."""
        for k8s_node in self.w.k8s_nodes:
            self.w.cluster.remove_worker_image(k8s_node)

        def undo():
            for k8s_node in self.w.k8s_nodes:
                self.w.cluster.import_worker_image(k8s_node)
        f.undo = undo
        target = self.powered_down_node(NODE_NAMES)
        f.target = target or "-"
        f.note = "the worker image removed from every node's containerd"
        if target:  # a job that needs a new pod now
            self.monitor.schedule.submit_now(JobSpec(0, 1, 3, True, target in GPU_NODES,
                                                     where=target))

    def powered_down_gpu_node(self):
        return self.powered_down_node(GPU_NODES)

    def powered_down_node(self, names):
        deadline = now() + 60  # an idle one powers down after SuspendTime
        while now() < deadline:
            for name in names:
                if flags(self.monitor.nodes.get(name, {}).get("State", "")) >= {
                        "IDLE", "POWERED_DOWN"}:
                    return name
            time.sleep(0.5)
        return None

    # ---- node faults
    def _k8s_node_of(self, f, node):
        pod = self.w.pod_of(node)
        host = pod["spec"].get("nodeName") if pod else None
        f.target = host or ""
        if host:
            self.monitor.expect_host_loss(host)
            for n in self.monitor.slurm_nodes_on(host):
                self.monitor.expect_pod_loss(n)
        return host

    def _kubelet_stop(self, f, node):
        # The node's kubelet stops (its containers run on); after the node
        # controller's grace period (50 s) the node is Unknown and tainted
        # unreachable: k8sbridge-sync fails its Slurm nodes and SuspendProgram's
        # deletes leave their pods Terminating there. Started again, the kubelet
        # stops those pods' containers.
        host = self._k8s_node_of(f, node)
        if host:
            self.w.cluster.stop_kubelet(host)
            f.undo = lambda: self.w.cluster.start_kubelet(host)

    def _k8s_cordon(self, f, node):
        host = self._k8s_node_of(f, node)
        if host:
            self.w.kubectl("cordon", host)
            f.undo = lambda: self.w.kubectl("uncordon", host)

    def _kubectl_drain(self, f, node):
        host = self._k8s_node_of(f, node)
        if host:
            self.w.kubectl("drain", host, "--ignore-daemonsets", "--force",
                           "--delete-emptydir-data", "--timeout=60s")
            f.undo = lambda: self.w.kubectl("uncordon", host)

    # ---- control plane
    def _sync_leader_kill(self, f, _):
        leader = self.w.leader()
        if leader is None:
            f.note = "no leader at the time"
            return
        f.target = f"k8sbridge-sync {leader}"
        self.w.daemons[leader].stop(signal.SIGKILL)
        self.w.start_daemon(leader)  # as its pod would be restarted

    def _slurmctld_restart(self, f, _):
        # SIGTERM is a controller pod's restart (it saves its state); SIGKILL, a crash,
        # only where the plan asks for it: a node that registered after the last save
        # comes back POWERING_UP and k8sbridge-sync fails it after SyncRegistrationGrace
        # (its jobs requeue and its pod goes: the crash is aimed at every node).
        sig = self.rng.choice([signal.SIGTERM, signal.SIGKILL]) if self.plan_kill \
            else signal.SIGTERM
        if sig == signal.SIGKILL:
            self.monitor.expect_every_pod_lost()
        with self.w.slurmctld_lock:
            self.w.rig.restart_slurmctld(sig)
        f.target = "slurmctld"
        f.note = signal.Signals(sig).name

    # ---- accounting
    def _slurmdbd_kill(self, f, _):
        # A crash; started again when cleared, as its pod would be.
        self.w.accounting.stop_slurmdbd(signal.SIGKILL)
        f.target = "slurmdbd"
        f.undo = self.w.accounting.start_slurmdbd

    def _db_restart(self, f, _):
        # A clean shutdown (SIGTERM), started again on its datadir when cleared.
        self.w.accounting.stop_database()
        f.target = "mariadbd"
        f.undo = self.w.accounting.start_database

    def _db_unreachable(self, f, _):
        # The database host hangs (SIGSTOP): its port accepts, nothing answers.
        self.w.accounting.freeze_database()
        f.target = "mariadbd"
        f.undo = self.w.accounting.thaw_database

    # ---- admin actions
    def _admin(self, f, node, state):
        self.admin_count += 1
        reason = f"chaos admin {state} {self.admin_count}"
        f.target = node
        if state == "down":
            self.monitor.expect_pod_loss(node)  # Slurm requeues its jobs; the pod stays
        self.w.rig.check_output(["scontrol", "update", f"nodename={node}", f"state={state}",
                                 f"reason={reason}"])
        self.monitor.admin_reasons[node] = (reason, now())  # checked from the next read

        def undo():
            self.monitor.admin_reasons.pop(node, None)
            self.w.rig.check_output(["scontrol", "update", f"nodename={node}",
                                     "state=resume"])
        f.undo = undo

    def _admin_drain(self, f, _):
        candidates = [n.name for n in NODES if n.name not in self.monitor.admin_reasons]
        self._admin(f, self.rng.choice(candidates), "drain")

    def _admin_down(self, f, node):
        self._admin(f, node, "down")


# ---- the monitor -------------------------------------------------------------------

OUT_OF_SERVICE = {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING"}


def flags(state: str) -> set:
    """scontrol's State, e.g. IDLE+CLOUD+POWERED_DOWN, as its words (POWERED_DOWN is
    not DOWN). NOT_RESPONDING counts on a powered-down node too: Slurm's RESUME of a
    DOWN node leaves it so (node_mgr.c _require_node_reg), and a restarted slurmctld
    never makes such a node available (read_config.c): a job that needs it waits for
    ever (k8sbridge-sync powers it down again, docs/sync.md)."""
    return set(state.split("+"))
FINAL_JOB_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                    "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def at_rest(state: str) -> bool:
    """IDLE, powered up or down, and not on the way between."""
    f = flags(state)
    return "IDLE" in f and not f & (OUT_OF_SERVICE | {"POWERING_UP", "POWERING_DOWN",
                                                      "POWER_DOWN"})


class Monitor:
    """Samples the world every half second and counts each invariant's violations
    (self.violations: invariant -> list of what was seen)."""

    def __init__(self, world: World):
        self.w = world
        self.schedule = None  # set by the Driver
        self.violations = {name: [] for name in INVARIANTS}
        self.admin_reasons = {}  # Slurm node -> the reason the driver's admin set
        self.expected_loss = {}  # Slurm node -> when a fault was aimed at its pod
        # Kubernetes node -> when a node fault hit it: every pod there may go, also
        # one bound after the last sample the fault's aim was taken from.
        self.expected_host_loss = {}
        self.faults_active = 0  # faults injected and not cleared
        self.api_faulty = False  # an API fault is on
        self.jobs = {}  # job id -> last state seen
        self.job_nodes = {}  # job id -> its nodes while RUNNING
        self.nodes = {}
        self.pods = {}  # uid -> (Slurm node, terminating, Kubernetes node)
        self.orphan_age = {}  # uid -> seconds of a working API it has been an orphan
        self.stuck_age = {}  # Slurm node -> calm seconds out of service
        self.stuck = set()  # nodes counted as stuck, until they come back
        self.samples = 0
        self._expand = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=60)

    def violate(self, invariant, what):
        with self._lock:
            self.violations[invariant].append(f"{time.strftime('%H:%M:%S')} {what}")
        print(f"chaos: VIOLATION {invariant}: {what}", flush=True)

    # ---- what the injector asks
    def expect_pod_loss(self, node):
        self.expected_loss[node] = now()

    def expect_every_pod_lost(self):
        """A slurmctld that dies without saving (SIGKILL, a crash) comes back with the
        nodes that registered since its last save POWERING_UP, and k8sbridge-sync fails
        them after SyncRegistrationGrace: any pod may go."""
        for spec in NODES:
            self.expect_pod_loss(spec.name)

    def expect_host_loss(self, host):
        self.expected_host_loss[host] = now()

    def running_nodes(self) -> set:
        with self._lock:
            return {n for nodes in self.job_nodes.values() for n in nodes}

    def slurm_nodes_on(self, host) -> list:
        with self._lock:
            return [node for node, _, h in self.pods.values() if h == host]

    # ---- sampling
    def _loop(self):
        last = now()
        while not self._stop.wait(0.5):
            t = now()
            try:
                self.sample(t - last)
            except Exception as e:  # noqa: BLE001 - a sample lost to a fault is skipped
                print(f"chaos: sample skipped: {e}", flush=True)
            last = t

    def hostnames(self, hostlist):
        if hostlist not in self._expand:
            self._expand[hostlist] = expand(self.w.rig, hostlist)
        return self._expand[hostlist]

    def read_jobs(self):
        out = self.w.rig.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%N"], timeout=20)
        if out.returncode != 0:
            return None
        jobs = {}
        for line in out.stdout.splitlines():
            job_id, state, nodelist = line.split("|")
            jobs[int(job_id)] = (state, nodelist)
        return jobs

    def sample(self, dt):
        read_at = now()
        try:
            nodes = self.w.rig.nodes()
        except Exception:  # noqa: BLE001 - slurmctld restarting
            return
        jobs = self.read_jobs()
        pods = self.w.pods()
        leaders = [i for i, d in self.w.daemons.items()
                   if d.proc.poll() is None and d.metric("k8sbridge_sync_leader") == 1]
        if len(leaders) > 1:
            self.violate("two daemons leading at once", f"{leaders}")
        self.check_admin_reasons(nodes, read_at)
        if jobs is not None:
            running = {}
            for job_id, (state, nodelist) in jobs.items():
                self.jobs[job_id] = state
                if state == "RUNNING":
                    running[job_id] = self.hostnames(nodelist)
            previous_running = self.running_nodes()
            with self._lock:
                self.job_nodes = running
        else:
            previous_running = self.running_nodes()
        if pods is not None:
            self.check_pods(pods, nodes, previous_running, dt)
        self.check_stuck(nodes, dt)
        self.nodes = nodes
        self.samples += 1

    def check_admin_reasons(self, nodes, read_at):
        for node, (reason, set_at) in list(self.admin_reasons.items()):
            n = nodes.get(node, {})
            state, have = n.get("State", ""), n.get("Reason", "")
            if node not in self.admin_reasons or set_at > read_at:
                continue  # resumed by the driver meanwhile, or set after this read
            if not have.startswith(reason) or not flags(state) & {"DRAIN", "DOWN"}:
                self.violate("admin reasons changed or cleared",
                             f"{node}: {state} reason {have!r}, the admin set {reason!r}")
                self.admin_reasons.pop(node, None)  # count it once

    def check_pods(self, pods, nodes, previous_running, dt):
        live = {}
        seen = {}
        for p in pods:
            node = p["metadata"]["labels"].get("k8sbridge.io/node", "")
            terminating = bool(p["metadata"].get("deletionTimestamp"))
            seen[p["metadata"]["uid"]] = (node, terminating, p["spec"].get("nodeName"))
            if not terminating:
                live.setdefault(node, []).append(p["metadata"]["name"])
        for node, names in live.items():
            if len(names) > 1:
                self.violate("Slurm nodes with two live pods", f"{node}: {names}")
        for uid, (node, terminating, host) in self.pods.items():
            # Going is counted once: when it starts terminating, or when it vanishes
            # without having been seen terminating.
            gone = (uid not in seen and not terminating) or \
                (uid in seen and seen[uid][1] and not terminating)
            expected = now() - max(self.expected_loss.get(node, -1e9),
                                   self.expected_host_loss.get(host, -1e9)) < 180
            if gone and node in previous_running and not expected:
                self.violate("pods deleted under a running job without a fault",
                             f"pod of {node} (uid {uid})")
        with self._lock:
            self.pods = seen
        # A pod gone is no orphan any more (left here, healthy() would stay false, and
        # every later fault would wait its whole recovery_wait).
        for uid in [u for u in self.orphan_age if u not in seen]:
            del self.orphan_age[uid]
        for uid, (node, terminating, _) in seen.items():
            state = nodes.get(node, {}).get("State", "")
            orphan = not terminating and (
                node not in nodes or flags(state) & {"POWERED_DOWN", "POWERING_UP"} == {
                    "POWERED_DOWN"})
            if not orphan:
                self.orphan_age.pop(uid, None)
                continue
            if not self.api_faulty:
                self.orphan_age[uid] = self.orphan_age.get(uid, 0) + dt
            age = self.orphan_age.get(uid, 0)  # none yet when first seen in an API fault
            if age > ORPHAN_BOUND and age - dt <= ORPHAN_BOUND:
                self.violate("orphan pods past the grace", f"pod of {node} ({state})")

    def check_stuck(self, nodes, dt):
        calm = self.faults_active == 0
        for name, n in nodes.items():
            state = n.get("State", "")
            out = bool(flags(state) & (OUT_OF_SERVICE | {"POWERING_UP"})) and \
                name not in self.admin_reasons
            if not out:
                self.stuck_age.pop(name, None)
                self.stuck.discard(name)
                continue
            if calm:
                self.stuck_age[name] = self.stuck_age.get(name, 0) + dt
            age = self.stuck_age.get(name, 0)
            if age > STUCK_BOUND and age - dt <= STUCK_BOUND:
                self.violate("nodes stuck out of service",
                             f"{name}: {state} reason {n.get('Reason', '')!r}")
                self.stuck.add(name)  # counted: later recoveries do not wait for it

    def healthy(self) -> bool:
        """No node out of service but by an admin, no orphan pod."""
        for name, n in self.nodes.items():
            state = n.get("State", "")
            if name not in self.admin_reasons and name not in self.stuck and \
                    flags(state) & OUT_OF_SERVICE:
                return False
        return not self.orphan_age


# ---- the schedule and the driver ---------------------------------------------------

@dataclass
class Plan:
    seed: int = 1
    jobs: int = 24
    window: float = 150.0  # seconds over which jobs arrive and faults are injected
    long_faults: bool = False  # the long run's fault durations (a 60 s outage)
    repeat: int = 1  # times each fault kind is injected
    max_nodes: int = 8
    settle: float = 300.0  # the most the end may wait for jobs and rest
    # The most the next fault waits for the world to recover from the last one
    # (whether a node recovers at all is the stuck-node invariant's, over STUCK_BOUND).
    recovery_wait: float = 45.0
    kinds: tuple = tuple(FAULTS)  # the fault kinds injected (all of FAULTS by default)
    ctld_sigkill: bool = False  # slurmctld-restart also by SIGKILL (a crash)


class Schedule:
    """The seeded jobs and faults of a Plan."""

    def __init__(self, plan: Plan, world: World):
        self.plan = plan
        self.w = world
        rng = random.Random(plan.seed)
        self.rng = rng
        self.jobs = []
        for _ in range(plan.jobs):
            gpu = rng.random() < 0.2
            size = rng.randint(1, 2 if gpu else plan.max_nodes)
            short = rng.random() < 0.7
            self.jobs.append(JobSpec(rng.uniform(0, plan.window), size,
                                     rng.randint(2, 6) if short else rng.randint(20, 45),
                                     rng.random() < 0.5, gpu))
        self.jobs.sort(key=lambda j: j.at)
        kinds = [k for k in plan.kinds for _ in range(plan.repeat)]
        rng.shuffle(kinds)
        step = plan.window / (len(kinds) + 1)
        self.faults = [Fault(k, step * (i + 1), FAULTS[k][1][1 if plan.long_faults else 0])
                       for i, k in enumerate(kinds)]
        self.submitted = {}  # job id -> JobSpec
        self.lost = []  # IDs given twice: the first job was lost
        self._lock = threading.Lock()

    def submit_now(self, spec: JobSpec):
        args = [f"-N{spec.nodes}", "-t", "15", "-o", str(self.w.jobdir / "%j.out")]
        if spec.requeue:  # the others are requeued by Slurm's default JobRequeue=1
            args.append("--requeue")
        if spec.gpu:
            args += ["-C", "gpu"]
        if spec.where:
            args += ["-w", spec.where]
        for _ in range(60):  # slurmctld may be restarting
            try:
                job = self.w.rig.sbatch(JOB_SCRIPT.format(dir=self.w.jobdir,
                                                          seconds=spec.seconds), args)
                break
            except Exception:  # noqa: BLE001
                time.sleep(1)
        else:
            raise RuntimeError("sbatch failed for a minute")
        with self._lock:
            if job in self.submitted:
                # slurmctld accepted the earlier job and lost it (a crash before its
                # state was saved), then gave its ID to this one.
                self.lost.append(job)
            self.submitted[job] = spec
        return job


def percentile(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


class Driver:
    def __init__(self, world: World, plan: Plan):
        self.w = world
        self.plan = plan
        self.schedule = Schedule(plan, world)
        self.monitor = Monitor(world)
        self.monitor.schedule = self.schedule
        world.on_slurmctld_crash = self.monitor.expect_every_pod_lost
        self.injector = Injector(world, self.monitor, random.Random(plan.seed + 1),
                                 plan.ctld_sigkill)
        self.done_faults = []
        self.skipped = []
        self.stopping = False

    def run(self) -> dict:
        start = now()
        self.monitor.start()
        faults = threading.Thread(target=self.inject_all, args=(start,), daemon=True)
        try:
            faults.start()
            for spec in self.schedule.jobs:  # jobs keep coming while a fault lasts
                time.sleep(max(0.0, start + spec.at - now()))
                self.schedule.submit_now(spec)
            self.keep_jobs_coming(faults)
            faults.join()
            self.finish()
        finally:
            self.stopping = True
            faults.join(timeout=120)
            self.monitor.stop()
        return self.report(now() - start)

    def keep_jobs_coming(self, faults: threading.Thread):
        """Once the stream's jobs are all in and faults are still due (each waits for
        the last one to recover, so they can outlast the window), more jobs keep
        work in progress: a fault aimed at a running job's node finds one at once
        instead of starting a job of its own and waiting for it."""
        rng = random.Random(self.plan.seed + 2)
        while faults.is_alive():
            states = self.monitor.jobs
            active = [j for j in self.schedule.submitted
                      if states.get(j) not in FINAL_JOB_STATES]
            if len(active) < 2:
                self.schedule.submit_now(JobSpec(0, rng.randint(1, 4), rng.randint(20, 45),
                                                 rng.random() < 0.5, False))
            faults.join(timeout=2)

    def inject_all(self, start):
        """The faults, one at a time, each at its time or when the last one ended."""
        for f in self.schedule.faults:
            time.sleep(max(0.0, start + f.at - now()))
            if self.stopping:
                return
            try:
                self.one_fault(f)
            except Exception as e:  # noqa: BLE001 - reported, and the run goes on
                self.skipped.append(f.kind)
                print(f"chaos: {f.kind} failed: {e}", flush=True)

    def one_fault(self, f: Fault):
        if not self.injector.inject(f):
            self.skipped.append(f.kind)
            return
        print(f"chaos: {f.kind} on {f.target or '-'} for {f.hold:.0f} s {f.note}", flush=True)
        said = f.note
        self.monitor.faults_active += 1
        self.monitor.api_faulty = f.kind.startswith(("api-", "watch-"))
        try:
            time.sleep(f.hold)
        finally:
            self.injector.clear(f)
            self.monitor.faults_active -= 1
            self.monitor.api_faulty = False
        if f.note != said:  # what the fault did, known once it is cleared
            print(f"chaos: {f.kind} cleared: {f.note}", flush=True)
        self.done_faults.append(f)
        # Recovery: the first sample at rest, at least 3 s after the fault (its
        # effects take a poll or two to show).
        deadline = now() + self.plan.recovery_wait
        earliest = max(f.cleared, f.started + 3)
        while now() < deadline and not self.stopping:
            if now() >= earliest and self.monitor.healthy():
                f.recovered = now()
                break
            time.sleep(0.25)

    def finish(self):
        """Waits for every job to end and the world to be at rest."""
        def jobs_done():
            states = self.monitor.jobs
            return all(states.get(j) in FINAL_JOB_STATES for j in self.schedule.submitted)
        deadline = now() + self.plan.settle
        while now() < deadline and not jobs_done():
            time.sleep(1)
        while now() < deadline and not self.at_rest():
            time.sleep(1)

    def at_rest(self) -> bool:
        """Every node IDLE (powered down or up), no pod of ours on a powered-down node."""
        nodes = self.monitor.nodes
        if not nodes or not self.monitor.healthy():
            return False
        for name, n in nodes.items():
            if not at_rest(n.get("State", "")):
                return False
        pods = self.w.pods() or []
        return not any("POWERED_DOWN" in flags(nodes.get(p["metadata"]["labels"].get(
            "k8sbridge.io/node"), {}).get("State", "")) for p in pods)

    def final_checks(self):
        m = self.monitor
        for job_id, spec in sorted(self.schedule.submitted.items()):
            state = m.jobs.get(job_id)
            if state != "COMPLETED":
                m.violate("jobs not completed", f"job {job_id} ({spec.nodes} nodes): {state}")
        for job_id in self.schedule.lost:
            m.violate("jobs not completed", f"job {job_id}: an earlier job of this ID, "
                      "accepted by sbatch, was lost")
        double = self.w.jobdir / "double"
        if double.exists():
            for line in double.read_text().split("\n"):
                if line:
                    m.violate("jobs run twice at once", line)
        if not self.at_rest():
            for name, n in m.nodes.items():
                state = n.get("State", "")
                if not at_rest(state):
                    m.violate("nodes stuck out of service",
                              f"at the end {name}: {state} {n.get('Reason', '')!r}")
        for identity, d in self.w.daemons.items():
            for line in unleased_actions(d.log()):
                m.violate("actions without the lease", f"{identity}: {line}")
        self.check_accounting()

    def check_accounting(self):
        """Every job Slurm ended is in sacct with the state Slurm gave it, once the
        records queued during the accounting faults have been sent."""
        ended = {j: self.monitor.jobs.get(j) for j in self.schedule.submitted
                 if self.monitor.jobs.get(j) in FINAL_JOB_STATES}
        listed = {}

        def all_listed():
            out = self.w.rig.run(["sacct", "-a", "-X", "-n", "-P", "-S", "2000-01-01",
                                  "--format=JobID,State"], timeout=60).stdout
            listed.clear()
            listed.update(line.split("|", 1) for line in out.splitlines() if "|" in line)
            return all(listed.get(str(j)) == state for j, state in ended.items())
        try:
            wait_for(all_listed, ACCOUNTING_BOUND, "sacct to list every job", interval=2)
        except RigError:  # what is missing is the violation
            for job_id, state in sorted(ended.items()):
                if listed.get(str(job_id)) != state:
                    self.monitor.violate("jobs missing from accounting",
                                         f"job {job_id} ({state}): sacct has "
                                         f"{listed.get(str(job_id))}")

    def report(self, seconds) -> dict:
        self.final_checks()
        m = self.monitor
        restarts = 0
        runs = self.w.jobdir / "runs"
        if runs.exists():
            restarts = sum(1 for line in runs.read_text().splitlines()
                           if line.split()[1] != "0")
        kinds = {}
        for f in self.done_faults:
            k = kinds.setdefault(f.kind, {"count": 0, "recovery": [], "unrecovered": 0})
            k["count"] += 1
            if f.recovered:
                k["recovery"].append(f.recovered - max(f.cleared, f.started))
            else:
                k["unrecovered"] += 1
        for k in kinds.values():
            k["p50"] = percentile(k["recovery"], 50)
            k["p99"] = percentile(k["recovery"], 99)
        return {"seed": self.plan.seed, "seconds": round(seconds),
                "jobs": len(self.schedule.submitted), "reruns": restarts,
                "samples": m.samples, "faults": kinds, "skipped": self.skipped,
                "control_plane_restarts": dict(self.w.control_plane_restarts),
                "violations": {k: len(v) for k, v in m.violations.items()},
                "details": {k: v[:10] for k, v in m.violations.items() if v}}


def unleased_actions(log: str) -> list:
    """Lines of a k8sbridge-sync log (one file over restarts, each start marked by
    World.start_daemon) where it acted while it did not hold the Lease."""
    leading = False
    bad = []
    for line in log.splitlines():
        if line.startswith("=== chaos: start"):
            leading = False
        elif "leading: holding Lease" in line:
            leading = True
        elif "no longer leading" in line:
            leading = False
        elif re.search(r": (info|warning): sync: ", line) and not leading:
            bad.append(line)
    return bad


def format_report(r: dict) -> str:
    lines = [f"chaos: seed {r['seed']}, {r['seconds']} s, {r['jobs']} jobs "
             f"({r['reruns']} reruns after requeue), {r['samples']} samples"]
    lines.append(f"{'fault':<20} {'count':>5} {'recovery p50':>13} {'p99':>8} "
                 f"{'not in the wait':>16}")
    for kind, k in sorted(r["faults"].items()):
        p50 = f"{k['p50']:.1f} s" if k["p50"] is not None else "-"
        p99 = f"{k['p99']:.1f} s" if k["p99"] is not None else "-"
        lines.append(f"{kind:<20} {k['count']:>5} {p50:>13} {p99:>8} {k['unrecovered']:>16}")
    if r["skipped"]:
        lines.append(f"not injected (no running job's node in 90 s, or failed): "
                     f"{r['skipped']}")
    if r.get("control_plane_restarts"):
        lines.append(f"control-plane components that exited and were started again: "
                     f"{r['control_plane_restarts']}")
    lines.append("invariant violations:")
    for name, count in r["violations"].items():
        lines.append(f"  {count:>4}  {name}")
    for name, details in r["details"].items():
        lines.append(f"{name}:")
        lines += [f"    {d}" for d in details]
    return "\n".join(lines)


def run(plan: Plan, log_root=None) -> dict:
    """One chaos run; returns the report (also printed)."""
    with World(log_root=log_root) as world:
        report = Driver(world, plan).run()
        print(format_report(report), flush=True)
        report["world"] = world.cluster.describe() if any(report["violations"].values()) else ""
        return report
