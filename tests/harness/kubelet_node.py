"""Real Kubernetes nodes for the tests: pods that are real containers.

RealCluster starts a KubeCluster (tests/harness/kube.py) whose API server listens on a
bridge of the cluster's own, CoreDNS for the cluster's DNS, and `nodes` RealNodes:

    with RealCluster(nodes=2) as rc:
        rc.kube.create("/api/v1/namespaces/default/pods", busybox_pod("p", "sleep 3600"))

A RealNode runs the upstream node programs as a machine of a cluster runs them:
Debian's containerd with runc and its v2 shim, the kubelet (scripts/build-kubernetes.sh),
Debian's CNI plugins (bridge, host-local, portmap, loopback) and kube-proxy in iptables
mode. No registry can be reached, so the images (a busybox and the pods' sandbox
"pause" image, tests/harness/oci_layout.py) are imported into each node's containerd;
pods name BUSYBOX_IMAGE with imagePullPolicy Never.

How a node is kept apart from the host, from other nodes and from other tests:
- Network: a namespace k8sb-<id>-<node> on the host bridge k8sb<id> (the rig slot's
  subnet: the host's side is .1, node i is .10+i) and no default route, so nothing a
  node does leaves for an address the tests do not own. A node's pods get addresses
  from its quarter of the slot's pod network (its podCIDR), and each node routes the
  other nodes' podCIDRs to them: pods reach each other across nodes with their own
  addresses, no NAT (Kubernetes' network model; slurmctld takes a worker's address
  from its connection). What leaves the pod network (for the API server and CoreDNS
  on the host's bridge) is masqueraded to the node's address, unless
  masquerade=False: then pods keep their addresses towards the host too, and whoever
  they talk to there routes the podCIDRs to the nodes (the host's routes are then the
  caller's; they go with the bridge). kube-proxy's, the CNI plugins' and that rule's
  iptables rules live in the namespace and go with
  it.
- Mounts: a mount namespace of the node's own (made by a `sleep` process that holds it;
  every process of the node joins it), so containerd's overlays, the pods' network
  namespace files and the kubelet's volumes never show on the host and vanish with
  the node. Inside it /run is a fresh tmpfs (the shims' sockets, runc's state, the
  pods' netns files), and /var/log and /var/lib/cni (the kubelet's pod logs, the CNI
  cache) are directories of the node: an empty /var/lib/cni, their mount point, is
  all that a node leaves on the host.
- Host settings: the kubelet sets six sysctls to values of its own at start (among
  them kernel.panic_on_oops=1, which would turn any oops on this shared machine into
  a panic); protectKernelDefaults refuses to start instead. So the node's mount
  namespace shows the kubelet a writable copy of each (KUBELET_SYSCTLS), and the
  machine's stay as they are. kube-proxy is told to leave the conntrack table's size
  (a machine-wide setting) alone.
- OOM scores: root on these machines lacks CAP_SYS_RESOURCE, so no process may lower
  its oom_score_adj, and runc cannot start a sandbox at the kubelet's -998 (nor a
  Guaranteed pod at -997). containerd's restrict_oom_score_adj clamps them to its own
  score (0); the kubelet's own -999 fails with a logged error, harmlessly.
- cgroups: cgroupfs under a cgroupRoot of the node's own, /k8sb-<id>-<node>, made in
  every hierarchy before the kubelet starts (it requires that). Closing kills what is
  left in it (the containers: no process the harness started is their parent) and
  removes it.
- Processes: each carries K8SBRIDGE_RIG_ID=<id> (containerd passes it on to its
  shims), so `rigctl cleanup` finds what a killed test left; the containers' processes
  are found by the node's cgroup (rig.py's leftovers() and cleanup_all() look there).

Several nodes on one machine work (the test runs two): each has its own namespaces,
kubelet root directory, containerd, cgroupRoot and podCIDR. A rig slot's /24 pod
network gives four /26 podCIDRs, so a RealCluster has at most four nodes.
"""

