"""kubesim's authentication and RBAC (docs/kubesim.md, "Authentication and RBAC"):
`kubectl auth can-i --as` answers as a real API server would for a table of roles
and bindings, a ServiceAccount token lacking a verb gets the exact 403, a token of a
deleted ServiceAccount gets 401, and python3-kubernetes works with a token."""

import json
import unittest

from harness.kubesim import KubeSim, wait_for

NS = "slurm"
POWER = "k8sbridge-power"
POWER_USER = f"system:serviceaccount:{NS}:{POWER}"

# A platform team's manifests: what k8sbridge-power may do in its namespace, a
# cluster-wide node reader bound by a RoleBinding-free ClusterRoleBinding, a named
# ConfigMap, pod status, a ClusterRole bound in one namespace only, and a
# non-resource URL.
MANIFESTS = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: other}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: {POWER}, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: power, namespace: {NS}}}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [pods/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [slurm-conf]
  verbs: [get, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: power, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: power}}
subjects:
- {{kind: ServiceAccount, name: {POWER}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: node-watcher}}
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list, watch]
- nonResourceURLs: [/metrics]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: power-nodes}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-watcher}}
subjects:
- {{kind: ServiceAccount, name: {POWER}, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: secret-reader}}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: power-secrets, namespace: other}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: secret-reader}}
subjects:
- {{kind: ServiceAccount, name: {POWER}, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: role-writer, namespace: other}}
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles]
  verbs: [create]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: power-role-writer, namespace: other}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: role-writer}}
