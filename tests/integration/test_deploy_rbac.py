"""The shipped RBAC (deploy/base/rbac.yaml) and admission policies
(deploy/base/admission.yaml) are what k8sbridge's programs run with, and nothing less
works: kube-apiserver's RBAC authorizer and its ValidatingAdmissionPolicy admission (a
real cluster, KubeCluster, with kwok nodes) decide every request of the
ServiceAccounts' tokens.

With a real slurmctld/slurmd (the rig), k8sbridge-power and k8sbridge-sync use the
token of k8sbridge-controller, under both. One verb taken from its Role (pods:
create) makes a resume fail, and the Slurm node's reason names the missing
permission as the API server words it; the verb given back, the node returns to
service (k8sbridge-sync) and a job runs on it.

Without a rig, each admission policy on its own: the controller's token creates a
pod rendered from the shipped worker template, and nothing else (no ownership
labels, another image or command, a host path, a program in the environment, a
mount over /usr); changes only k8sbridge.io/ annotations of its pods; changes only
k8sbridge's taint, cordon and annotations on a node. The worker's token, bound to a
pod on a node, sets its health condition and records Events on that node only;
an unbound token changes no node.
"""

import copy
import json
import time
import unittest

import yaml

from harness.kube import KWOK_NODE_ANNOTATION, KubeCluster
from harness.paths import SOURCE_ROOT
from harness.rig import wait_for
from harness.sync import SyncRigTestCase, template
from harness.testcase import main

HEALTH_CONDITION = "K8sbridgeHealthProblem"


class ShippedRbac(SyncRigTestCase):
    groups = (("g0", "w-0", template("node-0")),)
    cluster_args = {"nodes": 1}

    def setUp(self):
        super().setUp()
        # The rig's worker pod template: its image and the default ServiceAccount.
        self.kube.apply_deploy_admission(self.namespace, images="registry.example/slurm-worker:",
                                         serviceAccount="default")

    def role_pods_verbs(self, verbs):
        self.kube.kubectl("-n", self.namespace, "patch", "role", "k8sbridge-controller",
                          "--type=json", "-p",
                          f'[{{"op":"replace","path":"/rules/0/verbs","value":{list(verbs)}}}]'
                          .replace("'", '"'))

    def test_a_verb_missing_from_the_role_is_named_and_its_return_recovers(self):
        rig = self.make_rig(nodes=1)
        rig.config.slurm_conf_extra += "\nReturnToService=1\n"
        with rig:
            self.kubelet(rig, ["w-0"])
            d = self.start_daemon(rig)
            self.wait_leader(d)
            user = f"system:serviceaccount:{self.namespace}:k8sbridge-controller"
            self.role_pods_verbs(["get", "list", "watch", "delete", "patch"])

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=power_up"])
            n = rig.wait_reason("w-0", "k8sbridge: pods is forbidden", 60,
                                lambda: f"w-0 failed by the resume; power log:\n"
                                        f"{self.power_log()[-3000:]}")
            self.assertIn(f'User "{user}" cannot create resource "pods" in API group "" '
                          f'in the namespace "{self.namespace}"', n["Reason"])
            self.assertIn("DOWN", n["State"])

            self.role_pods_verbs(["get", "list", "watch", "create", "delete", "patch"])
            # Slurm powers the failed node down; the daemon returns it to service.
            wait_for(lambda: rig.node("w-0")["State"].startswith("IDLE"), 120,
                     lambda: f"w-0 back in service (now {rig.node('w-0')['State']}); "
                             f"log:\n{d.log()[-3000:]}")
            out = rig.workdir / "job.out"
            job = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0", "-o", str(out)])
            self.assertEqual(rig.wait_job(job, timeout=180)["JobState"], "COMPLETED")
            self.assertEqual(out.read_text().split(), ["w-0"])
            self.assertEqual(self.pod("w-0")["metadata"]["labels"]["k8sbridge.io/node"], "w-0")
        self.assertNoLeftovers()



