"""A site's copy of a shipped overlay, as docs/deploy.md tells a site to make one:
copy deploy/overlays/example-gpu, then set what a site sets (its registry and
images, node pools, the nodes and their sizes, storage). Nothing else changes; its
users are in its LDAP directory (the overlay's directory mode: the group
config/users/directory-group names, as shipped), which the admin names in the
Secret slurm-sssd (tests/harness/deployment.py makes both):
tests/integration/test_deploy_e2e.py checks the copy's files against the shipped
ones with test_deploy_manifests.py's rule of what a site may change.

The site here is the test cluster (tests/harness/deployment.py): no registry (the
images are imported into every node), no storage class (static volumes), two
real nodes in the GPU pool on InfiniBand leaves leaf-0 and leaf-1, each with 16
GPUs of the fake toolkit (tests/harness/gpu_toolkit.py), and a 2-core machine:
four Slurm nodes of 8 GPUs, pinned two to a leaf, with small pods.
"""

import os
import re
import shutil
from pathlib import Path

import yaml

from harness.gpu_toolkit import RUNTIME_CLASS

POOL_LABEL = "node-pool.example.com/name"
GPU_POOL = "gpu-h100"  # the shipped worker-pod.yaml's pool: the test nodes carry it
SYSTEM_SELECTOR = {"kubernetes.io/os": "linux"}  # the controller's and login's pool: any node
NODES = "gpu-[001-004]"
SLURM_NODES = ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]
LEAF_OF_NODE = {"gpu-001": "leaf-0", "gpu-002": "leaf-0", "gpu-003": "leaf-1",
                "gpu-004": "leaf-1"}
SUSPEND_TIME = 60
SMALL_POD = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "2Gi"}}
SMALL_CONTROLLER = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}}

SLURM_CONF_LINES = {
    "NodeName": f"NodeName={NODES} CPUs=2 RealMemory=1000 Gres=gpu:8 Features=h100,ib "
                "State=CLOUD",
    "PartitionName": f"PartitionName=gpu Nodes={NODES} Default=YES MaxTime=INFINITE State=UP",
    "SuspendTime": f"SuspendTime={SUSPEND_TIME}",
}
GRES_CONF_LINES = {"NodeName": f"NodeName={NODES} Name=gpu File=/dev/nvidia[0-7]"}
# One group per leaf, pinned there, with the toolkit's RuntimeClass (the shipped
# file says where to name it).
NODE_GROUPS = [
    f"NodeGroup=gpu-{leaf} Nodes={nodes} PodTemplate=worker-pod.yaml "
    f"RuntimeClass={RUNTIME_CLASS} PlacementDomain={leaf}"
    for leaf, nodes in (("leaf-0", "gpu-[001-002]"), ("leaf-1", "gpu-[003-004]"))]


# The site's users, in its directory (tests/harness/ldap.py; docs/deploy.md,
# "Users"): name -> uid, each with a group of their own of the same id, all
# members of the overlay's directory-group.
USERS = {"alice": 2001, "bob": 2002}


def replace_lines(text: str, lines: dict) -> str:
    """Each `Key=` line of `text` (the first of its key) replaced by lines[Key]."""
    for key, line in lines.items():
        text, n = re.subn(rf"^{key}=.*$", line, text, count=1, flags=re.M)
        if n != 1:
            raise RuntimeError(f"no {key}= line to set")
    return text


def replace_node_groups(text: str) -> str:
    out, placed = [], False
    for line in text.splitlines():
        if line.startswith("NodeGroup="):
            if not placed:
                out.extend(NODE_GROUPS)
                placed = True
            continue
        out.append(line)
    if not placed:
        raise RuntimeError("no NodeGroup= line to set")
    return "\n".join(out) + "\n"


def site_worker_pod(text: str, worker_image: str) -> str:
    template = yaml.safe_load(text)
    container = template["template"]["spec"]["containers"][0]
    container["image"] = worker_image
    container["resources"] = SMALL_POD
    return yaml.safe_dump(template, sort_keys=False)


def site_patches(patches: list, worker_image: str) -> list:
    """The shipped overlay's patches with the site's values: its worker image in the
    admission policy, no pull secret (no registry), its pools and sizes, no
    storage class."""
    out = []
    for entry in patches:
        target = entry["target"]
        ops = yaml.safe_load(entry["patch"])
        kind, name = target.get("kind"), target.get("name")
        if kind == "ServiceAccount":
            continue  # imagePullSecrets: the images are on the nodes
        for op in ops:
            if name == "k8sbridge-worker-policy" and op["path"] == "/data/images":
                op["value"] = worker_image.rsplit(":", 1)[0] + ":"
            elif op["path"].endswith("/nodeSelector"):
                op["value"] = SYSTEM_SELECTOR
            elif op["path"].endswith("/resources"):
                op["value"] = SMALL_CONTROLLER
            elif op["path"] == "/spec/resources/requests/storage":
                op["value"] = "2Gi"
        ops = [op for op in ops if op["path"] != "/spec/storageClassName"]
        out.append({"target": target, "patch": yaml.safe_dump(ops)})
    return out


def copy_example_gpu(deploy: Path, dest: Path, images: dict) -> Path:
    """The site's copy of deploy/overlays/example-gpu in `dest`. `images`: image
    name -> (name, tag) as the nodes hold them."""
    shipped = deploy / "overlays" / "example-gpu"
    shutil.copytree(shipped, dest)
    worker_image = ":".join(images["k8sbridge-worker"])
    config = dest / "config"
    edits = {
        "slurm.conf": lambda t: replace_lines(t, SLURM_CONF_LINES),
        "gres.conf": lambda t: replace_lines(t, GRES_CONF_LINES),
        "k8sbridge.conf": replace_node_groups,
        "worker-pod.yaml": lambda t: site_worker_pod(t, worker_image),
    }
    for name, edit in edits.items():
        path = config / name
        path.write_text(edit(path.read_text()))
    path = dest / "kustomization.yaml"
    k = yaml.safe_load(path.read_text())
    # Where the copy lives, the base and components are found by relative path.
    k["resources"] = [os.path.relpath((shipped / r).resolve(), dest) for r in k["resources"]]
    k["components"] = [os.path.relpath((shipped / c).resolve(), dest)
                       for c in k.get("components", [])]
    k["images"] = [{"name": i["name"], "newName": images[i["name"]][0],
                    "newTag": images[i["name"]][1]} for i in k["images"]]
    k["patches"] = site_patches(k["patches"], worker_image)
    path.write_text(yaml.safe_dump(k, sort_keys=False))
    return dest
