"""Starts the kubesim command (the Kubernetes stand-in) for a test and talks to it.

kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
"""

import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

import yaml

from harness.paths import BUILD_ROOT, SOURCE_ROOT

KUBESIM = Path(os.environ.get("KUBESIM", BUILD_ROOT / "tests" / "kubesim" / "kubesim"))
KUBECTL = "/usr/bin/kubectl"
# The smallest worker pod template k8sbridge-power accepts, for tests whose pods
# no kubelet runs (or the test plays it): one slurmd container, a short grace.
WORKER_TEMPLATE = """\
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: slurmd
    image: registry.example/slurm-worker:24.11
"""


def wait_for(predicate, timeout=30.0, interval=0.05, what="condition"):
    """Polls predicate until it returns something truthy; raises at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def runc_ids(runc_root):
    """The containers of an OCI-mode kubelet's runc root (/run/kubesim-runc/<bridge>)."""
    r = subprocess.run(["runc", "--root", str(runc_root), "list", "-q"], capture_output=True,
                       text=True)
    return r.stdout.split() if r.returncode == 0 else []


def mounts_under(path):
    """The mount points under `path` (a kubelet state directory's overlays and volumes)."""
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(str(path))]


def remove_oci_kubelet_leftovers(runc_root, state_dir, bridge):
    """What an OCI-mode kubesim that died may leave: its runc containers, the mounts
    under its state directory, its bridge (docs/kubesim.md, "A killed kubesim")."""
    for cid in runc_ids(runc_root):
        subprocess.run(["runc", "--root", str(runc_root), "delete", "--force", cid], check=False)
    for m in sorted(mounts_under(state_dir), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], check=False)
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)


