"""spank_jail without PrologFlags=Contain: there is no extern step, so no job
namespace; every task builds its own namespace and still runs in the jail, the
job's steps share its private /tmp, and nothing is left behind."""

import os
import textwrap
import unittest

from harness.jail import (JailFixture, holders, jail_rig, node_pid, os_release_id,
                          own_mountinfo_lines)
from harness.rig import NodeSpec, wait_for
from harness.testcase import RigTestCase, main


class JailWithoutContainTest(RigTestCase):
    def test_tasks_enter_one_by_one_and_share_the_jobs_tmp(self):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        with JailFixture() as fixture:
            rig = jail_rig(fixture, nodes=[NodeSpec("w-0", cpus=2)], contain=False)
            with rig:
                rig.wait_nodes_idle()
                jail_release = os_release_id((fixture.jail / "etc/os-release").read_text())
                own = {rig.id, fixture.id}
                before = (own_mountinfo_lines(own), own_mountinfo_lines(own, node_pid(rig, "w-0")))
                out = rig.workdir / "nocontain.out"
                job = rig.sbatch(textwrap.dedent("""\
                    #!/bin/sh
                    readlink /proc/self/ns/mnt
                    echo shared > /tmp/from-batch
                    srun -n2 sh -c 'readlink /proc/self/ns/mnt; cat /tmp/from-batch'
                    . /etc/os-release; echo "release $VERSION_CODENAME"
                    """), ["-N1", "-n2", "-o", str(out)])
                rig.wait_job(job)
                lines = out.read_text().splitlines()
                namespaces = [l for l in lines if l.startswith("mnt:")]
                self.assertEqual(len(namespaces), 3, lines)
                self.assertEqual(len(set(namespaces)), 3, lines)  # one per task
                self.assertEqual(lines.count("shared"), 2, lines)  # the job's /tmp, in every step
                self.assertIn(f"release {jail_release}", lines)
                self.assertEqual(holders(), [])
                wait_for(lambda: not fixture.job_tmp("w-0", int(job)).exists(), 60,
                         "the job's private /tmp to be removed")
                after = (own_mountinfo_lines(own), own_mountinfo_lines(own, node_pid(rig, "w-0")))
                self.assertEqual(after, before)


if __name__ == "__main__":
    main()