import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import oci_layout
from harness.kube import CLUSTER_DOMAIN, KubeCluster, wait_for_condition
from harness.rig import (CGROUP_FS, RESOURCE_PREFIX, RIG_ENV, WORKDIR_PREFIX, cgroup_pids,
                         claim_slot, kill_and_wait, remove_cgroup_tree)

BUSYBOX_IMAGE = "k8sbridge.invalid/busybox:1"
PAUSE_IMAGE = "k8sbridge.invalid/pause:1"
DNS_SERVICE_IP = "10.233.0.10"  # in kube.SERVICE_CIDR: the kubelets' clusterDNS
NODE_POD_PREFIX = 26            # a node's podCIDR: a quarter of the slot's pod network
KUBELET_PORT = 10250
CNI_PLUGIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
CNI_PLUGINS = ("bridge", "host-local", "portmap", "loopback")
# The sysctls the kubelet sets when they differ from what it wants (see above).
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
                   "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
                   "kernel/keys/root_maxbytes")
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CGROUP_PREFIX = RESOURCE_PREFIX + "-"  # cgroupRoots /k8sb-<id>-<node>, as the netns


def runc_program() -> str:
    """The runc the nodes' containerd runs (and a runtime wrapping it execs)."""
    return shutil.which("runc", path=PATH)


def _run(argv, timeout=60, check=True, input=None):
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                            timeout=timeout, input=input)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(str(a) for a in argv)} failed ({result.returncode}):\n"
                           f"{result.stdout}{result.stderr}")
    return result


def skip_unless_real_nodes_can_run():
    """Raises unittest.SkipTest unless this machine has what a real node needs."""
    import unittest
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root: namespaces, cgroups, containerd")
    for tool in ("containerd", "containerd-shim-runc-v2", "ctr", "runc", "skopeo", "iptables",
                 "nsenter", "unshare"):
        if shutil.which(tool, path=PATH) is None:
            raise unittest.SkipTest(f"{tool} is not installed (scripts/setup.sh)")
    missing = [p for p in CNI_PLUGINS if not (CNI_PLUGIN_DIR / p).exists()]
    if missing:
        raise unittest.SkipTest(f"CNI plugins {missing} are missing: apt-get install "
                                "containernetworking-plugins (scripts/setup.sh)")
    if not oci_layout.BUSYBOX.exists():
        raise unittest.SkipTest(f"{oci_layout.BUSYBOX} is missing (scripts/setup.sh)")


def busybox_pod(name, command, node=None, labels=None, namespace="default"):
    """A Pod of one busybox container running `command` (sh -c), on `node` if given."""
    spec = {"containers": [{"name": "main", "image": BUSYBOX_IMAGE,
                            "imagePullPolicy": "Never", "command": ["sh", "-c", command]}],
            "terminationGracePeriodSeconds": 1}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": spec}


@dataclass
class NodeImage:
    name: str      # what pods name
    archive: Path  # the docker-archive `ctr images import` takes
    id: str        # its configuration's digest: the image's ID in containerd


def write_node_images(directory: Path) -> list:
    """The busybox image the pods run and the sandbox image containerd starts each pod
    with (a sleep: containerd stops it with SIGKILL), as docker-archives."""
    directory.mkdir(parents=True, exist_ok=True)
    images = []
    for name, config in ((BUSYBOX_IMAGE, None),
                         (PAUSE_IMAGE, {"Cmd": ["/bin/sleep", "2147483647"]})):
        stem = name.split("/")[-1].split(":")[0]
        layout = directory / stem
        manifest = oci_layout.build_image(layout, "1", f"k8sbridge-{stem}", config)
        blob = layout / "blobs" / "sha256" / manifest.split(":", 1)[1]
        archive = directory / f"{stem}.tar"
        _run(["skopeo", "--insecure-policy", "copy", "-q", f"oci:{layout}:1",
              f"docker-archive:{archive}:{name}"])
        images.append(NodeImage(name, archive, json.loads(blob.read_text())["config"]["digest"]))
    return images


