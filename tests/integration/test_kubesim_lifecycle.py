"""kubesim's node lifecycle, DefaultTolerationSeconds, taint eviction, pod GC and
PodDisruptionBudgets, seen through kubectl, the Python client and plain HTTP
(docs/kubesim.md, "Controllers and lifecycle"). kubesim runs without a kubelet here:
the server plays each node's kubelet."""

import json
import unittest

from kubernetes import client

from harness.kubesim import PythonClientTestCase, wait_for

FAULT = "kubesim.k8sbridge.io/fault"


def pod(name, node, labels=None, grace=30):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "c", "image": "registry.example/x:1"}]}}


class Lifecycle(PythonClientTestCase):
    kubesim_args = ("--fake-nodes", "3", "--default-unreachable-toleration-seconds", "1",
                    "--pod-gc-quarantine-ms", "300")

    def tearDown(self):
        for p in self.v1.list_namespaced_pod("default").items:
            self.v1.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=0)
        self.sim.request("DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets")

    def make_ready(self, name):
        status, _, body = self.sim.request(
            "PATCH", f"/api/v1/namespaces/default/pods/{name}/status",
            {"status": {"phase": "Running",
                        "conditions": [{"type": "Ready", "status": "True"}]}},
            content_type="application/merge-patch+json")
        self.assertEqual(status, 200, body)

    def node(self, name):
        return self.sim.kubectl_json("get", "node", name)

    def taints(self, name):
        return sorted((t["key"], t["effect"]) for t in self.node(name)["spec"].get("taints", []))

    def ready(self, name):
        for c in self.node(name)["status"]["conditions"]:
            if c["type"] == "Ready":
                return c
        return None

    def get_pod(self, name):
        status, _, body = self.sim.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        return body if status == 200 else None

    def test_lost_node_taints_tolerations_eviction_and_pod_gc(self):
        self.v1.create_namespaced_pod("default", pod("lost", "node-0", grace=1))
        self.v1.create_namespaced_pod("default", pod("fine", "node-1", grace=1))
        tolerations = {t.key: t.toleration_seconds
                       for t in self.v1.read_namespaced_pod("lost", "default").spec.tolerations}
        self.assertEqual(tolerations, {"node.kubernetes.io/not-ready": 300,
                                       "node.kubernetes.io/unreachable": 1})
        self.make_ready("lost")

        self.sim.kubectl("annotate", "node", "node-0", f"{FAULT}=NotReady")
        wait_for(lambda: self.ready("node-0")["status"] == "Unknown", what="node-0 Unknown")
        self.assertEqual(self.ready("node-0")["reason"], "NodeStatusUnknown")
        wait_for(lambda: self.taints("node-0") == [
            ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoSchedule")], what="unreachable taints")
        # The taint manager evicts the pod once its 1 s toleration is over ...
        evicted = wait_for(lambda: (self.get_pod("lost") or {}).get("metadata", {})
                           .get("deletionTimestamp") and self.get_pod("lost"),
                           what="the taint manager's delete")
        reasons = {c["type"]: c.get("reason") for c in evicted["status"]["conditions"]}
        self.assertEqual(reasons["DisruptionTarget"], "DeletionByTaintManager")
        # ... and with no kubelet to confirm it stays Terminating, while a pod deleted
        # later, with the same grace, on a Ready node is gone.
        self.v1.delete_namespaced_pod("fine", "default", grace_period_seconds=1)
        wait_for(lambda: self.get_pod("fine") is None, what="fine deleted")
        self.assertIsNotNone(self.get_pod("lost"))
        self.assertIn("Terminating", self.sim.kubectl("get", "pod", "lost").stdout)

        # node.kubernetes.io/out-of-service: pod GC force-deletes it.
        self.sim.kubectl("taint", "node", "node-0",
                         "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
        wait_for(lambda: self.get_pod("lost") is None, what="pod GC of the terminating pod")

        self.sim.kubectl("taint", "node", "node-0", "node.kubernetes.io/out-of-service-")
        self.sim.kubectl("annotate", "node", "node-0", f"{FAULT}-")
        wait_for(lambda: self.ready("node-0")["status"] == "True", what="node-0 Ready")
        wait_for(lambda: self.taints("node-0") == [], what="taints removed")

    def test_not_ready_taints_and_deleted_node(self):
        status, _, body = self.sim.request(
            "PATCH", "/api/v1/nodes/node-2/status",
            {"status": {"conditions": [{"type": "Ready", "status": "False",
                                        "reason": "KubeletNotReady"}]}},
            content_type="application/strategic-merge-patch+json")
        self.assertEqual(status, 200, body)
        wait_for(lambda: self.taints("node-2") == [
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/not-ready", "NoSchedule")], what="not-ready taints")
        self.v1.create_namespaced_pod("default", pod("orphan", "node-2"))
        self.sim.kubectl("delete", "node", "node-2")
        wait_for(lambda: self.get_pod("orphan") is None, what="pod GC of the orphan")

    def test_pod_disruption_budget_on_eviction(self):
        for name, node in (("web-a", "node-0"), ("web-b", "node-1")):
            self.v1.create_namespaced_pod("default", pod(name, node, {"app": "web"}))
            self.make_ready(name)
        pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web"},
               "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
        path = self.sim.dir / "pdb.json"
        path.write_text(json.dumps(pdb))
        self.sim.kubectl("apply", "-f", str(path))
        budget = wait_for(lambda: (self.sim.kubectl_json("get", "pdb", "web").get("status") or {})
                          .get("disruptionsAllowed") == 1
                          and self.sim.kubectl_json("get", "pdb", "web"),
                          what="the budget's status")
        self.assertEqual((budget["status"]["expectedPods"], budget["status"]["currentHealthy"],
                          budget["status"]["desiredHealthy"]), (2, 2, 1))

        policy = client.PolicyV1Api(self.api_client)

        def evict(name, body_name=None):
            return self.sim.request(
                "POST", f"/api/v1/namespaces/default/pods/{name}/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": body_name or name, "namespace": "default"}})
        status, _, body = evict("web-a", "web-b")
        self.assertEqual((status, body["reason"]), (400, "BadRequest"))
        status, _, body = evict("web-a")
        self.assertEqual(status, 201, body)
        self.assertEqual(policy.read_namespaced_pod_disruption_budget(
            "web", "default").status.disruptions_allowed, 0)
        # The Python client sees the refusal as a 429 with the budget's cause.
        with self.assertRaises(client.ApiException) as refused:
            self.v1.create_namespaced_pod_eviction(
                "web-b", "default",
                client.V1Eviction(metadata=client.V1ObjectMeta(name="web-b")))
        self.assertEqual(refused.exception.status, 429)
        answer = json.loads(refused.exception.body)
        self.assertEqual(answer["message"],
                         "Cannot evict pod as it would violate the pod's disruption budget.")
        self.assertEqual(answer["details"]["causes"][0]["reason"], "DisruptionBudget")
        self.assertIsNone(self.get_pod("web-b")["metadata"].get("deletionTimestamp"))


if __name__ == "__main__":
    unittest.main()
