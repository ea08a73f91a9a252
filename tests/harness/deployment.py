"""k8sbridge deployed on a real Kubernetes as a platform team deploys it.

The cluster is RealCluster (tests/harness/kubelet_node.py): the upstream control
plane (etcd, kube-apiserver with RBAC, Node authorization and admission,
controller-manager, scheduler), CoreDNS, and real nodes, each a kubelet with
containerd, runc, a CNI bridge and kube-proxy in namespaces of its own. No registry
can be reached: the four images scripts/images.py builds are imported into every
node's containerd from their docker-archives, under the names the overlay gives
them (k8sbridge-worker:<tag> is docker.io/library/k8sbridge-worker:<tag> to
containerd), so the kubelet finds them present and pulls nothing.

What the harness does is what an admin does on a cluster without a registry or a
dynamic provisioner (docs/deploy.md, "On Kubernetes"):
- labels the nodes as the fabric's topology labeller and NVIDIA's GPU feature
  discovery would (InfiniBand leaf and spine, GPU product and count) and
  advertises their GPUs as an extended resource (a PATCH of the Node's status
  capacity, as the Kubernetes documentation describes for extended resources);
- creates the two namespaces (slurm: controller and login; slurm-workers: the
  worker pods) and the munge key Secret in each, the login pods' SSH host keys
  Secret (ssh-keygen -A) and the accounting database's password Secret;
- for an overlay in directory mode (the component sssd: its pods mount the
  Secret slurm-sssd), runs the site's LDAP directory (tests/harness/ldap.py: a
  real slapd on the cluster's bridge, which the pods reach, holding the site's
  users and the group the overlay's directory-group names) and creates the Secret
  slurm-sssd in both namespaces with an sssd.conf for it;
- makes a static hostPath PersistentVolume for each claim the overlay makes (the
  jail, slurmctld's state, the database's datadir, the homes: the two slurm-home
  claims on one directory), each bound to its claim;
- applies the overlay through a site kustomization that only sets what a site
  sets: the images' names and tags (kustomize's `images:`). Everything else is
  applied as shipped.

slurmctld and k8sbridge-sync then run in the controller pod, whose power programs
create the worker pods; the tests reach Slurm with `kubectl exec` into the login
pod as its admin does (login()), or over SSH as a user (test_deploy_e2e.py).

Used by tests/integration/test_deploy_e2e.py and by the README's demo
(scripts/demo.sh). Needs root and what real nodes need (scripts/setup.sh), and the
images (K8SBRIDGE_IMAGES: a directory with k8sbridge-{controller,worker,login,mariadb}/).
"""

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Sequence

import yaml

from harness.kube import (GPU_COUNT_LABEL, GPU_PRODUCT_LABEL, LEAF_LABEL, SPINE_LABEL,
                          kubectl_program, wait_for_condition)
from harness.gpu_toolkit import FakeGpuToolkit, RUNTIME_CLASS
from harness.kubelet_node import NodeImage, RealCluster, RealNode, runc_program
from harness.paths import SOURCE_ROOT
from harness.ldap import Directory
from harness.site import GPU_POOL, POOL_LABEL, USERS, copy_example_gpu

NAMESPACE = "slurm"  # the controller and login pods
WORKER_NAMESPACE = "slurm-workers"  # the worker pods (k8sbridge.conf Namespace=), the jail
NAMESPACES = (NAMESPACE, WORKER_NAMESPACE)
DEPLOY = SOURCE_ROOT / "deploy"
IMAGE_NAMES = ("k8sbridge-controller", "k8sbridge-worker", "k8sbridge-login",
               "k8sbridge-mariadb")
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"
RDMA_LABEL = "feature.node.kubernetes.io/rdma.available"  # NFD's
# The overlays applied through a site's copy (tests/harness/site.py), on nodes with
# the fake GPU toolkit; the others are applied as shipped with the images set.
SITE_COPIES = {"example-gpu": copy_example_gpu}


def images_or_skip() -> Path:
    """The images directory of K8SBRIDGE_IMAGES for a test that runs them on real
    nodes; raises unittest.SkipTest when they or what runs them are not there
    (scripts/test.sh sets the variable for the artifacts suite)."""
    import unittest
    from harness.kubelet_node import skip_unless_real_nodes_can_run
    images = os.environ.get("K8SBRIDGE_IMAGES")
    if not images:
        raise unittest.SkipTest("K8SBRIDGE_IMAGES is not set: scripts/test.sh sets it for "
                                "the artifacts suite once scripts/images.py built the images")
    skip_unless_real_nodes_can_run()
    return Path(images)


