"""Teardown leaves nothing behind: not after a test that fails on purpose while
jobs run, not after the test process is told to stop, and two rigs started one
after the other do not share or disturb anything. Other tests' rigs may run at the
same time: every check looks at the child's rig (by the id it prints) and ours."""

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.rig import Rig, leftovers, live_processes, wait_for
from harness.testcase import RigTestCase, main

# A child test process that starts a rig, starts long jobs on both nodes (so
# slurmstepd and user tasks exist), then fails or waits to be killed.
# It finds the harness package on the PYTHONPATH it inherits (meson sets it).
CHILD = textwrap.dedent("""
    import time
    from harness.rig import Rig
    with Rig(nodes=2) as rig:
        rig.wait_nodes_idle()
        job = rig.sbatch("#!/bin/sh\\nsrun sleep 300\\n", ["-N2"])
        rig.wait_job(job, states=["RUNNING"])
        print("JOBS RUNNING", rig.id, flush=True)
        if {mode!r} == "fail":
            assert False, "this test fails on purpose"
        time.sleep(600)
""")


class TeardownTest(RigTestCase):
    def run_child(self, mode: str) -> subprocess.Popen:
        code = CHILD.format(mode=mode)
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_child, child)
        return child

    @staticmethod
    def stop_child(child: subprocess.Popen):
        """A check that failed half-way must not leave the child's rig running."""
        if child.poll() is None:
            child.terminate()
            child.communicate(timeout=180)

    def child_rig(self, line: str) -> str:
        """The id of the child's rig, from its JOBS RUNNING line; its leftovers count."""
        rig_id = line.split("JOBS RUNNING", 1)[1].split()[0]
        self.child_rig_ids.append(rig_id)
        return rig_id

    def wait_steps_running(self, rig_id: str):
        return wait_for(lambda: live_processes("slurmstepd", rig_ids=[rig_id]), 60,
                        "slurmstepd processes of the child's job")

    def test_failing_test_leaves_nothing(self):
        child = self.run_child("fail")
        out, err = child.communicate(timeout=180)
        self.assertIn("JOBS RUNNING", out)
        self.child_rig(out)
        self.assertIn("this test fails on purpose", err)
        self.assertNotEqual(child.returncode, 0)
        self.assertNoLeftovers()

    def test_terminated_test_leaves_nothing(self):
        child = self.run_child("hang")
        line = child.stdout.readline()
        self.assertIn("JOBS RUNNING", line)
        rig_id = self.child_rig(line)
        self.wait_steps_running(rig_id)
        during = leftovers([rig_id])
        self.assertEqual(len(during["netns"]), 2)
        self.assertTrue(during["daemons"])
        child.send_signal(signal.SIGTERM)  # what meson does on a test time-out
        child.communicate(timeout=180)
        self.assertNoLeftovers()

    def test_two_rigs_one_after_another_do_not_share_anything(self):
        with Rig(nodes=2) as first:
            first.wait_nodes_idle()
            first_ids = (first.id, first.bridge, str(first.subnet), first.ctld_port,
                         str(first.workdir))
            first.check_output(["srun", "-N2", "true"])
        with Rig(nodes=2) as second:
            second.wait_nodes_idle()
            second_ids = (second.id, second.bridge, str(second.subnet), second.ctld_port,
                          str(second.workdir))
            for a, b in zip(first_ids, second_ids):
                self.assertNotEqual(a, b)
            # A fresh controller: no job history from the first rig.
            self.assertEqual(second.check_output(["squeue", "-h"]).strip(), "")
            out = second.check_output(["srun", "-N2", "hostname"])
            self.assertEqual(sorted(out.split()), ["w-0", "w-1"])
            self.assertFalse(Path(first_ids[4]).exists())
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