def write_kubeconfig(kube: KubeCluster, path: Path, cert) -> Path:
    """A kubeconfig for the cluster's API server with client certificate `cert`."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": {
            "server": kube.url, "certificate-authority": str(kube.pki.ca)}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        "current-context": "test",
        "users": [{"name": "test", "user": {"client-certificate": str(cert[0]),
                                            "client-key": str(cert[1])}}]}))
    path.chmod(0o600)
    return path


def _close_all(closers):
    """Calls every closer, even after one fails; raises the first failure at the end."""
    first = None
    for close in closers:
        try:
            close()
        except BaseException as e:  # noqa: B902 - the rest must still be closed
            first = first or e
    if first is not None:
        raise first


class Daemons:
    """The long-running processes of one part of the cluster (a node, CoreDNS): each
    in a session of its own, with the rig marker in its environment and its output in
    <directory>/<name>.log."""

    def __init__(self, directory: Path, rig_id: str):
        self.dir = directory
        self.rig_id = rig_id
        self.procs = {}  # name -> Popen, in start order

    def start(self, name, argv):
        env = {"PATH": PATH, RIG_ENV: self.rig_id, "HOME": str(self.dir)}
        with open(self.dir / f"{name}.log", "a") as log:  # a restart adds to it
            self.procs[name] = subprocess.Popen([str(a) for a in argv], stdout=log,
                                                stderr=subprocess.STDOUT, env=env, cwd="/",
                                                start_new_session=True)
        return self.procs[name].pid

    def log_tail(self, name, lines=40):
        path = self.dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) \
            if path.exists() else ""

    def check_alive(self, name):
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited ({proc.returncode}):\n{self.log_tail(name)}")

    def stop(self, *names):
        """Stops `names` (all, newest first, when none are named): SIGTERM to the
        process group, SIGKILL after 20 s."""
        for name in names or reversed(list(self.procs)):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


class NodeNetwork:
    """The host's side of the nodes' network: the bridge k8sb<id> with the first address
    of the slot's subnet, where the API server and CoreDNS listen. Node i is .10+i on
    it, and its podCIDR is the i-th /26 of the slot's pod network."""

    def __init__(self, slot, rig_id: str):
        self.slot = slot
        self.bridge = f"{RESOURCE_PREFIX}{rig_id}"
        self._hosts = list(slot.subnet.hosts())
        self.address = str(self._hosts[0])
        self.pod_network = slot.pod_network
        self._pod_cidrs = list(slot.pod_network.subnets(new_prefix=NODE_POD_PREFIX))

    def up(self):
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.address}/{self.slot.subnet.prefixlen}", "dev",
              self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        return self

    def node_address(self, index: int) -> str:
        return str(self._hosts[9 + index])

    def pod_cidr(self, index: int) -> str:
        if index >= len(self._pod_cidrs):
            raise ValueError(f"a slot's pod network has room for {len(self._pod_cidrs)} nodes")
        return str(self._pod_cidrs[index])

    def close(self):
        _run(["ip", "link", "del", self.bridge], check=False)


