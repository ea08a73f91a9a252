"""A rig beside a Kubernetes, and who plays the kubelet there.

The kubelet is one choice, `kubelet=`:

- "real" (PodCluster's default): real Kubernetes nodes (harness.kubelet_node's
  RealCluster: the kubelet, containerd, runc, the CNI bridge and kube-proxy of each
  node in namespaces of its own) run the worker pods as containers, and in them
  k8sbridge-worker and real slurmd;
- None: a real cluster (harness.kube.KubeCluster) whose nodes are kwok's fake nodes:
  kwok reports their pods Running, and nothing runs in them (no slurmd starts);
- "test": the same cluster, and the test plays the kubelet of the rig's nodes
  (TestKubelet): a node's slurmd starts in the rig, in the node's own namespaces, once
  its pod is bound to a fake node, and stops when the pod goes.

PodCluster is the whole main job on one machine: the API server, scheduler and the
real kubelets whose pods run k8sbridge-worker and real slurmd, a real slurmctld from
the rig whose power saving runs k8sbridge-power, and munge.

Used by the end-to-end tests and by the README's demo (scripts/demo.sh). Nothing
here is a shortcut the bridge could depend on: the pods are rendered by
k8sbridge-power from a pod template, the worker checks the munge key and execs
slurmd, slurmd registers with its pod IP, and Slurm deletes the pods when idle.

The worker image (kubelet="real"): no registry can be reached, so PodCluster writes
a tiny image (WORKER_IMAGE, harness.oci_layout) whose root is a skeleton, empty
directories and the host's top-level links into /usr, and imports it into every
node's containerd. The pod template mounts what the container runs from the host:
/usr and /etc read-only, the Slurm prefix and k8sbridge's build read-only, and the
rig's directory (slurm.conf, the spool and log directories, the jobs' files). The
container is privileged, as the deployed worker is: k8sbridge-worker is its PID 1,
starts the pod's own munged and supervises slurmd. Its output is the container's
log, which the kubelet serves (`kubectl logs`, PodCluster.pod_log).

The Kubernetes nodes (kubelet="real"): `fake_nodes` real nodes real-0, real-1, ...
(at most four: a rig slot's pod network has room for four podCIDRs), labelled as
kwok's fake nodes are (GPU product and count, InfiniBand leaf and spine) and with
`gpus_per_node` nvidia.com/gpu in their capacity, advertised as the Kubernetes
documentation advertises an extended resource: a PATCH of the Node's status, after
which the kubelet itself adds it to the allocatable resources. A restarted kubelet
zeroes extended resources (as after a reboot), so start_kubelet() advertises them
again, as a device plugin would.

Networking (kubelet="real"): the rig's bridge holds slurmctld's address; the real
nodes sit on a bridge of their own (another slot's subnet), with the pods on each
node's CNI bridge. The pods keep their addresses off their node (no masquerade):
each node routes the rig's subnet to the host, and the host routes each node's
podCIDR to that node, so pods reach slurmctld and one another, and slurmctld and
the host's srun reach the pods. The host forwards nothing (its own addresses are
the only ones pods reach on it), no namespace has a default route, and the pods'
resolv.conf names no name server: no packet leaves the machine. With the test's
kubelet a pod's slurmd runs in its rig node's namespace on the rig's bridge.
"""

import base64
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

from harness import oci_layout
from harness.kube import (GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, LEAF_LABEL, SPINE_LABEL,
                          KubeCluster)
from harness.paths import BUILD_ROOT, POWER, SLURM_BUILD, WORKER
from harness.rig import Rig, RigError, host_path, kill_and_wait, wait_for

GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
GPU_RESOURCE = "nvidia.com/gpu"
KUBELETS = ("real", None, "test")
# The worker pods' image on real nodes: a skeleton root (see the module's docstring).
WORKER_IMAGE = "k8sbridge.invalid/worker-root:1"
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


