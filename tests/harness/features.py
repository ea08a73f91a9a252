"""Shared set-up for the node_features/k8s end-to-end tests: a rig whose slurmctld
and slurmd load node_features_k8s.so (NodeFeaturesPlugins=k8s), the real Kubernetes
(harness.kube.KubeCluster) serving TLS on the rig's bridge address (so slurmd, inside
its node's network namespace, reaches the API; the certificate names that address)
with two H100 and two A100 nodes that kwok plays, k8sbridge-power as the power
programs, and the test as the kubelet of the rig's nodes (harness.cluster.TestKubelet):
when a worker pod is bound, the node's slurmd starts with
K8SBRIDGE_HOST_NODE=<spec.nodeName>, as the downward API would set it; when the pod is
gone, it stops.
"""

import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from harness.cluster import (WORKER_TEMPLATE as TEMPLATE, TestKubelet, power_program_lines)
from harness.kube import KubeCluster, fake_node
from harness.paths import POWER, SLURM_BUILD
from harness.rig import (RIG_ENV, NodeSpec, Rig, alive, pids_with_env, slurm_plugindir,
                         wait_for)
from harness.testcase import RigTestCase

PLUGIN_DIR = SLURM_BUILD / "plugins" / "node_features_k8s"
SKEWED_PLUGIN_DIR = PLUGIN_DIR / "skewed"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
KUBE_NODES = {"k-h100-0": H100, "k-h100-1": H100, "k-a100-0": A100, "k-a100-1": A100}
POOL = [f"w-{i}" for i in range(8)]
RDMA_LABEL = "feature.node.kubernetes.io/rdma.available"  # k-h100-0's, from NFD


def kube_nodes() -> list:
    """The Nodes of KUBE_NODES, for kwok to play: one GPU each, k-h100-0 with RDMA."""
    nodes = []
    for index, (name, product) in enumerate(KUBE_NODES.items()):
        node = fake_node(name, index, leaf=0, spine=0, gpus=1, gpu_product=product, cpu="8",
                         memory="64Gi", pods=10)
        if name == "k-h100-0":
            node["metadata"]["labels"][RDMA_LABEL] = "true"
        nodes.append(node)
    return nodes


def bridge_conf(kubeconfig: Path, log_file: Path) -> str:
    return (f"ClusterName=rig\nKubeconfig={kubeconfig}\n"
            f"Namespace=default\nRetryDeadline=5\nLogFile={log_file}\n"
            "FeatureLabelPrefix=feature.node.kubernetes.io/\nFeatureLabelTimeout=2s\n"
            "NodeGroup=w Nodes=w-[0-7] PodTemplate=worker.yaml Gpus=1\n"
            f"Feature=h100 Selector=nvidia.com/gpu.product={H100}\n"
            f"Feature=a100 Selector=nvidia.com/gpu.product={A100}\n")


class FeaturesRigCase(RigTestCase):
    def setUp(self):
        super().setUp()
        for need in (POWER, PLUGIN_DIR / "node_features_k8s.so"):
            if not need.exists():
                self.skipTest(f"{need} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="features-rig-"))
        self.dir.chmod(0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.kubeconfig = self.dir / "kubeconfig"
        self.kube = None  # the KubeCluster, from start_kube()
        self.kubelet = None  # the test's TestKubelet, from start_kubelet()

    def power_lines(self, rig: Rig) -> str:
        return power_program_lines(self.dir, rig.etc / "k8sbridge.conf", rig.slurm_conf)

    def make_rig(self, nodes=POOL, power=True, suspend_time=600, plugin_dir=PLUGIN_DIR) -> Rig:
        specs = [NodeSpec(n, features=("h100", "a100")) for n in nodes]
        rig = Rig(specs, start_slurmd=False)
        extra = [f"PluginDir={plugin_dir}:{slurm_plugindir()}", "NodeFeaturesPlugins=k8s"]
        if power:
            extra += [self.power_lines(rig), "SuspendTimeout=5", "ResumeTimeout=300",
                      f"SuspendTime={suspend_time}"]
        rig.config.slurm_conf_extra = "\n".join(extra) + "\n"
        rig.config.extra_files = {
            "k8sbridge.conf": bridge_conf(self.kubeconfig, self.dir / "power.log"),
            "worker.yaml": TEMPLATE,
        }
        return rig

    def start_kube(self, rig: Rig) -> None:
        """The real Kubernetes on the rig's bridge address, after the rig made the
        bridge, with the nodes of KUBE_NODES (Ready once kwok plays them)."""
        self.kube = KubeCluster(address=rig.bridge_address)
        self.addCleanup(self.kube.close)
        for node in kube_nodes():
            self.kube.create("/api/v1/nodes", node, ok=(201,))

        def ready():
            status, _, body = self.kube.request("GET", "/api/v1/nodes")
            return status == 200 and {n["metadata"]["name"] for n in body["items"] if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", []))} >= set(KUBE_NODES)
        wait_for(ready, 120, "kwok to make the Kubernetes nodes Ready")
        # node_features_k8s (in slurmctld and slurmd) and k8sbridge-power run with the
        # deployment's controller ServiceAccount (both need only what it grants).
        self.kube.apply_deploy_rbac("default")
        shutil.copy(self.kube.service_account_kubeconfig(
            "default", "k8sbridge-controller", expiration_seconds=24 * 3600), self.kubeconfig)

    def cut_off_api(self, rig: Rig, node: str) -> None:
        """Makes the API server unreachable from `node`'s network namespace, as a
        network partition does: packets to its port are dropped (a connection never
        opens, a request never gets an answer); slurmctld and the other nodes still
        reach it. Until reconnect_api(); the namespace goes with the rig."""
        self._api_rule(rig, node, "-A")
        self.addCleanup(self.reconnect_api, rig, node)

    def reconnect_api(self, rig: Rig, node: str) -> None:
        if not rig.stopped:
            self._api_rule(rig, node, "-D", check=False)

    def _api_rule(self, rig: Rig, node: str, op: str, check: bool = True) -> None:
        url = urlsplit(self.kube.url)
        iptables = ["ip", "netns", "exec", rig.workers[node].netns, "iptables"]
        rule = ["OUTPUT", "-p", "tcp", "-d", url.hostname, "--dport", str(url.port),
                "-j", "DROP"]
        present = subprocess.run(iptables + ["-C", *rule], capture_output=True).returncode == 0
        if (op == "-A") == present:
            return  # already as asked
        subprocess.run(iptables + [op, *rule], check=check, capture_output=True)

    # ---- the test's kubelet ----------------------------------------------------

    def pod(self, name):
        status, _, body = self.kube.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        return body if status == 200 else None

    def start_kubelet(self, rig: Rig) -> None:
        self.kubelet = TestKubelet(self.kube, rig).start()

    def stop_kubelet(self) -> None:
        if self.kubelet:
            self.kubelet.stop()

    # ---- checks -------------------------------------------------------------------

    def power_log(self) -> str:
        p = self.dir / "power.log"
        return p.read_text() if p.exists() else "(no power.log)"

    def assertRigGone(self, rig: Rig) -> None:
        """This rig's resources are gone (other engineers' rigs may be running)."""
        def gone():
            netns = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                               text=True).stdout.split()
                     if n.startswith(f"k8sb-{rig.id}-")]
            procs = [p for p in pids_with_env(RIG_ENV, rig.id) if alive(p)]
            return not netns and not procs
        wait_for(gone, 30, f"rig {rig.id}'s namespaces and processes to be gone")


def features_of(node: dict, key: str) -> set:
    value = node.get(key, "")
    return set() if value in ("", "(null)") else set(value.split(","))