class ClusterDNS:
    """CoreDNS on the host, on the bridge's address: cluster.local from the API server
    (its kubernetes plugin, with a client certificate allowed to read Services,
    EndpointSlices, Pods and Namespaces), every other name NXDOMAIN (nothing is
    forwarded out). The Service kube-system/kube-dns, whose ClusterIP is the kubelets'
    clusterDNS, leads to it through an EndpointSlice the harness writes."""

    USER = "k8sbridge-test:coredns"

    def __init__(self, kube: KubeCluster, network: NodeNetwork, directory: Path, rig_id: str):
        self.kube = kube
        self.network = network
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.daemons = Daemons(self.dir, rig_id)
        self.port = network.slot.free_port()
        self.ready_port = network.slot.free_port()
        self.bin = kube.bin / "coredns"

    def start(self):
        self._grant_reads()
        kubeconfig = write_kubeconfig(self.kube, self.dir / "kubeconfig",
                                      self.kube.pki.issue("coredns", self.USER))
        corefile = self.dir / "Corefile"
        corefile.write_text(self._corefile(kubeconfig))
        self.daemons.start("coredns", [self.bin, "-conf", corefile])
        wait_for_condition(self._ready, 60, "CoreDNS's /ready")
        self._publish()
        return self

    def version(self) -> str:
        return _run([self.bin, "-version"]).stdout.splitlines()[0]

    def _corefile(self, kubeconfig):
        address = self.network.address
        return (
            f"# The test cluster's DNS: cluster.local only.\n"
            f"{CLUSTER_DOMAIN}:{self.port} {{\n"
            f"    bind {address}\n"
            f"    errors\n"
            f"    ready 127.0.0.1:{self.ready_port}\n"
            f"    kubernetes {CLUSTER_DOMAIN} {{\n"
            f"        kubeconfig {kubeconfig}\n"
            f"    }}\n"
            f"}}\n"
            f".:{self.port} {{\n"
            f"    bind {address}\n"
            f"    template ANY ANY {{\n"
            f"        rcode NXDOMAIN\n"
            f"    }}\n"
            f"}}\n")

    def _ready(self):
        self.daemons.check_alive("coredns")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ready_port}/ready",
                                        timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def _grant_reads(self):
        name = self.USER
        self.kube.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["services", "pods", "namespaces",
                                                        "endpoints"],
                       "verbs": ["get", "list", "watch"]},
                      {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                       "verbs": ["get", "list", "watch"]}]})
        self.kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": name}]})

    def _publish(self):
        """kube-dns: a Service without a selector, and the EndpointSlice that names
        CoreDNS's address and port (kube-proxy DNATs port 53 there)."""
        ports = [("dns", "UDP"), ("dns-tcp", "TCP")]
        self.kube.create("/api/v1/namespaces/kube-system/services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system",
                         "labels": {"k8s-app": "kube-dns"}},
            "spec": {"clusterIP": DNS_SERVICE_IP,
                     "ports": [{"name": n, "protocol": p, "port": 53, "targetPort": self.port}
                               for n, p in ports]}}, ok=(201,))
        self.kube.create("/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices", {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kube-dns-coredns", "namespace": "kube-system",
                         "labels": {"kubernetes.io/service-name": "kube-dns",
                                    "endpointslice.kubernetes.io/managed-by":
                                        "k8sbridge-tests"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.network.address],
                           "conditions": {"ready": True}}],
            "ports": [{"name": n, "protocol": p, "port": self.port} for n, p in ports]},
            ok=(201,))

    def close(self):
        self.daemons.stop()