def write_private(path, text):
    """Replaces `path` by a file of mode 0600 holding `text`, atomically (a reader
    sees the old content or the new, never a part)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    os.replace(tmp, path)


class KubeSim:
    """One kubesim process with its own output directory; use as a context manager."""

    def __init__(self, *args, https=True, scheduler=False):
        """args go to the kubesim command. The scheduler is off unless asked for, so
        that API tests see pods exactly as they created them."""
        if not KUBESIM.exists():
            raise RuntimeError(f"{KUBESIM} does not exist: build it with meson compile")
        self.dir = Path(tempfile.mkdtemp(prefix="kubesim-test-"))
        self.https = https
        argv = [str(KUBESIM), "--out", str(self.dir)]
        if not scheduler:
            argv.append("--no-scheduler")
        if not https:
            argv.append("--http")
        argv += list(args)
        self.log = open(self.dir / "kubesim.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: (self.dir / "ready").exists() or self.proc.poll() is not None,
                     what="kubesim to write its ready file")
            if self.proc.poll() is not None:
                raise RuntimeError(f"kubesim exited: {(self.dir / 'kubesim.log').read_text()}")
        except BaseException:
            self.close()
            raise
        self.url = (self.dir / "endpoints").read_text().split()[0]
        self.kubeconfig = str(self.dir / "kubeconfig")

    @property
    def token(self):
        return (self.dir / "token").read_text().strip()

    def ssl_context(self):
        if not self.https:
            return None
        return ssl.create_default_context(cafile=str(self.dir / "ca.crt"))

    def request(self, method, path, body=None, token=None, content_type="application/json",
                timeout=30):
        """Returns (status, headers, parsed JSON body or text) without raising on errors."""
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            data = data.encode() if isinstance(data, str) else data
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token if token is not None else self.token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout) as r:
                status, headers, raw = r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            status, headers, raw = e.code, dict(e.headers), e.read()
        try:
            return status, headers, json.loads(raw)
        except ValueError:
            return status, headers, raw.decode(errors="replace")

    def answers(self, timeout=2):
        """True when the API server answers (GET /version: 200); False while it
        refuses or resets connections (POST /kubesim/restart, an outage)."""
        try:
            return self.request("GET", "/version", timeout=timeout)[0] == 200
        except OSError:
            return False

    def admin(self, method, what, body=None):
        status, _, parsed = self.request(method, "/kubesim/" + what, body)
        if not 200 <= status < 300:
            raise AssertionError(f"admin {method} {what}: {status} {parsed}")
        return parsed

    def add_fault(self, **fault):
        return self.admin("POST", "faults", fault)["id"]

    def fault_hits(self, fault_id):
        for f in self.admin("GET", "faults")["faults"]:
            if f["id"] == fault_id:
                return f["hits"]
        return None  # used up and removed

    def requests_log(self):
        return self.admin("GET", "requests")["requests"]

    def request_counts(self):
        """{(verb, resource): count} of every request since start or the last
        DELETE /kubesim/stats, whatever its code."""
        counts = {}
        for r in self.admin("GET", "stats")["requests"]:
            key = (r["verb"], r["resource"])
            counts[key] = counts.get(key, 0) + r["count"]
        return counts

    def service_account_token(self, namespace, name, expiration_seconds=3600):
        """A token of the ServiceAccount namespace/name (which must exist), from the
        admin endpoint: any lifetime of at least a second."""
        return self.admin("POST", "serviceaccount-token",
                          {"namespace": namespace, "name": name,
                           "expirationSeconds": expiration_seconds})["token"]

    def create_service_account(self, namespace, name):
        """Creates the ServiceAccount (as a platform team's manifests would); an
        existing one is fine."""
        status, _, body = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        if status not in (201, 409):
            raise AssertionError(f"create ServiceAccount {namespace}/{name}: {status} {body}")

    def service_account_kubeconfig(self, namespace, name, expiration_seconds=3600,
                                   token_file=False):
        """Writes a kubeconfig that acts as the ServiceAccount namespace/name (same
        server and CA, a token of that ServiceAccount, namespace as the default) and
        returns its path, so a program runs with what its Role grants. `token_file`:
        the token is in a file beside it (`tokenFile:`, as a pod's projected token),
        which rotate_service_account_token replaces."""
        token = self.service_account_token(namespace, name, expiration_seconds)
        path = self.dir / f"kubeconfig-sa-{namespace}-{name}"
        ca = f"    certificate-authority: {self.dir / 'ca.crt'}\n" if self.https else ""
        if token_file:
            token_path = path.with_name(path.name + ".token")
            write_private(token_path, token)
            user = f"    tokenFile: {token_path}\n"
        else:
            user = f"    token: {token}\n"
        path.write_text(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n"
            f"    server: {self.url}\n{ca}"
            "contexts:\n- name: sa\n  context:\n    cluster: kubesim\n    user: sa\n"
            f"    namespace: {namespace}\ncurrent-context: sa\n"
            f"users:\n- name: sa\n  user:\n{user}")
        path.chmod(0o600)
        return path

    def rotate_service_account_token(self, namespace, name, expiration_seconds=3600):
        """Revokes every token of the ServiceAccount (deleted and made again: a token
        bound to the old uid gets 401, as upstream's legacy and bound token
        validators do) and writes a new one to the tokenFile of its kubeconfig (made
        with token_file=True), atomically, as the kubelet updates a projected token."""
        status, _, body = self.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
        if status != 200:
            raise AssertionError(f"delete ServiceAccount {namespace}/{name}: {status} {body}")
        self.create_service_account(namespace, name)
        token = self.service_account_token(namespace, name, expiration_seconds)
        write_private(self.dir / f"kubeconfig-sa-{namespace}-{name}.token", token)

    def apply_deploy_rbac(self, namespace):
        """Applies deploy/base/rbac.yaml (what a platform team applies) for worker pods
        in `namespace`: its namespaced objects and its ServiceAccount subjects go to
        `namespace` (as kustomize's namespace would put them), the node events' Role
        stays in "default". Returns the objects as applied."""
        docs = [d for d in yaml.safe_load_all((SOURCE_ROOT / "deploy" / "base" /
                                               "rbac.yaml").read_text()) if d]
        for d in docs:
            if d["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
                d["metadata"].setdefault("namespace", namespace)
            for s in d.get("subjects", []):
                if s["kind"] == "ServiceAccount":
                    s["namespace"] = namespace
        plural = {"ServiceAccount": "serviceaccounts", "Role": "roles",
                  "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
                  "ClusterRoleBinding": "clusterrolebindings"}
        status, _, body = self.request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        if status not in (201, 409):
            raise AssertionError(f"create namespace {namespace}: {status} {body}")
        for d in docs:
            group = "/api/v1" if d["apiVersion"] == "v1" else f"/apis/{d['apiVersion']}"
            ns = d["metadata"].get("namespace")
            path = f"{group}/namespaces/{ns}" if ns else group
            status, _, body = self.request("POST", f"{path}/{plural[d['kind']]}", d)
            if status not in (201, 409):  # 409: applied before (a class-wide kubesim)
                raise AssertionError(f"create {d['kind']} {d['metadata']['name']}: "
                                     f"{status} {body}")
        return docs

    def kubectl(self, *args, check=True, timeout=60, context=None, kubeconfig=None, input=None):
        argv = [KUBECTL, "--kubeconfig", str(kubeconfig or self.kubeconfig)]
        if context:
            argv += ["--context", context]
        argv += list(args)
        env = dict(os.environ, HOME=str(self.dir))  # kubectl's cache stays in the test dir
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                                input=input)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def kubectl_json(self, *args, **kw):
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if os.environ.get("KUBESIM_KEEP_DIR"):
            print(f"kubesim dir kept: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PythonClientTestCase(unittest.TestCase):
    """A test class sharing one kubesim (two fake nodes, or `kubesim_args`) and one
    python3-kubernetes client between its tests."""

    kubesim_args = ("--fake-nodes", "2")

    @classmethod
    def setUpClass(cls):
        from kubernetes import client, config
        cls.sim = KubeSim(*cls.kubesim_args)
        cls.api_client = config.new_client_from_config(config_file=cls.sim.kubeconfig)
        cls.v1 = client.CoreV1Api(cls.api_client)

    @classmethod
    def tearDownClass(cls):
        cls.api_client.close()
        cls.sim.close()
