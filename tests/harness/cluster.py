"""A rig beside a Kubernetes, and who plays the kubelet there.

The kubelet is one choice, `kubelet=`:

- None: a real cluster (harness.kube.KubeCluster) whose nodes are kwok's fake nodes:
  kwok reports their pods Running, and nothing runs in them (no slurmd starts);
- "test": the same cluster, and the test plays the kubelet of the rig's nodes
  (TestKubelet): a node's slurmd starts in the rig, in the node's own namespaces, once
  its pod is bound to a fake node, and stops when the pod goes;
- "kubesim": kubesim (the stand-in) with its kubelet runs the pods, k8sbridge-worker
  and real slurmd in them (PodCluster's default, until real kubelet nodes replace it).

PodCluster is the whole main job on one machine: the API server, scheduler and a
kubelet whose pods run slurmd, a real slurmctld from the rig whose power saving runs
k8sbridge-power, and munge.

Used by the end-to-end tests and by the README's demo (scripts/demo.sh). Nothing
here is a shortcut the bridge could depend on: the pods are rendered by
k8sbridge-power from a pod template, the worker checks the munge key and execs
slurmd, slurmd registers with its pod IP, and Slurm deletes the pods when idle.

Networking: the rig's bridge holds slurmctld's address. With kubesim's kubelet each
pod has its own network namespace on kubesim's bridge, routed through the host, so
pods reach slurmctld and one another, and the host's srun reaches the pods; with the
test's kubelet a pod's slurmd runs in its rig node's namespace on the rig's bridge.
No packet leaves the machine: pods get a resolv.conf without name servers.
"""

import base64
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path

from harness.kube import LEAF_LABEL, KubeCluster  # noqa: F401  (LEAF_LABEL: for importers)
from harness.paths import BUILD_ROOT, POWER, WORKER
from harness.rig import Rig, RigError, kill_and_wait, wait_for

GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
KUBELETS = (None, "test", "kubesim")
NO_KUBELET = "test.k8sbridge.io/no-kubelet"  # pods the test's kubelet leaves alone
# Worker pod template lines (append to PodCluster.template()): a pod on a lost node
# is evicted after 2 s, not the default 300 s, so whether or not the API server's
# taint manager evicts it meanwhile, the bridge must act the same.
SHORT_TOLERATIONS = """\
    tolerations:
    - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute,
       tolerationSeconds: 2}
    - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute,
       tolerationSeconds: 2}
"""
# The smallest worker pod template k8sbridge-power accepts, for tests whose pods no
# kubelet runs (or the test plays it): one slurmd container, a short grace.
WORKER_TEMPLATE = """\
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: slurmd
    image: registry.example/slurm-worker:24.11
"""


def power_program_lines(directory: Path, conf: Path, slurm_conf: Path, prolog=True) -> str:
    """Wrapper scripts in `directory`, as an admin writes them for a k8sbridge.conf
    that is not at the default path; returns slurm.conf's four program lines (the
    power programs and the PrologSlurmctld that starts a job once its nodes are up;
    prolog=False leaves it out, as bench/resume_bench.py's peer run does)."""
    lines = []
    programs = [("ResumeProgram", "resume"), ("SuspendProgram", "suspend"),
                ("ResumeFailProgram", "resume-fail"), ("PrologSlurmctld", "prolog")]
    for key, sub in programs if prolog else programs[:-1]:
        script = directory / f"{sub}.sh"
        hostlist = "" if sub == "prolog" else ' "$1"'  # slurmctld passes the prolog none
        script.write_text("#!/bin/sh\n"
                          f"export SLURM_CONF={slurm_conf}\n"
                          f"exec {POWER} --config {conf} {sub}{hostlist}\n")
        script.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        lines.append(f"{key}={script}")
    # As docs/power.md tells an admin: Slurm's default ResumeRate (300 nodes a minute)
    # would hand k8sbridge-power five nodes every two seconds.
    lines += ["ResumeRate=0", "SuspendRate=0"]
    return "\n".join(lines)