class RealNode:
    """One real node, `real-<index>`, of a running KubeCluster whose API server listens
    on `network`'s bridge (see the module's docstring). Starting it returns once the
    Node is Ready with its podCIDR and kube-proxy has written the Services' rules.
    close() stops everything and removes what it made, also after a failed start."""

    def __init__(self, kube: KubeCluster, network: NodeNetwork, index: int, workdir: Path,
                 rig_id: str, images: list, masquerade: bool = True, runtimes=None):
        self.kube = kube
        # Handler name -> the OCI runtime binary containerd runs for it beside runc
        # (a RuntimeClass names the handler), as a site's GPU toolkit adds one.
        self.runtimes = dict(runtimes or {})
        self.masquerade = masquerade  # of the pods' traffic that leaves the pod network
        self.network = network
        self.name = f"real-{index}"
        self.address = network.node_address(index)
        self.pod_cidr = network.pod_cidr(index)
        self.netns = f"{RESOURCE_PREFIX}-{rig_id}-{self.name}"
        self.veth = f"kv{rig_id}{index}"
        self.cgroup_root = f"/{CGROUP_PREFIX}{rig_id}-{self.name}"
        self.dir = workdir / self.name
        self.socket = self.dir / "containerd.sock"
        self.dir.mkdir(parents=True)
        self.daemons = Daemons(self.dir, rig_id)
        self.holder = None  # the pid that holds the node's mount namespace
        try:
            self._make_network_namespace()
            self._make_mount_namespace()
            self._make_cgroup_root()
            self._start_containerd()
            for image in images:
                self.ctr("images", "import", image.archive, timeout=120)
            self._start_kubelet()
            self._start_kube_proxy()
        except BaseException:
            self.close()
            raise

    # --- running things in the node --------------------------------------------

    def in_node(self, argv, timeout=60, check=True, input=None):
        """Runs argv in the node's network and mount namespaces (as its daemons run)."""
        return _run(["nsenter", f"--target={self.holder}", "--mount", "--net", "--", *argv],
                    timeout=timeout, check=check, input=input)

    def ctr(self, *args, timeout=60, check=True):
        """containerd's own client against this node's containerd, in the k8s.io
        namespace (the kubelet's)."""
        return self.in_node(["ctr", "--address", self.socket, "--namespace", "k8s.io", *args],
                            timeout=timeout, check=check)

    def containers(self) -> set:
        """The ids of the containers containerd has (sandboxes included)."""
        return set(self.ctr("containers", "list", "--quiet").stdout.split())

    def tasks(self) -> dict:
        """Running containers: id -> pid, as containerd's shims report them."""
        lines = self.ctr("tasks", "list").stdout.splitlines()[1:]
        return {f[0]: int(f[1]) for f in (line.split() for line in lines) if f[2] == "RUNNING"}

    def route_pods_of(self, other: "RealNode"):
        """Sends traffic for `other`'s pods to `other` over the bridge."""
        _run(["ip", "-n", self.netns, "route", "replace", other.pod_cidr, "via",
              other.address])

    # --- start -------------------------------------------------------------------

    def _make_network_namespace(self):
        _run(["ip", "netns", "add", self.netns])
        _run(["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0",
              "netns", self.netns])
        _run(["ip", "link", "set", self.veth, "master", self.network.bridge, "up"])
        ns = ["ip", "-n", self.netns]
        _run(ns + ["link", "set", "lo", "up"])
        _run(ns + ["addr", "add", f"{self.address}/{self.network.slot.subnet.prefixlen}",
                   "dev", "eth0"])
        _run(ns + ["link", "set", "eth0", "up"])
        # The node forwards its pods' traffic, and bridged traffic between its pods
        # passes iptables (the answer of a Service's pod on the same bridge must be
        # un-DNATed): both are settings of the namespace, not of the machine.
        _run(["nsenter", f"--net=/run/netns/{self.netns}", "sysctl", "-q", "-w",
              "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1"])
        # Not the bridge plugin's ipMasq, which would masquerade pod to pod across
        # nodes too: only what leaves the cluster's pod network.
        if self.masquerade:
            _run(["nsenter", f"--net=/run/netns/{self.netns}", "iptables", "-t", "nat", "-A",
                  "POSTROUTING", "-s", self.pod_cidr, "!", "-d", str(self.network.pod_network),
                  "-m", "comment", "--comment", "k8sbridge-tests: pods leaving the pod network",
                  "-j", "MASQUERADE"])

    def _make_mount_namespace(self):
        """A mount namespace for every process of the node (slave: the host's unmounts,
        such as `ip netns del` of other rigs, still reach it), held by a sleep."""
        pid = self.daemons.start("namespace", [
            "nsenter", f"--net=/run/netns/{self.netns}", "unshare", "--mount",
            "--propagation", "slave", "--", "sleep", "infinity"])
        host = os.stat("/proc/self/ns/mnt")

        def unshared():
            self.daemons.check_alive("namespace")
            st = os.stat(f"/proc/{pid}/ns/mnt")
            return (st.st_dev, st.st_ino) != (host.st_dev, host.st_ino)
        wait_for_condition(unshared, 10, "the node's mount namespace")
        self.holder = pid
        self.in_node(["mount", "-t", "tmpfs", "-o", "mode=0755", "k8sb-node-run", "/run"])
        for name, target in (("log", "/var/log"), ("cni-cache", "/var/lib/cni")):
            (self.dir / name).mkdir()
            # libcni's cache directory is fixed; an empty mount point on the host
            # is all that this leaves there.
            Path(target).mkdir(parents=True, exist_ok=True)
            self.in_node(["mount", "--bind", self.dir / name, target])
        copies = self.dir / "sysctl"
        copies.mkdir()
        for key in KUBELET_SYSCTLS:
            copy = copies / key.replace("/", ".")
            copy.write_text(Path("/proc/sys", key).read_text())
            self.in_node(["mount", "--bind", copy, Path("/proc/sys", key)])

    def _cgroup_dirs(self) -> list:
        """The node's cgroupRoot in every cgroup hierarchy of the machine."""
        return [h / self.cgroup_root.lstrip("/") for h in sorted(CGROUP_FS.iterdir())
                if (h / "cgroup.procs").exists()]

    def _make_cgroup_root(self):
        for d in self._cgroup_dirs():
            d.mkdir()
            if (d / "cpuset.cpus").exists():  # an empty cpuset takes no process
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (d / f).write_text((d.parent / f).read_text())

    def _start_containerd(self):
        self._write_cni_config()
        config = self.dir / "containerd.toml"
        config.write_text(self._containerd_config())
        self.daemons.start("containerd", self._node_argv(["containerd", "--config", config]))

        def answers():
            self.daemons.check_alive("containerd")
            return self.socket.exists() and self.ctr("version", check=False).returncode == 0
        wait_for_condition(answers, 60, "containerd to answer", interval=0.2)

    def _node_argv(self, argv):
        return ["nsenter", f"--target={self.holder}", "--mount", "--net", "--", *argv]

    def _containerd_config(self):
        d = self.dir / "containerd"
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return f"""\
# containerd of the test node {self.name}: everything under its directory or in its
# mount namespace; the CRI plugin runs runc through the v2 shim, cgroupfs, overlayfs.
version = 2
root = "{d}/root"
state = "{d}/state"

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{self.socket}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  disable_apparmor = true
  # Root here lacks CAP_SYS_RESOURCE: no process may lower its oom_score_adj, and
  # runc fails to start a sandbox at the kubelet's -998. Clamp to containerd's own.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{runc_program()}"
  SystemdCgroup = false

{self._extra_runtimes_config(cri)}
[{cri}.cni]
  bin_dir = "{self.dir}/cni/bin"
  conf_dir = "{self.dir}/cni/net.d"
  max_conf_num = 1
"""

    def _extra_runtimes_config(self, cri: str) -> str:
        return "".join(f"""
[{cri}.containerd.runtimes.{name}]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.{name}.options]
  BinaryName = "{binary}"
  SystemdCgroup = false
""" for name, binary in self.runtimes.items())

    def _write_cni_config(self):
        bin_dir, conf_dir = self.dir / "cni" / "bin", self.dir / "cni" / "net.d"
        bin_dir.mkdir(parents=True)
        conf_dir.mkdir()
        for plugin in CNI_PLUGINS:
            (bin_dir / plugin).symlink_to(CNI_PLUGIN_DIR / plugin)
        (conf_dir / "10-pods.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "k8sbridge-pods",
            "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                 "hairpinMode": True,
                 "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_cidr}]],
                          "routes": [{"dst": "0.0.0.0/0"}],
                          "dataDir": str(self.dir / "cni" / "ipam")}},
                {"type": "portmap", "capabilities": {"portMappings": True}}]}, indent=2))

    def _start_kubelet(self):
        serving = self.kube.pki.issue(f"kubelet-serving-{self.name}", f"system:node:{self.name}",
                                      ["system:nodes"], hosts=[self.name, self.address],
                                      server=True, client=False)
        resolv = self.dir / "resolv.conf"
        resolv.write_text("# The test node's resolv.conf: no name server outside the cluster.\n")
        config = self.dir / "kubelet.yaml"
        config.write_text(yaml.safe_dump(self._kubelet_config(serving, resolv)))
        self._kubelet_argv = self._node_argv([
            self.kube.bin / "kubelet", f"--config={config}",
            f"--kubeconfig={self.kube.node_kubeconfig(self.name)}",
            f"--root-dir={self.dir / 'kubelet'}", f"--hostname-override={self.name}",
            f"--node-ip={self.address}", "--v=2"])
        self.daemons.start("kubelet", self._kubelet_argv)
        wait_for_condition(self._registered, 120, f"the kubelet to register {self.name}")
        # The Node's podCIDR, as --allocate-node-cidrs would set it (the CNI config
        # names the same range).
        self.kube.kubectl("patch", "node", self.name, "--type=merge", "-p", json.dumps(
            {"spec": {"podCIDR": self.pod_cidr, "podCIDRs": [self.pod_cidr]}}))
        wait_for_condition(self._ready, 120, f"node {self.name} to be Ready")

    def stop_kubelet(self):
        """Stops the node's kubelet (SIGTERM), as a crashed or stopped kubelet: the
        containers run on (containerd keeps them), and nobody renews the Node's status
        and Lease, so the node controller marks it Unknown after its grace period."""
        self.daemons.stop("kubelet")

    def start_kubelet(self):
        """Starts the stopped kubelet again with its first command line; returns once
        the Node is Ready. (A restarted kubelet zeroes the extended resources of the
        Node's capacity, as after a reboot: whoever advertised them does it again.)"""
        self.daemons.start("kubelet", self._kubelet_argv)
        wait_for_condition(self._ready, 120, f"node {self.name} to be Ready again")

    def _kubelet_config(self, serving, resolv):
        never = "0%"  # a busy CI disk must not evict the tests' pods
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "failCgroupV1": False,  # this machine's cgroups are v1 (hybrid)
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup_root,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "address": self.address, "port": KUBELET_PORT, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "tlsCertFile": str(serving[0]), "tlsPrivateKeyFile": str(serving[1]),
            "authentication": {"anonymous": {"enabled": False},
                               "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.kube.pki.ca)}},
            "authorization": {"mode": "Webhook"},
            "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(resolv),
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": never,
                             "nodefs.inodesFree": never, "imagefs.available": never,
                             "imagefs.inodesFree": never},
            # The images cannot be pulled again: never collect them.
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "maxPods": ipaddress.ip_network(self.pod_cidr).num_addresses - 4,
            "rotateCertificates": False, "serializeImagePulls": False,
        }

    def _node(self):
        status, _, body = self.kube.request("GET", f"/api/v1/nodes/{self.name}")
        return body if status == 200 else None

    def _registered(self):
        self.daemons.check_alive("kubelet")
        return self._node() is not None

    def _ready(self):
        self.daemons.check_alive("kubelet")
        node = self._node() or {}
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in node.get("status", {}).get("conditions", []))

    def _start_kube_proxy(self):
        kubeconfig = write_kubeconfig(self.kube, self.dir / "kube-proxy.kubeconfig",
                                      self.kube.pki.issue(f"kube-proxy-{self.name}",
                                                          "system:kube-proxy"))
        config = self.dir / "kube-proxy.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "hostnameOverride": self.name, "mode": "iptables",
            "clusterCIDR": str(self.network.pod_network),
            "healthzBindAddress": "127.0.0.1:10256", "metricsBindAddress": "127.0.0.1:10249",
            # The conntrack table's size is the machine's: leave it (0 keeps it).
            "conntrack": {"maxPerCore": 0, "min": 0}}))
        self.daemons.start("kube-proxy", self._node_argv([
            self.kube.bin / "kube-proxy", f"--config={config}", "--v=2"]))
        wait_for_condition(lambda: self.service_rules("default/kubernetes:https"), 60,
                           f"kube-proxy on {self.name} to write the kubernetes Service's rules")

    def service_rules(self, service_port: str) -> bool:
        """True once kube-proxy's nat rules name `service_port` (namespace/name:port)."""
        self.daemons.check_alive("kube-proxy")
        rules = self.in_node(["iptables-save", "-t", "nat"]).stdout
        return any(service_port in line and "KUBE-SVC-" in line for line in rules.splitlines())

    # --- the end -----------------------------------------------------------------

    def close(self):
        """Stops the node and removes its namespaces, cgroups and veth."""
        # The kubelet first: it would start again the containers it sees die.
        _close_all([
            lambda: self.daemons.stop("kube-proxy", "kubelet"),
            self._kill_containers,
            self.daemons.stop,  # containerd, then the mount namespace's holder
            lambda: kill_and_wait(self._netns_pids()),  # the shims: sessions of their own
            lambda: _run(["ip", "netns", "del", self.netns], check=False),
            self._remove_cgroup_root,
        ])

    def _netns_pids(self):
        out = _run(["ip", "netns", "pids", self.netns], check=False).stdout
        return [int(p) for p in out.split()]

    def _kill_containers(self):
        kill_and_wait(cgroup_pids(d for d in self._cgroup_dirs() if d.exists()))

    def _remove_cgroup_root(self):
        def removed():
            self._kill_containers()
            for top in self._cgroup_dirs():
                remove_cgroup_tree(top)
            return not any(top.exists() for top in self._cgroup_dirs())
        wait_for_condition(removed, 30, f"{self.cgroup_root}'s cgroups to go", interval=0.2)


