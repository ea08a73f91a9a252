"""Shared set-up for integration tests: imports the rig and checks leftovers."""

import os
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rig"))

from k8sbridge_rig import (NodeSpec, Rig, RigConfig, RigError, cleanup_all,  # noqa: E402,F401
                           leftovers, wait_for)

SOURCE_ROOT = Path(__file__).resolve().parent.parent.parent
BUILD_ROOT = Path(os.environ.get("K8SBRIDGE_BUILD_ROOT", SOURCE_ROOT / "build"))


def require_root(test: unittest.TestCase) -> None:
    if os.geteuid() != 0:
        test.skipTest("needs root: network namespaces, bridges, munge and slurmd")


class RigTestCase(unittest.TestCase):
    """Fails a test that leaves rig resources behind."""

    def setUp(self):
        require_root(self)

    def assertNoLeftovers(self):
        left = wait_for_no_leftovers()
        self.assertEqual(left, {"netns": [], "bridges": [], "daemons": [],
                                "rig_processes": [], "mounts": []})


def wait_for_no_leftovers(timeout: float = 30) -> dict:
    """Returns leftovers() once it is empty, or what is still there at the deadline."""
    last = {}

    def empty():
        nonlocal last
        last = leftovers()
        return not any(last.values())
    try:
        wait_for(empty, timeout, "rig resources to disappear")
    except RigError:
        pass
    return last


def main():
    unittest.main(verbosity=2)