subjects:
- {{kind: ServiceAccount, name: {POWER}, namespace: {NS}}}
"""

# (kubectl auth can-i arguments after --as, expected answer)
CAN_I = [
    (["list", "pods", "-n", NS], "yes"),
    (["watch", "pods", "-n", NS], "yes"),
    (["create", "pods", "-n", NS], "yes"),
    (["update", "pods", "-n", NS], "no"),
    (["list", "pods", "-n", "default"], "no"),
    (["list", "pods", "--all-namespaces"], "no"),
    (["patch", "pods", "-n", NS, "--subresource", "status"], "yes"),
    (["patch", "pods", "-n", NS], "no"),
    (["get", "configmaps/slurm-conf", "-n", NS], "yes"),
    (["get", "configmaps/other-conf", "-n", NS], "no"),
    (["list", "configmaps", "-n", NS], "no"),  # resourceNames never allow a list
    (["update", "leases.coordination.k8s.io", "-n", NS], "yes"),
    (["get", "nodes"], "yes"),
    (["delete", "nodes"], "no"),
    (["patch", "nodes", "--subresource", "status"], "no"),
    (["get", "secrets", "-n", "other"], "yes"),  # RoleBinding to a ClusterRole
    (["get", "secrets", "-n", NS], "no"),
    (["get", "secrets", "-n", "default"], "no"),
    (["get", "/healthz"], "yes"),  # system:public-info-viewer
    (["get", "/apis"], "yes"),  # system:discovery
    (["get", "/metrics"], "yes"),
    (["get", "/debug/pprof"], "no"),
    (["create", "selfsubjectaccessreviews.authorization.k8s.io"], "yes"),  # basic-user
]


class KubesimRbac(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sim = KubeSim("--fake-nodes", "2")
        try:
            cls.sim.kubectl("apply", "-f", "-", input=MANIFESTS)
        except BaseException:
            cls.sim.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()

    def can_i(self, *args):
        result = self.sim.kubectl("auth", "can-i", f"--as={POWER_USER}", *args, check=False)
        return result.stdout.strip()

    def test_can_i_answers_as_the_real_server(self):
        for args, expected in CAN_I:
            with self.subTest(args=args):
                self.assertEqual(self.can_i(*args), expected)

    def test_can_i_list_shows_the_rules(self):
        out = self.sim.kubectl("auth", "can-i", "--list", f"--as={POWER_USER}", "-n", NS).stdout
        rows = [line.split() for line in out.splitlines()]
        self.assertIn(["pods", "[]", "[]", "[get", "list", "watch", "create", "delete]"], rows)
        self.assertIn(["configmaps", "[]", "[slurm-conf]", "[get", "update]"], rows)
        self.assertIn(["nodes", "[]", "[]", "[get", "list", "watch]"], rows)
        self.assertIn(["[/metrics]", "[]", "[get]"], rows)

    def test_whoami_as_the_service_account(self):
        out = self.sim.kubectl("auth", "whoami", f"--as={POWER_USER}", "-o", "json").stdout
        self.assertIn(POWER_USER, out)
        self.assertIn(f"system:serviceaccounts:{NS}", out)

    def test_token_lacking_a_verb_gets_the_exact_403(self):
        token = self.sim.service_account_token(NS, POWER)
        status, _, body = self.sim.request("GET", "/api/v1/namespaces/default/pods", token=token)
        self.assertEqual(status, 403)
        self.assertEqual(body["reason"], "Forbidden")
        self.assertEqual(
            body["message"],
            f'pods is forbidden: User "{POWER_USER}" cannot list resource "pods" in API group "" '
            'in the namespace "default"')
        status, _, body = self.sim.request("PATCH", "/api/v1/nodes/node-0/status", body={},
                                           token=token,
                                           content_type="application/merge-patch+json")
        self.assertEqual(status, 403)
        self.assertEqual(
            body["message"],
            f'nodes "node-0" is forbidden: User "{POWER_USER}" cannot patch resource '
            '"nodes/status" in API group "" at the cluster scope')
        self.assertEqual(body["details"], {"name": "node-0", "kind": "nodes"})
        status, _, body = self.sim.request("GET", "/kubesim/faults", token=token)
        self.assertEqual(status, 403)
        # An unknown resource is still refused by authorization, not routing.
        status, _, _ = self.sim.request("GET", "/apis/example.com/v1/widgets", token=token)
        self.assertEqual(status, 403)
        status, _, body = self.sim.request("GET", f"/api/v1/namespaces/{NS}/pods", token=token)
        self.assertEqual(status, 200, body)
        # The request log names what was refused.
        refused = [(r["verb"], r["resource"]) for r in self.sim.requests_log()
                   if r["code"] == 403 and r["path"] == "/api/v1/namespaces/default/pods"]
        self.assertIn(("list", "pods"), refused)

    def test_kubectl_with_a_service_account_kubeconfig(self):
        config = self.sim.service_account_kubeconfig(NS, POWER)
        self.sim.kubectl("get", "pods", kubeconfig=config)
        denied = self.sim.kubectl("get", "pods", "-n", "default", kubeconfig=config, check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn(
            f'Error from server (Forbidden): pods is forbidden: User "{POWER_USER}" cannot list '
            'resource "pods" in API group "" in the namespace "default"', denied.stderr)
        impersonating = self.sim.kubectl("get", "pods", "--as=bob", kubeconfig=config,
                                         check=False)
        self.assertIn(f'users "bob" is forbidden: User "{POWER_USER}" cannot impersonate '
                      'resource "users" in API group "" at the cluster scope',
                      impersonating.stderr)

    def test_token_of_a_deleted_or_recreated_service_account_gets_401(self):
        self.sim.create_service_account(NS, "short-lived")
        token = self.sim.service_account_token(NS, "short-lived")
        status, _, _ = self.sim.request("GET", "/api", token=token)
        self.assertEqual(status, 200)
        self.sim.kubectl("delete", "serviceaccount", "short-lived", "-n", NS)
        status, _, body = self.sim.request("GET", "/api", token=token)
        self.assertEqual((status, body["reason"]), (401, "Unauthorized"))
        self.sim.create_service_account(NS, "short-lived")  # another uid
        status, _, _ = self.sim.request("GET", "/api", token=token)
        self.assertEqual(status, 401)
        status, _, _ = self.sim.request("GET", "/api", token=token + "x")
        self.assertEqual(status, 401)

    def test_expired_token_gets_401(self):
        token = self.sim.service_account_token(NS, POWER, expiration_seconds=1)
        status, _, _ = self.sim.request("GET", "/api", token=token)
        self.assertEqual(status, 200)
        # Valid until a minute past its exp (the leeway of upstream's validator), then 401.
        wait_for(lambda: self.sim.request("GET", "/api", token=token)[0] == 401, timeout=120,
                 interval=1, what="the expired token to be refused")

    def test_token_request_api(self):
        created = self.sim.kubectl("create", "token", POWER, "-n", NS, "--duration=20m")
        token = created.stdout.strip()
        status, _, _ = self.sim.request("GET", f"/api/v1/namespaces/{NS}/pods", token=token)
        self.assertEqual(status, 200)
        too_short = self.sim.kubectl("create", "token", POWER, "-n", NS, "--duration=5m",
                                     check=False)
        self.assertIn("spec.expirationSeconds: Invalid value: 300: may not specify a duration "
                      "less than 10 minutes", too_short.stderr)

    def test_every_namespace_has_its_service_account_and_ca(self):
        for ns in ("default", "kube-system", NS, "other"):
            with self.subTest(ns=ns):
                self.sim.kubectl("get", "serviceaccount", "default", "-n", ns)
                cm = self.sim.kubectl_json("get", "configmap", "kube-root-ca.crt", "-n", ns)
                self.assertEqual(cm["data"]["ca.crt"], (self.sim.dir / "ca.crt").read_text())
        names = self.sim.kubectl("get", "clusterrolebindings", "-o", "name").stdout.split()
        for name in ("cluster-admin", "system:discovery", "system:basic-user",
                     "system:public-info-viewer"):
            self.assertIn(f"clusterrolebinding.rbac.authorization.k8s.io/{name}", names)

    def test_pod_naming_a_missing_service_account_is_refused(self):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0"},
               "spec": {"serviceAccountName": "k8sbridge-worker",
                        "containers": [{"name": "slurmd", "image": "registry.example/w:1"}]}}
        status, _, body = self.sim.request("POST", f"/api/v1/namespaces/{NS}/pods", pod)
        self.assertEqual(status, 403)
        self.assertEqual(body["message"],
                         f'pods "w-0" is forbidden: error looking up service account '
                         f'{NS}/k8sbridge-worker: serviceaccount "k8sbridge-worker" not found')

    def test_roles_grant_only_what_their_writer_holds(self):
        config = self.sim.service_account_kubeconfig(NS, POWER)
        self.sim.kubectl("create", "role", "cm-reader", "-n", "other", "--verb=get",
                         "--resource=configmaps", kubeconfig=config)
        escalating = self.sim.kubectl("create", "role", "cm-writer", "-n", "other",
                                      "--verb=get,delete", "--resource=configmaps",
                                      kubeconfig=config, check=False)
        self.assertNotEqual(escalating.returncode, 0)
        self.assertIn(
            'roles.rbac.authorization.k8s.io "cm-writer" is forbidden: user '
            f'"{POWER_USER}" (groups=["system:serviceaccounts" "system:serviceaccounts:{NS}" '
            '"system:authenticated"]) is attempting to grant RBAC permissions not currently '
            'held:\n{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}',
            escalating.stderr)

    def test_python_client_with_a_service_account_token(self):
        from kubernetes import client, config
        api_client = config.new_client_from_config(
            config_file=str(self.sim.service_account_kubeconfig(NS, POWER)))
        try:
            v1 = client.CoreV1Api(api_client)
            self.assertEqual(v1.list_namespaced_pod(NS).items, [])
            self.assertGreaterEqual(len(v1.list_node().items), 2)
            with self.assertRaises(client.exceptions.ApiException) as refused:
                v1.list_namespaced_secret(NS)
            self.assertEqual(refused.exception.status, 403)
            self.assertEqual(
                json.loads(refused.exception.body)["message"],
                f'secrets is forbidden: User "{POWER_USER}" cannot list resource "secrets" in '
                f'API group "" in the namespace "{NS}"')
        finally:
            api_client.close()


if __name__ == "__main__":
    unittest.main()
