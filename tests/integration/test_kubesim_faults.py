"""Every fault kubesim can inject, each observed by a real client: kubectl, the Python
client, or a plain HTTP connection where the fault is at the connection level."""

import http.client
import json
import socket
import time
import unittest
import urllib.parse

import urllib3
from kubernetes import client, watch

from harness.kubesim import PythonClientTestCase, wait_for

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}}


class Faults(PythonClientTestCase):
    def setUp(self):
        self.sim.admin("DELETE", "faults")
        self.sim.admin("DELETE", "requests")
        for cm in self.v1.list_namespaced_config_map("default").items:
            self.v1.delete_namespaced_config_map(cm.metadata.name, "default")

    def tearDown(self):
        self.sim.admin("DELETE", "faults")

    def connection(self, timeout=10):
        url = urllib.parse.urlsplit(self.sim.url)
        return http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout,
                                           context=self.sim.ssl_context())

    def raw(self, method, path, body=None, timeout=10):
        conn = self.connection(timeout)
        headers = {"Authorization": f"Bearer {self.sim.token}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def test_429_with_retry_after_and_client_retry(self):
        fid = self.sim.add_fault(resource="pods", verb="list", type="status", code=429,
                                 retryAfterSeconds=1, times=2)
        status, headers, body = self.raw("GET", "/api/v1/namespaces/default/pods")
        self.assertEqual(status, 429)
        self.assertEqual(headers["Retry-After"], "1")
        parsed = json.loads(body)
        self.assertEqual((parsed["kind"], parsed["reason"], parsed["code"]),
                         ("Status", "TooManyRequests", 429))
        self.assertEqual(parsed["details"]["retryAfterSeconds"], 1)
        # kubectl (client-go) honours Retry-After and retries: the command succeeds.
        self.sim.kubectl("get", "pods")
        self.assertIsNone(self.sim.fault_hits(fid))
        codes = [r["code"] for r in self.sim.requests_log()
                 if r["resource"] == "pods" and r["verb"] == "list"]
        self.assertEqual(codes, [429, 429, 200])

    def test_stats_count_every_request_by_verb_resource_and_code(self):
        self.sim.admin("DELETE", "stats")
        cleared = self.sim.admin("GET", "stats")
        self.assertEqual((cleared["requests"], cleared["total"]), ([], 0))
        self.assertLessEqual(cleared["connections"], 1)  # this admin request's own
        self.sim.add_fault(resource="configmaps", verb="create", type="status", code=503, times=1)
        with self.assertRaises(client.ApiException):
            self.v1.create_namespaced_config_map("default", CM)
        started = time.monotonic()
        for i in range(5):
            self.v1.create_namespaced_config_map(
                "default", dict(CM, metadata={"name": f"cm-{i}"}))
        creating = time.monotonic() - started
        for i in range(5):
            self.v1.delete_namespaced_config_map(f"cm-{i}", "default")
        self.raw("GET", "/api/v1/namespaces/default/configmaps/none")
        stats = self.sim.admin("GET", "stats")
        rows = {(r["verb"], r["resource"], r["code"]): r["count"] for r in stats["requests"]}
        # seconds: from the first answer of a row to its last, within what the client saw
        seconds = {(r["verb"], r["code"]): r["seconds"] for r in stats["requests"]}
        self.assertGreater(seconds[("create", 201)], 0)
        self.assertLessEqual(seconds[("create", 201)], creating)
        self.assertEqual(seconds[("get", 404)], 0)
        self.assertEqual(rows, {("create", "configmaps", 503): 1,
                                ("create", "configmaps", 201): 5,
                                ("delete", "configmaps", 200): 5,
                                ("get", "configmaps", 404): 1})
        self.assertEqual(stats["total"], 12)
        self.assertGreaterEqual(stats["connections"], 1)  # the raw request's own connection
        self.assertEqual(self.sim.request_counts()[("create", "configmaps")], 6)
        self.sim.admin("DELETE", "stats")
        self.assertEqual(self.sim.admin("GET", "stats")["total"], 0)

    def test_500_and_503(self):
        self.sim.add_fault(resource="configmaps", verb="create", type="status", code=500)
        with self.assertRaises(client.ApiException) as caught:
            self.v1.create_namespaced_config_map("default", CM)
        self.assertEqual(caught.exception.status, 500)
        self.assertEqual(json.loads(caught.exception.body)["reason"], "InternalError")
        # Nothing was created (kube-root-ca.crt is in every namespace, as on a cluster).
        self.assertEqual([c.metadata.name for c in self.v1.list_namespaced_config_map(
            "default").items if c.metadata.name != "kube-root-ca.crt"], [])
        self.sim.admin("DELETE", "faults")
        self.sim.add_fault(resource="nodes", verb="get", type="status", code=503,
                           retryAfterSeconds=2)
        with self.assertRaises(client.ApiException) as caught:
            self.v1.read_node("node-0")
        self.assertEqual(caught.exception.status, 503)
        self.assertEqual(caught.exception.headers["Retry-After"], "2")
        # Scoped to nodes/get: lists and other resources still work.
        self.assertEqual(len(self.v1.list_node().items), 2)

    def test_reset_before_commit(self):
        fid = self.sim.add_fault(resource="configmaps", verb="create", type="reset-before",
                                 times=1)
        with self.assertRaises(ConnectionError):
            self.raw("POST", "/api/v1/namespaces/default/configmaps", CM)
        self.assertIsNone(self.sim.fault_hits(fid))
        with self.assertRaises(client.ApiException) as caught:
            self.v1.read_namespaced_config_map("cm", "default")
        self.assertEqual(caught.exception.status, 404)  # nothing was written

    def test_reset_after_commit(self):
        self.sim.add_fault(resource="configmaps", verb="create", type="reset-after", times=1)
        with self.assertRaises(ConnectionError):
            self.raw("POST", "/api/v1/namespaces/default/configmaps", CM)
        # The write happened although the client never got an answer.
        self.assertEqual(self.v1.read_namespaced_config_map("cm", "default").data, {"a": "1"})
        # A retried create then meets AlreadyExists, as against a real server.
        with self.assertRaises(client.ApiException) as caught:
            self.v1.create_namespaced_config_map("default", CM)
        self.assertEqual(caught.exception.status, 409)

    def test_stalled_watch(self):
        rv = self.v1.list_namespaced_pod("default").metadata.resource_version
        fid = self.sim.add_fault(resource="pods", verb="watch", type="stall")
        conn = self.connection(timeout=1)
        try:
            conn.request("GET", f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}",
                         headers={"Authorization": f"Bearer {self.sim.token}"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)  # headers arrive, then nothing
            self.v1.create_namespaced_pod("default", {
                "metadata": {"name": "stalled"},
                "spec": {"containers": [{"name": "c", "image": "x"}]}})
            with self.assertRaises((socket.timeout, TimeoutError)):
                resp.readline()
        finally:
            conn.close()
        self.assertEqual(self.sim.fault_hits(fid), 1)
        # The Python client's read timeout fires the same way.
        with self.assertRaises(urllib3.exceptions.ReadTimeoutError):
            for _ in watch.Watch().stream(self.v1.list_namespaced_pod, "default",
                                          resource_version=rv, timeout_seconds=60,
                                          _request_timeout=(5, 1)):
                self.fail("a stalled watch delivered an event")
        # Lifted: the same watch now delivers.
        self.sim.admin("DELETE", f"faults/{fid}")
        w = watch.Watch()
        for ev in w.stream(self.v1.list_namespaced_pod, "default", resource_version=rv,
                           timeout_seconds=30):
            self.assertEqual((ev["type"], ev["object"].metadata.name), ("ADDED", "stalled"))
            w.stop()
        self.v1.delete_namespaced_pod("stalled", "default")

    def test_410_as_http_status_and_mid_stream(self):
        self.sim.add_fault(resource="pods", verb="watch", type="status", code=410, times=1)
        with self.assertRaises(client.ApiException) as caught:
            for _ in watch.Watch().stream(self.v1.list_namespaced_pod, "default",
                                          resource_version="1", timeout_seconds=5):
                pass
        self.assertEqual(caught.exception.status, 410)
        self.sim.add_fault(resource="pods", verb="watch", type="watch-expire", times=1)
        status, _, body = self.raw("GET", "/api/v1/namespaces/default/pods?watch=1")
        self.assertEqual(status, 200)
        events = [json.loads(line) for line in body.decode().splitlines()]
        self.assertEqual(events[-1]["type"], "ERROR")
        self.assertEqual((events[-1]["object"]["code"], events[-1]["object"]["reason"]),
                         (410, "Expired"))

    def test_watch_reset_after_n_events(self):
        for i in range(3):
            self.v1.create_namespaced_config_map(
                "default", {"metadata": {"name": f"reset-{i}"}, "data": {"a": "1"}})
        self.sim.add_fault(resource="configmaps", verb="watch", type="watch-reset",
                           afterEvents=2, times=1)
        # A plain connection sees two events, then the stream breaks mid-body.
        conn = self.connection()
        try:
            conn.request("GET", "/api/v1/namespaces/default/configmaps?watch=1",
                         headers={"Authorization": f"Bearer {self.sim.token}"})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            # http.client raises IncompleteRead (with what came) for a chunked body
            # that ends without its last chunk.
            with self.assertRaises(http.client.IncompleteRead) as broken:
                resp.read()
        finally:
            conn.close()
        lines = [json.loads(line) for line in broken.exception.partial.splitlines()]
        self.assertEqual([e["type"] for e in lines], ["ADDED", "ADDED"])
        # The Python client's watch gets the same two events, then an error.
        self.sim.add_fault(resource="configmaps", verb="watch", type="watch-reset",
                           afterEvents=2, times=1)
        seen = []
        with self.assertRaises(Exception):
            # Not the root-CA publisher's ConfigMap, which every namespace has.
            for ev in watch.Watch().stream(self.v1.list_namespaced_config_map, "default",
                                           field_selector="metadata.name!=kube-root-ca.crt",
                                           timeout_seconds=10):
                seen.append(ev["object"].metadata.name)
        self.assertEqual(seen, ["reset-0", "reset-1"])

    def test_latency(self):
        answered_before = self.answered("list", "nodes")
        fid = self.sim.add_fault(resource="nodes", verb="list", type="latency", latencyMs=3000)
        # A client whose read timeout is shorter than the injected latency times out
        # (urllib3 retries reads first, each retry meets the latency again).
        with self.assertRaises((urllib3.exceptions.ReadTimeoutError,
                                urllib3.exceptions.MaxRetryError)):
            self.v1.list_node(_request_timeout=(5, 0.5))
        self.assertGreaterEqual(self.sim.fault_hits(fid), 1)
        # The server still answers the requests the client gave up on, up to 3 s
        # later; wait for every one, so none lands in a later test's request stats.
        hits = self.sim.fault_hits(fid)
        wait_for(lambda: self.answered("list", "nodes") >= answered_before + hits, 30,
                 what="the delayed list requests answered")
        self.sim.admin("DELETE", f"faults/{fid}")
        self.assertEqual(len(self.v1.list_node(_request_timeout=(5, 0.5)).items), 2)

    def answered(self, verb, resource):
        """How many `verb` `resource` requests the server has answered so far."""
        return sum(r["count"] for r in self.sim.admin("GET", "stats")["requests"]
                   if (r["verb"], r["resource"]) == (verb, resource))

    def test_wrong_token_is_401(self):
        status, _, body = self.sim.request("GET", "/api/v1/nodes", token="wrong")
        self.assertEqual(status, 401)
        self.assertEqual((body["kind"], body["reason"], body["code"]),
                         ("Status", "Unauthorized", 401))

    def refused(self):
        try:
            self.raw("GET", "/version", timeout=2)
        except ConnectionRefusedError:
            return True
        except OSError:
            pass
        return False

    def test_api_server_restart_keeps_the_store_and_starts_a_new_watch_cache(self):
        self.v1.create_namespaced_config_map("default", CM)
        before = self.v1.list_namespaced_config_map("default").metadata.resource_version
        self.v1.create_namespaced_config_map("default", dict(CM, metadata={"name": "cm-2"}))
        # A watch open across the restart.
        conn = self.connection(timeout=30)
        conn.request("GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={before}",
                     headers={"Authorization": f"Bearer {self.sim.token}"})
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        first = json.loads(resp.readline())
        self.assertEqual((first["type"], first["object"]["metadata"]["name"]), ("ADDED", "cm-2"))
        status, _, body = self.sim.request("POST", "/kubesim/restart", {"downSeconds": 3})
        self.assertEqual((status, body), (202, {"downSeconds": 3}))
        try:
            status, _, body = self.sim.request("POST", "/kubesim/restart", {"downSeconds": 3})
            self.assertEqual(status, 409)
            # Down: the listener is gone (refused, as a process that exited), and the
            # open watch ends.
            wait_for(self.refused, timeout=10, what="connections refused")
            # The stream is cut, not ended: no last chunk, as from a process that died.
            with self.assertRaises(http.client.IncompleteRead):
                resp.read()
        finally:
            conn.close()
            wait_for(self.sim.answers, timeout=30, what="the API server back")
        # The store survived: the objects, and resourceVersions going on from there.
        names = {c.metadata.name for c in self.v1.list_namespaced_config_map("default").items}
        self.assertLessEqual({"cm", "cm-2"}, names)
        cm = self.v1.create_namespaced_config_map("default", dict(CM, metadata={"name": "cm-3"}))
        self.assertGreater(int(cm.metadata.resource_version), int(before))
        # A new watch cache: resuming from before the restart is 410; a relist's RV works.
        with self.assertRaises(client.ApiException) as caught:
            for _ in watch.Watch().stream(self.v1.list_namespaced_config_map, "default",
                                          resource_version=before, timeout_seconds=5):
                pass
        self.assertEqual(caught.exception.status, 410)
        relisted = self.v1.list_namespaced_config_map("default").metadata.resource_version
        self.v1.delete_namespaced_config_map("cm-3", "default")
        w, seen = watch.Watch(), []
        for ev in w.stream(self.v1.list_namespaced_config_map, "default",
                           resource_version=relisted, timeout_seconds=30):
            if ev["object"].metadata.name == "cm-3":  # (the root CA's ConfigMap may come back)
                seen.append(ev["type"])
                w.stop()
        self.assertEqual(seen, ["DELETED"])

    def test_restart_rejects_a_bad_down_time(self):
        for body in ({}, {"downSeconds": -1}, {"downSeconds": 601}, {"downSeconds": "5"}):
            status, _, answer = self.sim.request("POST", "/kubesim/restart", body)
            self.assertEqual(status, 400, body)
            self.assertIn("downSeconds", answer["message"])

    def test_fault_admin_rejects_bad_input(self):
        status, _, body = self.sim.request("POST", "/kubesim/faults", {"type": "explode"})
        self.assertEqual(status, 400)
        self.assertIn("explode", body["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
