"""Refusals from the real API server, for tests of k8sbridge's error paths.

A validating admission webhook is how a real cluster refuses a write that is valid
to the API: a policy engine, a quota system or a broken webhook. FaultWebhook serves
one over HTTPS on the loopback address, and KubeCluster registers it for the
resource and operation of each fault. Its answer carries the status code and
message the test chose, and the API server passes them on to the client, as it
does for any webhook's denial (a 503 is then a 503 with a Status body).

The webhook sees only writes (CREATE, UPDATE, DELETE); reads and watches are
faulted by the real means in KubeCluster (stopping the API server or etcd,
compacting etcd).
"""

import http.server
import json
import ssl
import threading
import time


class FaultWebhook:
    """An HTTPS admission webhook that refuses the requests its faults match.

    A fault: {"id", "resource", "operation", "code", "message", "times", "name",
    "delay"}: `times` answers (0: every request until removed) to `operation`
    (CREATE, UPDATE, DELETE or *) on `resource` (pods, configmaps, ...), optionally
    only for the object `name`: after `delay` seconds, a refusal with `code`, or
    with code None the request let through (a slow webhook: latency alone). Each
    fault counts the requests it answered ("hits")."""

    PROBE_NAME = "k8sbridge-fault-probe"

    def __init__(self, pki, port):
        crt, key = pki.issue("fault-webhook", "fault-webhook", hosts=["127.0.0.1"],
                             server=True, client=False)
        self.url = f"https://127.0.0.1:{port}"
        self.faults = []
        self.lock = threading.Lock()
        self.probes_seen = set()
        webhook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                answer = webhook.review(review["request"])
                data = json.dumps({"apiVersion": "admission.k8s.io/v1",
                                   "kind": "AdmissionReview", "response": answer}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # The API server hangs up on a call it stopped waiting for (its
                # client gave up, or the webhook's timeout passed): nothing to report.
                pass

        self.server = Server(("127.0.0.1", port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(crt), str(key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def review(self, request):
        uid = request["uid"]
        obj = request.get("object") or {}
        name = request.get("name") or obj.get("metadata", {}).get("name")
        if name and name.startswith(self.PROBE_NAME):
            with self.lock:
                self.probes_seen.add(name)
            return {"uid": uid, "allowed": False,
                    "status": {"code": 400, "message": "fault webhook probe"}}
        resource = request["resource"]["resource"]
        with self.lock:
            for fault in self.faults:
                if fault["resource"] not in (resource, "*"):
                    continue
                if fault["operation"] not in (request["operation"], "*"):
                    continue
                if fault.get("name") and fault["name"] != name:
                    continue
                fault["hits"] += 1
                if fault["times"]:
                    fault["left"] -= 1
                    if fault["left"] == 0:
                        self.faults.remove(fault)
                break
            else:
                return {"uid": uid, "allowed": True}
        time.sleep(fault.get("delay") or 0)  # outside the lock: other requests go on
        if fault["code"] is None:
            return {"uid": uid, "allowed": True}
        return {"uid": uid, "allowed": False,
                "status": {"code": fault["code"], "message": fault["message"],
                           "reason": _reason(fault["code"])}}

    def add(self, fault):
        with self.lock:
            fault = dict(fault, hits=0, left=fault.get("times", 0))
            self.faults.append(fault)
        return fault

    def hits(self, fault_id):
        with self.lock:
            for f in self.faults:
                if f["id"] == fault_id:
                    return f["hits"]
        return None  # used up and removed

    def remove(self, fault_id):
        with self.lock:
            self.faults = [f for f in self.faults if f["id"] != fault_id]

    def clear(self):
        with self.lock:
            self.faults.clear()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _reason(code):
    return {409: "Conflict", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable", 504: "Timeout"}.get(code, "BadRequest")
