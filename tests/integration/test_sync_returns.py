"""Nodes returned to service stay schedulable across a slurmctld restart: real
slurmctld and slurmd (the rig), a real Kubernetes (KubeCluster, kwok's nodes),
k8sbridge-power and k8sbridge-sync.

slurmctld's RESUME of a DOWN node also marks it NOT_RESPONDING until its slurmd
registers (node_mgr.c, _require_node_reg). A powered-down node stays so until a job
resumes it, and a restarted slurmctld does not make an idle node that is
NOT_RESPONDING available (read_config.c): every job that needs it then waits,
`ReqNodeNotAvail`, for ever, while `sinfo` shows it `idle~`.

- An admin's `state=resume` of a down~ node, then a slurmctld restart: a job pinned
  to the node waits; k8sbridge-sync powers the node down again (the power-down
  cycle clears NOT_RESPONDING), and the job runs on it.
- A node k8sbridge-sync failed (its pod deleted) and returned to service is not
  NOT_RESPONDING (the return is `state=idle`), and after a slurmctld restart a job
  pinned to it runs.
"""

import sys

from harness.rig import wait_for
from harness.sync import SyncRigTestCase
from harness.testcase import main

PINNED_JOB = "#!/bin/sh\nhostname\n"


def state_words(node):
    return set(node["State"].split("+"))


class SyncReturns(SyncRigTestCase):

    def wait_state(self, rig, name, want, avoid, timeout, d=None):
        """Waits until node `name`'s State has every word of `want` and none of `avoid`."""
        def seen():
            node = rig.node(name)
            words = state_words(node)
            return node if want <= words and not words & avoid else None
        return wait_for(seen, timeout, lambda: (
            f"{name} {'+'.join(sorted(want))} without {','.join(sorted(avoid))}: now "
            f"{rig.node(name)['State']}" + (f"; sync log:\n{d.log()[-3000:]}" if d else "")))

    def run_pinned_job(self, rig, name, d):
        out = rig.workdir / f"pinned-{name}.out"
        job = rig.sbatch(PINNED_JOB, ["-N1", "-w", name, "-o", str(out)])
        rig.wait_job(job, timeout=180)
        self.assertEqual(out.read_text().split(), [name], d.log()[-3000:])
        return job

    def test_an_admins_resume_then_a_restart_does_not_strand_the_node(self):
        with self.make_rig(suspend_time=600) as rig:
            self.kubelet(rig)
            # down~, as ResumeTimeout leaves a node in 24.11, and an admin's resume.
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=down",
                              "reason=admin: PSU swapped"])
            self.wait_state(rig, "w-0", {"DOWN", "POWERED_DOWN"}, set(), 30)
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=resume"])
            node = self.wait_state(rig, "w-0", {"IDLE", "POWERED_DOWN"}, {"DOWN"}, 30)
            stranded = "NOT_RESPONDING" in state_words(node)
            print(f"after the admin's RESUME: {node['State']}", file=sys.stderr)
            rig.restart_slurmctld()
            out = rig.workdir / "pinned-w-0.out"
            job = rig.sbatch(PINNED_JOB, ["-N1", "-w", "w-0", "-o", str(out)])
            if stranded:
                # slurmctld holds it: the node is not available to it.
                wait_for(lambda: rig.job(job).get("Reason", "").startswith("ReqNodeNotAvail"),
                         60, lambda: f"job {job} held ReqNodeNotAvail: {rig.job(job)}")
                self.assertEqual(rig.job(job)["JobState"], "PENDING")
            d = self.start_daemon(rig)
            self.wait_leader(d)
            rig.wait_job(job, timeout=180)
            self.assertEqual(out.read_text().split(), ["w-0"], d.log()[-3000:])
            if stranded:
                self.assertIn("sync: renew_power_down w-0", d.log())
            # The admin's reason is not k8sbridge's to touch; the node is in service.
            self.wait_state(rig, "w-0", {"IDLE"}, {"DOWN", "DRAIN", "NOT_RESPONDING"}, 30, d)
        self.assertNoLeftovers()

    def test_a_node_sync_returned_is_schedulable_after_a_restart(self):
        with self.make_rig(suspend_time=600) as rig:
            self.kubelet(rig)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            self.power_up(rig, ["w-0"])
            status, _, body = self.kube.request(
                "DELETE", f"/api/v1/namespaces/{self.namespace}/pods/w-0")
            self.assertEqual(status, 200, body)
            # DOWN and POWER_DOWN, powered down after SuspendTimeout, returned.
            wait_for(lambda: "sync: resume w-0: back to service" in d.log(), 120,
                     lambda: f"w-0 back to service; sync log:\n{d.log()[-3000:]}")
            self.wait_state(rig, "w-0", {"IDLE", "POWERED_DOWN"},
                            {"DOWN", "NOT_RESPONDING", "POWER_DOWN", "POWERING_DOWN"}, 30, d)
            self.assertNotIn("renew_power_down w-0", d.log())
            rig.restart_slurmctld()
            self.run_pinned_job(rig, "w-0", d)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