def write_worker_image(directory: Path):
    """The worker pods' image (WORKER_IMAGE) as a docker-archive for `ctr images
    import`: one layer holding the root's top-level directories, empty (mount points
    for /usr, /etc, /proc, ...; /tmp world-writable) and the links that lead into /usr
    on the host (bin -> usr/bin, lib64 -> usr/lib64, ...), or in the root Slurm runs in
    (K8SBRIDGE_SLURM_ROOT). Returns a kubelet_node.NodeImage."""
    from harness.kubelet_node import NodeImage
    root = host_path(Path("/"))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def entry(name, kind, mode, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
            tar.addfile(info)
        for d in ("dev", "etc", "proc", "root", "run", "sys", "usr", "var"):
            entry(d, tarfile.DIRTYPE, 0o755)
        entry("tmp", tarfile.DIRTYPE, 0o1777)
        for top in sorted(root.iterdir()):
            if top.is_symlink() and os.readlink(top).startswith("usr/"):
                entry(top.name, tarfile.SYMTYPE, 0o777, os.readlink(top))
    directory.mkdir(parents=True, exist_ok=True)
    layout = directory / "worker-root"
    manifest = oci_layout.build_image(layout, "1", "k8sbridge-worker-root", {
        "Env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"], "Cmd": ["/bin/sh"]},
        layer=raw.getvalue())
    archive = directory / "worker-root.tar"
    subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", f"oci:{layout}:1",
                    f"docker-archive:{archive}:{WORKER_IMAGE}"], check=True,
                   capture_output=True, text=True)
    blob = layout / "blobs" / "sha256" / manifest.split(":", 1)[1]
    return NodeImage(WORKER_IMAGE, archive, json.loads(blob.read_text())["config"]["digest"])


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
    kills the pod's processes. The pods are bound to kwok's fake nodes, and kwok
    reports them Running and removes them once deleted. API errors change nothing (a
    kubelet keeps running its pods when the API server is away); pods annotated
    NO_KUBELET are left alone. Ends with stop(), or when the rig stops."""

    __test__ = False  # not a test case

    def __init__(self, sim, rig: Rig, names=None, interval: float = 0.2,
                 namespace: str = "default"):
        self.sim = sim  # the API server: a KubeCluster
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


class PodCluster:
    """Use as a context manager. Node groups: a list of (name, hostlist, extra keys,
    template overrides) written to k8sbridge.conf; `nodes` are the Slurm NodeSpecs.
    `slurm_conf_extra` may be a function of the Rig (for lines naming its paths).
    `fake_nodes`: how many Kubernetes nodes (real ones with kubelet="real", at most
    four), with `gpus_per_node` GPUs each, spread over `ib_leaves` leaves. `services`
    are the rig's (RigConfig.services: harness.accounting's slurmdbd)."""

    def __init__(self, nodes, groups, *, fake_nodes=4, gpus_per_node=8, ib_leaves=2,
                 suspend_time=600, conf_extra="", slurm_conf_extra="", extra_templates=None,
                 log_root=None, kubelet="real", retry_deadline=15, prolog=True, services=()):
        if kubelet not in KUBELETS:
            raise ValueError(f"kubelet must be one of {KUBELETS}, not {kubelet!r}")
        self.kubelet = kubelet
        self.test_kubelet = None  # the TestKubelet, with kubelet="test"
        self.real = None  # the RealCluster, with kubelet="real"
        self.nodes = nodes
        self.groups = groups
        self.fake_nodes = fake_nodes  # node-0..., kwok's fake nodes (or real-0... real ones)
        self.gpus_per_node = gpus_per_node
        self.ib_leaves = ib_leaves
        self._host_routes = []  # (podCIDR, via): the host's routes to the real nodes' pods
        self._closed = False
        self.suspend_time = suspend_time
        self.retry_deadline = retry_deadline
        self.prolog = prolog  # k8sbridge-prolog as PrologSlurmctld
        self.conf_extra = conf_extra
        self.slurm_conf_extra = slurm_conf_extra
        self.extra_templates = extra_templates or {}
        self.log_root = log_root
        self.services = list(services)
        self.sim = None  # the API server: a KubeCluster (the RealCluster's, with real nodes)
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
        # With real nodes the Slurm nodes are their pods, with no namespaces of the rig.
        self.rig = Rig(nodes=self.nodes, start_slurmd=False,
                       node_namespaces=self.kubelet != "real", log_root=self.log_root,
                       services=self.services)
        if self.kubelet == "real":
            self._start_real_nodes()
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
        for name in self.rig.workers if self.real is not None else ():
            # SlurmdSpoolDir (in the rig's directory, which the pods mount), as
            # Rig.start_slurmd makes it for a slurmd of its own.
            (self.rig.workdir / "spool" / name).mkdir(parents=True, exist_ok=True)
        self.create_munge_secret("munge-key", self.rig.munge_key.read_bytes())
        if self.kubelet == "test":
            self.test_kubelet = TestKubelet(self.sim, self.rig).start()

    def close(self):
        if self._closed:  # a test's finish() and its cleanup both close
            return
        self._closed = True
        # Pods first (their slurmd talk to slurmctld), then Slurm.
        if self.test_kubelet is not None:
            self.test_kubelet.stop()
        try:
            if self.real is not None:
                for cidr, via in self._host_routes:
                    subprocess.run(["ip", "route", "del", cidr, "via", via],
                                   capture_output=True)
                self.real.close()  # the API server too
            elif self.sim is not None:
                self.sim.close()
        finally:
            if self.rig is not None:
                self.rig.stop()
            if self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def rig_ids(self) -> list:
        """The ids of everything this cluster started, for rig.leftovers()."""
        return ([self.rig.id] if self.rig else []) + (self.real.rig_ids if self.real else [])

    # ---- real nodes (kubelet="real") -----------------------------------------------

    def _start_real_nodes(self):
        from harness.kubelet_node import (RealCluster,  # noqa: F401 - the tools it needs
                                          skip_unless_real_nodes_can_run)
        skip_unless_real_nodes_can_run()
        # The pods keep their addresses: slurmd registers with its pod IP, and a
        # slurmstepd calls back the srun that launched it at that srun's address.
        # The worker image goes onto every node, as a site without a registry loads it.
        self.worker_image = write_worker_image(self.dir / "image")
        self.real = RealCluster(nodes=self.fake_nodes, images=[self.worker_image],
                                masquerade=False)
        self.sim = self.real.kube
        network = self.real.network
        for node in self.real.nodes:
            # slurmctld's address (the rig's bridge) through the host; the host
            # reaches the node's pods through the node.
            subprocess.run(["ip", "-n", node.netns, "route", "replace", str(self.rig.subnet),
                            "via", network.address], check=True, capture_output=True)
            subprocess.run(["ip", "route", "replace", node.pod_cidr, "via", node.address],
                           check=True, capture_output=True)
            self._host_routes.append((node.pod_cidr, node.address))
        leaves = max(self.ib_leaves, 1)
        per_leaf = max((len(self.real.nodes) + leaves - 1) // leaves, 1)
        for i, node in enumerate(self.real.nodes):
            labels = {LEAF_LABEL: f"leaf-{i // per_leaf}", SPINE_LABEL: "spine-0"}
            if self.gpus_per_node > 0:
                labels.update({GPU_PRODUCT_LABEL: GPU_PRODUCT,
                               GPU_COUNT_LABEL: str(self.gpus_per_node)})
            self.sim.kubectl("label", "node", node.name, "--overwrite",
                             *(f"{k}={v}" for k, v in labels.items()))
            self.advertise_gpus(node.name)

    @property
    def k8s_nodes(self) -> list:
        """The Kubernetes nodes' names: the real nodes' (real-0, ...), else kwok's fake
        ones (node-0, ...)."""
        if self.real is not None:
            return [n.name for n in self.real.nodes]
        return [f"node-{i}" for i in range(self.fake_nodes)]

    def real_node(self, name):
        return next(n for n in self.real.nodes if n.name == name)

    def advertise_gpus(self, name):
        """Puts the node's GPUs (gpus_per_node nvidia.com/gpu) in its capacity, as the
        Kubernetes documentation advertises an extended resource (a JSON patch of the
        Node's status), and returns once the kubelet has kept it: it adds the resource
        to the node's allocatable resources itself, from the capacity."""
        if self.gpus_per_node <= 0:
            return
        count = str(self.gpus_per_node)
        status, _, body = self.sim.request(
            "PATCH", f"/api/v1/nodes/{name}/status",
            [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": count}],
            content_type="application/json-patch+json")
        if status != 200:
            raise RuntimeError(f"advertising {name}'s GPUs: {status} {body}")

        def kept():
            node = self.k8s_node(name) or {}
            st = node.get("status", {})
            return st.get("capacity", {}).get(GPU_RESOURCE) == count and \
                st.get("allocatable", {}).get(GPU_RESOURCE) == count
        self.wait(kept, 60, f"{name}'s kubelet to report {count} {GPU_RESOURCE} allocatable")

    def import_worker_image(self, name):
        """Imports WORKER_IMAGE into real node `name`'s containerd (again)."""
        self.real_node(name).ctr("images", "import", self.worker_image.archive, timeout=120)

    def remove_worker_image(self, name):
        """Removes WORKER_IMAGE from real node `name`'s containerd: a new worker pod
        there must pull it, and no registry can be reached (the kubelet reports
        ErrImagePull, then ImagePullBackOff); running containers go on."""
        self.real_node(name).ctr("images", "rm", WORKER_IMAGE)

    def container_pids(self, pod) -> list:
        """The processes of `pod`'s first container on its real node, by the PID
        namespace of the container's first process (k8sbridge-worker, whose pid
        containerd's shim reports): slurmd, slurmstepd, the jobs' processes. [] when
        the container does not run."""
        statuses = pod.get("status", {}).get("containerStatuses") or [{}]
        cid = statuses[0].get("containerID", "").split("://")[-1]
        host = pod.get("spec", {}).get("nodeName")
        if not cid or host not in self.k8s_nodes:
            return []
        init = self.real_node(host).tasks().get(cid)
        try:
            ns = os.stat(f"/proc/{init}/ns/pid") if init else None
        except OSError:
            return []
        pids = []
        for entry in os.listdir("/proc") if ns else ():
            try:
                st = os.stat(f"/proc/{entry}/ns/pid") if entry.isdigit() else None
            except OSError:
                continue
            if st and (st.st_dev, st.st_ino) == (ns.st_dev, ns.st_ino):
                pids.append(int(entry))
        return pids

    def stop_kubelet(self, name):
        """Stops the kubelet of real node `name` (its containers run on)."""
        self.real_node(name).stop_kubelet()

    def start_kubelet(self, name):
        """Starts the kubelet of real node `name` again; returns once the node is Ready
        with its GPUs advertised again (a restarted kubelet zeroes them)."""
        self.real_node(name).start_kubelet()
        self.advertise_gpus(name)

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

    def host_mounts(self) -> list:
        """(volume name, path in the pod, path on the host, read-only) of what the
        worker container runs from the host (see the module's docstring)."""
        rig = self.rig
        mounts = [("host-usr", "/usr", host_path(Path("/usr")), True),
                  ("host-etc", "/etc", host_path(Path("/etc")), True),
                  ("slurm", rig.prefix, host_path(rig.prefix), True),
                  ("build", SLURM_BUILD, SLURM_BUILD, True),
                  ("rig", rig.workdir, rig.workdir, False)]
        if BUILD_ROOT.resolve() != SLURM_BUILD.resolve():
            mounts.insert(3, ("build-root", BUILD_ROOT, BUILD_ROOT, True))
        return mounts

    def template(self, secret="munge-key", container_extra="") -> str:
        """The worker pod template: the image is WORKER_IMAGE, whose container runs the
        host's k8sbridge-worker, munged and slurmd from hostPath volumes (host_mounts),
        privileged; the pod's own munged gets the key from a Secret and its socket in
        an emptyDir at the path slurm.conf names, the key's copy in an emptyDir of its
        own; /etc/hosts and resolv.conf are the rig's node files."""
        rig = self.rig
        host = self.host_mounts()
        host_mounts = "".join(
            f'      - {{name: {name}, mountPath: "{inside}"'
            f'{", readOnly: true" if ro else ""}}}\n' for name, inside, _, ro in host)
        host_volumes = "".join(
            f'    - {{name: {name}, hostPath: {{path: "{path}", type: Directory}}}}\n'
            for name, _, path, _ in host)
        return f"""\
kind: PodTemplate
template:
  metadata:
    labels: {{app.kubernetes.io/part-of: slurm}}
  spec:
    terminationGracePeriodSeconds: 5
    containers:
    - name: slurmd
      image: {WORKER_IMAGE}
      securityContext: {{privileged: true}}
      env:
      - {{name: SLURM_CONF, value: "{rig.slurm_conf}"}}
      - {{name: K8SBRIDGE_SLURMD, value: "{rig.prefix}/sbin/slurmd"}}
      - {{name: K8SBRIDGE_MUNGED, value: /usr/sbin/munged}}
      - {{name: K8SBRIDGE_MUNGED_KEY, value: "{rig.workdir}/pod-munge-key/munge.key"}}
      - {{name: K8SBRIDGE_MUNGE_SOCKET, value: "{rig.munge_socket}"}}
      - {{name: K8SBRIDGE_MUNGED_DIR, value: "{rig.workdir}/pod-munged"}}
{container_extra}      volumeMounts:
{host_mounts}      - {{name: munge-run, mountPath: "{rig.munge_socket.parent}"}}
      - {{name: munged-private, mountPath: "{rig.workdir}/pod-munged"}}
      - {{name: munge-key, mountPath: "{rig.workdir}/pod-munge-key", readOnly: true}}
      - {{name: hosts, mountPath: /etc/hosts, readOnly: true}}
      - {{name: resolv, mountPath: /etc/resolv.conf, readOnly: true}}
    volumes:
{host_volumes}    - {{name: munge-run, emptyDir: {{}}}}
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
        """The worker container's output, as its kubelet serves it (`kubectl logs`)."""
        meta = pod["metadata"]
        r = self.sim.kubectl("logs", "-n", meta.get("namespace", "default"), meta["name"],
                             check=False, timeout=30)
        return r.stdout if r.returncode == 0 else f"(no log: {r.stderr.strip()})"

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
        for name in self.k8s_nodes if self.real is not None else ():
            node = self.k8s_node(name) or {}
            ready = [c.get("status") for c in node.get("status", {}).get("conditions", [])
                     if c["type"] == "Ready"]
            out.append(f"k8s node {name}: ready={ready} "
                       f"unschedulable={node.get('spec', {}).get('unschedulable', False)} "
                       f"taints={[t['key'] for t in node.get('spec', {}).get('taints', [])]}")
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
