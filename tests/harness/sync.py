"""Shared set-up for the k8sbridge-sync end-to-end tests: a rig (real slurmctld and
slurmd), a real Kubernetes (harness.kube.KubeCluster: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kwok playing the fake GPU nodes),
k8sbridge-power as the power programs, and k8sbridge-sync daemons. kwok is the
nodes' kubelet as far as Kubernetes sees it (node leases, Ready, pods Running,
deleted pods gone); the test's kubelet (harness.cluster.TestKubelet) runs what a
pod would: a node's slurmd starts when its pod is bound and stops when the pod goes.
"""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from harness.cluster import NO_KUBELET, TestKubelet, power_program_lines
from harness.kube import KWOK_NODE_ANNOTATION, KubeCluster
from harness.paths import POWER, SYNC
from harness.rig import Rig, free_tcp_port, wait_for
from harness.testcase import RigTestCase, wait_for_no_leftovers


def template(host=None, gpus=0, image="registry.example/slurm-worker:24.11"):
    """A worker pod template; `host` pins the pod to one Kubernetes node."""
    lines = ["spec:", "  terminationGracePeriodSeconds: 1"]
    if host:
        lines += ["  nodeSelector:", f"    kubernetes.io/hostname: {host}"]
    lines += ["  containers:", "  - name: slurmd", f"    image: {image}"]
    return "\n".join(lines) + "\n"


