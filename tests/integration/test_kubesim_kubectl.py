"""Conformance of the Kubernetes stand-in (kubesim) with the real kubectl 1.32.

Every command is the real /usr/bin/kubectl against a kubesim started for the test
over HTTPS with its generated CA and a bearer token from the written kubeconfig.
"""

import base64
import json
import os
import re
import signal
import subprocess
import threading
import unittest
from pathlib import Path

from harness.kubesim import KUBECTL, KubeSim, wait_for

POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: main
    image: registry.example/web:1
    command: ["sleep", "infinity"]
"""

BOUND_POD_YAML = """\
apiVersion: v1
kind: Pod
metadata:
  name: bound
spec:
  nodeName: node-0
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: registry.example/web:1
"""

EVENT_YAML = """\
apiVersion: v1
kind: Event
metadata:
  name: web.kubesim1
  namespace: default
involvedObject:
  kind: Pod
  name: web
  namespace: default
reason: Pulled
message: Container image pulled for the conformance test
type: Normal
source:
  component: kubelet
"""


class LineReader:
    """Collects a process's stdout lines in a thread so tests can wait for one."""

    def __init__(self, proc):
        self.proc = proc
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        for line in self.proc.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def seen(self, text):
        with self.lock:
            return any(text in line for line in self.lines)


class KubectlConformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sim = KubeSim("--fake-nodes", "4", "--gpus-per-node", "8")
        cls.manifests = cls.sim.dir / "manifests"
        cls.manifests.mkdir()
        (cls.manifests / "pod.yaml").write_text(POD_YAML)
        (cls.manifests / "bound.yaml").write_text(BOUND_POD_YAML)
        (cls.manifests / "event.yaml").write_text(EVENT_YAML)

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()

    def k(self, *args, **kw):
        return self.sim.kubectl(*args, **kw)

    def test_01_apply_get_and_get_json(self):
        out = self.k("apply", "-f", str(self.manifests / "pod.yaml")).stdout
        self.assertIn("pod/web created", out)
        out = self.k("apply", "-f", str(self.manifests / "pod.yaml")).stdout
        self.assertIn("pod/web unchanged", out)
        table = self.k("get", "pods").stdout
        self.assertRegex(table, r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE")
        self.assertRegex(table, r"web\s+0/1\s+Pending\s+0")
        pod = self.sim.kubectl_json("get", "pod", "web")
        self.assertEqual(pod["kind"], "Pod")
        self.assertEqual(pod["metadata"]["labels"], {"app": "web"})
        self.assertTrue(pod["metadata"]["uid"])
        self.assertTrue(pod["metadata"]["creationTimestamp"])
        self.assertIn("kubectl.kubernetes.io/last-applied-configuration",
                      pod["metadata"]["annotations"])
        nodes = self.sim.kubectl_json("get", "nodes")
        self.assertEqual(nodes["kind"], "List")
        self.assertEqual(sorted(n["metadata"]["name"] for n in nodes["items"]),
                         ["node-0", "node-1", "node-2", "node-3"])
        node0 = nodes["items"][0]
        self.assertEqual(node0["status"]["allocatable"]["nvidia.com/gpu"], "8")
        self.assertEqual(node0["metadata"]["labels"]["nvidia.com/gpu.product"],
                         "NVIDIA-H100-80GB-HBM3")
        self.assertIn("network.topology.nvidia.com/leaf", node0["metadata"]["labels"])
        # A changed manifest applied again is patched (strategic merge, client side).
        (self.manifests / "pod2.yaml").write_text(POD_YAML.replace("app: web", "app: web\n    v: two"))
        self.assertIn("pod/web configured",
                      self.k("apply", "-f", str(self.manifests / "pod2.yaml")).stdout)
        self.assertEqual(self.sim.kubectl_json("get", "pod", "web")["metadata"]["labels"],
                         {"app": "web", "v": "two"})

    def test_02_get_watch_until_event(self):
        self.k("apply", "-f", str(self.manifests / "pod.yaml"))
        proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", self.sim.kubeconfig, "get", "pods", "-w", "-o",
             'jsonpath={.metadata.name} {.metadata.labels.stage}{"\\n"}'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, HOME=str(self.sim.dir)))
        try:
            reader = LineReader(proc)
            wait_for(lambda: reader.seen("web"), what="kubectl get -w to print the pod")
            self.k("label", "pod", "web", "stage=go", "--overwrite")
            wait_for(lambda: reader.seen("web go"), what="the label change in kubectl get -w")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
            proc.stdout.close()
            proc.stderr.close()

    def test_03_label_and_annotate(self):
        self.k("apply", "-f", str(self.manifests / "pod.yaml"))
        self.assertIn("pod/web labeled", self.k("label", "pod", "web", "tier=front").stdout)
        self.assertIn("pod/web annotated",
                      self.k("annotate", "pod", "web", "example.com/note=hello").stdout)
        pod = self.sim.kubectl_json("get", "pod", "web")
        self.assertEqual(pod["metadata"]["labels"]["tier"], "front")
        self.assertEqual(pod["metadata"]["annotations"]["example.com/note"], "hello")
        selected = self.k("get", "pods", "-l", "tier in (front,back),app", "-o", "name").stdout
        self.assertEqual(selected.split(), ["pod/web"])
        self.assertEqual(self.k("get", "pods", "-l", "tier!=front", "-o", "name").stdout, "")
        self.k("label", "pod", "web", "tier-")
        self.assertNotIn("tier", self.sim.kubectl_json("get", "pod", "web")["metadata"]["labels"])

    def test_04_cordon_uncordon_taint(self):
        self.assertIn("node/node-1 cordoned", self.k("cordon", "node-1").stdout)
        self.assertTrue(self.sim.kubectl_json("get", "node", "node-1")["spec"]["unschedulable"])
        self.assertRegex(self.k("get", "node", "node-1").stdout, r"Ready,SchedulingDisabled")
        cordoned = self.k("get", "nodes", "--field-selector", "spec.unschedulable=true",
                          "-o", "name").stdout.split()
        self.assertEqual(cordoned, ["node/node-1"])
        self.assertIn("node/node-1 uncordoned", self.k("uncordon", "node-1").stdout)
        self.assertFalse(
            self.sim.kubectl_json("get", "node", "node-1")["spec"].get("unschedulable", False))

        self.assertIn("node/node-2 tainted",
                      self.k("taint", "nodes", "node-2", "gpu=broken:NoSchedule").stdout)
        self.k("taint", "nodes", "node-2", "maint=yes:NoExecute")
        taints = self.sim.kubectl_json("get", "node", "node-2")["spec"]["taints"]
        self.assertEqual(sorted((t["key"], t["value"], t["effect"]) for t in taints),
                         [("gpu", "broken", "NoSchedule"), ("maint", "yes", "NoExecute")])
        self.assertIn("node/node-2 untainted", self.k("taint", "nodes", "node-2", "gpu-").stdout)
        taints = self.sim.kubectl_json("get", "node", "node-2")["spec"]["taints"]
        self.assertEqual([t["key"] for t in taints], ["maint"])
        self.k("taint", "nodes", "node-2", "maint-")
        self.assertNotIn("taints", self.sim.kubectl_json("get", "node", "node-2")["spec"])

    def test_05_delete_with_grace_period(self):
        self.k("apply", "-f", str(self.manifests / "bound.yaml"))
        self.k("delete", "pod", "bound", "--grace-period=3", "--wait=false")
        pod = self.sim.kubectl_json("get", "pod", "bound")
        self.assertIn("deletionTimestamp", pod["metadata"])
        self.assertEqual(pod["metadata"]["deletionGracePeriodSeconds"], 3)
        self.assertRegex(self.k("get", "pod", "bound").stdout, r"Terminating")
        # Without a kubelet on node-0 the server finalizes after the grace period.
        self.k("wait", "--for=delete", "pod/bound", "--timeout=60s")
        result = self.k("get", "pod", "bound", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('Error from server (NotFound): pods "bound" not found', result.stderr)
        # An unbound pod goes at once, and kubectl's default wait returns.
        self.k("apply", "-f", str(self.manifests / "pod.yaml"))
        self.assertIn('pod "web" deleted', self.k("delete", "pod", "web", "--grace-period=5").stdout)

    def test_06_get_events(self):
        self.k("create", "-f", str(self.manifests / "event.yaml"))
        out = self.k("get", "events").stdout
        self.assertRegex(out, r"LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE")
        self.assertRegex(out, r"Normal\s+Pulled\s+pod/web\s+Container image pulled")
        by_field = self.k("get", "events", "--field-selector", "involvedObject.name=web,reason=Pulled",
                          "-o", "name").stdout.split()
        self.assertEqual(by_field, ["event/web.kubesim1"])
        # The same event through events.k8s.io/v1.
        ev = self.sim.kubectl_json("get", "events.v1.events.k8s.io", "web.kubesim1")
        self.assertEqual(ev["apiVersion"], "events.k8s.io/v1")
        self.assertEqual(ev["note"], "Container image pulled for the conformance test")
        self.assertEqual(ev["regarding"]["name"], "web")

    def test_07_create_existing_is_already_exists(self):
        self.k("apply", "-f", str(self.manifests / "pod.yaml"))
        result = self.k("create", "-f", str(self.manifests / "pod.yaml"), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(f'Error from server (AlreadyExists): error when creating '
                      f'"{self.manifests / "pod.yaml"}": pods "web" already exists', result.stderr)

    def test_08_server_side_apply(self):
        cm = self.manifests / "cm.yaml"
        cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
                      "data:\n  mode: fast\n")
        self.assertIn("configmap/settings serverside-applied",
                      self.k("apply", "--server-side", "-f", str(cm)).stdout)
        cm.write_text(cm.read_text() + "  size: big\n")
        self.k("apply", "--server-side", "-f", str(cm))
        got = self.sim.kubectl_json("get", "configmap", "settings", "--show-managed-fields")
        self.assertEqual(got["data"], {"mode": "fast", "size": "big"})
        self.assertEqual(got["metadata"]["managedFields"][0]["manager"], "kubectl")

    def test_09_auth_client_cert_and_token_rotation(self):
        self.assertIn("node-0", self.k("get", "nodes", context="kubesim-cert").stdout)
        token_file = self.sim.dir / "token"
        old = token_file.read_text()
        self.sim.admin("POST", "token", {"token": "rotated-token-1"})
        denied = self.k("get", "nodes", check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("Unauthorized", denied.stderr)
        token_file.write_text("rotated-token-1")  # the kubeconfig reads tokenFile
        self.assertIn("node-0", self.k("get", "nodes").stdout)
        # SIGHUP makes kubesim re-read its token file.
        token_file.write_text(old)
        self.sim.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.k("get", "nodes", check=False).returncode == 0,
                 what="kubesim to accept the token file after SIGHUP")

    def test_09b_service_account_token_file_rotation(self):
        # A ServiceAccount made again has another uid: its old tokens get 401 (as
        # upstream's token validators check the bound uid), and a kubeconfig whose
        # tokenFile holds the new token works again.
        self.sim.create_service_account("default", "rotated")
        self.addCleanup(self.k, "delete", "serviceaccount", "rotated", "--ignore-not-found")
        self.sim.kubectl("create", "role", "rotated", "--verb=list", "--resource=pods")
        self.sim.kubectl("create", "rolebinding", "rotated", "--role=rotated",
                         "--serviceaccount=default:rotated")
        self.addCleanup(self.k, "delete", "role,rolebinding", "rotated", "--ignore-not-found")
        kubeconfig = self.sim.service_account_kubeconfig("default", "rotated", token_file=True)
        token_file = Path(str(kubeconfig) + ".token")
        old = token_file.read_text()
        self.assertEqual(self.sim.kubectl("get", "pods", kubeconfig=kubeconfig).returncode, 0)
        self.sim.rotate_service_account_token("default", "rotated")
        self.assertNotEqual(token_file.read_text(), old)
        status, _, _ = self.sim.request("GET", "/api/v1/namespaces/default/pods", token=old)
        self.assertEqual(status, 401)
        self.assertEqual(self.sim.kubectl("get", "pods", kubeconfig=kubeconfig).returncode, 0)

    def test_10_list_paging_and_discovery(self):
        for i in range(5):
            cm = self.manifests / f"page-{i}.yaml"
            cm.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: page-{i}\n"
                          f"data:\n  i: '{i}'\n")
            self.k("create", "-f", str(cm))
        out = self.k("get", "configmaps", "--chunk-size=2", "-o", "name").stdout.split()
        self.assertEqual([n for n in out if n.startswith("configmap/page-")],
                         [f"configmap/page-{i}" for i in range(5)])
        resources = self.k("api-resources", "-o", "name").stdout.split()
        for name in ["pods", "nodes", "namespaces", "configmaps", "secrets", "events",
                     "events.events.k8s.io", "leases.coordination.k8s.io"]:
            self.assertIn(name, resources)
        version = json.loads(self.k("version", "-o", "json").stdout)
        self.assertEqual(version["serverVersion"]["minor"], "32")

    def test_drain_evicts_through_policy_v1(self):
        # What an admin runs: cordon, then an Eviction per pod (kubectl 1.32 sends it as
        # JSON; a protobuf one is read too, tests/unit/kubesim/protobuf_test.cpp).
        (self.manifests / "drained.yaml").write_text(
            BOUND_POD_YAML.replace("name: bound", "name: drained")
            .replace("nodeName: node-0", "nodeName: node-3"))
        self.k("apply", "-f", str(self.manifests / "drained.yaml"))
        self.addCleanup(self.k, "uncordon", "node-3", check=False)
        out = self.k("drain", "node-3", "--ignore-daemonsets", "--force",
                     "--delete-emptydir-data", "--grace-period=1", "--timeout=60s").stdout
        self.assertIn("node/node-3 cordoned", out)
        self.assertIn("pod/drained evicted", out)
        self.assertIn("node/node-3 drained", out)
        self.assertTrue(self.sim.kubectl_json("get", "node", "node-3")["spec"]["unschedulable"])
        evictions = [r for r in self.sim.requests_log()
                     if r.get("path", "").endswith("/pods/drained/eviction")]
        self.assertEqual([r.get("code") for r in evictions], [201], evictions)
        self.assertNotEqual(self.k("get", "pod", "drained", check=False).returncode, 0)

    def test_drain_waits_for_a_disruption_budget(self):
        # A PodDisruptionBudget that allows no disruption blocks `kubectl drain` (429
        # from every eviction, which kubectl retries until its --timeout); one that
        # allows it lets the same drain through.
        (self.manifests / "guarded.yaml").write_text(
            BOUND_POD_YAML.replace("name: bound", "name: guarded\n  labels:\n    app: guarded")
            .replace("nodeName: node-0", "nodeName: node-2"))
        self.k("apply", "-f", str(self.manifests / "guarded.yaml"))
        self.addCleanup(self.k, "delete", "pod", "guarded", "--force", "--grace-period=0",
                        check=False)
        self.addCleanup(self.k, "uncordon", "node-2", check=False)
        # There is no kubelet here: report the pod Ready as its kubelet would.
        self.k("patch", "pod", "guarded", "--subresource=status", "--type=merge", "-p",
               json.dumps({"status": {"phase": "Running", "conditions": [
                   {"type": "Ready", "status": "True"}]}}))
        (self.manifests / "budget.yaml").write_text(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: guard\n"
            "spec:\n  minAvailable: 1\n  selector:\n    matchLabels:\n      app: guarded\n")
        self.k("apply", "-f", str(self.manifests / "budget.yaml"))
        self.addCleanup(self.k, "delete", "pdb", "guard", check=False)

        def budget():
            return self.sim.kubectl_json("get", "pdb", "guard")

        wait_for(lambda: budget().get("status", {}).get("currentHealthy") == 1,
                 what="the budget to count the guarded pod")
        drain = ["drain", "node-2", "--ignore-daemonsets", "--force",
                 "--delete-emptydir-data", "--grace-period=1"]
        blocked = self.k(*drain, "--timeout=8s", check=False)
        self.assertNotEqual(blocked.returncode, 0, blocked.stdout)
        self.assertIn("Cannot evict pod as it would violate the pod's disruption budget",
                      blocked.stderr)
        pod = self.sim.kubectl_json("get", "pod", "guarded")
        self.assertNotIn("deletionTimestamp", pod["metadata"])
        self.k("patch", "pdb", "guard", "--type=merge", "-p", '{"spec":{"minAvailable":0}}')
        wait_for(lambda: budget().get("status", {}).get("disruptionsAllowed") == 1,
                 what="the budget to allow one disruption")
        out = self.k(*drain, "--timeout=60s").stdout
        self.assertIn("pod/guarded evicted", out)
        self.assertIn("node/node-2 drained", out)

    def test_generators_send_protobuf_and_it_is_read(self):
        # kubectl's generators send their objects as protobuf (client-go's typed client),
        # which kubesim reads for these kinds as the API server does.
        self.k("create", "namespace", "gen-ns")
        self.addCleanup(self.k, "delete", "namespace", "gen-ns", check=False)
        self.k("create", "configmap", "gen-cm", "-n", "gen-ns", "--from-literal=mode=fast",
               "--from-literal=level=3")
        self.k("create", "secret", "generic", "gen-secret", "-n", "gen-ns",
               "--from-literal=token=s3cret", "--type=Opaque")
        self.assertEqual(self.sim.kubectl_json("get", "namespace", "gen-ns")["metadata"]["name"],
                         "gen-ns")
        cm = self.sim.kubectl_json("get", "configmap", "gen-cm", "-n", "gen-ns")
        self.assertEqual(cm["data"], {"mode": "fast", "level": "3"})
        secret = self.sim.kubectl_json("get", "secret", "gen-secret", "-n", "gen-ns")
        self.assertEqual(secret["type"], "Opaque")
        self.assertEqual(base64.b64decode(secret["data"]["token"]), b"s3cret")
        creates = [r for r in self.sim.requests_log() if r.get("verb") == "create"
                   and r.get("resource") in ("namespaces", "configmaps", "secrets")]
        self.assertTrue(creates)
        self.assertEqual({r.get("code") for r in creates}, {201}, creates)


