"""kubesim is as strict as kube-apiserver (docs/kubesim.md, "Strictness rules"), seen
through the real clients: kubectl 1.32 (which sends fieldValidation=Strict on create
and apply by default) and Debian's python3-kubernetes (which sends no directive, so
the server's default Warn applies)."""

import json
import unittest

from kubernetes import client
from kubernetes.client.rest import ApiException

from harness.kubesim import PythonClientTestCase

POD_WITH_TYPO = """\
apiVersion: v1
kind: Pod
metadata:
  name: typo
spec:
  containers:
  - name: main
    image: registry.example/app:1
    imagePullPolcy: Always
"""


def pod(name, container=None, **spec):
    c = {"name": "main", "image": "registry.example/app:1"}
    c.update(container or {})
    body = {"containers": [c]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def event(name, ns, regarding, **extra):
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": ns},
            "eventTime": "2026-12-01T10:00:00.000000Z", "reportingController": "k8sbridge",
            "reportingInstance": "test-host", "action": "Drain", "reason": "HardwareDrain",
            "type": "Warning", "note": "GPU 3 fell off the bus", "regarding": regarding}
    body.update(extra)
    return body


class Strictness(PythonClientTestCase):
    def setUp(self):
        self.ns = self.id().rsplit(".", 1)[-1].replace("_", "-").lower()[:50]
        self.v1.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(self.v1.delete_namespace, self.ns)

    def refused(self, call, *args):
        with self.assertRaises(ApiException) as caught:
            call(*args)
        return caught.exception.status, json.loads(caught.exception.body)["message"]

    def test_kubectl_create_is_strict_about_unknown_fields(self):
        manifest = self.sim.dir / "typo.yaml"
        manifest.write_text(POD_WITH_TYPO)
        r = self.sim.kubectl("create", "-n", self.ns, "-f", str(manifest), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                      'unknown field "spec.containers[0].imagePullPolcy"', r.stderr)
        warned = self.sim.kubectl("create", "-n", self.ns, "--validate=warn", "-f", str(manifest))
        self.assertIn('unknown field "spec.containers[0].imagePullPolcy"', warned.stderr)
        stored = self.v1.read_namespaced_pod("typo", self.ns)
        self.assertIsNone(stored.spec.containers[0].image_pull_policy)

    def test_kubectl_apply_is_strict_about_unknown_fields(self):
        manifest = self.sim.dir / "apply.yaml"
        manifest.write_text(POD_WITH_TYPO.replace("typo", "applied"))
        created = self.sim.kubectl("apply", "-n", self.ns, "-f", str(manifest), check=False)
        self.assertNotEqual(created.returncode, 0)
        self.assertIn("strict decoding error", created.stderr)
        manifest.write_text(POD_WITH_TYPO.replace("typo", "applied")
                            .replace("    imagePullPolcy: Always\n", ""))
        self.sim.kubectl("apply", "-n", self.ns, "-f", str(manifest))
        manifest.write_text(POD_WITH_TYPO.replace("typo", "applied")
                            .replace("app:1", "app:2"))
        patched = self.sim.kubectl("apply", "-n", self.ns, "-f", str(manifest), check=False)
        self.assertNotEqual(patched.returncode, 0)
        self.assertIn('strict decoding error: unknown field "spec.containers[0].imagePullPolcy"',
                      patched.stderr)
        self.assertEqual(self.v1.read_namespaced_pod("applied", self.ns).spec.containers[0].image,
                         "registry.example/app:1")

    def test_default_is_warn_with_a_warning_header(self):
        status, headers, body = self.sim.request(
            "POST", f"/api/v1/namespaces/{self.ns}/configmaps",
            {"metadata": {"name": "cm"}, "data": {"a": "b"}, "spec": {"x": 1}})
        self.assertEqual(status, 201)
        self.assertEqual(headers.get("Warning"), '299 - "unknown field \\"spec\\""')
        self.assertNotIn("spec", body)
        strict = self.sim.request(
            "POST", f"/api/v1/namespaces/{self.ns}/configmaps?fieldValidation=Strict",
            {"metadata": {"name": "cm2"}, "spec": {"x": 1}})
        self.assertEqual((strict[0], strict[2]["reason"]), (400, "BadRequest"))

    def test_create_with_resource_version_fails(self):
        status, message = self.refused(
            self.v1.create_namespaced_config_map, self.ns,
            {"metadata": {"name": "copied", "resourceVersion": "12"}})
        self.assertEqual(status, 500)
        self.assertEqual(message, "resourceVersion should not be set on objects to be created")

    def test_names_per_kind(self):
        status, message = self.refused(self.v1.create_namespace,
                                       {"metadata": {"name": "team.a"}})
        self.assertEqual(status, 422)
        self.assertIn('metadata.name: Invalid value: "team.a": must not contain dots', message)
        leases = client.CoordinationV1Api(self.api_client)
        status, message = self.refused(leases.create_namespaced_lease, self.ns,
                                       {"metadata": {"name": "Leader"}})
        self.assertEqual(status, 422)
        self.assertTrue(message.startswith('Lease.coordination.k8s.io "Leader" is invalid'))

    def test_events_about_nodes_live_in_default(self):
        events = client.EventsV1Api(self.api_client)
        node = {"kind": "Node", "name": "node-0"}
        status, message = self.refused(events.create_namespaced_event, self.ns,
                                       event("node-0.1", self.ns, node))
        self.assertEqual(status, 422)
        self.assertIn("involvedObject.namespace: Invalid value: \"\": does not match "
                      "event.namespace", message)
        events.create_namespaced_event("default", event("node-0.strict1", "default", node))
        self.addCleanup(events.delete_namespaced_event, "node-0.strict1", "default")
        listed = self.sim.kubectl_json("get", "events", "-A")
        self.assertIn("node-0.strict1", [e["metadata"]["name"] for e in listed["items"]])
        status, message = self.refused(
            events.create_namespaced_event, "default",
            event("node-0.2", "default", node, reportingController="", note="x" * 1025))
        self.assertEqual(status, 422)
        self.assertIn("reportingController: Required value", message)
        self.assertIn("message: Invalid value: \"\": can have at most 1024 characters", message)

    def test_pods_validated_like_the_apiserver(self):
        status, message = self.refused(self.v1.create_namespaced_pod, self.ns,
                                       pod("noimage", {"image": ""}))
        self.assertEqual((status, message),
                         (422, 'Pod "noimage" is invalid: spec.containers[0].image: '
                               'Required value'))
        status, message = self.refused(
            self.v1.create_namespaced_pod, self.ns,
            pod("gpu", {"resources": {"requests": {"nvidia.com/gpu": "2"},
                                      "limits": {"nvidia.com/gpu": "4"}}}))
        self.assertIn("must be equal to nvidia.com/gpu limit of 4", message)
        self.v1.create_namespaced_pod(self.ns, pod("web"))
        self.sim.kubectl("set", "image", "-n", self.ns, "pod/web", "main=registry.example/app:2")
        r = self.sim.kubectl("patch", "-n", self.ns, "pod", "web", "-p",
                             '{"spec":{"hostname":"other"}}', check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pod updates may not change fields other than", r.stderr)


if __name__ == "__main__":
    unittest.main()