def shipped_worker_pod(namespace, node="w-0"):
    """A worker pod as k8sbridge-power renders it from deploy/base's worker pod
    template (docs/power.md, "Pod templates"): the ownership labels, the node's name,
    the worker command, restartPolicy Never and the K8SBRIDGE_* environment."""
    text = (SOURCE_ROOT / "deploy" / "base" / "config" / "worker-pod.yaml").read_text()
    pod = {"apiVersion": "v1", "kind": "Pod"}
    pod.update(yaml.safe_load(text)["template"])
    pod["metadata"].update(name=node, namespace=namespace)
    pod["metadata"]["labels"].update({
        "app.kubernetes.io/managed-by": "k8sbridge", "k8sbridge.io/cluster": "hpc1",
        "k8sbridge.io/node": node, "k8sbridge.io/node-group": "gpu"})
    pod["metadata"]["annotations"] = {"k8sbridge.io/job-ids": "7"}
    spec = pod["spec"]
    spec["restartPolicy"] = "Never"
    c = spec["containers"][0]
    c["command"] = ["/usr/sbin/k8sbridge-worker"]
    c["terminationMessagePolicy"] = "FallbackToLogsOnError"
    c["env"] += [{"name": "K8SBRIDGE_NODE_NAME", "value": node},
                 {"name": "K8SBRIDGE_CLUSTER", "value": "hpc1"},
                 {"name": "K8SBRIDGE_CONF_SERVER", "value": "slurmctld-0.slurmctld.slurm:6817"},
                 {"name": "K8SBRIDGE_POD_IP",
                  "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    return pod


class AdmissionPolicies(unittest.TestCase):
    """deploy/base/admission.yaml on the real API server, with the tokens of the
    shipped ServiceAccounts (deploy/base/rbac.yaml) in one namespace."""

    namespace = "slurm-workers"

    @classmethod
    def setUpClass(cls):
        cls.kube = KubeCluster(nodes=2, scheduler=False)
        try:
            cls.kube.apply_deploy_rbac(cls.namespace)
            cls.kube.apply_deploy_admission(cls.namespace)
            cls.controller = cls.kube.service_account_token(cls.namespace,
                                                            "k8sbridge-controller")
        except BaseException:
            cls.kube.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.kube.close()

    def call(self, method, path, body=None, token=None, content_type="application/json"):
        return self.kube.request(method, path, body, token=token, content_type=content_type)

    def pods_path(self, dry_run=True):
        return f"/api/v1/namespaces/{self.namespace}/pods" + ("?dryRun=All" if dry_run else "")

    def assertRefused(self, answer, policy, what, because=""):
        """403 from `policy` (and not from an error in it: its message says why)."""
        status, _, body = answer
        self.assertEqual(status, 403, f"{what}: {status} {body}")
        message = json.dumps(body)
        self.assertIn(f"ValidatingAdmissionPolicy '{policy}'", message, what)
        self.assertNotIn("resulted in error", message, what)
        self.assertIn(because, message, what)

    def assertAdmitted(self, answer, what, codes=(200, 201)):
        status, _, body = answer
        self.assertIn(status, codes, f"{what}: {status} {body}")

    # ---- the controller's pods ---------------------------------------------------------

    def test_the_controller_creates_only_pods_from_the_worker_template(self):
        good = shipped_worker_pod(self.namespace)
        self.assertAdmitted(self.call("POST", self.pods_path(), good, self.controller),
                            "the shipped template's pod")

        def variant(change):
            pod = copy.deepcopy(good)
            change(pod)
            return pod
        c0 = lambda pod: pod["spec"]["containers"][0]  # noqa: E731
        # A file of a ConfigMap mounted by subPath (an admin wrote it) is the template's
        # business.
        with_config = variant(lambda p: (
            p["spec"]["volumes"].append({"name": "conf", "configMap": {"name": "slurm-conf"}}),
            c0(p)["volumeMounts"].append({"name": "conf", "mountPath": "/etc/x.conf",
                                          "subPath": "x.conf"})))
        self.assertAdmitted(self.call("POST", self.pods_path(), with_config, self.controller),
                            "a ConfigMap file by subPath")
        bad = {
            "no ownership labels": lambda p: p["metadata"].update(labels={}),
            "named after another node": lambda p: p["metadata"].update(name="w-1"),
            "another image": lambda p: c0(p).update(image="debian:trixie"),
            "a shell for command": lambda p: c0(p).update(command=["sh", "-c", "id"]),
            "arguments": lambda p: c0(p).update(args=["-f", "/jail/tmp/slurm.conf"]),
            "a hostPath volume": lambda p: p["spec"]["volumes"].append(
                {"name": "root", "hostPath": {"path": "/"}}),
            "the host's PID namespace": lambda p: p["spec"].update(hostPID=True),
            "another ServiceAccount": lambda p: p["spec"].update(
                serviceAccountName="k8sbridge-controller"),
            "LD_PRELOAD": lambda p: c0(p)["env"].append(
                {"name": "LD_PRELOAD", "value": "/jail/tmp/x.so"}),
            "another jail-prepare program": lambda p: c0(p).update(env=[
                e if e["name"] != "K8SBRIDGE_JAIL_PREPARE" else
                {"name": e["name"], "value": "sh -c id"} for e in c0(p)["env"]]),
            "a subPath mount over /usr/sbin": lambda p: c0(p)["volumeMounts"].append(
                {"name": "jail", "mountPath": "/usr/sbin", "subPath": "tmp"}),
            "a subPath into the jail's claim": lambda p: c0(p)["volumeMounts"].append(
                {"name": "jail", "mountPath": "/etc/slurm-extra", "subPath": "tmp"}),
            "a postStart hook": lambda p: c0(p).update(
                lifecycle={"postStart": {"exec": {"command": ["id"]}}}),
            "an init container": lambda p: p["spec"].update(initContainers=[
                {"name": "i", "image": "k8sbridge-worker:x", "command": ["sh"]}]),
        }
        for what, change in bad.items():
            with self.subTest(what):
                pod = variant(change)
                self.assertRefused(self.call("POST", self.pods_path(), pod, self.controller),
                                   "k8sbridge-controller-pods", what)
                # The policy holds the controller's account only: the admin may.
                self.assertAdmitted(self.call("POST", self.pods_path(), pod), f"admin: {what}")

    def test_the_controller_changes_only_k8sbridge_annotations_of_its_pods(self):
        pod = shipped_worker_pod(self.namespace, node="w-patch")
        self.assertAdmitted(self.call("POST", self.pods_path(False), pod, self.controller),
                            "the worker pod")
        path = f"{self.pods_path(False)}/w-patch"
        # As k8sbridge-sync patches: a merge patch of its annotations.
        merge = "application/merge-patch+json"
        self.assertAdmitted(self.call("PATCH", path, {"metadata": {"annotations": {
            "k8sbridge.io/slurm-drain-reason": "bad disk"}}}, self.controller, merge),
            "sync's drain annotations")
        # A container's image is one of the few fields a pod update may change.
        strategic = "application/strategic-merge-patch+json"
        for what, patch in {
                "a label": {"metadata": {"labels": {"k8sbridge.io/cluster": "other"}}},
                "a foreign annotation": {"metadata": {"annotations": {"x": "y"}}},
                "the image": {"spec": {"containers": [{"name": "slurmd",
                                                       "image": "debian:trixie"}]}}}.items():
            with self.subTest(what):
                self.assertRefused(self.call("PATCH", path, patch, self.controller, strategic),
                                   "k8sbridge-controller-pods", what)
        # Deletes: its own pods only.
        self.kube.create(self.pods_path(False), {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "someone-elses"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}, ok=(201,))
        self.assertRefused(self.call("DELETE", f"{self.pods_path(False)}/someone-elses",
                                     token=self.controller),
                           "k8sbridge-controller-pods", "a pod without the ownership label")
        self.assertAdmitted(self.call("DELETE", path, token=self.controller), "its worker pod")

    # ---- the controller's nodes --------------------------------------------------------

    def update_node(self, name, change, token):
        """GET, change, PUT (as k8sbridge-sync's Update), again on a conflict (the kwok
        node's heartbeats move its resourceVersion)."""
        for _ in range(20):
            node = self.call("GET", f"/api/v1/nodes/{name}")[2]
            change(node)
            answer = self.call("PUT", f"/api/v1/nodes/{name}", node, token)
            if answer[0] != 409:
                return answer
            time.sleep(0.1)
        raise AssertionError(f"PUT node {name}: conflicts")

    def test_the_controller_touches_only_its_taint_cordon_and_annotations_on_nodes(self):
        def cordon(node):
            node["spec"]["unschedulable"] = True
            node["spec"].setdefault("taints", []).append(
                {"key": "k8sbridge.io/hardware", "value": "hpc1", "effect": "NoSchedule"})
            node["metadata"].setdefault("annotations", {}).update({
                "k8sbridge.io/cordoned-by": "hpc1", "k8sbridge.io/hardware-drains": "gpu-001",
                "k8sbridge.io/hardware-reason": "xid 79"})

        def uncordon(node):
            node["spec"].pop("unschedulable", None)
            node["spec"]["taints"] = [t for t in node["spec"].get("taints", [])
                                      if t["key"] != "k8sbridge.io/hardware"]
            for k in ("k8sbridge.io/cordoned-by", "k8sbridge.io/hardware-drains",
                      "k8sbridge.io/hardware-reason"):
                node["metadata"]["annotations"].pop(k, None)
        self.assertAdmitted(self.update_node("node-0", cordon, self.controller), "sync's cordon")
        self.assertAdmitted(self.update_node("node-0", uncordon, self.controller),
                            "sync lifts its cordon")
        bad = {
            "a label": lambda n: n["metadata"]["labels"].update({"team": "x"}),
            "a foreign annotation": lambda n: n["metadata"].setdefault(
                "annotations", {}).update({"x": "y"}),
            "a foreign taint": lambda n: n["spec"].setdefault("taints", []).append(
                {"key": "x", "effect": "NoSchedule"}),
            "a cordon not its own": lambda n: n["spec"].update(unschedulable=True),
            "an annotation not its own, removed": lambda n: n["metadata"]["annotations"].pop(
                KWOK_NODE_ANNOTATION),
        }
        for what, change in bad.items():
            with self.subTest(what):
                self.assertRefused(self.update_node("node-1", change, self.controller),
                                   "k8sbridge-controller-nodes", what)
                self.assertAdmitted(self.update_node("node-1", lambda n: None, self.controller),
                                    "an unchanged node")

    # ---- the worker's token ------------------------------------------------------------

    def worker_token(self, node):
        """A token of k8sbridge-worker bound to a pod on `node`, as the worker pod's
        projected token is; the API server adds the node's name to its user."""
        name = f"worker-on-{node}"
        pod = self.kube.create(self.pods_path(False), {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"serviceAccountName": "k8sbridge-worker", "nodeName": node,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "x"}]}}, ok=(201, 409))
        pod = self.call("GET", f"{self.pods_path(False)}/{name}")[2]
        status, _, body = self.call(
            "POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/k8sbridge-worker/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": 600, "boundObjectRef": {
                 "apiVersion": "v1", "kind": "Pod", "name": name,
                 "uid": pod["metadata"]["uid"]}}})
        self.assertEqual(status, 201, body)
        return body["status"]["token"]

    def health_condition(self, node, token, condition_type=HEALTH_CONDITION):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return self.call("PATCH", f"/api/v1/nodes/{node}/status", {"status": {"conditions": [
            {"type": condition_type, "status": "True", "reason": "Xid79",
             "message": "k8sbridge-health: GPU fell off the bus",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}},
            token, "application/strategic-merge-patch+json")

    def node_event(self, node, token):
        return self.call("POST", "/apis/events.k8s.io/v1/namespaces/default/events", {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{node}.{time.monotonic_ns():x}"},
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "reportingController": "k8sbridge.io/health", "reportingInstance": node,
            "action": "Check", "reason": "HealthProblem", "type": "Warning",
            "regarding": {"apiVersion": "v1", "kind": "Node", "name": node}}, token)

    def test_the_worker_touches_only_its_own_node(self):
        token = self.worker_token("node-0")
        self.assertAdmitted(self.health_condition("node-0", token), "its node's condition")
        self.assertAdmitted(self.node_event("node-0", token), "an Event about its node")
        self.assertRefused(self.health_condition("node-1", token), "k8sbridge-worker-node",
                           "another node's condition")
        self.assertRefused(self.node_event("node-1", token), "k8sbridge-worker-events",
                           "an Event about another node")
        self.assertRefused(self.health_condition("node-0", token, "Ready"),
                           "k8sbridge-worker-node", "its node's Ready condition")
        unbound = self.kube.service_account_token(self.namespace, "k8sbridge-worker")
        self.assertRefused(self.health_condition("node-0", unbound), "k8sbridge-worker-node",
                           "a token bound to no node", "this token is bound to no node")


if __name__ == "__main__":
    main()
