"""libk8sbridge's Kubernetes client against the real Kubernetes (harness.kube.KubeCluster,
over TLS and HTTP/2): calls, paging, patches and conflicts; refusals and Retry-After
shown retried (with the delay) or surfaced (with the error); resets, stalls and a
slow server; watches whose history was compacted away, relisted; resets under a
watch; token rotation during a watch; an exec plugin whose credential expires; TLS
verification and client certificates; leader election and event series.

The scenarios are C++ (tests/unit/kube/kube_scenarios.cpp, built as kube_scenarios);
this file runs each against one cluster and makes the faults it asks for
(harness.kube_scenarios) the way they happen to a real API server:

- refusals of writes (429, 500, 503, with or without Retry-After) from an admission
  webhook (the API server passes its status and details on, Retry-After included);
- a 429 on a read from API Priority and Fairness: a FlowSchema puts the scenario's
  reads in a priority level without seats, which refuses them while another request
  of the level (a create held in the webhook) runs;
- a stalled or slow server: kube-apiserver stopped with SIGSTOP (and continued once
  the request waits in its socket);
- resets: the scenario's connections reset with `ss -K`, once its request waits in
  the stopped server's socket, or while its create is held in the webhook;
- expired watches: the API server stops, etcd's history is compacted past a new
  revision, and the API server starts again;
- token rotation: the ServiceAccount is deleted and made again (its old tokens are
  refused) and the token file gets a new token.

What only a load balancer in front of the API server makes (a reset after the server
acted on a write, watch events lost, a 500 of its own on a read or a watch) is in
test_kube_client_lb.py.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import unittest
from pathlib import Path
from urllib.parse import urlsplit

from harness.kube import KubeCluster, wait_for_condition
from harness.kube_scenarios import ScenarioCase
from harness.webhook import FaultWebhook

SA = ("default", "kube-scenarios")  # the scenarios' user, bound to cluster-admin
USER = f"system:serviceaccount:{SA[0]}:{SA[1]}"
APF_NAMESPACE = "k8sbridge-apf"  # where the request that fills the priority level goes
APF_BLOCKER = "apf-blocker"
APF_NAME = "k8sbridge-scenarios-reject"  # the FlowSchema and its priority level
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


class ScenarioWebhook(FaultWebhook):
    """FaultWebhook for the scenarios' user alone (the cluster's own writes pass), with
    what the scenarios need beyond its refusals: a Retry-After on a refusal
    (status.details.retryAfterSeconds, which the API server turns into the header),
    and holds: a create of a resource by the user waits in the webhook until the
    test releases it."""

    def __init__(self, pki, port, user):
        super().__init__(pki, port)
        self.user = user
        self.retry_after = {}  # a fault's message -> its Retry-After in seconds
        self.holds = []
        # A held request's API server may give up on it before it is released.
        self.server.handle_error = lambda request, client_address: None

    def hold(self, resource, name=None):
        """The next create of `resource` (named `name`, if given) waits until
        hold["release"] is set; hold["held"] is set when it arrives."""
        hold = {"resource": resource, "name": name, "held": threading.Event(),
                "release": threading.Event()}
        with self.lock:
            self.holds.append(hold)
        return hold

    def release_all(self):
        with self.lock:
            holds, self.holds = self.holds, []
        for hold in holds:
            hold["release"].set()

    def review(self, request):
        obj = request.get("object") or {}
        name = request.get("name") or obj.get("metadata", {}).get("name") or ""
        if name.startswith(self.PROBE_NAME):
            return super().review(request)
        if request.get("userInfo", {}).get("username") != self.user:
            return {"uid": request["uid"], "allowed": True}
        if request["operation"] == "CREATE":
            with self.lock:
                hold = next((h for h in self.holds if not h["held"].is_set() and
                             h["resource"] == request["resource"]["resource"] and
                             h["name"] in (None, name)), None)
                if hold:
                    hold["held"].set()
            if hold:
                hold["release"].wait(120)
                return {"uid": request["uid"], "allowed": True}
        answer = super().review(request)
        status = answer.get("status")
        if status and status.get("message") in self.retry_after:
            status["details"] = {"retryAfterSeconds": self.retry_after[status["message"]]}
        return answer


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    os.replace(tmp, path)


class KubeClient(ScenarioCase):
    """One cluster for the class; each test runs one scenario against it."""

    @classmethod
    def setUpClass(cls):
        cls.kube = KubeCluster(nodes=2, scheduler=False)
        try:
            cls.set_up_cluster()
        except BaseException:
            cls.kube.close()
            raise

    @classmethod
    def set_up_cluster(cls):
        kube = cls.kube
        cls.dir = Path(tempfile.mkdtemp(prefix="kube-scenarios-"))
        cls.port = urlsplit(kube.url).port
        cls.token_path = cls.dir / "token"
        kube.create_service_account(*SA)
        kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": SA[1]},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "namespace": SA[0], "name": SA[1]}]})
        kube.create_namespace(APF_NAMESPACE)
        write_private(cls.token_path, kube.service_account_token(*SA, 24 * 3600))
        cluster = f"- name: test\n  cluster:\n    server: {kube.url}\n" \
                  f"    certificate-authority: {kube.pki.ca}\n"
        # The users come last: the exec scenario replaces them.
        (cls.dir / "kubeconfig").write_text(
            f"apiVersion: v1\nkind: Config\nclusters:\n{cluster}"
            "contexts:\n- name: scenarios\n  context:\n    cluster: test\n"
            "    user: scenarios\n    namespace: default\ncurrent-context: scenarios\n"
            f"users:\n- name: scenarios\n  user:\n    tokenFile: {cls.token_path}\n")
        cert, key = kube.admin_cert
        (cls.dir / "client-cert-kubeconfig").write_text(
            f"apiVersion: v1\nkind: Config\nclusters:\n{cluster}"
            "contexts:\n- name: admin\n  context:\n    cluster: test\n    user: admin\n"
            "current-context: admin\n"
            f"users:\n- name: admin\n  user:\n    client-certificate: {cert}\n"
            f"    client-key: {key}\n")
        # The webhook, registered for ConfigMaps with a fault that never matches.
        kube.webhook = ScenarioWebhook(kube.pki, kube.slot.free_port(), USER)
        kube.add_fault("configmaps", "create", None, times=1, name="never-created")
        kube.clear_faults()
        cls.paused = False
        cls.background = []  # threads of faults that act after their answer
        cls.blocker = None  # the request that fills the priority level

    @classmethod
    def tearDownClass(cls):
        cls.kube.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    # ---- faults ---------------------------------------------------------------------

    def control(self, pid, request):
        verb, *args = request.split()
        options = dict(a.split("=", 1) for a in args if "=" in a)
        args = [a for a in args if "=" not in a]
        kube = self.kube
        if verb == "clear":
            self.clear_faults()
        elif verb == "refuse":  # refuse RESOURCE VERB CODE times=N [retry-after=S]
            resource, what, code = args
            message = f"refused by the test with {code}"
            if "retry-after" in options:
                message += f", retry after {options['retry-after']} s"
                kube.webhook.retry_after[message] = int(options["retry-after"])
            kube.add_fault(resource, what, int(code), times=int(options.get("times", 1)),
                           message=message)
        elif verb == "reject-reads":
            self.reject_reads(args[0])
        elif verb == "release-reads":
            self.release_reads()
        elif verb == "stall":
            self.pause()
        elif verb == "slow-next":  # answered once the request waits: after() resumes
            self.pause()
            self.after(lambda: self.wait_request_in_server(pid))
        elif verb == "reset-next-read":
            self.pause()

            def reset_waiting():
                self.wait_request_in_server(pid)
                kube.reset_connections(pid)
            self.after(reset_waiting)
        elif verb == "reset-next-write":
            hold = kube.webhook.hold(args[0])

            def reset_held():
                if not hold["held"].wait(60):
                    raise AssertionError("the create never came")
                kube.reset_connections(pid)
                hold["release"].set()
            self.after(reset_held)
        elif verb == "expire-watches":
            self.expire_watches()
        elif verb == "reset-connections":
            return str(kube.reset_connections(pid))
        elif verb == "rotate-token":
            self.rotate_token()
        else:
            raise ValueError(f"the real cluster makes no fault {verb!r}")
        return ""

    def after(self, action):
        """Runs `action` in the background, once the scenario has its answer; then
        the API server runs again, if paused."""
        def run():
            try:
                action()
            except Exception as e:  # noqa: BLE001 - the scenario then fails and says how
                print(f"fault action failed: {e}")
            finally:
                self.resume()
        thread = threading.Thread(target=run, daemon=True)
        self.background.append(thread)
        thread.start()

    def pause(self):
        type(self).paused = True
        self.kube.pause("kube-apiserver")

    def resume(self):
        if self.paused:
            type(self).paused = False
            self.kube.resume("kube-apiserver")

    def wait_request_in_server(self, pid):
        """Returns once bytes from process `pid` wait unread in the (stopped) API
        server's end of one of its connections."""
        def waiting():
            clients = subprocess.run(
                ["ss", "-Htnp", "state", "established", "dport", "=", str(self.port)],
                capture_output=True, text=True, check=True).stdout
            for line in clients.splitlines():
                if f"pid={pid}," not in line:
                    continue
                local = line.split()[2].rsplit(":", 1)[1]
                server = subprocess.run(
                    ["ss", "-Htn", "state", "established", "sport", "=", str(self.port),
                     "dport", "=", local], capture_output=True, text=True, check=True).stdout
                if any(int(s.split()[0]) > 0 for s in server.splitlines()):
                    return True
            return False
        wait_for_condition(waiting, 60, f"a request of process {pid} in the API server's socket",
                           interval=0.02)

    def reject_reads(self, resource):
        """The scenario user's LISTs of `resource` go to a priority level without seats
        (API Priority and Fairness), and a create of the user holds the level: until
        release_reads, those LISTs are refused with 429 and a Retry-After."""
        kube = self.kube
        api = "/apis/flowcontrol.apiserver.k8s.io/v1"
        kube.create(f"{api}/prioritylevelconfigurations", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
            "kind": "PriorityLevelConfiguration", "metadata": {"name": APF_NAME},
            "spec": {"type": "Limited", "limited": {
                "nominalConcurrencyShares": 0, "lendablePercent": 0,
                "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}}, ok=(201,))
        schema = kube.create(f"{api}/flowschemas", {
            "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": APF_NAME},
            "spec": {"priorityLevelConfiguration": {"name": APF_NAME}, "matchingPrecedence": 50,
                     "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {
                                    "namespace": SA[0], "name": SA[1]}}],
                                "resourceRules": [
                                    {"verbs": ["list"], "apiGroups": [""],
                                     "resources": [resource], "clusterScope": True},
                                    {"verbs": ["create"], "apiGroups": [""],
                                     "resources": ["configmaps"],
                                     "namespaces": [APF_NAMESPACE]}]}]}}, ok=(201,))
        token = self.token_path.read_text().strip()
        # The API server applies a FlowSchema a little later: its uid in the answer's
        # header says that it did (this LIST runs, the level being idle).
        wait_for_condition(lambda: self.kube.request(
            "GET", f"/api/v1/{resource}?limit=1", token=token)[1].get(
            "X-Kubernetes-Pf-Flowschema-Uid") == schema["metadata"]["uid"], 60,
            "the API server to use the FlowSchema")
        hold = kube.webhook.hold("configmaps", APF_BLOCKER)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": APF_BLOCKER}}
        thread = threading.Thread(target=lambda: self.kube.request(
            "POST", f"/api/v1/namespaces/{APF_NAMESPACE}/configmaps", body, token=token,
            timeout=120), daemon=True)
        thread.start()
        type(self).blocker = (hold, thread)
        if not hold["held"].wait(60):
            raise AssertionError("the create that holds the priority level never came")

    def release_reads(self):
        if self.blocker:
            hold, thread = self.blocker
            hold["release"].set()
            thread.join(120)
            type(self).blocker = None

    def expire_watches(self):
        """What a watch from before now then meets: the API server stops, etcd gets
        a new revision (outside the API's keys) and compacts its history up to it, and
        the API server starts again, its watch cache beginning there."""
        self.kube.stop("kube-apiserver")
        self.kube.etcdctl("put", "/k8sbridge-test/revision", "bump")
        self.kube.compact_etcd()
        self.kube.start("kube-apiserver")

    def rotate_token(self):
        """Revokes the user's tokens (its ServiceAccount deleted and made again) and
        writes a new one to the token file; returns once the API server refuses the
        old token and takes the new one."""
        old = self.token_path.read_text().strip()
        status, _, body = self.kube.request(
            "DELETE", f"/api/v1/namespaces/{SA[0]}/serviceaccounts/{SA[1]}")
        if status != 200:
            raise AssertionError(f"delete ServiceAccount: {status} {body}")
        self.kube.create_service_account(*SA)
        new = self.kube.service_account_token(*SA, 24 * 3600)
        wait_for_condition(lambda: self.kube.request("POST", REVIEW_PATH, REVIEW,
                                                     token=old)[0] == 401, 60,
                           "the old token to be refused")
        wait_for_condition(lambda: self.kube.request("POST", REVIEW_PATH, REVIEW,
                                                     token=new)[0] == 201, 60,
                           "the new token to be taken")
        write_private(self.token_path, new)

    def clear_faults(self):
        self.kube.webhook.release_all()
        self.kube.webhook.retry_after.clear()
        self.kube.clear_faults()
        self.release_reads()
        for thread in self.background:
            thread.join(90)
        self.background.clear()
        self.resume()
        api = "/apis/flowcontrol.apiserver.k8s.io/v1"
        self.kube.request("DELETE", f"{api}/flowschemas/{APF_NAME}")
        self.kube.request("DELETE", f"{api}/prioritylevelconfigurations/{APF_NAME}")
        self.kube.request("DELETE",
                          f"/api/v1/namespaces/{APF_NAMESPACE}/configmaps/{APF_BLOCKER}")

    # ---- calls
    def test_calls_paging_patch_types_delete_preconditions_typed_helpers(self):
        # The API server's message for a uid precondition that does not hold.
        self.run_scenario("crud", "in 3 pages", "merge, json, strategic-merge and apply",
                          "the UID in the precondition (not-the-uid) does not match the UID "
                          "in record", "typed helpers")

    def test_conflict_on_replace_resolved_by_rereading(self):
        self.run_scenario("conflict", "stale replace surfaced: conflict", "HTTP 409 Conflict",
                          "resolved by Update re-reading")

    # ---- faults on calls: retried (with what delay) or surfaced (with which error)
    def test_429_with_retry_after_is_retried_after_that_delay(self):
        self.run_scenario("fault-429", "429 Retry-After: 1 retried after 1 s")

    def test_503_with_retry_after_on_a_write_is_retried(self):
        self.run_scenario("fault-503", "503 Retry-After: 1 on create retried after 1 s")

    def test_500_without_retry_after_is_surfaced(self):
        self.run_scenario("fault-500", "surfaced: unavailable", "HTTP 500 InternalError")

    def test_resets_retry_reads_and_surface_writes(self):
        out = self.run_scenario("fault-reset", "reset before answer on LIST re")
        self.assertIn("reset before commit on POST", out)

    def test_stall_hits_the_total_timeout_or_cancellation(self):
        self.run_scenario("fault-stall", "surfaced after the 1 s total timeout: timeout",
                          "stalled GET cancelled: cancelled")

    def test_latency_is_seen_by_the_metrics_hook(self):
        self.run_scenario("fault-latency", "slow LIST answered")

    # ---- watches
    def test_410_mid_stream_relists(self):
        self.run_scenario("watch-expire-mid-stream", "mid-stream ERROR 410: relisted")

    def test_watch_from_a_compacted_version_is_expired(self):
        self.run_scenario("watch-410-http", "expired", "(HTTP 410)")

    def test_watch_resets(self):
        self.run_scenario("watch-reset", "watch connections reset twice", "cache converged")

    # ---- credentials, leases, events
    def test_token_rotated_while_a_watch_runs(self):
        self.run_scenario("token-rotation", "token rotated during a watch")

    def test_exec_plugin_credential_expires(self):
        self.run_scenario("exec-expiry", "cached until expiry, then re-run",
                          "401 re-ran the exec plugin")

    def test_leader_election_and_event_series(self):
        self.run_scenario("leader-events", "b took over", "series.count 3")

    def test_tls_verification_and_client_certificates(self):
        self.run_scenario("tls", "no CA: refused", "client certificate accepted")


if __name__ == "__main__":
    unittest.main(verbosity=2)
