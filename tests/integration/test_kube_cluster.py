"""The tests' Kubernetes is the real one, set up as a real cluster is.

One KubeCluster (tests/harness/kube.py): the upstream etcd, kube-apiserver,
kube-controller-manager and kube-scheduler that scripts/build-kubernetes.sh built
from their Go modules, and kwok for two fake GPU nodes. Each test checks one thing
a real cluster does and a stand-in could get wrong: the release, TLS and who may do
what (RBAC, the Node authorizer and NodeRestriction), Pod Security admission,
ServiceAccount tokens and their revocation, API Priority and Fairness, the
scheduler and controllers, the fault webhook and the audit log the other tests use.
"""

import http.client
import os
import re
import subprocess
import unittest
import urllib.parse

from harness.kube import KubeCluster, LEAF_LABEL, wait_for_condition

PRIVILEGED_POD = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"},
    "spec": {"containers": [{"name": "c", "image": "registry.example/x:1",
                             "securityContext": {"privileged": True}}]}}


class KubeClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kube = KubeCluster(nodes=2, gpus_per_node=8, ib_leaves=2)
        print(f"kube-apiserver --version: {cls.kube.version()}")

    @classmethod
    def tearDownClass(cls):
        cls.kube.close()

    def test_release_is_the_pinned_one(self):
        pinned = re.search(r"kubernetes (v\S+)",
                           (self.kube.bin / "VERSIONS").read_text()).group(1)
        self.assertEqual(self.kube.version(), f"Kubernetes {pinned}")
        status, _, body = self.kube.request("GET", "/version")
        self.assertEqual((status, body["gitVersion"]), (200, pinned))
        for program in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
            out = subprocess.run([str(self.kube.bin / program), "--version"],
                                 capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.strip(), f"Kubernetes {pinned}", program)
        client = self.kube.kubectl_json("version", "--client")["clientVersion"]
        self.assertEqual(client["gitVersion"], pinned)

    def test_anonymous_and_unbound_accounts_are_refused(self):
        self.assertEqual(self.kube.request("GET", "/api/v1/pods", token=False)[0], 403)
        self.kube.create_service_account("default", "nobody")
        token = self.kube.service_account_token("default", "nobody")
        self.assertEqual(self.kube.request("GET", "/api/v1/pods", token=token)[0], 403)
        self.assertEqual(self.kube.request("GET", "/api/v1/pods", token="not-a-token")[0], 401)

    def test_revoked_token_is_refused(self):
        self.kube.create_service_account("default", "short-lived")
        token = self.kube.service_account_token("default", "short-lived")
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        status, _, body = self.kube.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review, token=token)
        self.assertEqual(status, 201, body)
        self.assertEqual(body["status"]["userInfo"]["username"],
                         "system:serviceaccount:default:short-lived")
        self.kube.request("DELETE", "/api/v1/namespaces/default/serviceaccounts/short-lived")
        wait_for_condition(lambda: self.kube.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review,
            token=token)[0] == 401, 30, "the deleted account's token to be refused")

    def test_pod_security_enforces_the_namespace_level(self):
        self.kube.create_namespace("restricted-ns")
        self.kube.kubectl("label", "namespace", "restricted-ns",
                          "pod-security.kubernetes.io/enforce=baseline")
        status, _, body = self.kube.request("POST", "/api/v1/namespaces/restricted-ns/pods",
                                            PRIVILEGED_POD)
        self.assertEqual(status, 403, body)
        self.assertIn('violates PodSecurity "baseline:latest"', body["message"])

    def test_a_node_may_change_only_itself(self):
        node = self.kube.node_kubeconfig("node-0")
        self.kube.kubectl("label", "node", "node-0", "probe=1", "--overwrite", kubeconfig=node)
        denied = self.kube.kubectl("label", "node", "node-1", "probe=1", "--overwrite",
                                   kubeconfig=node, check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("forbidden", denied.stderr)

    def test_priority_and_fairness_is_on(self):
        status, _, body = self.kube.request(
            "GET", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas")
        self.assertEqual(status, 200)
        names = {f["metadata"]["name"] for f in body["items"]}
        self.assertTrue({"exempt", "system-nodes", "service-accounts"} <= names, names)

    def test_deployment_pods_are_scheduled_and_run_on_fake_nodes(self):
        self.kube.kubectl("create", "deployment", "web", "--image=registry.example/web:1",
                          "--replicas=2")

        def running():
            pods = self.kube.kubectl_json("get", "pods", "-l", "app=web")["items"]
            up = [p for p in pods if p["status"].get("phase") == "Running"]
            return up if len(up) == 2 else None
        pods = wait_for_condition(running, 120, "the Deployment's two pods to run")
        for pod in pods:
            self.assertIn(pod["spec"]["nodeName"], ("node-0", "node-1"))
            self.assertTrue(pod["status"]["podIP"])
        self.kube.kubectl("delete", "deployment", "web", "--wait=false")
        wait_for_condition(lambda: not self.kube.kubectl_json(
            "get", "pods", "-l", "app=web")["items"], 60, "the garbage collector and kwok "
            "to remove the Deployment's pods")

    def test_fake_nodes_carry_gpus_and_leaves(self):
        nodes = {n["metadata"]["name"]: n for n in self.kube.kubectl_json("get", "nodes")["items"]}
        self.assertEqual(set(nodes), {"node-0", "node-1"})
        self.assertEqual(nodes["node-0"]["metadata"]["labels"][LEAF_LABEL], "leaf-0")
        self.assertEqual(nodes["node-1"]["metadata"]["labels"][LEAF_LABEL], "leaf-1")
        self.assertEqual(nodes["node-1"]["status"]["allocatable"]["nvidia.com/gpu"], "8")

    def test_fault_webhook_refuses_as_asked_and_the_audit_log_shows_it(self):
        self.kube.clear_requests()
        fault = self.kube.add_fault("configmaps", "create", 503, times=1, message="try later")
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "refused-once"}}
        status, _, body = self.kube.request("POST", "/api/v1/namespaces/default/configmaps", cm)
        self.assertEqual(status, 503, body)
        self.assertIn("try later", body["message"])
        status, _, _ = self.kube.request("POST", "/api/v1/namespaces/default/configmaps", cm)
        self.assertEqual(status, 201)
        self.assertIsNone(self.kube.fault_hits(fault))  # used up
        codes = [r["code"] for r in self.kube.requests_log()
                 if r["verb"] == "create" and r["name"] == "refused-once"]
        self.assertEqual(codes, [503, 201])

    def test_a_throttled_account_gets_429_until_unthrottled(self):
        self.kube.create_service_account("default", "noisy")
        token = self.kube.service_account_token("default", "noisy")
        self.kube.kubectl("create", "rolebinding", "noisy-edit", "--clusterrole=edit",
                          "--serviceaccount=default:noisy")
        path = "/api/v1/namespaces/default/configmaps"
        wait_for_condition(lambda: self.kube.request("GET", path, token=token)[0] == 200, 30,
                           "the edit binding to take effect")
        self.kube.throttle("default", "noisy")
        try:
            status, headers, _ = wait_for_condition(
                lambda: (lambda r: r if r[0] == 429 else None)(
                    self.kube.request("GET", path, token=token)), 30,
                "API Priority and Fairness to reject the account")
            self.assertIn("Retry-After", headers)
            self.assertEqual(self.kube.request("GET", path)[0], 200)  # the admin is not capped
        finally:
            self.kube.unthrottle("default", "noisy")
        wait_for_condition(lambda: self.kube.request("GET", path, token=token)[0] == 200, 30,
                           "the account to be served again")

    def test_a_restarted_api_server_keeps_its_objects(self):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "survivor"}}
        self.kube.create("/api/v1/namespaces/default/configmaps", cm, ok=(201,))
        self.kube.stop("kube-apiserver")
        self.assertFalse(self.kube.answers())
        self.kube.start("kube-apiserver")
        status, _, _ = self.kube.request("GET", "/api/v1/namespaces/default/configmaps/survivor")
        self.assertEqual(status, 200)

    def test_a_watch_from_before_a_compaction_is_gone(self):
        _, _, listed = self.kube.request("GET", "/api/v1/namespaces/default/configmaps")
        old = listed["metadata"]["resourceVersion"]
        for i in range(3):
            self.kube.create("/api/v1/namespaces/default/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"churn-{i}"}})
        self.kube.compact_etcd()
        # The watch cache keeps a window of its own: a restart drops it, as the
        # API servers of a real cluster do in a rollout.
        self.kube.restart("kube-apiserver")
        status, _, body = self.kube.request(
            "GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={old}"
            "&timeoutSeconds=1")
        gone = status == 410 or '"code":410' in str(body).replace(" ", "") or \
            "'code': 410" in str(body)
        self.assertTrue(gone, f"{status} {str(body)[:400]}")

    def test_reset_connections_breaks_a_client_s_watch(self):
        url = urllib.parse.urlsplit(self.kube.url)
        conn = http.client.HTTPSConnection(url.hostname, url.port,
                                           context=self.kube.ssl_context(), timeout=30)
        conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=1")
        response = conn.getresponse()
        self.assertEqual(response.status, 200)
        self.assertGreaterEqual(self.kube.reset_connections(os.getpid()), 1)
        with self.assertRaises((OSError, http.client.HTTPException)):
            while response.read1(65536):
                pass
            raise ConnectionResetError("the watch ended without an error")
        conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
