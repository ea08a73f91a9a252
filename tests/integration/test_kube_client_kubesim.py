"""libk8sbridge's Kubernetes client under the faults that only the stand-in (kubesim)
makes; the rest of the client's scenarios run against the real Kubernetes in
test_kube_client.py. A real API server cannot be made to:

- reset a connection after it committed a write and before it answered (a create
  then meets libcurl's one re-send and fails with 409 AlreadyExists, nothing is
  applied twice: docs/client.md, "Known limits");
- answer watches 200 and then deliver nothing while writes go on (a stalled watch:
  the client re-opens silent streams from the last resourceVersion, no relist);
- answer 500 to a read or to a watch (the admission webhook that refuses writes does
  not see them): a GET surfaces it, a watch backs off and watches again.

The scenarios are C++ (tests/unit/kube/kube_scenarios.cpp); harness.kube_scenarios
runs them, and this file turns their requests for faults into kubesim's.
"""

import unittest

from harness.kube_scenarios import ScenarioCase
from harness.kubesim import KubeSim


class KubeClientKubesim(ScenarioCase):
    @classmethod
    def setUpClass(cls):
        # Plain HTTP: kubesim's TLS does not resume sessions (docs/client.md).
        cls.sim = KubeSim("--fake-nodes", "2", https=False)
        cls.dir = cls.sim.dir  # its kubeconfig and token

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()

    def control(self, pid, request):
        verb, *args = request.split()
        options = dict(a.split("=", 1) for a in args if "=" in a)
        args = [a for a in args if "=" not in a]
        if verb == "clear":
            self.clear_faults()
        elif verb == "refuse":  # refuse RESOURCE VERB CODE times=N
            resource, what, code = args
            self.sim.add_fault(resource=resource, verb=what, type="status", code=int(code),
                               times=int(options.get("times", 1)))
        elif verb == "refuse-watches":  # refuse-watches RESOURCE CODE times=N
            resource, code = args
            self.sim.add_fault(resource=resource, verb="watch", type="status", code=int(code),
                               times=int(options.get("times", 1)))
        elif verb == "reset-after-commit":
            self.sim.add_fault(resource=args[0], verb="create", type="reset-after", times=1)
        elif verb == "stall-watches":
            self.sim.add_fault(resource=args[0], verb="watch", type="stall", times=0)
        else:
            raise ValueError(f"this test makes no fault {verb!r}")
        return ""

    def clear_faults(self):
        self.sim.admin("DELETE", "faults")

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
