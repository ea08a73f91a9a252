"""k8sbridge deployed on kubesim as a platform team deploys it on Kubernetes.

kubesim runs as a whole cluster: the API server with RBAC and admission, the
scheduler, the workload controllers, cluster DNS and a kubelet that runs every
container from the OCI images scripts/images.py builds, with runc. The deployment
is `kubectl kustomize deploy/overlays/<overlay> | kubectl apply -f -` after the
munge key Secret, as docs/deploy.md tells an admin. Nothing on the Slurm side runs
on the host: slurmctld and k8sbridge-sync run in the controller pod, which resumes
worker pods with its power programs; users reach Slurm with `kubectl exec` into the
login pod.

Used by tests/integration/test_deploy_e2e.py and by the README's demo
(scripts/demo.sh). Needs root (namespaces, a bridge, overlays, runc) and the images
(K8SBRIDGE_IMAGES: a directory with k8sbridge-{controller,worker,login}/).
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from harness.kubesim import KubeSim, remove_oci_kubelet_leftovers, wait_for
from harness.paths import SOURCE_ROOT
from harness.rig import claim_slot

NAMESPACE = "slurm"
DEPLOY = SOURCE_ROOT / "deploy"
IMAGE_NAMES = ("k8sbridge-controller", "k8sbridge-worker", "k8sbridge-login")


def images_or_skip() -> Path:
    """The images directory of K8SBRIDGE_IMAGES for a test that runs them under
    kubesim's OCI kubelet; raises unittest.SkipTest when they or what runs them are
    not there (scripts/test.sh sets the variable for the artifacts suite)."""
    import unittest
    from harness.kubesim import KUBESIM
    images = os.environ.get("K8SBRIDGE_IMAGES")
    if not images:
        raise unittest.SkipTest("K8SBRIDGE_IMAGES is not set: scripts/test.sh sets it for "
                                "the artifacts suite once scripts/images.py built the images")
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root: namespaces, a bridge, overlays and runc")
    if not KUBESIM.exists():
        raise unittest.SkipTest(f"{KUBESIM} is not built")
    if shutil.which("runc") is None:
        raise unittest.SkipTest("runc is not installed (scripts/setup.sh)")
    return Path(images)


def missing_images(images: Path) -> list:
    """The images the deployment needs that `images` does not hold."""
    return [name for name in IMAGE_NAMES if not (images / name / "oci" / "index.json").exists()
            and not (images / name / "index.json").exists()]


class Deployment:
    """kubesim (with its OCI kubelet over `images`) and k8sbridge applied to it from
    deploy/overlays/<overlay>; use as a context manager. Everything it made (runc
    containers, mounts, the bridge, its directory) is gone after close, also when
    the start failed half way."""

    def __init__(self, images: Path, overlay: str = "demo", fake_nodes: int = 4,
                 ib_leaves: int = 2, keep_dir: bool = False):
        self.images = Path(images)
        self.overlay = overlay
        self.fake_nodes = fake_nodes
        self.ib_leaves = ib_leaves
        self.keep_dir = keep_dir
        self.sim: Optional[KubeSim] = None
        self.dir: Optional[Path] = None
        self.slot = None

    # ---- lifecycle ------------------------------------------------------------------

    def __enter__(self):
        missing = missing_images(self.images)
        if missing:
            raise RuntimeError(f"{self.images} lacks the images {missing}: build them with "
                               "scripts/build-packages.sh and scripts/images.py --packages DIR")
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def bridge(self) -> str:
        return f"ksimd{self.slot.number}"

    @property
    def runc_root(self) -> str:
        return f"/run/kubesim-runc/{self.bridge}"

    def _start(self):
        self.slot = claim_slot()
        self.dir = Path(tempfile.mkdtemp(prefix="k8sbridge-deploy-"))
        self.sim = KubeSim("--kubelet", "--bridge", self.bridge,
                           "--pod-network", str(self.slot.pod_network),
                           "--kubelet-state-dir", str(self.dir / "state"),
                           "--image-store", str(self.images),
                           "--fake-nodes", str(self.fake_nodes),
                           "--ib-leaves", str(self.ib_leaves), scheduler=True)
        self.apply()

    def apply(self):
        """The admin's steps (docs/deploy.md, "On Kubernetes"): the namespace, the
        munge key Secret from 1 KiB of random bytes, then the overlay."""
        self.sim.kubectl("create", "namespace", NAMESPACE)
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.kubectl("create", "secret", "generic", "slurm-munge-key",
                     f"--from-file=munge.key={key}")
        rendered = subprocess.run(["/usr/bin/kubectl", "kustomize",
                                   str(DEPLOY / "overlays" / self.overlay)],
                                  capture_output=True, text=True, check=True).stdout
        (self.dir / "rendered.yaml").write_text(rendered)
        self.sim.kubectl("apply", "-f", "-", input=rendered)

    def close(self):
        try:
            if self.sim is not None:
                self.sim.close()  # the kubelet stops and removes its containers
        finally:
            self._remove_leftovers()

    def _remove_leftovers(self):
        if self.slot is not None:
            remove_oci_kubelet_leftovers(self.runc_root, self.dir, self.bridge)
        if self.dir is not None and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ---- talking to it ----------------------------------------------------------------

    def kubectl(self, *args, check=True, timeout=120, input=None):
        """kubectl in the deployment's namespace, as the cluster admin."""
        return self.sim.kubectl("-n", NAMESPACE, *args, check=check, timeout=timeout,
                                input=input)

    def get(self, kind: str, name: str) -> Optional[dict]:
        r = self.kubectl("get", kind, name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def pods(self, selector: str = "") -> list:
        args = ["get", "pods", "-o", "json"] + (["-l", selector] if selector else [])
        return json.loads(self.kubectl(*args).stdout)["items"]

    def worker_pods(self) -> list:
        return self.pods("app.kubernetes.io/name=slurm-worker")

    def login(self, command: Sequence[str], check=True, timeout=300, input=None,
              user: Optional[str] = None) -> subprocess.CompletedProcess:
        """Runs a command in the login pod: kubectl exec, as root, or with `user` as
        that user (spank_jail refuses root's jobs: submit them as a user)."""
        if user is not None:
            command = ["runuser", "-u", user, "--", *command]
        return self.kubectl("exec", "deploy/slurm-login", "-c", "login", "--", *command,
                            check=check, timeout=timeout, input=input)

    def slurm_nodes(self) -> dict:
        """Node name -> `scontrol show node` fields, as the login pod sees them."""
        from harness.rig import parse_scontrol_oneliner
        out = self.login(["scontrol", "-o", "show", "node"]).stdout
        nodes = {}
        for line in out.splitlines():
            if line.strip():
                fields = parse_scontrol_oneliner(line)
                nodes[fields["NodeName"]] = fields
        return nodes

    def job(self, job_id: str) -> dict:
        from harness.rig import parse_scontrol_oneliner
        out = self.login(["scontrol", "-o", "show", "job", job_id]).stdout
        return parse_scontrol_oneliner(out.splitlines()[0]) if out.strip() else {}

    # ---- waiting ----------------------------------------------------------------------

    def wait(self, predicate, timeout, what):
        """wait_for, and on time-out an AssertionError that shows the cluster."""
        try:
            return wait_for(predicate, timeout, interval=0.5, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_ready(self, timeout=600):
        """The jail populated, slurmctld answering the login pod."""
        def job_done():
            job = self.get("job", "slurm-jail-populate") or {}
            if job.get("status", {}).get("failed", 0) >= 3:
                raise AssertionError("the jail populate Job failed:\n" + self.describe())
            return job.get("status", {}).get("succeeded", 0) >= 1
        self.wait(job_done, timeout, "the jail populate Job to succeed")

        def login_running():
            return any(p["status"].get("phase") == "Running"
                       for p in self.pods("app.kubernetes.io/name=slurm-login"))
        self.wait(login_running, timeout, "the login pod to run")

        def ping():
            # Before slurmctld-0 has an address its name does not resolve, and Slurm
            # retries a failed lookup ten times a second apart: one try may be slow.
            try:
                r = self.login(["scontrol", "ping"], check=False, timeout=120)
            except subprocess.TimeoutExpired:
                return False
            return r.returncode == 0 and "is UP" in r.stdout
        self.wait(ping, timeout, "slurmctld in slurmctld-0 to answer the login pod")

    # ---- diagnostics ------------------------------------------------------------------

    def container_log(self, pod: str, container: str, tail: int = 30) -> str:
        r = self.kubectl("logs", pod, "-c", container, f"--tail={tail}", check=False,
                         timeout=30)
        return (r.stdout + r.stderr).rstrip()

    def pod_file(self, pod: dict, volume: str, name: str) -> Optional[Path]:
        """A file in one of the pod's emptyDir volumes, as the kubelet keeps it."""
        uid = pod["metadata"]["uid"]
        for path in (self.dir / "state").glob(f"*/pods/{uid}/volumes/{volume}/{name}"):
            return path
        return None

    def describe(self) -> str:
        """What a failing test prints: pods, their logs, slurmctld's and the power
        programs' logs, and the Slurm nodes."""
        out = []
        try:
            pods = self.pods()
        except AssertionError as e:
            return f"kubectl get pods failed: {e}"
        for p in pods:
            st = p.get("status", {})
            name = p["metadata"]["name"]
            out.append(f"pod {name}: node={p['spec'].get('nodeName')} "
                       f"phase={st.get('phase')} ip={st.get('podIP')} "
                       f"containers={json.dumps(st.get('containerStatuses', []))[:600]}")
            for c in p["spec"]["containers"]:
                out.append(f"  log {c['name']}:\n    " +
                           self.container_log(name, c["name"]).replace("\n", "\n    "))
            for log in ("slurmctld.log", "k8sbridge-power.log"):
                path = self.pod_file(p, "log", log)
                if path is not None and path.exists():
                    tail = path.read_text(errors="replace").splitlines()[-40:]
                    out.append(f"  {log}:\n    " + "\n    ".join(tail))
        try:
            for name, n in self.slurm_nodes().items():
                out.append(f"slurm node {name}: {n.get('State')} addr={n.get('NodeAddr')} "
                           f"reason={n.get('Reason')}")
        except AssertionError as e:
            out.append(f"scontrol in the login pod failed: {e}")
        return "\n".join(out)
