"""spank_jail together with Slurm's cgroup plugins (proctrack/cgroup and
task/cgroup): tasks run in the jail and in their job's cgroup, and a batch script
in the jail still launches steps. The jail is entered per task, before slurmstepd
moves the task into its cgroup; slurmstepd itself stays on the host, where
/sys/fs/cgroup is."""

import os
import textwrap
import unittest

from harness.jail import JailFixture, jail_rig, os_release_id
from harness.rig import NodeSpec
from harness.testcase import RigTestCase, main

CGROUP_PLUGINS = "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\n"


class JailCgroupTest(RigTestCase):
    def test_tasks_run_in_the_jail_and_in_their_job_cgroup(self):
        if not os.path.isdir("/sys/fs/cgroup"):
            raise unittest.SkipTest("no /sys/fs/cgroup on this host")
        with JailFixture() as fixture:
            # One node: rig nodes share the host's cgroup tree, and two slurmd
            # managing the same job_N cgroup would trip over each other.
            rig = jail_rig(fixture, nodes=[NodeSpec("w-0", cpus=2)],
                           slurm_conf_extra=CGROUP_PLUGINS)
            with rig:
                rig.wait_nodes_idle()
                jail_release = os_release_id((fixture.jail / "etc/os-release").read_text())
                r = rig.run(["srun", "-N1", "sh", "-c", "cat /etc/os-release; cat /proc/self/cgroup"],
                            cwd=rig.workdir)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(os_release_id(r.stdout), jail_release)
                job_id = self._job_of(r.stdout)
                self.assertIsNotNone(job_id, r.stdout)

                out = rig.workdir / "cgroup-batch.out"
                job = rig.sbatch(textwrap.dedent("""\
                    #!/bin/sh
                    . /etc/os-release; echo "batch $VERSION_CODENAME"
                    srun -N1 -n2 sh -c '. /etc/os-release; echo "step $VERSION_CODENAME"; cat /proc/self/cgroup'
                    """), ["-N1", "-n2", "-o", str(out)])
                rig.wait_job(job)
                text = out.read_text()
                self.assertIn(f"batch {jail_release}", text)
                self.assertEqual(text.count(f"step {jail_release}"), 2)
                self.assertIn(f"job_{job}", text)
            self.assertNoLeftovers()

    @staticmethod
    def _job_of(text):
        for line in text.splitlines():
            if "job_" in line:
                return line.split("job_", 1)[1].split("/", 1)[0]
        return None


if __name__ == "__main__":
    main()
