"""libk8sbridge's Kubernetes client behind a load balancer that fails, as the hop in
front of a real cluster's API servers does (harness.front_proxy.FrontProxy, before
the real kube-apiserver of harness.kube.KubeCluster). The API server itself never
makes these faults; test_kube_client.py has the ones it does:

- the load balancer answers 500 to a read: a GET surfaces it, once;
- it answers 500 to a watch: the informer backs off and watches again;
- it resets the connection after the API server acted on a create and before the
  answer came back: the create is surfaced (or meets libcurl's one re-send and
  409 AlreadyExists), never applied twice by the client;
- it answers watches 200 and then forwards nothing while writes go on: the client
  drops silent streams and re-opens them from the last resourceVersion, no relist.

The scenarios are C++ (tests/unit/kube/kube_scenarios.cpp); harness.kube_scenarios
runs them, and this file turns their requests for faults into the proxy's rules.
"""

import os
import shutil
import tempfile
import unittest
from pathlib import Path

from harness.front_proxy import FrontProxy
from harness.kube import KubeCluster
from harness.kube_scenarios import ScenarioCase

SA = ("default", "kube-scenarios-lb")  # the scenarios' user, bound to cluster-admin


def resource_path(resource):
    """The paths of `resource`'s collection and objects, core group (all the
    scenarios here use)."""
    return rf"^/api/v1/(namespaces/[^/]+/)?{resource}(/[^/]+)?$"


class KubeClientBehindLoadBalancer(ScenarioCase):
    @classmethod
    def setUpClass(cls):
        cls.kube = KubeCluster(nodes=2, scheduler=False)
        try:
            cls.proxy = FrontProxy(cls.kube, cls.kube.slot.free_port())
            cls.dir = Path(tempfile.mkdtemp(prefix="kube-scenarios-lb-"))
            cls.kube.create_service_account(*SA)
            cls.kube.kubectl("create", "clusterrolebinding", SA[1],
                             "--clusterrole=cluster-admin", f"--serviceaccount={SA[0]}:{SA[1]}")
            token = cls.dir / "token"
            token.write_text(cls.kube.service_account_token(*SA, 24 * 3600))
            token.chmod(0o600)
            (cls.dir / "kubeconfig").write_text(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: lb\n  cluster:\n"
                f"    server: {cls.proxy.url}\n    certificate-authority: {cls.kube.pki.ca}\n"
                "contexts:\n- name: scenarios\n  context:\n    cluster: lb\n"
                "    user: scenarios\n    namespace: default\ncurrent-context: scenarios\n"
                f"users:\n- name: scenarios\n  user:\n    tokenFile: {token}\n")
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "proxy", None):
            cls.proxy.close()
        cls.kube.close()
        if getattr(cls, "dir", None):
            shutil.rmtree(cls.dir, ignore_errors=True)

    def control(self, pid, request):
        verb, *args = request.split()
        options = dict(a.split("=", 1) for a in args if "=" in a)
        args = [a for a in args if "=" not in a]
        method = {"get": "GET", "list": "GET", "create": "POST", "delete": "DELETE",
                  "update": "PUT", "patch": "PATCH"}
        if verb == "clear":
            self.clear_faults()
        elif verb == "refuse":  # refuse RESOURCE VERB CODE times=N
            resource, what, code = args
            self.proxy.add("status", method[what], resource_path(resource), code=int(code),
                           times=int(options.get("times", 1)))
        elif verb == "refuse-watches":  # refuse-watches RESOURCE CODE times=N
            resource, code = args
            self.proxy.add("status", "GET", resource_path(resource), watch=True,
                           code=int(code), times=int(options.get("times", 1)))
        elif verb == "reset-after-commit":
            self.proxy.add("reset-after", "POST", resource_path(args[0]))
        elif verb == "stall-watches":
            self.proxy.add("stall", "GET", resource_path(args[0]), watch=True, times=0)
        else:
            raise ValueError(f"this test makes no fault {verb!r}")
        return ""

    def clear_faults(self):
        self.proxy.clear()

    def test_500_on_a_read_is_surfaced(self):
        self.run_scenario("fault-500-read", "surfaced: unavailable", "HTTP 500 InternalError")

    def test_reset_after_commit_is_surfaced_not_applied_twice(self):
        self.run_scenario("fault-reset-after-commit", "reset after commit on POST")

    def test_stalled_watch_is_dropped_and_resumed(self):
        self.run_scenario("watch-stall", "silent streams re-opened", "without a relist")

    def test_500_on_a_watch_backs_off_and_watches_again(self):
        self.run_scenario("watch-5xx", "500 on a watch backed off and re-watched",
                          "cache converged")


if __name__ == "__main__":
    unittest.main(verbosity=2)
