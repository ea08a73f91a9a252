"""kubesim's kubelet, driven through the real kubectl: a pod whose command is a small HTTP
server gets its own IP in its own network namespace, is reachable from the host on that
IP, sees its env (downward API), hostname and volumes, and is gone (process, namespace,
veth) after a delete with a grace period. Also: exit codes, a failed start, eviction,
and a node going NotReady.

Needs root (namespaces, a bridge). The stand-in gets a bridge and a /24 of its own
(10.232.<slot>.0/24 of a rig slot this process holds), so it never meets another
stand-in or a Slurm rig, also one running at the same time.
Traffic goes only to the pods' addresses inside namespaces this test created.
"""

import json
import os
import signal
import subprocess
import tempfile
import unittest
import urllib.request
from pathlib import Path

from harness.kubesim import KUBESIM, KubeSim, wait_for
from harness.rig import claim_slot

# Held until the process ends. Claiming needs root, as the test does (it skips without).
SLOT = claim_slot() if os.geteuid() == 0 else None
BRIDGE = f"ksimt{SLOT.number if SLOT else 0}"
NETWORK = str(SLOT.pod_network) if SLOT else "10.232.0.0/24"

SERVER = r"""
import http.server, json, os, socket, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        vol = {}
        for name in ("/kubesim-test/host/hello", "/kubesim-test/scratch/made-by-pod"):
            try:
                vol[name] = open(name).read()
            except OSError as e:
                vol[name] = str(e)
        body = json.dumps({"hostname": socket.gethostname(), "env": dict(os.environ),
                           "volumes": vol}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
open("/kubesim-test/scratch/made-by-pod", "w").write("yes")
def on_term(*a):
    open("/kubesim-test/host/got-sigterm", "w").write("yes")
    sys.exit(0)
import signal
signal.signal(signal.SIGTERM, on_term)
http.server.HTTPServer(("0.0.0.0", 8080), H).serve_forever()
"""


def ip_link_names():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def netns_members(inode):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/net").st_ino == inode:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


class KubeletKubeSim(KubeSim):
    """KubeSim with the scheduler and the kubelet on this test's own bridge."""

    def __init__(self):
        state = Path(tempfile.gettempdir()) / f"{BRIDGE}-state"
        super().__init__("--kubelet", "--bridge", BRIDGE, "--pod-network", NETWORK,
                         "--kubelet-state-dir", str(state), "--fake-nodes", "2", scheduler=True)


class KubeletTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root: network namespaces and a bridge")
        if not KUBESIM.exists():
            raise unittest.SkipTest(f"{KUBESIM} is not built")
        if BRIDGE in ip_link_names():
            subprocess.run(["ip", "link", "del", BRIDGE], check=False)
        cls.host_dir = Path(tempfile.mkdtemp(prefix="kubesim-kubelet-host-"))
        (cls.host_dir / "hello").write_text("from the host")
        cls.pod_pids = []
        cls.sim = KubeletKubeSim()

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()  # SIGTERM: the kubelet stops every pod and removes the bridge
        try:
            wait_for(lambda: BRIDGE not in ip_link_names(), timeout=10,
                     what=f"bridge {BRIDGE} to go")
        finally:
            # Belt and braces if kubesim died: no process, veth or bridge stays behind.
            for pid in cls.pod_pids:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            if BRIDGE in ip_link_names():
                subprocess.run(["ip", "link", "del", BRIDGE], check=False)
            subprocess.run(["rm", "-rf", str(cls.host_dir),
                            str(Path(tempfile.gettempdir()) / f"{BRIDGE}-state")], check=False)
        left = [n for n in ip_link_names() if n == BRIDGE]
        assert not left, f"left behind: {left}"

    def apply(self, obj):
        r = subprocess.run(
            ["/usr/bin/kubectl", "--kubeconfig", self.sim.kubeconfig, "apply", "-f", "-"],
            input=json.dumps(obj), capture_output=True, text=True, timeout=60,
            env={"HOME": str(self.sim.dir), "PATH": "/usr/bin:/bin"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def get(self, name):
        r = self.sim.kubectl("get", "pod", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def wait_phase(self, name, *phases):
        return wait_for(lambda: (p := self.get(name)) and p.get("status", {}).get("phase")
                        in phases and p, timeout=60, what=f"{name} to reach {phases}")

    def container_state(self, pod):
        return pod["status"]["containerStatuses"][0]["state"]

    def pod(self, name, command, **spec):
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "python:3-slim",
                                         "command": command}]}}
        body["spec"]["containers"][0].update(spec.pop("container", {}))
        body["spec"].update(spec)
        return body

    def test_server_pod_gets_its_own_ip_and_is_gone_after_graceful_delete(self):
        self.apply(self.pod(
            "web", ["/usr/bin/python3", "-c", SERVER],
            container={
                "env": [
                    {"name": "GREETING", "value": "hi $(MY_POD_NAME)"},
                    {"name": "MY_POD_NAME",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "MY_NODE",
                     "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "MY_POD_IP",
                     "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "MY_NAMESPACE",
                     "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                "volumeMounts": [
                    {"name": "host", "mountPath": "/kubesim-test/host"},
                    {"name": "scratch", "mountPath": "/kubesim-test/scratch"}]},
            volumes=[{"name": "host", "hostPath": {"path": str(self.host_dir)}},
                     {"name": "scratch", "emptyDir": {}}],
            terminationGracePeriodSeconds=20))
        pod = self.wait_phase("web", "Running")
        pod_ip = pod["status"]["podIP"]
        self.assertTrue(pod_ip.startswith(NETWORK.rsplit(".", 2)[0] + "."), pod_ip)
        self.assertEqual({c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"],
                         "True")
        self.assertIn("running", self.container_state(pod))
        pid = int(pod["status"]["containerStatuses"][0]["containerID"].split("://")[1])
        self.pod_pids.append(pid)
        inode = os.stat(f"/proc/{pid}/ns/net").st_ino
        self.assertNotEqual(inode, os.stat("/proc/self/ns/net").st_ino)
        veth = "ksv" + "".join(f"{int(o):02x}" for o in pod_ip.split("."))
        self.assertIn(veth, ip_link_names())

        # Reachable from the host on its own address (the server may still be binding).
        def fetch():
            try:
                with urllib.request.urlopen(f"http://{pod_ip}:8080/", timeout=5) as r:
                    return json.loads(r.read())
            except OSError:
                return None
        answer = wait_for(fetch, timeout=30, what=f"the pod's server on {pod_ip}:8080")
        self.assertEqual(answer["hostname"], "web")
        env = answer["env"]
        self.assertEqual(env["MY_POD_NAME"], "web")
        self.assertEqual(env["MY_NODE"], pod["spec"]["nodeName"])
        self.assertEqual(env["MY_POD_IP"], pod_ip)
        self.assertEqual(env["MY_NAMESPACE"], "default")
        self.assertEqual(env["GREETING"], "hi $(MY_POD_NAME)")  # defined after: not expanded
        self.assertEqual(answer["volumes"]["/kubesim-test/host/hello"], "from the host")
        self.assertEqual(answer["volumes"]["/kubesim-test/scratch/made-by-pod"], "yes")
        # The bind mounts live in the pod's mount namespace only.
        self.assertFalse(Path("/kubesim-test/host/hello").exists())

        # Delete with a grace period: SIGTERM first (the server records it), then gone.
        self.sim.kubectl("delete", "pod", "web", "--grace-period=15", "--wait=false")
        wait_for(lambda: self.get("web") is None, timeout=60, what="web to be deleted")
        self.assertEqual((self.host_dir / "got-sigterm").read_text(), "yes")
        self.assertFalse(Path(f"/proc/{pid}").exists())
        self.assertEqual(netns_members(inode), [])
        wait_for(lambda: veth not in ip_link_names(), timeout=10, what=f"{veth} to go")

    def test_grace_period_ends_in_sigkill(self):
        self.apply(self.pod("stubborn", ["/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"],
                            terminationGracePeriodSeconds=30))
        pod = self.wait_phase("stubborn", "Running")
        pid = int(pod["status"]["containerStatuses"][0]["containerID"].split("://")[1])
        self.pod_pids.append(pid)
        self.sim.kubectl("delete", "pod", "stubborn", "--grace-period=2", "--wait=false")
        # Terminating (deletionTimestamp set) while the process ignores SIGTERM ...
        self.assertIsNotNone(self.get("stubborn")["metadata"].get("deletionTimestamp"))
        # ... and gone once the grace period ran out.
        wait_for(lambda: self.get("stubborn") is None, timeout=60, what="stubborn to go")
        self.assertFalse(Path(f"/proc/{pid}").exists())

    def test_exit_codes_and_a_failed_start(self):
        self.apply(self.pod("ok", ["/bin/true"]))
        self.apply(self.pod("fails", ["/bin/sh", "-c", "exit 3"]))
        self.apply(self.pod("missing", ["no-such-command-kubesim"]))
        # "$$" is Kubernetes' escape for "$" in commands.
        self.apply(self.pod("killed", ["/bin/sh", "-c", "kill -9 $$$$"]))
        ok = self.wait_phase("ok", "Succeeded")
        self.assertEqual(self.container_state(ok)["terminated"]["reason"], "Completed")
        self.assertEqual(self.container_state(ok)["terminated"]["exitCode"], 0)
        fails = self.wait_phase("fails", "Failed")
        self.assertEqual(self.container_state(fails)["terminated"]["exitCode"], 3)
        self.assertEqual(self.container_state(fails)["terminated"]["reason"], "Error")
        missing = self.wait_phase("missing", "Failed")
        term = self.container_state(missing)["terminated"]
        self.assertEqual(term["reason"], "StartError")
        self.assertEqual(term["exitCode"], 128)
        self.assertIn("executable file not found in $PATH", term["message"])
        killed = self.wait_phase("killed", "Failed")
        self.assertEqual(self.container_state(killed)["terminated"]["reason"], "OOMKilled")
        self.assertEqual(self.container_state(killed)["terminated"]["exitCode"], 137)
        for name in ("ok", "fails", "missing", "killed"):
            self.sim.kubectl("delete", "pod", name)
            self.assertIsNone(self.get(name))

    def test_kubectl_exec_enters_the_pods_namespaces(self):
        # Host mode: nsenter into the pod process's namespaces, with its environment and
        # working directory (docs/kubesim.md, "pods/exec").
        self.addCleanup(self.sim.kubectl, "delete", "pod", "execd", "--grace-period=1",
                        "--ignore-not-found")
        self.apply(self.pod("execd", ["/bin/sh", "-c", "sleep 3600"],
                            container={"workingDir": "/tmp",
                                       "env": [{"name": "POD_VAR", "value": "from-pod"}]}))
        self.wait_phase("execd", "Running")
        r = self.sim.kubectl("exec", "execd", "--", "sh", "-c",
                             "echo $POD_VAR; pwd; hostname; readlink /proc/self/ns/net; "
                             "echo err >&2; exit 3", check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:3], ["from-pod", "/tmp", "execd"])
        self.assertNotEqual(lines[3], os.readlink("/proc/self/ns/net"))  # the pod's network
        self.assertEqual(r.stderr, "err\ncommand terminated with exit code 3\n")
        r = self.sim.kubectl("exec", "-i", "execd", "--", "wc", "-c", input="abc\n")
        self.assertEqual(r.stdout.strip(), "4")

    def test_eviction_by_annotation(self):
        self.apply(self.pod("victim", ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"],
                            terminationGracePeriodSeconds=30))
        self.wait_phase("victim", "Running")
        self.sim.kubectl("annotate", "pod", "victim", "kubesim.k8sbridge.io/evict=5")

        def disrupted():
            p = self.get("victim")
            if p is None:
                return "gone"
            conds = {c["type"]: c for c in p["status"].get("conditions", [])}
            c = conds.get("DisruptionTarget")
            return c and c["status"] == "True" and c["reason"] == "EvictionByEvictionAPI" and c
        # The condition may be seen before the pod is gone (it is set first).
        self.assertTrue(wait_for(disrupted, timeout=30, what="DisruptionTarget"))
        wait_for(lambda: self.get("victim") is None, timeout=60, what="victim to go")

    def test_node_not_ready_and_back(self):
        node = "node-1"
        self.sim.kubectl("annotate", "node", node, "kubesim.k8sbridge.io/fault=NotReady")

        def ready_status():
            n = self.sim.kubectl_json("get", "node", node)
            return {c["type"]: c for c in n["status"]["conditions"]}["Ready"], n
        cond, n = wait_for(lambda: (r := ready_status())[0]["status"] == "Unknown" and r,
                           timeout=30, what=f"{node} Ready=Unknown")
        self.assertEqual(cond["reason"], "NodeStatusUnknown")
        keys = {(t["key"], t["effect"]) for t in n["spec"].get("taints", [])}
        self.assertIn(("node.kubernetes.io/unreachable", "NoSchedule"), keys)
        self.assertIn(("node.kubernetes.io/unreachable", "NoExecute"), keys)
        self.sim.kubectl("annotate", "node", node, "kubesim.k8sbridge.io/fault-")
        wait_for(lambda: ready_status()[0]["status"] == "True", timeout=30,
                 what=f"{node} Ready=True")
        self.assertFalse(self.sim.kubectl_json("get", "node", node)["spec"].get("taints"))

    def test_image_pull_error_node_fault_and_back(self):
        # A node whose image pulls fail (its registry unreachable): a pod bound there
        # waits, ErrImagePull then ImagePullBackOff, Pending and not Ready; once the
        # fault is gone the kubelet pulls again and the pod runs.
        node = "node-0"
        self.sim.kubectl("annotate", "node", node, "kubesim.k8sbridge.io/fault=ImagePullError")
        self.addCleanup(self.sim.kubectl, "annotate", "node", node,
                        "kubesim.k8sbridge.io/fault-", check=False)
        self.addCleanup(self.sim.kubectl, "delete", "pod", "unpulled", "--grace-period=1",
                        "--ignore-not-found")
        self.apply(self.pod("unpulled", ["/bin/sh", "-c", "sleep 300"], nodeName=node))

        def waiting(reason):
            p = self.get("unpulled")
            w = p and p["status"].get("containerStatuses") and \
                self.container_state(p).get("waiting")
            return w and w["reason"] == reason and (p, w)
        p, w = wait_for(lambda: waiting("ErrImagePull"), timeout=30, interval=0.05,
                        what="ErrImagePull")
        self.assertIn('failed to pull and unpack image "python:3-slim"', w["message"])
        self.assertEqual(p["status"]["phase"], "Pending")
        p, w = wait_for(lambda: waiting("ImagePullBackOff"), timeout=30, what="ImagePullBackOff")
        self.assertEqual(w["message"], 'Back-off pulling image "python:3-slim"')
        ready = {c["type"]: c["status"] for c in p["status"]["conditions"]}["Ready"]
        self.assertEqual(ready, "False")
        self.sim.kubectl("annotate", "node", node, "kubesim.k8sbridge.io/fault-")
        self.wait_phase("unpulled", "Running")


if __name__ == "__main__":
    unittest.main(verbosity=2)
