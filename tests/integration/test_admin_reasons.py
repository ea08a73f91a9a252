"""No k8sbridge component changes a reason it did not write (issue 15).

Before each k8sbridge action the test sets an admin's reason on the node with
scontrol; afterwards the reason is exactly as the admin left it (its text, and
the author and time Slurm prints after it), while the state still changes where
it must:

- k8sbridge-power: a resume whose pod the API rejects (the real Kubernetes,
  harness.kube.KubeCluster, whose admission webhook refuses every pod with 422)
  sets the node DOWN and POWER_DOWN (its jobs requeue) but keeps an admin's DOWN or
  DRAIN reason;
- spank_jail: a step on an unsafe jail fails, but a node an admin drained keeps
  the admin's reason (the plugin logs that it left it).

k8sbridge-health's cases are in test_health_rig.py, k8sbridge-sync's in
test_sync_drains.py and tests/unit/sync.
"""

import os
import shutil
import tempfile
import unittest
from pathlib import Path

from harness.jail import JailFixture, jail_rig, slurmd_log
from harness.cluster import WORKER_TEMPLATE as TEMPLATE
from harness.kube import KubeCluster
from harness.paths import POWER
from harness.rig import Rig, wait_for
from harness.testcase import RigTestCase, main


class PowerKeepsAdminReasons(RigTestCase):
    def setUp(self):
        super().setUp()
        if not POWER.exists():
            self.skipTest(f"{POWER} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="admin-reasons-"))
        self.dir.chmod(0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        # No pod is ever scheduled here: no scheduler.
        self.kube = KubeCluster(nodes=1, scheduler=False)
        self.addCleanup(self.kube.close)
        (self.dir / "worker.yaml").write_text(TEMPLATE)
        self.conf = self.dir / "k8sbridge.conf"
        self.conf.write_text(
            f"ClusterName=rig\nKubeconfig={self.kube.kubeconfig}\nNamespace=default\n"
            f"RetryDeadline=2\nLogFile={self.dir / 'power.log'}\n"
            "NodeGroup=w Nodes=w-[0-1] PodTemplate=worker.yaml\n")
        # Every pod create is refused: each resume fails its node.
        self.kube.add_fault("pods", "create", 422, times=0, message="pod refused by policy")

    def resume_by_hand(self, rig, node):
        """k8sbridge-power resume, as slurmctld would run it (no resume file)."""
        return rig.run([str(POWER), "--config", str(self.conf), "resume", node])

    def log(self):
        path = self.dir / "power.log"
        return path.read_text() if path.exists() else "(no power.log)"

    def test_a_failed_resume_keeps_an_admins_down_and_drain_reasons(self):
        with Rig(nodes=2, start_slurmd=False) as rig:
            cases = {"w-0": ("down", "admin: rack 3 has no power"),
                     "w-1": ("drain", "admin: firmware update, ticket 17")}
            before = {}
            for node, (state, reason) in cases.items():
                rig.check_output(["scontrol", "update", f"nodename={node}", f"state={state}",
                                  f"reason={reason}"])
                before[node] = rig.node(node)["Reason"]
                self.assertTrue(before[node].startswith(reason), before[node])

            for node in cases:
                self.resume_by_hand(rig, node)
                # The node was failed (DOWN): the program got as far as Slurm.
                wait_for(lambda n=node: "DOWN" in rig.node(n)["State"], 30,
                         lambda: f"{node} to be DOWN; power.log:\n{self.log()}")
                self.assertIn(f"node {node}", self.log())

            for node in cases:
                self.assertEqual(rig.node(node)["Reason"], before[node])
        self.assertNoLeftovers()

    def test_without_an_admin_reason_the_failure_is_explained(self):
        # The same failure on a node nobody took out of service writes our reason:
        # the case above keeps the admin's because it is theirs, not by accident.
        with Rig(nodes=1, start_slurmd=False) as rig:
            self.resume_by_hand(rig, "w-0")
            node = rig.wait_reason("w-0", "k8sbridge:", 30,
                                   lambda: f"w-0's k8sbridge: reason; power.log:\n{self.log()}")
            self.assertIn("DOWN", node["State"])
        self.assertNoLeftovers()


class JailKeepsAdminReasons(RigTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        self.fixture = JailFixture().__enter__()
        self.addCleanup(self.fixture.close)

    def test_a_broken_jail_under_an_admins_drain_keeps_the_reason(self):
        rig = jail_rig(self.fixture, nodes=1)
        with rig:
            rig.wait_nodes_idle()
            plugstack = rig.etc / "plugstack.conf"
            good = plugstack.read_text()
            # A job holds the node, so a new step can still start after the drain.
            job = rig.sbatch("#!/bin/sh\nsleep 300\n", ["-N1", "-w", "w-0"])
            wait_for(lambda: rig.job(job)["JobState"] == "RUNNING", 60, "the job to run")
            reason = "admin: replacing the node's disk"
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              f"reason={reason}"])
            before = rig.node("w-0")["Reason"]
            self.assertTrue(before.startswith(reason), before)

            unsafe = self.fixture.base / "unsafe"
            (unsafe / "etc").mkdir(parents=True)
            (unsafe / "etc" / "os-release").write_text("ID=fake\n")
            os.chmod(unsafe, 0o777)
            plugstack.write_text(good.replace(f"jail={self.fixture.jail} ", f"jail={unsafe} "))
            try:
                r = rig.run(["srun", f"--jobid={job}", "--overlap", "-N1", "-w", "w-0", "true"],
                            timeout=120)
                self.assertNotEqual(r.returncode, 0, "the step on an unsafe jail must fail")
                wait_for(lambda: "left as it is" in slurmd_log(rig, "w-0"), 60,
                         "spank_jail to log that it left the admin's drain")
                node = rig.node("w-0")
                self.assertIn("DRAIN", node["State"])
                self.assertEqual(node["Reason"], before)
            finally:
                plugstack.write_text(good)
                rig.run(["scancel", str(job)])
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