class KubectlAdminFlows(unittest.TestCase):
    """The flows an admin runs with kubectl 1.32 (issue 17): waits, watches in table form,
    describe, client- and server-side apply that drop or contest fields, cascading and
    dry-run deletes. Each test uses its own objects in one shared kubesim."""

    @classmethod
    def setUpClass(cls):
        cls.sim = KubeSim("--fake-nodes", "2")
        cls.manifests = cls.sim.dir / "manifests"
        cls.manifests.mkdir()

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()

    def k(self, *args, **kw):
        return self.sim.kubectl(*args, **kw)

    def write(self, name, text):
        path = self.manifests / name
        path.write_text(text)
        return str(path)

    def make_pod(self, name, node=None):
        node_line = f"  nodeName: {node}\n" if node else ""
        self.k("create", "-f", self.write(f"{name}.yaml", POD_YAML.replace("name: web", f"name: {name}")
                                          .replace("spec:\n", "spec:\n" + node_line)))

    def set_pod_status(self, name, phase, ready):
        status = {"status": {"phase": phase, "conditions": [
            {"type": "Ready", "status": "True" if ready else "False"}]}}
        code, _, body = self.sim.request(
            "PATCH", f"/api/v1/namespaces/default/pods/{name}/status", status,
            content_type="application/merge-patch+json")
        self.assertEqual(code, 200, body)

    def start_kubectl(self, *args):
        proc = subprocess.Popen(
            [KUBECTL, "--kubeconfig", self.sim.kubeconfig, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, HOME=str(self.sim.dir)))
        self.addCleanup(self.stop, proc)
        return proc

    @staticmethod
    def stop(proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()

    def test_wait_for_condition_ready(self):
        self.make_pod("waited", node="node-0")
        proc = self.start_kubectl("wait", "--for=condition=Ready", "pod/waited", "--timeout=60s")
        self.set_pod_status("waited", "Running", ready=True)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("pod/waited condition met", out)

    def test_get_pods_watch_in_table_form(self):
        self.make_pod("watched", node="node-1")
        proc = self.start_kubectl("get", "pods", "-w")
        reader = LineReader(proc)
        wait_for(lambda: reader.seen("NAME"), what="the table header of kubectl get pods -w")
        self.assertRegex(reader.lines[0], r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE")
        wait_for(lambda: reader.seen("watched"), what="the pod's row")
        self.set_pod_status("watched", "Running", ready=True)
        wait_for(lambda: any(re.match(r"watched\s+\S+\s+Running", line) for line in reader.lines),
                 what="a new row with the pod Running")

    def test_describe_node_and_pod(self):
        self.make_pod("described", node="node-0")
        uid = self.sim.kubectl_json("get", "pod", "described")["metadata"]["uid"]
        # kubectl describe selects the events by the object's uid as well.
        self.k("create", "-f", self.write("described-event.yaml", EVENT_YAML
                                          .replace("web.kubesim1", "described.kubesim1")
                                          .replace("  name: web\n", f"  name: described\n  uid: {uid}\n")))
        pod = self.k("describe", "pod", "described").stdout
        self.assertRegex(pod, r"Name:\s+described")
        self.assertRegex(pod, r"Node:\s+node-0")
        self.assertRegex(pod, r"Normal\s+Pulled\s+.*Container image pulled")
        node = self.k("describe", "node", "node-0").stdout
        self.assertRegex(node, r"Name:\s+node-0")
        self.assertIn("Capacity:", node)
        self.assertRegex(node, r"Non-terminated Pods:\s+\(\d+ in total\)")
        self.assertRegex(node, r"default\s+described")
        missing = self.k("describe", "node", "no-such-node", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn('nodes "no-such-node" not found', missing.stderr)

    def test_client_side_apply_removes_a_field(self):
        manifest = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\n  labels:\n"
                    "    keep: 'yes'\n    drop: 'yes'\ndata:\n  keep: '1'\n  drop: '2'\n")
        self.k("apply", "-f", self.write("csa.yaml", manifest))
        trimmed = manifest.replace("    drop: 'yes'\n", "").replace("  drop: '2'\n", "")
        self.assertIn("configmap/csa configured",
                      self.k("apply", "-f", self.write("csa.yaml", trimmed)).stdout)
        cm = self.sim.kubectl_json("get", "configmap", "csa")
        self.assertEqual(cm["data"], {"keep": "1"})
        self.assertEqual(cm["metadata"]["labels"], {"keep": "yes"})

    def test_server_side_apply_conflict_then_force(self):
        manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  mode: {}\n"
        self.k("apply", "--server-side", "--field-manager=alice",
               "-f", self.write("ssa.yaml", manifest.format("fast")))
        path = self.write("ssa.yaml", manifest.format("slow"))
        conflict = self.k("apply", "--server-side", "-f", path, check=False)
        self.assertNotEqual(conflict.returncode, 0)
        self.assertIn('Apply failed with 1 conflict: conflict with "alice": .data.mode',
                      conflict.stderr)
        self.assertEqual(self.sim.kubectl_json("get", "configmap", "ssa")["data"], {"mode": "fast"})
        self.assertIn("configmap/ssa serverside-applied",
                      self.k("apply", "--server-side", "--force-conflicts", "-f", path).stdout)
        cm = self.sim.kubectl_json("get", "configmap", "ssa", "--show-managed-fields")
        self.assertEqual(cm["data"], {"mode": "slow"})
        owners = {e["manager"]: e["fieldsV1"] for e in cm["metadata"]["managedFields"]}
        self.assertEqual(owners, {"kubectl": {"f:data": {"f:mode": {}}}})

    def make_owner_and_dependent(self, owner, dependent):
        self.k("create", "-f", self.write(f"{owner}.yaml",
               f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {owner}\n"))
        uid = self.sim.kubectl_json("get", "configmap", owner)["metadata"]["uid"]
        self.k("create", "-f", self.write(f"{dependent}.yaml", (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {dependent}\n"
            f"  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: {owner}\n"
            f"    uid: {uid}\n    blockOwnerDeletion: true\n")))

    def test_delete_cascade_foreground(self):
        self.make_owner_and_dependent("owner", "dependent")
        out = self.k("delete", "configmap", "owner", "--cascade=foreground", "--timeout=60s").stdout
        self.assertIn('configmap "owner" deleted', out)
        for name in ("owner", "dependent"):
            gone = self.k("get", "configmap", name, check=False)
            self.assertIn(f'configmaps "{name}" not found', gone.stderr)

    def test_delete_cascade_orphan_keeps_the_dependent(self):
        self.make_owner_and_dependent("parent", "orphaned")
        self.k("delete", "configmap", "parent", "--cascade=orphan", "--timeout=60s")
        self.assertIn('configmaps "parent" not found',
                      self.k("get", "configmap", "parent", check=False).stderr)
        orphaned = self.sim.kubectl_json("get", "configmap", "orphaned")
        self.assertNotIn("ownerReferences", orphaned["metadata"])

    def test_dry_run_server_leaves_objects_unchanged(self):
        self.make_pod("dry", node="node-1")
        before = self.sim.kubectl_json("get", "pod", "dry")
        self.assertIn('pod "dry" deleted (server dry run)',
                      self.k("delete", "pod", "dry", "--dry-run=server").stdout)
        # kubectl patch does not mark its output as a dry run; the object below shows it.
        self.assertIn("pod/dry patched",
                      self.k("patch", "pod", "dry", "--dry-run=server",
                             "-p", '{"metadata":{"labels":{"dry":"run"}}}').stdout)
        changed = POD_YAML.replace("name: web", "name: dry").replace("app: web", "app: other")
        path = self.write("dry.yaml", changed)
        self.assertIn("(server dry run)", self.k("apply", "--dry-run=server", "-f", path).stdout)
        # kubectl create made "kubectl-create" the owner of the label: a plain server-side
        # apply conflicts, even as a dry run; forced, it would take the label.
        conflict = self.k("apply", "--server-side", "--dry-run=server", "-f", path, check=False)
        self.assertIn('conflict with "kubectl-create" using v1: .metadata.labels.app',
                      conflict.stderr)
        self.assertIn("(server dry run)",
                      self.k("apply", "--server-side", "--force-conflicts", "--dry-run=server",
                             "-f", path).stdout)
        after = self.sim.kubectl_json("get", "pod", "dry")
        self.assertEqual(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"])
        self.assertNotIn("deletionTimestamp", after["metadata"])
        self.assertEqual(after["metadata"]["labels"], {"app": "web"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