def report_running(sim, name: str, namespace: str = "default") -> None:
    """What a kubelet reports once pod `name`'s containers run: phase Running (for a
    KubeSim, which has no kwok to report it)."""
    sim.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                {"status": {"phase": "Running"}}, content_type="application/merge-patch+json")


def wait_for_default_service_account(kube: KubeCluster, namespace: str) -> None:
    """Returns once `namespace` has its "default" ServiceAccount: the controller-manager
    makes it, and the API server refuses a pod that names no ServiceAccount until then
    (k8sbridge-power's worker pods name none unless their template does)."""
    wait_for(lambda: kube.request(
        "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] == 200, 60,
        f"the default ServiceAccount of namespace {namespace}")


def kill_pod_processes(rig: Rig, name: str) -> None:
    """What the end of a pod does to its processes: every one in the node's
    network namespace is killed, slurmd and also the slurmstepds and job processes
    that outlive a stopped slurmd (else a fresh pod's slurmd would find the old
    job "already running")."""
    try:
        netns = os.stat(rig.netns_path(name))
    except OSError:
        return
    pids = []
    for entry in os.listdir("/proc"):
        try:
            ns = os.stat(f"/proc/{entry}/ns/net") if entry.isdigit() else None
        except OSError:
            continue
        if ns and (ns.st_dev, ns.st_ino) == (netns.st_dev, netns.st_ino):
            pids.append(int(entry))
    kill_and_wait(pids)


class TestKubelet:
    """kubelet="test": the test plays the kubelet of the rig's nodes. A thread looks
    at the pods of `names` (the rig's nodes) every `interval` seconds: once a node's
    pod is bound it starts the node's slurmd in the rig, with what the downward API
    would set (K8SBRIDGE_HOST_NODE, K8SBRIDGE_NODE_NAME, and what `slurmd_env` holds
    for the node); when the pod is gone, terminating or replaced it stops slurmd and
    kills the pod's processes. On a KubeCluster the pods are bound to kwok's fake
    nodes, and kwok reports them Running and removes them once deleted; on a KubeSim
    (no kwok) this kubelet reports them Running itself. API errors change nothing (a
    kubelet keeps running its pods when the API server is away); pods annotated
    NO_KUBELET are left alone. Ends with stop(), or when the rig stops."""

    __test__ = False  # not a test case

    def __init__(self, sim, rig: Rig, names=None, interval: float = 0.2,
                 namespace: str = "default"):
        self.sim = sim  # the API server: a KubeCluster (or a KubeSim)
        self.reports_running = not isinstance(sim, KubeCluster)
        self.rig = rig
        self.namespace = namespace  # k8sbridge.conf's Namespace=, where the pods are
        self.names = tuple(names) if names is not None else None
        self.interval = interval
        self.slurmd_env = {}  # Slurm node -> more environment for its next start
        self.started = {}  # Slurm node -> uid of the pod its slurmd runs for
        self._stop = threading.Event()
        self._thread = None

    def start(self) -> "TestKubelet":
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)

    def __enter__(self) -> "TestKubelet":
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _loop(self) -> None:
        while not self._stop.is_set() and not self.rig.stopped:
            for name in self.names or tuple(self.rig.workers):
                try:
                    self.sync_pod(name)
                except Exception as e:  # keep playing the kubelet; the test reports
                    print(f"test kubelet, pod {name}: {e}", file=sys.stderr)
            self._stop.wait(self.interval)

    def sync_pod(self, name: str) -> None:
        """One look at the pod of Slurm node `name`."""
        try:
            status, _, pod = self.sim.request(
                "GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        except OSError:
            return
        if status not in (200, 404):
            return
        pod = pod if status == 200 else None
        host = pod["spec"].get("nodeName") if pod else None
        alive = bool(host and not pod["metadata"].get("deletionTimestamp") and
                     NO_KUBELET not in pod["metadata"].get("annotations", {}))
        uid = pod["metadata"]["uid"] if pod else None
        if name in self.started and (not alive or self.started[name] != uid):
            self.rig.stop_slurmd(name)
            kill_pod_processes(self.rig, name)
            del self.started[name]
        if alive and name not in self.started:
            env = {"K8SBRIDGE_HOST_NODE": host, "K8SBRIDGE_NODE_NAME": name}
            env.update(self.slurmd_env.get(name, {}))
            self.rig.start_slurmd(name, env=env)
            self.started[name] = uid
        if alive and self.reports_running and \
                pod.get("status", {}).get("phase", "Pending") == "Pending":
            report_running(self.sim, name, self.namespace)


class PodCluster:
    """Use as a context manager. Node groups: a list of (name, hostlist, extra keys,
    template overrides) written to k8sbridge.conf; `nodes` are the Slurm NodeSpecs.
    `slurm_conf_extra` may be a function of the Rig (for lines naming its paths)."""

    def __init__(self, nodes, groups, *, fake_nodes=4, gpus_per_node=8, ib_leaves=2,
                 suspend_time=600, conf_extra="", slurm_conf_extra="", extra_templates=None,
                 log_root=None, kubelet="kubesim", retry_deadline=15, prolog=True):
        if kubelet not in KUBELETS:
            raise ValueError(f"kubelet must be one of {KUBELETS}, not {kubelet!r}")
        self.kubelet = kubelet
        self.test_kubelet = None  # the TestKubelet, with kubelet="test"
        self.nodes = nodes
        self.groups = groups
        self.fake_nodes = fake_nodes  # node-0..., kwok's (or kubesim's) fake nodes
        self.gpus_per_node = gpus_per_node
        self.ib_leaves = ib_leaves
        self.suspend_time = suspend_time
        self.retry_deadline = retry_deadline
        self.prolog = prolog  # k8sbridge-prolog as PrologSlurmctld
        self.conf_extra = conf_extra
        self.slurm_conf_extra = slurm_conf_extra
        self.extra_templates = extra_templates or {}
        self.log_root = log_root
        self.sim = None  # the API server: a KubeCluster, or a KubeSim with kubelet="kubesim"
        self.rig = None
        self.dir = None

    # ---- lifecycle ------------------------------------------------------------------

    def __enter__(self):
        for path in (POWER, WORKER):
            if not path.exists():
                raise RuntimeError(f"{path} is not built: meson compile -C {BUILD_ROOT}")
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _start(self):
        self.dir = Path(tempfile.mkdtemp(prefix="podcluster-"))
        self.dir.chmod(0o755)
        # With kubesim's kubelet the nodes are its pods, with no namespaces of the rig.
        self.rig = Rig(nodes=self.nodes, start_slurmd=False,
                       node_namespaces=self.kubelet != "kubesim", log_root=self.log_root)
        if self.kubelet == "kubesim":
            from harness.kubesim import KubeSim  # the stand-in's kubelet runs the pods
            # The kubelet's bridge and pod network are the rig's own (its id, its slot).
            self.sim = KubeSim("--kubelet", "--bridge", f"kspc{self.rig.id}",
                               "--pod-network", str(self.rig.pod_network),
                               "--kubelet-state-dir", str(self.dir / "kubelet"),
                               "--fake-nodes", str(self.fake_nodes), "--gpus-per-node",
                               str(self.gpus_per_node), "--gpu-product", GPU_PRODUCT,
                               "--ib-leaves", str(self.ib_leaves), scheduler=True)
        else:
            # kwok plays the Kubernetes nodes; the rig's slurmd are the test's to run.
            self.sim = KubeCluster(nodes=self.fake_nodes, gpus_per_node=self.gpus_per_node,
                                   gpu_product=GPU_PRODUCT, ib_leaves=self.ib_leaves)
        # The deployment's RBAC: k8sbridge-power runs as its controller ServiceAccount
        # and the workers' pods name theirs (conf-templates/worker-pod.yaml).
        self.sim.apply_deploy_rbac("default")
        # Its token in a file, as the controller pod's projected token (the chaos
        # suite rotates it).
        self.controller_kubeconfig = self.sim.service_account_kubeconfig(
            "default", "k8sbridge-controller", expiration_seconds=24 * 3600, token_file=True)
        extra = self.slurm_conf_extra
        self.rig.config.slurm_conf_extra = (self._power_programs() + "\n" +
                                            (extra(self.rig) if callable(extra) else extra))
        self._write_k8sbridge_conf()
        self.rig.start()
        self.create_munge_secret("munge-key", self.rig.munge_key.read_bytes())
        if isinstance(self.sim, KubeCluster):
            # The ServiceAccount admission gives pods without serviceAccountName the
            # namespace's "default", which the controller-manager makes.
            wait_for_default_service_account(self.sim, "default")
        if self.kubelet == "test":
            self.test_kubelet = TestKubelet(self.sim, self.rig).start()

    def close(self):
        # Pods first (their slurmd talk to slurmctld), then Slurm.
        if self.test_kubelet is not None:
            self.test_kubelet.stop()
        if self.sim is not None:
            self.sim.close()
        if self.rig is not None:
            self.rig.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- configuration --------------------------------------------------------------

    def _power_programs(self) -> str:
        return "\n".join([power_program_lines(self.dir, self.conf_path, self.rig.slurm_conf,
                                               self.prolog),
                          f"SuspendTime={self.suspend_time}", "SuspendTimeout=10",
                          "ResumeTimeout=300", "ReconfigFlags=KeepPowerSaveSettings"])

    @property
    def conf_path(self) -> Path:
        return self.dir / "k8sbridge.conf"

    @property
    def power_log(self) -> Path:
        return self.dir / "power.log"

    def template(self, secret="munge-key", container_extra="") -> str:
        """The worker pod template: the image's slurmd and k8sbridge-worker are the
        host's (kubesim's kubelet runs commands from the host's filesystem; the test's
        kubelet starts the rig's slurmd and only reads the pod's binding); the pod's own munged
        gets the key from a Secret and its socket in an emptyDir at the path slurm.conf
        names, the key's copy in an emptyDir of its own; /etc/hosts and resolv.conf are the rig's node files."""
        rig = self.rig
        return f"""\
kind: PodTemplate
template:
  metadata:
    labels: {{app.kubernetes.io/part-of: slurm}}
  spec:
    terminationGracePeriodSeconds: 5
    containers:
    - name: slurmd
      image: registry.example/slurm-worker:24.11.5
      env:
      - {{name: SLURM_CONF, value: "{rig.slurm_conf}"}}
      - {{name: K8SBRIDGE_SLURMD, value: "{rig.prefix}/sbin/slurmd"}}
      - {{name: K8SBRIDGE_MUNGED, value: /usr/sbin/munged}}
      - {{name: K8SBRIDGE_MUNGED_KEY, value: "{rig.workdir}/pod-munge-key/munge.key"}}
      - {{name: K8SBRIDGE_MUNGE_SOCKET, value: "{rig.munge_socket}"}}
      - {{name: K8SBRIDGE_MUNGED_DIR, value: "{rig.workdir}/pod-munged"}}
{container_extra}      volumeMounts:
      - {{name: munge-run, mountPath: "{rig.munge_socket.parent}"}}
      - {{name: munged-private, mountPath: "{rig.workdir}/pod-munged"}}
      - {{name: munge-key, mountPath: "{rig.workdir}/pod-munge-key", readOnly: true}}
      - {{name: hosts, mountPath: /etc/hosts, readOnly: true}}
      - {{name: resolv, mountPath: /etc/resolv.conf, readOnly: true}}
    volumes:
    - {{name: munge-run, emptyDir: {{}}}}
    - {{name: munged-private, emptyDir: {{}}}}
    - {{name: munge-key, secret: {{secretName: {secret}}}}}
    - {{name: hosts, hostPath: {{path: "{rig.node_hosts}", type: File}}}}
    - {{name: resolv, hostPath: {{path: "{rig.node_resolv}", type: File}}}}
"""

    def _write_k8sbridge_conf(self):
        # The rig writes node-hosts and node-resolv.conf when it starts; the
        # template only names them.
        self.rig.node_hosts = self.rig.workdir / "node-hosts"
        self.rig.node_resolv = self.rig.workdir / "node-resolv.conf"
        (self.dir / "worker.yaml").write_text(self.template())
        for name, text in self.extra_templates.items():
            (self.dir / name).write_text(text(self) if callable(text) else text)
        lines = ["ClusterName=rig", f"Kubeconfig={self.controller_kubeconfig}",
                 "Namespace=default",
                 f"WorkerCommand={WORKER}",
                 f"RetryDeadline={self.retry_deadline}", f"LogFile={self.power_log}",
                 self.conf_extra]
        for name, hostlist, extra in self.groups:
            template = "worker.yaml"
            if "PodTemplate=" in extra:
                template = ""
            lines.append(f"NodeGroup={name} Nodes={hostlist} "
                         + (f"PodTemplate={template} " if template else "") + extra)
        self.conf_path.write_text("\n".join(line for line in lines if line) + "\n")

    def create_munge_secret(self, name: str, key: bytes):
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                "type": "Opaque", "data": {"munge.key": base64.b64encode(key).decode()}}
        status, _, answer = self.sim.request("POST", "/api/v1/namespaces/default/secrets", body)
        if status != 201:
            raise RuntimeError(f"creating Secret {name}: {status} {answer}")

    # ---- state ----------------------------------------------------------------------

    def pod(self, name):
        status, _, body = self.sim.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        return body if status == 200 else None

    def k8s_node(self, name):
        status, _, body = self.sim.request("GET", f"/api/v1/nodes/{name}")
        return body if status == 200 else None

    def pod_log(self, pod) -> str:
        uid = pod["metadata"]["uid"]
        for path in (self.dir / "kubelet").glob(f"*/pods/{uid}/*.log"):
            return path.read_text(errors="replace")
        return "(no log)"

    def describe(self) -> str:
        """What a failing test prints: pods, Slurm nodes and the power log."""
        out = []
        status, _, pods = self.sim.request("GET", "/api/v1/namespaces/default/pods")
        for p in pods.get("items", []) if status == 200 else []:
            st = p.get("status", {})
            out.append(f"pod {p['metadata']['name']}: node={p['spec'].get('nodeName')} "
                       f"phase={st.get('phase')} ip={st.get('podIP')} "
                       f"conditions={json.dumps(st.get('conditions', []))[:300]} "
                       f"containers={json.dumps(st.get('containerStatuses', []))[:400]}")
        try:
            for name, n in self.rig.nodes().items():
                out.append(f"slurm node {name}: {n.get('State')} addr={n.get('NodeAddr')} "
                           f"reason={n.get('Reason')}")
        except Exception as e:  # noqa: BLE001 - this is diagnostics
            out.append(f"scontrol failed: {e}")
        log = self.power_log.read_text() if self.power_log.exists() else "(no power.log)"
        out.append("power.log:\n" + "\n".join(log.splitlines()[-30:]))
        return "\n".join(out)

    def wait(self, predicate, timeout, what):
        """wait_for, and on time-out an AssertionError that shows the cluster."""
        try:
            return wait_for(predicate, timeout, what)
        except RigError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_job(self, job_id, timeout=180):
        try:
            return self.rig.wait_job(job_id, timeout=timeout)
        except RigError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_powered_down(self, names, timeout=120):
        def down():
            nodes = self.rig.nodes()
            return all("POWERED_DOWN" in nodes[n]["State"] for n in names) and \
                all(self.pod(n) is None for n in names)
        self.wait(down, timeout, f"{names} to be POWERED_DOWN without pods")