class Daemon:
    """One k8sbridge-sync process with its own metrics port and log."""

    def __init__(self, conf, slurm_conf, identity, logdir, wrap=lambda cmd: cmd, slurm_bin=None):
        """slurm_bin: the directory of the Slurm clients (scontrol, for reboots)."""
        self.identity = identity
        self.log_path = Path(logdir) / f"sync-{identity}.log"
        self.port = conf["port"]
        env = dict(os.environ, SLURM_CONF=str(slurm_conf))
        if slurm_bin:
            env["PATH"] = f"{slurm_bin}:{env.get('PATH', '/usr/bin:/bin')}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                wrap([str(SYNC), "--config", conf["path"], "--identity", identity] +
                     (["--debug"] if os.environ.get("SYNC_TEST_DEBUG") else [])),
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @classmethod
    def for_rig(cls, rig, conf_path, logdir, identity="t"):
        """A daemon beside `rig`'s slurmctld (its resolver files too) with the
        configuration at `conf_path` (which names its own metrics address)."""
        return cls({"path": str(conf_path), "port": 0}, rig.slurm_conf, identity, logdir,
                   wrap=rig.host_command, slurm_bin=rig.prefix / "bin")

    def metrics(self):
        """{name{labels}: value} from the Prometheus endpoint, {} if it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                        timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def metric(self, key, default=0.0):
        return self.metrics().get(key, default)

    def actions(self):
        return sum(v for k, v in self.metrics().items()
                   if k.startswith("k8sbridge_sync_actions_total"))

    def log(self):
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class SyncRigTestCase(RigTestCase):
    """KubeCluster + conf + power wrappers; make_rig() builds the rig, start_daemon()
    the daemons, kubelet() the test's kubelet thread. Everything is cleaned up.
    `cluster_args`: KubeCluster's (its fake nodes node-0...: how many, their GPUs)."""

    cluster_args = {"nodes": 2}
    groups = (("g0", "w-0", template("node-0")), ("g1", "w-1", template("node-1")))
    namespace = "default"  # k8sbridge.conf's Namespace=, where the worker pods live
    sync_keys = ("SyncUnschedulableGrace=10s SyncOrphanGrace=10s SyncLeaseDuration=6s "
                 "SyncPollInterval=250ms")

    def setUp(self):
        super().setUp()
        for path in (POWER, SYNC):
            if not path.exists():
                self.skipTest(f"{path} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="sync-rig-"))
        self.dir.chmod(0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.kube = KubeCluster(**self.cluster_args, scheduler=True)
        self.addCleanup(self.kube.close)
        # k8sbridge-power and k8sbridge-sync run as the deployment's controller
        # ServiceAccount, with exactly the shipped rules (deploy/base/rbac.yaml).
        self.kube.apply_deploy_rbac(self.namespace)
        # Pods are admitted in a namespace once its "default" ServiceAccount exists
        # (the controller-manager makes it, as for any new namespace).
        wait_for(lambda: self.kube.request(
            "GET", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default")[0] == 200,
            60, f"the default ServiceAccount of namespace {self.namespace}")
        self.controller_kubeconfig = self.kube.service_account_kubeconfig(
            self.namespace, "k8sbridge-controller", expiration_seconds=24 * 3600)
        self.daemons = []
        self.addCleanup(self._stop_daemons)

    def assertNoLeftovers(self):
        """What this test's rigs and daemons left behind."""
        for d in self.daemons:
            d.stop()
        left = wait_for_no_leftovers(self.own_rig_ids(), more=lambda: {
            "sync_daemons": [d.proc.pid for d in self.daemons if d.proc.poll() is None]})
        self.assertFalse(any(left.values()), left)

    def _stop_daemons(self):
        for d in self.daemons:
            d.stop()
        if any(d.proc.returncode not in (0, -9) for d in self.daemons) or \
                os.environ.get("SYNC_TEST_LOGS"):
            for d in self.daemons:
                print(f"--- k8sbridge-sync {d.identity} (exit {d.proc.returncode}):\n"
                      f"{d.log()[-6000:]}", file=sys.stderr)

    # ---- configuration --------------------------------------------------------

    def write_conf(self, name="k8sbridge.conf", extra=""):
        port = free_tcp_port()
        lines = ["ClusterName=rig", f"Kubeconfig={self.controller_kubeconfig}",
                 f"Namespace={self.namespace}",
                 "RetryDeadline=5", "RequestTimeout=3", "ConnectTimeout=2",
                 f"LogFile={self.dir / 'power.log'}",
                 f"SyncMetricsListen=127.0.0.1:{port}", self.sync_keys, extra]
        for group, nodes, text, *group_extra in self.groups:
            (self.dir / f"{group}.yaml").write_text(text)
            lines.append(f"NodeGroup={group} Nodes={nodes} PodTemplate={group}.yaml " +
                         " ".join(group_extra))
        path = self.dir / name
        path.write_text("\n".join(lines) + "\n")
        return {"path": str(path), "port": port}

    def power_lines(self, slurm_conf_path, conf_path):
        return "\n".join([power_program_lines(self.dir, conf_path, slurm_conf_path),
                          "SuspendTimeout=5", "ResumeTimeout=300"])

    def make_rig(self, suspend_time=600, nodes=2, short_requeue=False):
        """short_requeue: a requeued job may start again after about 11 s instead of
        121 s (slurmctld holds it for the credential lifetime, AuthInfo cred_expire)."""
        self.conf = self.write_conf()
        rig = Rig(nodes=nodes, start_slurmd=False)
        extra = ""
        if short_requeue:
            # A later AuthInfo line wins over the rig's own.
            extra = f"AuthInfo=socket={rig.munge_socket},cred_expire=10\n"
        rig.config.slurm_conf_extra = (self.power_lines(rig.slurm_conf, self.conf["path"]) +
                                       f"\nSuspendTime={suspend_time}\n" + extra)
        return rig

    def start_daemon(self, rig, identity="a", conf=None):
        conf = conf or self.conf
        d = Daemon(conf, rig.slurm_conf, identity, self.dir, wrap=rig.host_command,
                   slurm_bin=rig.prefix / "bin")
        self.daemons.append(d)
        wait_for(lambda: d.proc.poll() is not None or d.metrics(), 30,
                 f"k8sbridge-sync {identity}'s metrics endpoint")
        self.assertIsNone(d.proc.poll(), d.log())
        return d

    def wait_leader(self, d, timeout=30):
        wait_for(lambda: d.metric("k8sbridge_sync_leader") == 1, timeout,
                 lambda: f"{d.identity} to lead; log:\n{d.log()[-3000:]}")

    # ---- Kubernetes --------------------------------------------------------------

    def get(self, path):
        status, _, body = self.kube.request("GET", path)
        return status, body

    def pod(self, name):
        status, body = self.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        return body if status == 200 else None

    def knode(self, name):
        status, body = self.get(f"/api/v1/nodes/{name}")
        self.assertEqual(status, 200, body)
        body.setdefault("spec", {})
        body["metadata"].setdefault("annotations", {})
        return body

    def set_ready(self, node, status):
        """What node `node`'s kubelet posts: Ready True or False, while it still
        renews the node's Lease (the node is not lost: that is Ready Unknown, from
        the controller-manager, test_sync_lost_node.py's). kwok plays the kubelet and
        would turn a Ready that is not True back at once, so for Ready False the
        node leaves kwok's selection (its annotation: kwok then ignores the node's
        changes, and goes on renewing the Lease it holds) and the test posts the
        status as the node itself, with its client certificate (system:node:<node>,
        which NodeRestriction lets change its own Node only). Ready True is posted
        the same way and hands the node back to kwok."""
        reason, message = {
            "True": ("KubeletReady", "kubelet is posting ready status"),
            "False": ("KubeletNotReady", "container runtime network not ready"),
        }[status]
        if status != "True":
            self.kube.kubectl("annotate", "node", node, f"{KWOK_NODE_ANNOTATION}-")
        cond = {"type": "Ready", "status": status, "reason": reason, "message": message}
        code, body = as_kubelet(self.kube, node, "PATCH", f"/api/v1/nodes/{node}/status",
                                {"status": {"conditions": [cond]}})
        self.assertEqual(code, 200, body)
        if status == "True":
            self.kube.kubectl("annotate", "node", node, f"{KWOK_NODE_ANNOTATION}=fake",
                              "--overwrite")

    def create_pod(self, name, labels, annotations=None):
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": labels,
                             "annotations": dict(annotations or {}, **{NO_KUBELET: "yes"})},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}
        code, _, resp = self.kube.request("POST", f"/api/v1/namespaces/{self.namespace}/pods",
                                          body)
        self.assertEqual(code, 201, resp)
        return resp

    @staticmethod
    def owned_labels(node, cluster="rig"):
        return {"app.kubernetes.io/managed-by": "k8sbridge", "k8sbridge.io/cluster": cluster,
                "k8sbridge.io/node": node}

    # ---- the test's kubelet --------------------------------------------------------

    def kubelet(self, rig, names=("w-0", "w-1")):
        """The test's kubelet (TestKubelet) for the pods of `names`, until the test ends."""
        kubelet = TestKubelet(self.kube, rig, names, namespace=self.namespace).start()
        self.addCleanup(kubelet.stop)
        return kubelet

    def power_up(self, rig, names):
        rig.check_output(["scontrol", "update", f"nodename={','.join(names)}",
                          "state=power_up"])
        rig.wait_nodes_idle(names, timeout=90)

    def power_log(self):
        path = self.dir / "power.log"
        return path.read_text() if path.exists() else "(no power.log)"


def as_kubelet(kube, node, method, path, body):
    """One request as node `node`'s kubelet (its client certificate, from
    KubeCluster.node_kubeconfig), with a merge patch body; returns (status, body)."""
    user = yaml.safe_load(Path(kube.node_kubeconfig(node)).read_text())["users"][0]["user"]
    context = ssl.create_default_context(cafile=str(kube.pki.ca))
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    req = urllib.request.Request(kube.url + path, data=json.dumps(body).encode(),
                                 method=method)
    req.add_header("Content-Type", "application/merge-patch+json")
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
