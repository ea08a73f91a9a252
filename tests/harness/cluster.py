"""The whole main job on one machine: kubesim (API server, scheduler and kubelet)
whose pods run k8sbridge-worker and real slurmd, a real slurmctld from the rig
whose power saving runs k8sbridge-power, and munge.

Used by the end-to-end tests and by the README's demo (scripts/demo.sh). Nothing
here is a shortcut the bridge could depend on: the pods are rendered by
k8sbridge-power from a pod template, the worker checks the munge key and execs
slurmd, slurmd registers with its pod IP, and Slurm deletes the pods when idle.

Networking: the rig's bridge holds slurmctld's address; kubesim's kubelet puts each
pod in its own network namespace on kubesim's bridge, routed through the host, so
pods reach slurmctld and one another, and the host's srun reaches the pods. No
packet leaves the machine: pods get a resolv.conf without name servers.
"""

import base64
import json
import shutil
import stat
import tempfile
from pathlib import Path

from harness.kubesim import KubeSim
from harness.paths import BUILD_ROOT, POWER, WORKER
from harness.rig import Rig, RigError, wait_for

LEAF_LABEL = "network.topology.nvidia.com/leaf"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"


def power_program_lines(directory: Path, conf: Path, slurm_conf: Path) -> str:
    """Wrapper scripts in `directory`, as an admin writes them for a k8sbridge.conf
    that is not at the default path; returns slurm.conf's three program lines."""
    lines = []
    for key, sub in (("ResumeProgram", "resume"), ("SuspendProgram", "suspend"),
                     ("ResumeFailProgram", "resume-fail")):
        script = directory / f"{sub}.sh"
        script.write_text("#!/bin/sh\n"
                          f"export SLURM_CONF={slurm_conf}\n"
                          f"exec {POWER} --config {conf} {sub} \"$1\"\n")
        script.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        lines.append(f"{key}={script}")
    return "\n".join(lines)


class PodCluster:
    """Use as a context manager. Node groups: a list of (name, hostlist, extra keys,
    template overrides) written to k8sbridge.conf; `nodes` are the Slurm NodeSpecs."""

    def __init__(self, nodes, groups, *, fake_nodes=4, gpus_per_node=8, ib_leaves=2,
                 suspend_time=600, conf_extra="", slurm_conf_extra="", extra_templates=None,
                 log_root=None):
        self.nodes = nodes
        self.groups = groups
        self.kubesim_args = ["--fake-nodes", str(fake_nodes), "--gpus-per-node",
                             str(gpus_per_node), "--gpu-product", GPU_PRODUCT,
                             "--ib-leaves", str(ib_leaves)]
        self.suspend_time = suspend_time
        self.conf_extra = conf_extra
        self.slurm_conf_extra = slurm_conf_extra
        self.extra_templates = extra_templates or {}
        self.log_root = log_root
        self.sim = None
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
        self.rig = Rig(nodes=self.nodes, start_slurmd=False, node_namespaces=False,
                       log_root=self.log_root)
        # The kubelet's bridge and pod network are the rig's own (its id, its slot).
        self.sim = KubeSim("--kubelet", "--bridge", f"kspc{self.rig.id}",
                           "--pod-network", str(self.rig.pod_network),
                           "--kubelet-state-dir", str(self.dir / "kubelet"),
                           *self.kubesim_args, scheduler=True)
        self.rig.config.slurm_conf_extra = (self._power_programs() + "\n" +
                                            self.slurm_conf_extra)
        self._write_k8sbridge_conf()
        self.rig.start()
        self.create_munge_secret("munge-key", self.rig.munge_key.read_bytes())

    def close(self):
        # Pods first (their slurmd talk to slurmctld), then Slurm.
        if self.sim is not None:
            self.sim.close()
        if self.rig is not None:
            self.rig.stop()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- configuration --------------------------------------------------------------

    def _power_programs(self) -> str:
        return "\n".join([power_program_lines(self.dir, self.conf_path, self.rig.slurm_conf),
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
        host's (kubesim runs commands from the host's filesystem); the pod's own munged
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
        lines = ["ClusterName=rig", f"Kubeconfig={self.sim.kubeconfig}", "Namespace=default",
                 f"WorkerCommand={WORKER}",
                 "RetryDeadline=15", f"LogFile={self.power_log}", self.conf_extra]
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
