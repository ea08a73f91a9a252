"""A real Kubernetes for the tests, the demo and the benchmarks.

KubeCluster starts the upstream programs that scripts/build-kubernetes.sh builds from
their Go modules, set up as a real cluster is:

- etcd, serving TLS to client certificates only;
- kube-apiserver with TLS, client certificates for the admin and the components,
  RBAC and Node authorization, the admission plugins that are on by default plus
  NodeRestriction (PodSecurity among them), ServiceAccount token issuing and API
  Priority and Fairness;
- kube-controller-manager with its default controllers, each under its own
  ServiceAccount, and kube-scheduler;
- kwok, which plays the kubelet of nodes that run no processes ("fake nodes"):
  node heartbeats and leases, pods to Running, deleted pods removed.

Every process carries the rig marker (harness.rig.RIG_ENV), so `rigctl cleanup`
and the leftover checks find one that a killed test left behind. Ports come from
a rig slot. Use as a context manager; close() stops everything and removes the
directory.
"""

import base64
import functools
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from harness.paths import SOURCE_ROOT
from harness.pki import Pki
from harness.rig import RIG_ENV, claim_slot
from harness.webhook import FaultWebhook

LEAF_LABEL = "network.topology.nvidia.com/leaf"
SPINE_LABEL = "network.topology.nvidia.com/spine"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# The annotation kwok selects the nodes it plays by (its documented convention).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.233.0.0/16"  # ClusterIPs: allocated only, no traffic goes there
KWOK_POD_CIDR = "10.234.0.0/16"  # the IPs kwok writes into fake pods' status
CLUSTER_DOMAIN = "cluster.local"
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
ADMIN_SA = ("kube-system", "k8sbridge-test-admin")  # the admin's bearer token

# What kwok does for the fake nodes and their pods (its Stage API): a node becomes
# Ready with the capacity it was created with; a bound pod becomes Running; a pod
# being deleted is removed, as a kubelet does once its containers are gone.
KWOK_STAGES = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: fake-node-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range NodeConditions }}
      - lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
        message: {{ .message | Quote }}
        reason: {{ .reason | Quote }}
        status: {{ .status | Quote }}
        type: {{ .type | Quote }}
      {{ end }}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: fake-pod-running}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Pending]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
      {{ with NodeIPsWith .spec.nodeName }}
      hostIP: {{ index . 0 | Quote }}
      {{ end }}
      {{ with PodIPsWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace }}
      podIP: {{ index . 0 | Quote }}
      podIPs:
      {{ range . }}
      - ip: {{ . | Quote }}
      {{ end }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: fake-pod-gone}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
"""


@functools.lru_cache(maxsize=None)
def kubernetes_bin() -> Path:
    """The directory of the Kubernetes programs (K8SBRIDGE_KUBERNETES_BIN, else
    what scripts/build-kubernetes.sh prints: it builds them if its cache lacks them)."""
    given = os.environ.get("K8SBRIDGE_KUBERNETES_BIN")
    if given:
        return Path(given)
    out = subprocess.run(["bash", str(SOURCE_ROOT / "scripts" / "build-kubernetes.sh")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/build-kubernetes.sh failed:\n{out.stderr[-4000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def kubectl_program() -> Path:
    """The kubectl built with the cluster's programs: the one every test uses."""
    return kubernetes_bin() / "kubectl"