def missing_images(images: Path) -> list:
    """The images the deployment needs that `images` does not hold (its OCI layout,
    its docker-archive or its image.json)."""
    return [name for name in IMAGE_NAMES
            if not all((images / name / f).exists()
                       for f in ("oci/index.json", f"{name}.tar", "image.json"))]


def image_info(images: Path, name: str) -> dict:
    """scripts/images.py's image.json: image, tag, digest (the manifest's), slurm."""
    return json.loads((Path(images) / name / "image.json").read_text())


def node_image(images: Path, name: str) -> NodeImage:
    """Image `name` of scripts/images.py's output as the nodes import it: its
    docker-archive, the name containerd gives it (the archive's <image>:<tag> in
    docker.io/library) and its ID (the configuration's digest, which containerd
    reports as the container's imageID)."""
    layout = Path(images) / name / "oci"
    blobs = layout / "blobs" / "sha256"
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((blobs / index["manifests"][0]["digest"].split(":", 1)[1])
                          .read_text())
    info = image_info(images, name)
    return NodeImage(f"docker.io/library/{name}:{info['tag']}",
                     Path(images) / name / f"{name}.tar", manifest["config"]["digest"])


class Deployment:
    """A RealCluster of `nodes` real nodes (the four images imported into each) and
    k8sbridge applied to it from deploy/overlays/<overlay>; use as a context manager.
    The nodes are spread over `ib_leaves` InfiniBand leaves in order and advertise
    `gpus_per_node` GPUs each. Everything it made (containers, namespaces, cgroups,
    the bridge, its directory) is gone after close, also when the start failed half
    way."""

    def __init__(self, images: Path, overlay: str = "demo", nodes: int = 2,
                 ib_leaves: int = 2, gpus_per_node: int = 8, progress=None):
        self.images = Path(images)
        self.progress = progress or (lambda text: None)
        self.overlay = overlay
        self.node_count = nodes
        self.ib_leaves = ib_leaves
        self.gpus_per_node = gpus_per_node
        self.rc: Optional[RealCluster] = None
        self.directory: Optional[Directory] = None  # directory mode's slapd
        self.toolkit: Optional[FakeGpuToolkit] = None
        self.dir: Optional[Path] = None
        self.rendered: list = []

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

    def _start(self):
        self.progress("starting the control plane (etcd, kube-apiserver, "
                      "kube-controller-manager, kube-scheduler) and CoreDNS")
        self.rc = RealCluster(nodes=0,
                              images=[node_image(self.images, n) for n in IMAGE_NAMES])
        self.dir = self.rc.dir / "deployment"
        self.dir.mkdir()
        if self.overlay in SITE_COPIES:
            # The site's GPU nodes run pods of its RuntimeClass through the toolkit.
            self.toolkit = FakeGpuToolkit(self.rc.dir / "gpu-toolkit", runc_program())
            self.rc.runtimes = {RUNTIME_CLASS: str(self.toolkit.runtime)}
            self.kube.kubectl("apply", "-f", "-", input=json.dumps(self.toolkit.runtime_class()))
        for i in range(self.node_count):
            self.progress(f"starting node real-{i}: containerd, importing the images into "
                          "it, the kubelet, kube-proxy")
            self.rc.add_node()
        self.progress("labelling the nodes (leaf, spine, GPUs) and advertising "
                      f"{GPU_RESOURCE} in their status")
        self.label_nodes()
        self.progress("kubectl create namespace slurm and slurm-workers; kubectl -n <each> "
                      "create secret generic slurm-munge-key; kubectl -n slurm create secret "
                      "generic slurm-login-host-keys and slurm-db-password; a "
                      "PersistentVolume for each claim; "
                      f"kubectl kustomize deploy/overlays/{self.overlay} (images: set) | "
                      "kubectl apply -f -")
        self.apply()

    @property
    def kube(self):
        return self.rc.kube

    @property
    def nodes(self) -> list:
        return self.rc.nodes

    def node(self, name: str) -> RealNode:
        return next(n for n in self.rc.nodes if n.name == name)

    def image(self, name: str) -> NodeImage:
        return next(i for i in self.rc.images if i.name.split("/")[-1].split(":")[0] == name)

    def label_nodes(self):
        """The nodes' topology and GPU labels, and their GPUs as the extended resource
        nvidia.com/gpu in the Node's status capacity (the kubelet keeps an extended
        resource it does not manage, and makes it allocatable)."""
        leaves = max(self.ib_leaves, 1)
        for i, node in enumerate(self.rc.nodes):
            leaf = i * leaves // len(self.rc.nodes)
            self.kube.kubectl("label", "node", node.name, "--overwrite",
                              f"{LEAF_LABEL}=leaf-{leaf}", f"{SPINE_LABEL}=spine-0",
                              f"{GPU_PRODUCT_LABEL}={GPU_PRODUCT}",
                              f"{GPU_COUNT_LABEL}={self.gpus_per_node}",
                              f"{POOL_LABEL}={GPU_POOL}", f"{RDMA_LABEL}=true")
            path = "/status/capacity/" + GPU_RESOURCE.replace("/", "~1")
            self.kube.kubectl("patch", "node", node.name, "--subresource=status",
                              "--type=json", "-p", json.dumps(
                                  [{"op": "add", "path": path,
                                    "value": str(self.gpus_per_node)}]))
        for node in self.rc.nodes:
            wait_for_condition(
                lambda: self.kube.kubectl_json("get", "node", node.name)["status"]
                .get("allocatable", {}).get(GPU_RESOURCE) == str(self.gpus_per_node),
                60, f"{GPU_RESOURCE} allocatable on {node.name}", interval=0.5)

    def site_kustomization(self) -> Path:
        """The site's kustomization over the shipped overlay: what a site sets, here
        the images' names and tags as scripts/images.py tagged them (no registry:
        the nodes hold them). The worker pod template is a file in the ConfigMap,
        beyond kustomize's `images:`: it must name the worker image as built."""
        site = self.dir / "site"
        if self.overlay in SITE_COPIES:
            return SITE_COPIES[self.overlay](DEPLOY, site, {
                name: (name, image_info(self.images, name)["tag"]) for name in IMAGE_NAMES})
        site.mkdir()
        images = []
        for name in IMAGE_NAMES:
            images.append({"name": name, "newName": name,
                           "newTag": image_info(self.images, name)["tag"]})
        overlay = DEPLOY / "overlays" / self.overlay
        (site / "kustomization.yaml").write_text(yaml.safe_dump({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            # kustomize takes a relative path only.
            "resources": [os.path.relpath(overlay, site)],
            "images": images}))
        return site

    def render(self) -> str:
        rendered = subprocess.run([str(kubectl_program()), "kustomize",
                                   str(self.site_kustomization())],
                                  capture_output=True, text=True, check=True).stdout
        (self.dir / "rendered.yaml").write_text(rendered)
        self.rendered = [d for d in yaml.safe_load_all(rendered) if d]
        worker = image_info(self.images, "k8sbridge-worker")
        expected = f"{worker['image']}:{worker['tag']}"
        for doc in self.rendered:
            if doc["kind"] == "ConfigMap":
                for key, text in doc.get("data", {}).items():
                    template = yaml.safe_load(text) if key.endswith(".yaml") else None
                    if not isinstance(template, dict) or template.get("kind") != "PodTemplate":
                        continue
                    for c in template["template"]["spec"]["containers"]:
                        if c["image"] != expected:
                            raise RuntimeError(
                                f"deploy/overlays/{self.overlay}'s {key} names {c['image']}, "
                                f"the images are {expected}")
        return rendered

    def claims(self) -> list:
        """(namespace, claim name, size, access modes) of every claim the rendered
        overlay makes: its PersistentVolumeClaims and its StatefulSets'
        volumeClaimTemplates."""
        out = []
        for doc in self.rendered:
            specs = []
            namespace = doc["metadata"].get("namespace", NAMESPACE)
            if doc["kind"] == "PersistentVolumeClaim":
                specs.append((doc["metadata"]["name"], doc["spec"]))
            elif doc["kind"] == "StatefulSet":
                for t in doc["spec"].get("volumeClaimTemplates", []):
                    for ordinal in range(doc["spec"].get("replicas", 1)):
                        specs.append((f"{t['metadata']['name']}-{doc['metadata']['name']}-"
                                      f"{ordinal}", t["spec"]))
            for name, spec in specs:
                if spec.get("storageClassName"):
                    raise RuntimeError(f"claim {name} asks for storage class "
                                       f"{spec['storageClassName']}: this cluster has none")
                out.append((namespace, name, spec["resources"]["requests"]["storage"],
                            spec["accessModes"]))
        return out

    def apply(self):
        """The admin's steps (docs/deploy.md, "On Kubernetes"): the namespaces, the
        munge key Secret from 1 KiB of random bytes in each, the login pods' host
        keys and the database's password, a static PersistentVolume for each
        claim, then the overlay."""
        rendered = self.render()
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        for namespace in NAMESPACES:
            self.kube.kubectl("create", "namespace", namespace)
            self.kubectl("create", "secret", "generic", "slurm-munge-key",
                         f"--from-file=munge.key={key}", namespace=namespace)
        key.unlink()
        self.create_host_keys()
        if self.directory_group():
            self.start_directory()
        # The database's password, as docs/deploy.md ("Accounting") makes it.
        self.kubectl("create", "secret", "generic", "slurm-db-password",
                     f"--from-literal=password={secrets.token_hex(24)}")
        # Each claim bound to a volume of its own, except that claims of one name in
        # both namespaces (slurm-home) share a directory: the share both must bind
        # (deploy/base/home.yaml).
        for namespace, name, size, modes in self.claims():
            self.kube.create_host_path_volume(f"{namespace}-{name}", size, modes,
                                              self.rc.dir / "volumes" / name,
                                              claim=(namespace, name))
        self.kube.kubectl("apply", "-f", "-", input=rendered, timeout=120)

    def directory_group(self) -> str:
        """The rendered slurm-users ConfigMap's directory-group: the group of the
        site's users in directory mode, "" in files mode."""
        text = self.users_configmap().get("directory-group", "")
        return "".join(line.split("#", 1)[0].strip() for line in text.splitlines())

    def users_configmap(self) -> dict:
        """The rendered slurm-users ConfigMap's files (namespace slurm)."""
        return next(o["data"] for o in self.rendered
                    if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "slurm-users"
                    and o["metadata"].get("namespace") == NAMESPACE)

    def start_directory(self):
        """The site's directory (docs/deploy.md, "Users"): slapd with the site's users
        in the group directory-group names, on the cluster's bridge where the pods
        reach it, and the Secret slurm-sssd with the sssd.conf that names it, in both
        namespaces, as the admin creates it."""
        self.directory = Directory(self.rc.network.address, self.rc.slot.free_port(),
                                   self.rc.dir / "ldap", self.rc.id, users=USERS,
                                   group=self.directory_group())
        self.directory.start()
        conf = self.dir / "sssd.conf"
        conf.write_text(self.directory.sssd_conf())
        for namespace in NAMESPACES:
            self.kubectl("create", "secret", "generic", "slurm-sssd",
                         f"--from-file=sssd.conf={conf}", namespace=namespace)
        conf.unlink()

    def create_host_keys(self):
        """The login pods' SSH host keys, as docs/deploy.md ("Users") makes them:
        ssh-keygen -A into a directory, the Secret slurm-login-host-keys from it."""
        keys = self.dir / "host-keys"
        (keys / "etc" / "ssh").mkdir(parents=True)
        subprocess.run(["ssh-keygen", "-A", "-f", str(keys)], check=True,
                       capture_output=True)
        self.kubectl("create", "secret", "generic", "slurm-login-host-keys",
                     f"--from-file={keys / 'etc' / 'ssh'}")
        shutil.rmtree(keys)

    def close(self):
        try:
            if self.directory is not None:
                self.directory.close()
        finally:
            if self.rc is not None:
                self.rc.close()  # the nodes stop, their containers with them

    # ---- talking to it ----------------------------------------------------------------

    def kubectl(self, *args, check=True, timeout=120, input=None, namespace=NAMESPACE):
        """kubectl in one of the deployment's namespaces, as the cluster admin."""
        return self.kube.kubectl("-n", namespace, *args, check=check, timeout=timeout,
                                 input=input)

    def get(self, kind: str, name: str, namespace=NAMESPACE) -> Optional[dict]:
        r = self.kubectl("get", kind, name, "-o", "json", check=False, namespace=namespace)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def pods(self, selector: str = "", namespace=NAMESPACE) -> list:
        args = ["get", "pods", "-o", "json"] + (["-l", selector] if selector else [])
        return json.loads(self.kubectl(*args, namespace=namespace).stdout)["items"]

    def worker_pods(self) -> list:
        return self.pods("app.kubernetes.io/name=slurm-worker", namespace=WORKER_NAMESPACE)

    def events(self, pod: str, namespace=NAMESPACE) -> list:
        """The core/v1 Events about pod `pod`, oldest first."""
        return json.loads(self.kubectl("get", "events", "-o", "json", "--field-selector",
                                       f"involvedObject.name={pod}",
                                       namespace=namespace).stdout)["items"]

    def login(self, command: Sequence[str], check=True, timeout=300, input=None,
              user: Optional[str] = None) -> subprocess.CompletedProcess:
        """Runs a command in the login pod: kubectl exec, as root, or with `user` as
        that user (spank_jail refuses root's jobs: submit them as a user)."""
        if user is not None:
            command = ["runuser", "-u", user, "--", *command]
        return self.kubectl("exec", "statefulset/slurm-login", "-c", "login", "--", *command,
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
        """wait_for_condition, and on time-out an AssertionError that shows the
        cluster."""
        try:
            return wait_for_condition(predicate, timeout, what, interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.describe()}") from None

    def wait_ready(self, timeout=600):
        """The jail populated, slurmctld answering the login pod, and the site's
        users in slurmdbd's associations."""
        def job_done():
            job = self.get("job", "slurm-jail-populate", namespace=WORKER_NAMESPACE) or {}
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

        # AccountingStorageEnforce=associations: a user submits once the controller
        # pod's accounts container gave them their association in slurmdbd and
        # slurmdbd passed it on to slurmctld (its association cache).
        users = self.site_users()

        def associated():
            r = self.login(["scontrol", "show", "assoc_mgr", "flags=assoc",
                            "users=" + ",".join(users)], check=False, timeout=120)
            return r.returncode == 0 and all(f"UserName={u}(" in r.stdout for u in users)
        if users:
            self.wait(associated, timeout, f"the site's users {users} in slurmctld's "
                      "associations (the controller pod's accounts container)")

    def site_users(self) -> list:
        """The site's users: those of the rendered slurm-users ConfigMap (namespace
        slurm), and in directory mode the directory group's members."""
        passwd = self.users_configmap()["passwd"]
        return [line.split(":")[0] for line in passwd.splitlines()
                if line.strip() and not line.lstrip().startswith("#")] + (
                    sorted(self.directory.users) if self.directory else [])

    # ---- diagnostics ------------------------------------------------------------------

    def container_log(self, pod: str, container: str, tail: int = 30,
                      namespace=NAMESPACE) -> str:
        r = self.kubectl("logs", pod, "-c", container, f"--tail={tail}", check=False,
                         timeout=30, namespace=namespace)
        return (r.stdout + r.stderr).rstrip()

    def pod_file(self, pod: dict, volume: str, name: str) -> Optional[Path]:
        """A file in one of the pod's (disk) emptyDir volumes, where its node's kubelet
        keeps it."""
        uid = pod["metadata"]["uid"]
        for path in self.rc.dir.glob(f"real-*/kubelet/pods/{uid}/volumes/"
                                     f"kubernetes.io~empty-dir/{volume}/{name}"):
            return path
        return None

    def describe(self) -> str:
        """What a failing test prints: pods, their logs and events, slurmctld's and
        the power programs' logs, and the Slurm nodes."""
        out = []
        try:
            pods = [p for namespace in NAMESPACES for p in self.pods(namespace=namespace)]
        except AssertionError as e:
            return f"kubectl get pods failed: {e}"
        for p in pods:
            st = p.get("status", {})
            name, namespace = p["metadata"]["name"], p["metadata"]["namespace"]
            out.append(f"pod {namespace}/{name}: node={p['spec'].get('nodeName')} "
                       f"phase={st.get('phase')} ip={st.get('podIP')} "
                       f"containers={json.dumps(st.get('containerStatuses', []))[:600]}")
            if st.get("phase") != "Running":
                try:
                    for e in self.events(name, namespace)[-8:]:
                        out.append(f"  event {e.get('reason')}: {e.get('message')}")
                except AssertionError:
                    pass
            for c in p["spec"].get("initContainers", []) + p["spec"]["containers"]:
                out.append(f"  log {c['name']}:\n    " +
                           self.container_log(name, c["name"], namespace=namespace)
                           .replace("\n", "\n    "))
            for log in ("slurmctld.log", "k8sbridge-power.log"):
                path = self.pod_file(p, "log", log)
                if path is not None and path.exists():
                    tail = path.read_text(errors="replace").splitlines()[-40:]
                    out.append(f"  {log}:\n    " + "\n    ".join(tail))
        if self.directory is not None:
            out.append("slapd.log:\n    " + self.directory.log_tail().replace("\n", "\n    "))
        try:
            for name, n in self.slurm_nodes().items():
                out.append(f"slurm node {name}: {n.get('State')} addr={n.get('NodeAddr')} "
                           f"reason={n.get('Reason')}")
        except (AssertionError, subprocess.TimeoutExpired) as e:
            out.append(f"scontrol in the login pod failed: {e}")
        return "\n".join(out)
