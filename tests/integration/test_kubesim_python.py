"""The Kubernetes stand-in (kubesim) with Debian's python3-kubernetes client: list,
watch from the list's resourceVersion, a 410 in the middle of a stream with the
client's relist, an HTTP 410 for an expired RV, patches, conflicts and leases."""

import unittest

from kubernetes import client, watch

from harness.kubesim import PythonClientTestCase


def pod(name, labels=None, node=None):
    spec = {"containers": [{"name": "main", "image": "registry.example/app:1",
                            "env": [{"name": "A", "value": "1"}]}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


class PythonClient(PythonClientTestCase):
    def setUp(self):
        self.ns = self.id().rsplit(".", 1)[-1].replace("_", "-").lower()[:50]
        self.v1.create_namespace({"metadata": {"name": self.ns}})
        self.sim.admin("DELETE", "faults")

    def tearDown(self):
        self.sim.admin("DELETE", "faults")
        self.v1.delete_namespace(self.ns)

    def events_until(self, stream, done):
        """Collects (type, name) from a watch stream until done(events) is true."""
        seen = []
        for ev in stream:
            if ev["type"] == "BOOKMARK":
                continue
            seen.append((ev["type"], ev["object"].metadata.name,
                         int(ev["object"].metadata.resource_version)))
            if done(seen):
                break
        return seen

    def test_list_then_watch_from_list_rv(self):
        self.v1.create_namespaced_pod(self.ns, pod("before-1"))
        self.v1.create_namespaced_pod(self.ns, pod("before-2"))
        listed = self.v1.list_namespaced_pod(self.ns)
        self.assertEqual(sorted(p.metadata.name for p in listed.items), ["before-1", "before-2"])
        rv = listed.metadata.resource_version
        self.v1.create_namespaced_pod(self.ns, pod("after"))
        self.v1.patch_namespaced_pod("before-1", self.ns, {"metadata": {"labels": {"x": "1"}}})
        self.v1.delete_namespaced_pod("before-2", self.ns)

        w = watch.Watch()
        seen = self.events_until(
            w.stream(self.v1.list_namespaced_pod, self.ns, resource_version=rv,
                     timeout_seconds=30),
            lambda s: len(s) == 3)
        w.stop()
        self.assertEqual([(t, n) for t, n, _ in seen],
                         [("ADDED", "after"), ("MODIFIED", "before-1"), ("DELETED", "before-2")])
        rvs = [r for _, _, r in seen]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv))

    def test_watch_from_zero_gives_synthetic_added_and_selector_deletes(self):
        self.v1.create_namespaced_pod(self.ns, pod("a", {"team": "red"}))
        self.v1.create_namespaced_pod(self.ns, pod("b", {"team": "blue"}))
        w = watch.Watch()
        stream = w.stream(self.v1.list_namespaced_pod, self.ns, label_selector="team=red",
                          resource_version="0", timeout_seconds=30)
        first = next(stream)
        self.assertEqual((first["type"], first["object"].metadata.name), ("ADDED", "a"))
        # "a" stops matching the selector: the watcher sees it as DELETED.
        self.v1.patch_namespaced_pod("a", self.ns, {"metadata": {"labels": {"team": "blue"}}})
        self.v1.patch_namespaced_pod("b", self.ns, {"metadata": {"labels": {"team": "red"}}})
        seen = self.events_until(stream, lambda s: len(s) == 2)
        w.stop()
        self.assertEqual([(t, n) for t, n, _ in seen], [("DELETED", "a"), ("ADDED", "b")])

    def test_410_mid_stream_then_relist(self):
        listed = self.v1.list_namespaced_pod(self.ns)
        self.v1.create_namespaced_pod(self.ns, pod("during"))
        fault = self.sim.add_fault(resource="pods", verb="watch", type="watch-expire", times=1)
        self.sim.admin("DELETE", "requests")

        # What an informer does: list, watch from the list's RV, and on 410 relist.
        rv = listed.metadata.resource_version
        names = set(p.metadata.name for p in listed.items)
        relists = 0
        delivered_before_error = []
        for _ in range(3):
            try:
                w = watch.Watch()
                for ev in w.stream(self.v1.list_namespaced_pod, self.ns, resource_version=rv,
                                   timeout_seconds=2):
                    delivered_before_error.append(ev["object"].metadata.name)
                    names.add(ev["object"].metadata.name)
                    rv = ev["object"].metadata.resource_version
                break  # the stream ended normally at its timeout
            except client.ApiException as e:
                self.assertEqual(e.status, 410)
                self.assertIn("Expired", e.reason)
                relisted = self.v1.list_namespaced_pod(self.ns)
                relists += 1
                names = set(p.metadata.name for p in relisted.items)
                rv = relisted.metadata.resource_version
                self.v1.create_namespaced_pod(self.ns, pod("after-relist"))
        self.assertEqual(relists, 1)
        self.assertEqual(delivered_before_error[0], "during")  # the stream was 200 first
        self.assertIn("after-relist", names)
        self.assertIsNone(self.sim.fault_hits(fault))  # used once, then gone
        verbs = [(r["verb"], r["code"], r["fault"]) for r in self.sim.requests_log()
                 if r["resource"] == "pods"]
        self.assertEqual(verbs[:3], [("watch", 200, "watch-expire"), ("list", 200, ""),
                                     ("create", 201, "")])

    def test_http_410_for_expired_resource_version(self):
        old_rv = self.v1.list_namespaced_pod(self.ns).metadata.resource_version
        self.v1.create_namespaced_pod(self.ns, pod("x"))
        self.sim.admin("POST", "compact")
        with self.assertRaises(client.ApiException) as caught:
            for _ in watch.Watch().stream(self.v1.list_namespaced_pod, self.ns,
                                          resource_version=old_rv, timeout_seconds=5):
                pass
        self.assertEqual(caught.exception.status, 410)
        body = caught.exception.body
        self.assertIn('"reason":"Expired"', body.decode() if isinstance(body, bytes) else body)
        # Relist and watch again from the new RV.
        rv = self.v1.list_namespaced_pod(self.ns).metadata.resource_version
        self.v1.create_namespaced_pod(self.ns, pod("y"))
        w = watch.Watch()
        seen = self.events_until(w.stream(self.v1.list_namespaced_pod, self.ns,
                                          resource_version=rv, timeout_seconds=30),
                                 lambda s: len(s) == 1)
        w.stop()
        self.assertEqual(seen[0][:2], ("ADDED", "y"))

    def test_patches(self):
        self.v1.create_namespaced_pod(self.ns, pod("p"))
        # A dict is sent as a strategic merge patch: containers merge by name (of a
        # pod's spec only the images may change, as on a real API server).
        patched = self.v1.patch_namespaced_pod("p", self.ns, {
            "metadata": {"labels": {"role": "worker"}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/app:2"}]}})
        self.assertEqual(patched.metadata.labels, {"role": "worker"})
        self.assertEqual(patched.spec.containers[0].image, "registry.example/app:2")
        self.assertEqual([(e.name, e.value) for e in patched.spec.containers[0].env],
                         [("A", "1")])
        with self.assertRaises(client.ApiException) as caught:
            self.v1.patch_namespaced_pod("p", self.ns, {"spec": {"containers": [
                {"name": "main", "env": [{"name": "B", "value": "2"}]}]}})
        self.assertEqual(caught.exception.status, 422)
        # A list is sent as a JSON patch; a failing "test" rejects the whole patch.
        patched = self.v1.patch_namespaced_pod("p", self.ns, [
            {"op": "test", "path": "/metadata/labels/role", "value": "worker"},
            {"op": "replace", "path": "/metadata/labels/role", "value": "driver"}])
        self.assertEqual(patched.metadata.labels["role"], "driver")
        with self.assertRaises(client.ApiException) as caught:
            self.v1.patch_namespaced_pod("p", self.ns, [
                {"op": "test", "path": "/metadata/labels/role", "value": "worker"},
                {"op": "remove", "path": "/metadata/labels/role"}])
        self.assertEqual(caught.exception.status, 422)
        self.assertEqual(self.v1.read_namespaced_pod("p", self.ns).metadata.labels["role"],
                         "driver")
        # Merge patch: null deletes.
        status, _, body = self.sim.request(
            "PATCH", f"/api/v1/namespaces/{self.ns}/pods/p",
            {"metadata": {"labels": {"role": None, "m": "1"}}},
            content_type="application/merge-patch+json")
        self.assertEqual(status, 200)
        self.assertEqual(body["metadata"]["labels"], {"m": "1"})
        # The status subresource.
        patched = self.v1.patch_namespaced_pod_status("p", self.ns, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        self.assertEqual(patched.status.phase, "Running")
        # Unknown patch type: 415.
        status, _, body = self.sim.request("PATCH", f"/api/v1/namespaces/{self.ns}/pods/p",
                                           {"a": 1}, content_type="application/x-weird")
        self.assertEqual((status, body["reason"]), (415, "UnsupportedMediaType"))
        # Cordon as kubectl and client libraries send it.
        node = self.v1.patch_node("node-1", {"spec": {"unschedulable": True}})
        self.assertTrue(node.spec.unschedulable)
        self.v1.patch_node("node-1", {"spec": {"unschedulable": None}})

    def test_put_with_stale_resource_version_conflicts(self):
        created = self.v1.create_namespaced_config_map(
            self.ns, {"metadata": {"name": "cfg"}, "data": {"a": "1"}})
        stale = created.metadata.resource_version
        created.data = {"a": "2"}
        updated = self.v1.replace_namespaced_config_map("cfg", self.ns, created)
        self.assertNotEqual(updated.metadata.resource_version, stale)
        created.metadata.resource_version = stale
        created.data = {"a": "3"}
        with self.assertRaises(client.ApiException) as caught:
            self.v1.replace_namespaced_config_map("cfg", self.ns, created)
        self.assertEqual(caught.exception.status, 409)
        self.assertIn('"reason":"Conflict"', caught.exception.body)
        with self.assertRaises(client.ApiException) as caught:
            self.v1.create_namespaced_config_map(self.ns, {"metadata": {"name": "cfg"}})
        self.assertEqual(caught.exception.status, 409)
        self.assertIn('"reason":"AlreadyExists"', caught.exception.body)
        with self.assertRaises(client.ApiException) as caught:
            self.v1.read_namespaced_config_map("missing", self.ns)
        self.assertEqual(caught.exception.status, 404)

    def test_paging_and_field_selectors(self):
        for i in range(5):
            self.v1.create_namespaced_pod(self.ns, pod(f"pg-{i}", node="node-0" if i % 2 else None))
        page = self.v1.list_namespaced_pod(self.ns, limit=2)
        names = [p.metadata.name for p in page.items]
        self.assertEqual(page.metadata.remaining_item_count, 3)
        while page.metadata._continue:
            page = self.v1.list_namespaced_pod(self.ns, limit=2, _continue=page.metadata._continue)
            names += [p.metadata.name for p in page.items]
        self.assertEqual(names, [f"pg-{i}" for i in range(5)])
        on_node = self.v1.list_namespaced_pod(self.ns, field_selector="spec.nodeName=node-0")
        self.assertEqual([p.metadata.name for p in on_node.items], ["pg-1", "pg-3"])
        pending = self.v1.list_namespaced_pod(self.ns, field_selector="status.phase=Pending,"
                                              "spec.nodeName!=node-0")
        self.assertEqual([p.metadata.name for p in pending.items], ["pg-0", "pg-2", "pg-4"])
        with self.assertRaises(client.ApiException) as caught:
            self.v1.list_namespaced_pod(self.ns, field_selector="spec.containers=x")
        self.assertEqual(caught.exception.status, 400)
        # Only the root-CA publisher's ConfigMap, which every namespace has.
        config_maps = self.v1.list_namespaced_config_map(self.ns)
        self.assertEqual([c.metadata.name for c in config_maps.items], ["kube-root-ca.crt"])

    def test_events_v1_and_leases(self):
        events = client.EventsV1Api(self.api_client)
        created = events.create_namespaced_event(self.ns, {
            "metadata": {"name": "ev1"}, "eventTime": "2026-11-30T10:00:00.000001Z",
            "reportingController": "k8sbridge.io/test", "reportingInstance": "t1",
            "action": "Testing", "reason": "Tested", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": self.ns}, "note": "hello"})
        self.assertEqual(created.note, "hello")
        core = self.v1.list_namespaced_event(self.ns, field_selector="involvedObject.name=p")
        self.assertEqual([(e.reason, e.message) for e in core.items], [("Tested", "hello")])
        leases = client.CoordinationV1Api(self.api_client)
        lease = leases.create_namespaced_lease(self.ns, {
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
        lease.spec.holder_identity = "b"
        renewed = leases.replace_namespaced_lease("leader", self.ns, lease)
        self.assertEqual(renewed.spec.holder_identity, "b")
        with self.assertRaises(client.ApiException) as caught:
            leases.replace_namespaced_lease("leader", self.ns, lease)  # stale RV
        self.assertEqual(caught.exception.status, 409)


if __name__ == "__main__":
    unittest.main(verbosity=2)
