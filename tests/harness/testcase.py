"""The integration tests' test case: needs root and checks leftovers."""

import os
import unittest

from harness.rig import RigError, leftovers, made_rig_ids, wait_for


def require_root(test: unittest.TestCase) -> None:
    if os.geteuid() != 0:
        test.skipTest("needs root: network namespaces, bridges, munge and slurmd")


class RigTestCase(unittest.TestCase):
    """Fails a test that leaves rig resources behind. Other tests' rigs run at the
    same time, so only this test's own rigs count: those this process made, and
    those of child processes the test names in `child_rig_ids`."""

    def setUp(self):
        require_root(self)
        if os.environ.get("K8SBRIDGE_REQUIRE_SLURM_ROOT") and not os.environ.get(
                "K8SBRIDGE_SLURM_ROOT"):
            self.skipTest("the version suite runs in another release's root: scripts/test.sh "
                          "sets K8SBRIDGE_SLURM_ROOT, _PREFIX and _BUILD (scripts/build-release.sh)")
        self.child_rig_ids = []

    def own_rig_ids(self) -> list:
        return made_rig_ids() + getattr(self, "child_rig_ids", [])

    def assertNoLeftovers(self):
        left = wait_for_no_leftovers(self.own_rig_ids())
        self.assertEqual(left, {"netns": [], "bridges": [], "daemons": [],
                                "rig_processes": [], "mounts": [], "cgroups": []})


def wait_for_no_leftovers(rig_ids, timeout: float = 30, more=dict) -> dict:
    """Returns leftovers(rig_ids), with what `more()` adds, once it is empty, or
    what is still there at the deadline."""
    last = {}

    def empty():
        nonlocal last
        last = {**leftovers(rig_ids), **more()}
        return not any(last.values())
    try:
        wait_for(empty, timeout, "rig resources to disappear")
    except RigError:
        pass
    return last


def close_leaving_nothing(close, rig_ids, what: str):
    """Calls close(), then raises AssertionError naming what the rigs `rig_ids` (read
    before the close) left behind, once wait_for_no_leftovers gives up."""
    close()
    left = wait_for_no_leftovers(rig_ids)
    if any(left.values()):
        raise AssertionError(f"{what} left {left}")


def main():
    unittest.main(verbosity=2)
