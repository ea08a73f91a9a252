"""Shared set-up for integration tests: imports the rig and checks leftovers."""

import os
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rig"))

from k8sbridge_rig import (NodeSpec, Rig, RigConfig, RigError, cleanup_all,  # noqa: E402,F401
                           leftovers, made_rig_ids, wait_for)

SOURCE_ROOT = Path(__file__).resolve().parent.parent.parent
BUILD_ROOT = Path(os.environ.get("K8SBRIDGE_BUILD_ROOT", SOURCE_ROOT / "build"))


def require_root(test: unittest.TestCase) -> None:
    if os.geteuid() != 0:
        test.skipTest("needs root: network namespaces, bridges, munge and slurmd")


class RigTestCase(unittest.TestCase):
    """Fails a test that leaves rig resources behind. Other tests' rigs run at the
    same time, so only this test's own rigs count: those this process made, and
    those of child processes the test names in `child_rig_ids`."""

    def setUp(self):
        require_root(self)
        self.child_rig_ids = []

    def own_rig_ids(self) -> list:
        return made_rig_ids() + getattr(self, "child_rig_ids", [])

    def assertNoLeftovers(self):
        left = wait_for_no_leftovers(self.own_rig_ids())
        self.assertEqual(left, {"netns": [], "bridges": [], "daemons": [],
                                "rig_processes": [], "mounts": []})


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


def main():
    unittest.main(verbosity=2)