def wait_for_condition(predicate, timeout, what, interval=0.1):
    """Polls `predicate` until it returns something truthy, and returns that;
    raises AssertionError naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def fake_node(name: str, index: int, leaf: int, spine: int, gpus: int, gpu_product: str,
              cpu: str, memory: str, pods: int) -> dict:
    """A Node for kwok to play: the labels and capacity that a GPU node's kubelet,
    NVIDIA's GPU feature discovery and the fabric's topology labeller would give it."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", LEAF_LABEL: f"leaf-{leaf}",
              SPINE_LABEL: f"spine-{spine}", "type": "kwok"}
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus > 0:
        labels[GPU_PRODUCT_LABEL] = gpu_product
        labels[GPU_COUNT_LABEL] = str(gpus)
        capacity["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
        "status": {"capacity": capacity, "allocatable": dict(capacity),
                   "addresses": [{"type": "InternalIP", "address": f"10.235.{index // 250}."
                                  f"{index % 250 + 1}"},
                                 {"type": "Hostname", "address": name}],
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "kubeletVersion": "kwok", "containerRuntimeVersion": "kwok",
                                "kernelVersion": "kwok", "osImage": "kwok",
                                "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                                "bootID": ""}},
    }


class KubeCluster:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok in a
    directory of their own. `nodes` fake nodes named <node_prefix>0... are spread
    over `ib_leaves` leaves in order, with `gpus_per_node` GPUs each. `address`: where the API server listens (a rig bridge's
    address, for pods in network namespaces); 127.0.0.1 by default. `slot`: a rig
    slot the caller claimed (and releases) to build that bridge from its subnet
    before the API server starts; by default the cluster claims one of its own.
    `kubelet_address_types`: the node addresses the API server dials a kubelet at,
    in order (--kubelet-preferred-address-types; real nodes' kubelets listen on their
    InternalIP, and their Hostname resolves nowhere)."""

    def __init__(self, nodes=0, node_prefix="node-", gpus_per_node=8,
                 gpu_product="NVIDIA-H100-80GB-HBM3", ib_leaves=2, ib_spines=1, cpu="64",
                 memory="512Gi", pods=110, scheduler=True, controllers=True,
                 address="127.0.0.1", audit=True, bin_dir=None, slot=None,
                 kubelet_address_types=None):
        self.bin = Path(bin_dir) if bin_dir else kubernetes_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="kube-test-"))
        self.id = "kc" + self.dir.name.rsplit("-", 1)[-1].lower()
        self.address = address
        self.audit = audit
        self.audit_log = self.dir / "audit.log"
        self._audit_offset = 0
        self.webhook = None
        self._fault_ids = 0
        self._throttles = {}  # (namespace, name) -> (stop event, thread, fault id)
        self._own_slot = slot is None
        self.slot = claim_slot() if slot is None else slot
        self.kubelet_address_types = kubelet_address_types
        self.procs = {}  # name -> Popen, in start order
        self._argv = {}  # name -> its command line, for start() after stop()
        self._logs = []
        try:
            self._start(scheduler, controllers)
            self.add_fake_nodes(nodes, node_prefix, gpus_per_node, gpu_product, ib_leaves,
                                ib_spines, cpu, memory, pods)
        except BaseException:
            self.close()
            raise
        # The test's log names the Kubernetes it ran against.
        print(f"kube cluster {self.id} at {self.url}: `kube-apiserver --version` printed "
              f"{self.version()!r}", file=sys.stderr)

    # --- start -----------------------------------------------------------------

    def _spawn(self, name, argv):
        self._argv[name] = argv
        log = open(self.dir / f"{name}.log", "a")
        self._logs.append(log)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", RIG_ENV: self.id, "HOME": str(self.dir)}
        self.procs[name] = subprocess.Popen([str(a) for a in argv], stdout=log,
                                            stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)

    def log_tail(self, name, lines=40):
        path = self.dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) \
            if path.exists() else ""

    def _check_alive(self, name):
        if self.procs[name].poll() is not None:
            raise RuntimeError(f"{name} exited ({self.procs[name].returncode}):\n"
                               f"{self.log_tail(name)}")

    def _start(self, scheduler, controllers):
        self.pki = Pki(self.dir / "pki")
        self.sa_key, self.sa_pub = self.pki.service_account_keys()
        self._start_etcd()
        self._start_apiserver()
        self._bootstrap_admin_token()
        if controllers:
            self._start_component("kube-controller-manager", "system:kube-controller-manager", [
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.sa_key}",
                f"--root-ca-file={self.pki.ca}",
                f"--cluster-signing-cert-file={self.pki.ca}",
                f"--cluster-signing-key-file={self.pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--leader-elect=false", "--controllers=*",
                "--kube-api-qps=1000", "--kube-api-burst=2000"])
        if scheduler:
            self._start_component("kube-scheduler", "system:kube-scheduler", [
                "--leader-elect=false", "--kube-api-qps=1000", "--kube-api-burst=2000"])
        self._start_kwok()
        if controllers:
            self.wait_for_default_service_account("default")

    def _start_etcd(self):
        crt, key = self.pki.issue("etcd", "etcd", hosts=["127.0.0.1", "localhost"],
                                  server=True)
        self.etcd_client = self.pki.issue("etcd-client", "kube-apiserver-etcd-client")
        client_port, peer_port = self.slot.free_port(), self.slot.free_port()
        self.etcd_url = f"https://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn("etcd", [
            self.bin / "etcd", "--name", "etcd0", "--data-dir", self.dir / "etcd",
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"etcd0={peer}",
            "--cert-file", crt, "--key-file", key, "--client-cert-auth",
            "--trusted-ca-file", self.pki.ca,
            "--listen-metrics-urls", f"http://127.0.0.1:{self.slot.free_port()}",
            # A test's data need not survive a power cut: no fsync, as envtest runs it.
            "--unsafe-no-fsync", "--quota-backend-bytes", str(4 << 30)])

    def etcdctl(self, *args, check=True):
        """Runs the etcdctl built beside etcd against this cluster's etcd."""
        crt, key = self.etcd_client
        r = subprocess.run([str(self.bin / "etcdctl"), "--endpoints", self.etcd_url,
                            "--cacert", str(self.pki.ca), "--cert", str(crt), "--key", str(key),
                            *args], capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"etcdctl {' '.join(args)}: {r.stderr}")
        return r

    def _start_apiserver(self):
        port = self.slot.free_port()
        hosts = ["127.0.0.1", "localhost", self.address, "10.233.0.1", "kubernetes",
                 "kubernetes.default", "kubernetes.default.svc",
                 f"kubernetes.default.svc.{CLUSTER_DOMAIN}"]
        crt, key = self.pki.issue("apiserver", "kube-apiserver", hosts=sorted(set(hosts)),
                                  server=True, client=False)
        kubelet_crt, kubelet_key = self.pki.issue("apiserver-kubelet-client",
                                                  "kube-apiserver-kubelet-client",
                                                  ["kubeadm:cluster-admins"])
        self.admin_cert = self.pki.issue("admin", "kubernetes-admin", ["system:masters"])
        self.url = f"https://{self.address}:{port}"
        etcd_crt, etcd_key = self.etcd_client
        self._spawn("kube-apiserver", [
            self.bin / "kube-apiserver",
            f"--bind-address={self.address}", f"--secure-port={port}",
            f"--advertise-address={self.address}",
            # The "kubernetes" Service's endpoints: a loopback address may not be
            # one, and fake nodes need none.
            "--endpoint-reconciler-type=" + ("none" if self.address.startswith("127.")
                                             else "lease"),
            f"--tls-cert-file={crt}", f"--tls-private-key-file={key}",
            f"--client-ca-file={self.pki.ca}",
            f"--etcd-servers={self.etcd_url}", f"--etcd-cafile={self.pki.ca}",
            f"--etcd-certfile={etcd_crt}", f"--etcd-keyfile={etcd_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
            f"--service-account-key-file={self.sa_pub}",
            f"--service-account-signing-key-file={self.sa_key}",
            f"--kubelet-client-certificate={kubelet_crt}",
            f"--kubelet-client-key={kubelet_key}",
            "--allow-privileged=true", "--enable-priority-and-fairness=true",
            "--profiling=false", *self._kubelet_address_flags(), *self._audit_flags()])
        self.kubeconfig = str(self._write_kubeconfig("admin", self.admin_cert))
        wait_for_condition(self._ready, 120, "kube-apiserver's /readyz", interval=0.2)

    def _kubelet_address_flags(self):
        if not self.kubelet_address_types:
            return []
        return ["--kubelet-preferred-address-types=" + ",".join(self.kubelet_address_types)]

    def _audit_flags(self):
        """Every request's verb, resource, user and answer in the audit log (JSON
        lines), which requests_log() reads: how a test sees what a client asked.
        audit=True logs every user's requests, a list of user names only theirs (a
        benchmark's: the log then costs the server nothing for the rest), False none."""
        if not self.audit:
            return []
        rule = {"level": "Metadata"}
        if self.audit is not True:
            rule["users"] = list(self.audit)
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
            "rules": [rule, {"level": "None"}]}))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json", "--audit-log-mode=blocking"]

    def requests_log(self):
        """The requests answered since start or the last clear_requests(), oldest
        first: {"verb", "resource", "subresource", "code", "path", "user", "received",
        "answered"}; the last two are the API server's RFC 3339 times (microseconds)
        of the request's arrival and of its answer."""
        out = []
        with open(self.audit_log, "rb") as f:
            f.seek(self._audit_offset)
            for line in f:
                e = json.loads(line)
                if e.get("stage") != "ResponseComplete":
                    continue
                ref = e.get("objectRef", {})
                out.append({"verb": e.get("verb"), "resource": ref.get("resource"),
                            "subresource": ref.get("subresource"), "name": ref.get("name"),
                            "namespace": ref.get("namespace"),
                            "code": e.get("responseStatus", {}).get("code"),
                            "path": e.get("requestURI"),
                            "user": e.get("user", {}).get("username"),
                            "received": e.get("requestReceivedTimestamp"),
                            "answered": e.get("stageTimestamp")})
        return out

    def clear_requests(self):
        self._audit_offset = self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def _ready(self):
        for name in ("etcd", "kube-apiserver"):
            self._check_alive(name)
        try:
            status, _, _ = self.request("GET", "/readyz", timeout=2, token=False)
            return status == 200
        except OSError:
            return False

    def _write_kubeconfig(self, user, cert=None, token=None, namespace=None, token_file=None):
        path = self.dir / f"kubeconfig-{user}"
        if cert:
            creds = {"client-certificate": str(cert[0]), "client-key": str(cert[1])}
        elif token_file:
            creds = {"tokenFile": str(token_file)}
        else:
            creds = {"token": token}
        context = {"cluster": "test", "user": user}
        if namespace:
            context["namespace"] = namespace
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {
                "server": self.url, "certificate-authority": str(self.pki.ca)}}],
            "contexts": [{"name": user, "context": context}],
            "current-context": user,
            "users": [{"name": user, "user": creds}]}))
        path.chmod(0o600)
        return path

    def _start_component(self, name, user, flags):
        kubeconfig = self._write_kubeconfig(name, self.pki.issue(name, user))
        self._spawn(name, [self.bin / name, f"--kubeconfig={kubeconfig}",
                           f"--authentication-kubeconfig={kubeconfig}",
                           f"--authorization-kubeconfig={kubeconfig}",
                           "--bind-address=127.0.0.1",
                           f"--secure-port={self.slot.free_port()}", *flags])

    def _start_kwok(self):
        stages = self.dir / "kwok-stages.yaml"
        stages.write_text(KWOK_STAGES)
        kubeconfig = self._write_kubeconfig("kwok", self.pki.issue("kwok", "kwok-controller",
                                                                   ["system:masters"]))
        self._spawn("kwok", [
            self.bin / "kwok", f"--kubeconfig={kubeconfig}", f"--config={stages}",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--cidr={KWOK_POD_CIDR}", "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{self.slot.free_port()}"])

    def _bootstrap_admin_token(self):
        """A ServiceAccount bound to cluster-admin, whose token is `token`: tests
        and benchmarks that speak HTTP with a bearer token act as the admin."""
        ns, name = ADMIN_SA
        self.create_service_account(ns, name)
        self.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "namespace": ns, "name": name}]})
        self._token = self.service_account_token(ns, name, 24 * 3600)

    # --- nodes ----------------------------------------------------------------

    def add_fake_nodes(self, count, prefix="node-", gpus_per_node=8,
                       gpu_product="NVIDIA-H100-80GB-HBM3", ib_leaves=2, ib_spines=1,
                       cpu="64", memory="512Gi", pods=110, first=0):
        """Creates `count` nodes that kwok plays and waits until every one is Ready."""
        leaves = max(ib_leaves, 1)
        per_leaf = max((count + leaves - 1) // leaves, 1)
        names = []
        for i in range(count):
            leaf = i // per_leaf
            name = f"{prefix}{first + i}"
            self.create("/api/v1/nodes", fake_node(name, first + i, leaf, leaf % max(ib_spines, 1),
                                                    gpus_per_node, gpu_product, cpu, memory,
                                                    pods))
            names.append(name)
        if names:
            wait_for_condition(lambda: self._nodes_ready(set(names)), 120 + count / 50,
                  f"{count} fake nodes to be Ready")
        return names

    def _nodes_ready(self, names):
        self._check_alive("kwok")
        status, _, body = self.request("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")
        if status != 200:
            return False
        ready = {n["metadata"]["name"] for n in body["items"]
                 if any(c["type"] == "Ready" and c["status"] == "True"
                        for c in n.get("status", {}).get("conditions", []))}
        return names <= ready

    def create_host_path_volume(self, name, size, access_modes, path, claim=None):
        """A PersistentVolume on a host directory, as an admin without a dynamic
        provisioner makes one for each claim (static provisioning): the PV
        controller binds a claim of no storage class whose size and access modes it
        satisfies, or only `claim` ((namespace, name)) when given."""
        Path(path).mkdir(parents=True, exist_ok=True)
        spec = {"capacity": {"storage": size}, "accessModes": list(access_modes),
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": str(path), "type": "DirectoryOrCreate"}}
        if claim is not None:
            spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
        self.create("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": spec}, ok=(201,))

    # --- talking to it --------------------------------------------------------

    @property
    def token(self):
        """A bearer token of a cluster-admin ServiceAccount."""
        return self._token

    def ssl_context(self, client_cert=True):
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        if client_cert:
            ctx.load_cert_chain(str(self.admin_cert[0]), str(self.admin_cert[1]))
        return ctx

    def request(self, method, path, body=None, token=None, content_type="application/json",
                timeout=30):
        """Returns (status, headers, parsed JSON body or text) without raising on
        errors. As the admin (client certificate) unless `token` is given; token=False
        sends no credentials at all."""
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        context = self.ssl_context(client_cert=token is None)
        try:
            with urllib.request.urlopen(req, context=context, timeout=timeout) as r:
                status, headers, raw = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, headers, raw = e.code, dict(e.headers), e.read()
        try:
            return status, headers, json.loads(raw)
        except ValueError:
            return status, headers, raw.decode(errors="replace")

    def create(self, path, body, ok=(201, 409)):
        """POSTs `body` as the admin; 409 (it exists) is fine unless `ok` says not."""
        status, _, answer = self.request("POST", path, body)
        if status not in ok:
            raise AssertionError(f"POST {path} {body.get('metadata', {}).get('name')}: "
                                 f"{status} {answer}")
        return answer

    def answers(self, timeout=2):
        """True when the API server answers /readyz with 200."""
        try:
            return self.request("GET", "/readyz", timeout=timeout, token=False)[0] == 200
        except OSError:
            return False

    def version(self):
        """What `kube-apiserver --version` prints, e.g. "Kubernetes v1.37.2"."""
        return subprocess.run([str(self.bin / "kube-apiserver"), "--version"],
                              capture_output=True, text=True, check=True).stdout.strip()

    def kubectl(self, *args, check=True, timeout=60, context=None, kubeconfig=None, input=None):
        argv = [str(self.bin / "kubectl"), "--kubeconfig", str(kubeconfig or self.kubeconfig)]
        if context:
            argv += ["--context", context]
        argv += list(args)
        env = dict(os.environ, HOME=str(self.dir))  # kubectl's cache stays in the test dir
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                                input=input)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def kubectl_json(self, *args, **kw):
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)

    def node_kubeconfig(self, node):
        """A kubeconfig with the client certificate of node `node`'s kubelet
        (system:node:<node> in system:nodes): what the Node authorizer and
        NodeRestriction let a kubelet do."""
        cert = self.pki.issue(f"node-{node}", f"system:node:{node}", ["system:nodes"])
        return self._write_kubeconfig(f"node-{node}", cert)

    # --- ServiceAccounts --------------------------------------------------------

    def create_namespace(self, name):
        """Creates the namespace (an existing one is fine) and, where the controllers
        run, waits for its "default" ServiceAccount: until the ServiceAccount
        controller made it, the API server refuses every pod there."""
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name}})
        manager = self.procs.get("kube-controller-manager")
        if manager is not None and manager.poll() is None:
            self.wait_for_default_service_account(name)

    def wait_for_default_service_account(self, namespace):
        wait_for_condition(lambda: self.request(
            "GET", f"/api/v1/namespaces/{namespace}/serviceaccounts/default")[0] == 200, 120,
            f"the ServiceAccount controller to make {namespace}'s default ServiceAccount")

    def create_service_account(self, namespace, name):
        """Creates the ServiceAccount (and its namespace); an existing one is fine."""
        self.create_namespace(namespace)
        self.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})

    def service_account_token(self, namespace, name, expiration_seconds=3600):
        """A token of the ServiceAccount namespace/name from the TokenRequest API (as
        `kubectl create token`); the API server takes at least 600 seconds."""
        status, _, body = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": max(expiration_seconds, 600)}})
        if status != 201:
            raise AssertionError(f"TokenRequest for {namespace}/{name}: {status} {body}")
        return body["status"]["token"]

    def service_account_kubeconfig(self, namespace, name, expiration_seconds=3600,
                                   token_file=False):
        """Writes a kubeconfig that acts as the ServiceAccount namespace/name (this
        server and CA, a token of that account, namespace as the default) and returns
        its path. `token_file`: the token is in a file beside it (`tokenFile:`, as a
        pod's projected token), which rotate_service_account_token replaces."""
        token = self.service_account_token(namespace, name, expiration_seconds)
        user = f"sa-{namespace}-{name}"
        if token_file:
            path = self.dir / f"kubeconfig-{user}.token"
            _write_private(path, token)
            return self._write_kubeconfig(user, namespace=namespace, token_file=path)
        return self._write_kubeconfig(user, token=token, namespace=namespace)

    def rotate_service_account_token(self, namespace, name, expiration_seconds=3600):
        """Revokes every token of the ServiceAccount (deleted and made again: a token
        bound to the old uid is refused) and writes a new one to the tokenFile of its
        kubeconfig (made with token_file=True), atomically, as the kubelet updates a
        projected token."""
        status, _, body = self.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
        if status != 200:
            raise AssertionError(f"delete ServiceAccount {namespace}/{name}: {status} {body}")
        self.create_service_account(namespace, name)
        token = self.service_account_token(namespace, name, expiration_seconds)
        _write_private(self.dir / f"kubeconfig-sa-{namespace}-{name}.token", token)

    def apply_deploy_rbac(self, namespace):
        """Applies deploy/base/rbac.yaml (what a platform team applies) for worker pods
        in `namespace`: its namespaced objects and ServiceAccount subjects go to
        `namespace` (the shipped controller's namespace and the worker pods' become
        one, as an overlay that renames them would put them), the node events' Role
        stays in "default". Returns the objects as applied."""
        docs = [d for d in yaml.safe_load_all((SOURCE_ROOT / "deploy" / "base" /
                                               "rbac.yaml").read_text()) if d]
        for d in docs:
            if (d["kind"] in ("ServiceAccount", "Role", "RoleBinding") and
                    d["metadata"].get("namespace") != "default"):
                d["metadata"]["namespace"] = namespace
            for s in d.get("subjects", []):
                if s["kind"] == "ServiceAccount":
                    s["namespace"] = namespace
        self.create_namespace(namespace)
        manifest = self.dir / f"rbac-{namespace}.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        self.kubectl("apply", "--server-side", "-f", str(manifest))
        return docs

    def apply_deploy_admission(self, namespace, **params):
        """Applies deploy/base/admission.yaml (the ValidatingAdmissionPolicies that
        narrow the shipped RBAC) for worker pods in `namespace`: its parameters
        ConfigMap goes there, with `params` over the shipped values, and the
        namespace gets the label the pods' binding selects. Waits until the API
        server enforces the policies. Returns the objects as applied."""
        docs = [d for d in yaml.safe_load_all((SOURCE_ROOT / "deploy" / "base" /
                                               "admission.yaml").read_text()) if d]
        for d in docs:
            if d["kind"] == "ConfigMap":
                d["metadata"]["namespace"] = namespace
                d["data"].update(params)
        self.create_namespace(namespace)
        self.kubectl("label", "namespace", namespace, "--overwrite",
                     "k8sbridge.io/worker-pods=true")
        manifest = self.dir / f"admission-{namespace}.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        self.kubectl("apply", "--server-side", "-f", str(manifest))
        # Every expression type-checks against each kind its policy matches (a
        # warning here is an expression that fails, and so refuses, at runtime).
        for d in docs:
            if d["kind"] != "ValidatingAdmissionPolicy":
                continue
            name = d["metadata"]["name"]

            def checked():
                policy = self.kubectl_json("get", "validatingadmissionpolicy", name)
                status = policy.get("status", {})
                if (status.get("observedGeneration") == policy["metadata"]["generation"] and
                        "typeChecking" in status):
                    return status
                return None
            warnings = wait_for_condition(checked, 60, f"policy {name} type-checked")[
                "typeChecking"].get("expressionWarnings")
            if warnings:
                raise AssertionError(f"policy {name}: {warnings}")
        # The policies and bindings take effect once the API server's informers
        # have them: until then a probe pod of no owner is admitted.
        probe = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "admission-probe", "namespace": namespace},
                 "spec": {"containers": [{"name": "c", "image": "probe"}]}}
        token = self.service_account_token(namespace, "k8sbridge-controller")
        wait_for_condition(lambda: self.request(
            "POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", probe,
            token=token)[0] == 403, 60, "the admission policies in force")
        return docs

    # --- faults ------------------------------------------------------------------

    def add_fault(self, resource, verb, code, times=1, message="injected fault", name=None,
                  delay=0.0):
        """Makes the API server refuse `verb` (create, update, patch, delete or *) of
        `resource` with `code` and `message`, `times` times (0: until clear_faults),
        through FaultWebhook; `delay` seconds first (code None: only the delay).
        Returns the fault's id (fault_hits)."""
        operation = {"create": "CREATE", "update": "UPDATE", "patch": "UPDATE",
                     "delete": "DELETE", "*": "*"}[verb]
        if self.webhook is None:
            self.webhook = FaultWebhook(self.pki, self.slot.free_port())
        self._fault_ids += 1
        self.webhook.add({"id": self._fault_ids, "resource": resource, "operation": operation,
                          "code": code, "message": message, "times": times, "name": name,
                          "delay": delay})
        self._register_webhook({resource})
        return self._fault_ids

    def fault_hits(self, fault_id):
        return self.webhook.hits(fault_id) if self.webhook else None

    def clear_faults(self):
        if self.webhook is not None:
            self.webhook.clear()

    def _register_webhook(self, resources):
        """The ValidatingWebhookConfiguration that sends writes of `resources` (and
        of the probe ConfigMap) to FaultWebhook; returns once the API server uses it."""
        self._webhook_resources = getattr(self, "_webhook_resources", set()) | resources
        ca = base64.b64encode(self.pki.ca.read_bytes()).decode()
        # "*" (a fault on every resource) must stand alone in a rule, and covers the
        # probe's configmaps.
        rule_resources = ["*"] if "*" in self._webhook_resources else \
            sorted(self._webhook_resources | {"configmaps"})
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "k8sbridge-test-faults"},
            "webhooks": [{
                "name": "faults.test.k8sbridge.io",
                "clientConfig": {"url": self.webhook.url, "caBundle": ca},
                "rules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                           "operations": ["CREATE", "UPDATE", "DELETE"],
                           "resources": rule_resources, "scope": "*"}],
                "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 10,
                "admissionReviewVersions": ["v1"]}]}
        path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
        status, _, current = self.request("GET", f"{path}/k8sbridge-test-faults")
        if status == 200:
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            status, _, answer = self.request("PUT", f"{path}/k8sbridge-test-faults", body)
        else:
            status, _, answer = self.request("POST", path, body)
        if status not in (200, 201):
            raise AssertionError(f"registering the fault webhook: {status} {answer}")
        probe = f"{FaultWebhook.PROBE_NAME}-{self._fault_ids}-{len(rule_resources)}"

        def probed():
            self.request("POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
                         {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": probe}})
            return probe in self.webhook.probes_seen
        wait_for_condition(probed, 30, "the API server to call the fault webhook", interval=0.05)

    def pause(self, name):
        """Freezes a component (SIGSTOP): it holds its connections and answers nothing.
        Returns once every thread of it has stopped: kill() only queues the stop, which
        the one thread picked to take the signal carries out when it next runs, and
        until then the other threads go on (on a loaded machine an API server
        answered a request sent after kill() had returned)."""
        proc = self.procs[name]
        os.kill(proc.pid, signal.SIGSTOP)

        def stopped():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited while being paused")
            return all(state in "TtZX" for state in _thread_states(proc.pid))
        wait_for_condition(stopped, 30, f"every thread of {name} to stop", interval=0.001)

    def resume(self, name):
        os.kill(self.procs[name].pid, signal.SIGCONT)

    def stop(self, name):
        """Stops a component as its supervisor would (SIGTERM, then SIGKILL)."""
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def start(self, name):
        """Starts a stopped component again with its first command line; for the API
        server, returns once it is ready."""
        self._spawn(name, self._argv[name])
        if name == "kube-apiserver":
            wait_for_condition(self._ready, 120, "kube-apiserver's /readyz", interval=0.2)

    def restart(self, name):
        self.stop(name)
        self.start(name)

    def throttle(self, namespace, name):
        """Makes API Priority and Fairness refuse the requests of ServiceAccount
        namespace/name with 429 and Retry-After, as a cluster does whose admins cap a
        noisy client and whose capped level is saturated: a FlowSchema that matches
        the account first sends it to a priority level of one seat that rejects
        instead of queueing, and a thread keeps that seat taken by one of the
        account's own writes, a dry-run pod create that the fault webhook holds for
        a few seconds (the account must be allowed to create pods in `namespace`).
        unthrottle() ends it."""
        level = f"throttled-{namespace}-{name}"
        self.create(f"{FLOWCONTROL}/prioritylevelconfigurations", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": level},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 0, "lendablePercent": 0,
                "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}})
        self.create(f"{FLOWCONTROL}/flowschemas", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": level},
            "spec": {"priorityLevelConfiguration": {"name": level},
                     "matchingPrecedence": 2, "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                         "namespace": namespace, "name": name}}],
                         "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                            "resources": ["*"], "namespaces": ["*"],
                                            "clusterScope": True}],
                         "nonResourceRules": [{"verbs": ["*"],
                                               "nonResourceURLs": ["*"]}]}]}})
        holder = f"apf-seat-holder-{name}"
        fault = self.add_fault("pods", "create", 503, times=0, name=holder, delay=5,
                               message="holding a seat of the throttled level")
        token = self.service_account_token(namespace, name)
        stop = threading.Event()
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": holder},
               "spec": {"containers": [{"name": "c", "image": "k8sbridge.invalid/none:1"}]}}

        def hold():
            while not stop.is_set():
                try:
                    self.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All",
                                 pod, token=token, timeout=30)
                except OSError:
                    stop.wait(0.1)  # the API server is away: try again shortly
        thread = threading.Thread(target=hold, daemon=True)
        thread.start()
        self._throttles[(namespace, name)] = (stop, thread, fault)

    def unthrottle(self, namespace, name):
        stop, thread, fault = self._throttles.pop((namespace, name))
        stop.set()
        self.webhook.remove(fault)
        thread.join(timeout=60)
        level = f"throttled-{namespace}-{name}"
        self.request("DELETE", f"{FLOWCONTROL}/flowschemas/{level}")
        self.request("DELETE", f"{FLOWCONTROL}/prioritylevelconfigurations/{level}")

    def compact_etcd(self):
        """Compacts etcd's history up to its current revision: a watch resumed from
        an older resourceVersion then gets 410 Gone, as after a long disconnection."""
        status = json.loads(self.etcdctl("endpoint", "status", "-w", "json").stdout)
        revision = status[0]["Status"]["header"]["revision"]
        self.etcdctl("compact", str(revision))
        return revision

    def reset_connections(self, pid=None):
        """Resets the TCP connections to the API server (only those of process `pid`
        when given), as a NAT or load balancer that drops its state does (`ss -K`).
        Returns how many were reset."""
        port = self.url.rsplit(":", 1)[1]
        listing = subprocess.run(["ss", "-Htnp", "state", "established", "dport", "=", port],
                                 capture_output=True, text=True, check=True).stdout
        local_ports = [line.split()[2].rsplit(":", 1)[1] for line in listing.splitlines()
                       if pid is None or f"pid={pid}," in line]
        for local in local_ports:
            subprocess.run(["ss", "-K", "dport", "=", port, "sport", "=", local],
                           capture_output=True, check=True)
        return len(local_ports)

    # --- the end -----------------------------------------------------------------

    def close(self):
        for key in list(self._throttles):
            self._throttles.pop(key)[0].set()
        if self.webhook is not None:
            self.webhook.close()
        for name, proc in reversed(list(self.procs.items())):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGCONT)
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        for log in self._logs:
            log.close()
        if self._own_slot:
            self.slot.release()
        if os.environ.get("KUBE_KEEP_DIR"):
            print(f"cluster dir kept: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _thread_states(pid):
    """The state letter (R, S, D, T, ...) of each thread of process `pid`."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the thread ended
            continue
        states.append(text.rsplit(")", 1)[1].split()[0])  # the name may hold ") "
    return states


def _write_private(path, text):
    """Replaces `path` by a file of mode 0600 holding `text`, atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    os.replace(tmp, path)
