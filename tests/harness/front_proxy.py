"""A load balancer in front of the API server that fails as real ones do.

A real cluster's clients rarely reach kube-apiserver directly: an HTTPS load balancer
or ingress stands between them (HAProxy, a cloud LB). That hop fails in ways the API
server itself never does, and a client must survive them:

- it answers 500 (or 502, 503) on its own, to a read or a watch, when a backend is
  unhealthy;
- it resets the client's connection after the backend has acted on a write and
  before the answer reaches the client (a backend timeout, a restart of the LB);
- it answers a watch 200 and then forwards none of its events, only the stream's
  end when the API server ends it (a backend connection that lost its data),
  while other requests go on.

FrontProxy is such a hop for the tests: TLS on the loopback address with a
certificate of the cluster's CA, HTTP/1.1 to the client, and one connection to the
API server per request, which sees the client's own Authorization header. Its
faults are rules: (method, path pattern, watch or not) and what to do, `times`
times (0: until cleared). Everything else passes through unchanged, watches
streamed as they come.
"""

import http.client
import http.server
import json
import re
import socket
import ssl
import struct
import threading
import urllib.parse

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "content-length", "host"}


class FrontProxy:
    """Serves https://127.0.0.1:`port` in front of `kube` (a KubeCluster)."""

    def __init__(self, kube, port):
        crt, key = kube.pki.issue("front-proxy", "front-proxy", hosts=["127.0.0.1"],
                                  server=True, client=False)
        upstream = urllib.parse.urlsplit(kube.url)
        self.upstream = (upstream.hostname, upstream.port)
        self.upstream_tls = ssl.create_default_context(cafile=str(kube.pki.ca))
        self.url = f"https://127.0.0.1:{port}"
        self.rules = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_request(self):
                proxy.handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_request

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that went away mid-request (the faults make many)

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(crt), str(key))
        context.set_alpn_protocols(["http/1.1"])
        self.server = Server(("127.0.0.1", port), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # ---- rules ------------------------------------------------------------------

    def add(self, action, method, path, watch=False, code=500, times=1):
        """`action`: "status" (answer `code` itself), "reset-after" (forward, then reset
        the client's connection instead of answering) or "stall" (forward, pass the
        answer's head and its end on, nothing between). `path`: a regular expression the request's
        path must match; `watch`: whether the rule is for watches or for the rest."""
        with self.lock:
            self.rules.append({"action": action, "method": method, "path": re.compile(path),
                               "watch": watch, "code": code, "left": times})

    def clear(self):
        with self.lock:
            self.rules.clear()

    def _take_rule(self, method, path, watch):
        with self.lock:
            for rule in self.rules:
                if rule["method"] in (method, "*") and rule["watch"] == watch and \
                        rule["path"].search(path):
                    if rule["left"]:
                        rule["left"] -= 1
                        if rule["left"] == 0:
                            self.rules.remove(rule)
                    return rule
        return None

    # ---- requests -----------------------------------------------------------------

    def handle(self, client):
        split = urllib.parse.urlsplit(client.path)
        query = urllib.parse.parse_qs(split.query)
        watch = query.get("watch", ["false"])[0] in ("1", "true")
        length = int(client.headers.get("Content-Length") or 0)
        body = client.rfile.read(length) if length else None
        rule = self._take_rule(client.command, split.path, watch)
        if rule and rule["action"] == "status":
            self._answer_status(client, rule["code"])
            return
        upstream = http.client.HTTPSConnection(*self.upstream, context=self.upstream_tls,
                                               timeout=None)
        try:
            headers = {k: v for k, v in client.headers.items() if k.lower() not in HOP_BY_HOP}
            upstream.request(client.command, client.path, body=body, headers=headers)
            answer = upstream.getresponse()
            if rule and rule["action"] == "reset-after":
                answer.read()
                _reset(client.connection)
                client.close_connection = True
                return
            self._relay(client, answer, stall=bool(rule and rule["action"] == "stall"))
        finally:
            upstream.close()

    def _answer_status(self, client, code):
        data = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "code": code, "reason": "InternalError",
                           "message": f"the load balancer answered {code}"}).encode()
        client.send_response(code)
        client.send_header("Content-Type", "application/json")
        client.send_header("Content-Length", str(len(data)))
        client.end_headers()
        client.wfile.write(data)

    def _relay(self, client, answer, stall):
        client.send_response_only(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in HOP_BY_HOP:
                client.send_header(key, value)
        if answer.length is not None and not stall:
            data = answer.read()
            client.send_header("Content-Length", str(len(data)))
            client.end_headers()
            client.wfile.write(data)
            return
        client.send_header("Transfer-Encoding", "chunked")
        client.end_headers()
        client.wfile.flush()
        while True:
            chunk = answer.read1(65536)
            if not chunk:
                break
            if stall:  # the head went on, the events are lost; the stream's end is not
                continue
            client.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            client.wfile.flush()
        client.wfile.write(b"0\r\n\r\n")

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _reset(sock):
    """Closes `sock` with a TCP reset (SO_LINGER 0), as a load balancer that drops
    the connection's state does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
