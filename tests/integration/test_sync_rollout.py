"""k8sbridge-sync rolls worker pods to a changed pod template without touching a job
(docs/sync.md, "Rollouts"), with a real slurmctld/slurmd (the rig) and a real
Kubernetes (KubeCluster: four kwok nodes).

Four nodes up, a job on two of them; the template's image changes under the running
daemon (as a ConfigMap update swaps the file). The two idle nodes' pods are replaced
at once, the busy ones only after the job ends; the job completes; every pod then
runs the new image and every node is back in service.
"""

from harness.rig import wait_for
from harness.sync import SyncRigTestCase, template
from harness.testcase import main

NODES = ["w-0", "w-1", "w-2", "w-3"]


class SyncRollout(SyncRigTestCase):
    cluster_args = {"nodes": 4}
    groups = (("g0", "w-[0-3]", template(image="registry.example/slurm-worker:v1")),)

    def image(self, node):
        pod = self.pod(node)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        return pod["spec"]["containers"][0]["image"]

    def test_a_template_change_rolls_idle_nodes_now_and_busy_ones_after_their_job(self):
        rig = self.make_rig(nodes=4)
        # Slurm needs a RebootProgram to accept `scontrol reboot`; slurmd runs it in the
        # pod, whose end is k8sbridge-sync's to bring about (the pod holds no token).
        rig.config.slurm_conf_extra += "\nRebootProgram=/bin/true\n"
        with rig:
            kubelet = self.kubelet(rig, NODES)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            self.power_up(rig, NODES)
            old_uids = {n: self.pod(n)["metadata"]["uid"] for n in NODES}
            release = rig.workdir / "release"
            out = rig.workdir / "job.out"
            job = rig.sbatch(f"#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.2; done\n"
                             "srun hostname\n",
                             ["-N2", "-w", "w-0,w-1", "--no-requeue", "-o", str(out)])
            rig.wait_job(job, ("RUNNING",), timeout=120)

            (self.dir / "g0.yaml").write_text(template(image="registry.example/slurm-worker:v2"))

            def rolled(nodes):
                return all(self.image(n) == "registry.example/slurm-worker:v2" and
                           rig.node(n)["State"].startswith("IDLE") for n in nodes)
            wait_for(lambda: rolled(["w-2", "w-3"]), 120,
                     lambda: f"w-2 and w-3 rolled (states {[rig.node(n)['State'] for n in NODES]},"
                             f" images {[self.image(n) for n in NODES]}); "
                             f"log:\n{d.log()[-4000:]}")
            # The busy nodes wait for their job: drained for the reboot, old pod, job running.
            for n in ("w-0", "w-1"):
                self.assertEqual(self.pod(n)["metadata"]["uid"], old_uids[n])
                self.assertIn("DRAIN", rig.node(n)["State"])
                self.assertEqual(self.image(n), "registry.example/slurm-worker:v1")
            self.assertEqual(rig.job(job)["JobState"], "RUNNING")

            release.touch()
            done = rig.wait_job(job, timeout=120)
            self.assertEqual(done["JobState"], "COMPLETED")
            self.assertEqual(sorted(out.read_text().split()), ["w-0", "w-1"])
            wait_for(lambda: rolled(NODES), 120,
                     lambda: f"every node rolled (states {[rig.node(n)['State'] for n in NODES]},"
                             f" images {[self.image(n) for n in NODES]}); "
                             f"log:\n{d.log()[-4000:]}")
            for n in NODES:
                pod = self.pod(n)
                self.assertNotEqual(pod["metadata"]["uid"], old_uids[n])
                state = rig.node(n)["State"]
                self.assertNotIn("DRAIN", state)
                self.assertNotIn("REBOOT", state)
            # The new pods serve: a job runs on all four.
            nxt = rig.sbatch("#!/bin/sh\nsrun hostname\n", ["-N4", "-o", str(rig.workdir / "n")])
            self.assertEqual(rig.wait_job(nxt, timeout=120)["JobState"], "COMPLETED")
            self.assertIn("sync: reboot w-2", d.log())
            self.assertGreaterEqual(
                d.metric('k8sbridge_sync_actions_total{kind="recreate_pod",result="ok"}'), 4)
            del kubelet
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