class RealCluster:
    """A KubeCluster with real nodes: a slot, the host bridge, the API server listening
    on it, CoreDNS, and `nodes` RealNodes real-0, real-1, ... `images`: NodeImages
    imported into every node's containerd beside busybox and the sandbox image (as
    a site without a registry loads its images onto each node). `masquerade`: whether
    pods' traffic that leaves the pod network is masqueraded (see the module's
    docstring). `kube_args` go to KubeCluster (fake nodes beside the real ones, ...).
    `rig_ids` names what rig.leftovers() checks."""

    def __init__(self, nodes=1, images=(), masquerade=True, runtimes=None, **kube_args):
        self.id = secrets.token_hex(4)
        self.runtimes = runtimes  # RealNode's: extra containerd runtime handlers
        self.dir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.id}-"))
        self.slot = claim_slot()
        self.network = self.kube = self.dns = None
        self.nodes = []
        self.masquerade = masquerade  # RealNode's: False, the pods keep their addresses
        try:
            self.network = NodeNetwork(self.slot, self.id).up()
            self.kube = KubeCluster(address=self.network.address, slot=self.slot,
                                    kubelet_address_types=["InternalIP"], **kube_args)
            self._let_api_server_use_kubelets()
            self.dns = ClusterDNS(self.kube, self.network, self.dir / "coredns", self.id).start()
            self.images = write_node_images(self.dir / "images") + list(images)
            for _ in range(nodes):
                self.add_node()
        except BaseException:
            self.close()
            raise

    def image_id(self, name=BUSYBOX_IMAGE) -> str:
        return next(i.id for i in self.images if i.name == name)

    @property
    def rig_ids(self):
        return [self.id] + ([self.kube.id] if self.kube else [])

    def add_node(self) -> RealNode:
        node = RealNode(self.kube, self.network, len(self.nodes), self.dir, self.id,
                        self.images, masquerade=self.masquerade, runtimes=self.runtimes)
        for other in self.nodes:
            other.route_pods_of(node)
            node.route_pods_of(other)
        self.nodes.append(node)
        return node

    def _let_api_server_use_kubelets(self):
        """Logs, exec and port-forward: the API server's client certificate for the
        kubelets gets the role made for it (kubeadm binds it through a group)."""
        self.kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "k8sbridge-test:apiserver-kubelet-client"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "system:kubelet-api-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "kube-apiserver-kubelet-client"}]})

    def close(self):
        closers = [node.close for node in reversed(self.nodes)]
        closers += [c.close for c in (self.dns, self.kube, self.network) if c is not None]
        closers.append(self.slot.release)
        try:
            _close_all(closers)
        finally:
            if os.environ.get("KUBE_KEEP_DIR"):
                print(f"real nodes' dir kept: {self.dir}")
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
