"""k8sbridge-sync with a real slurmctld/slurmd (the rig) and a real Kubernetes
(KubeCluster: kube-scheduler places the pods, kwok plays the nodes): pods.

- A worker pod killed while a job runs: the node goes DOWN, the job is requeued and
  completes on a fresh pod.
- That node, once Slurm powered it down, is returned to service (IDLE+POWERED_DOWN,
  not DOWN) and the next job that needs it runs on a fresh pod.
- A job needing more GPUs than any Kubernetes node has: its node goes DOWN/POWER_DOWN
  with kube-scheduler's message within grace + 10 s, and the job is pending.
- Orphans: owned pods whose node is POWERED_DOWN or unknown to Slurm are deleted;
  a pod without k8sbridge's labels (or another cluster's) never is.
"""

import sys
import time

from harness.cluster import kill_pod_processes
from harness.rig import wait_for
from harness.sync import SyncRigTestCase, template
from harness.testcase import main

GRACE = 10  # SyncUnschedulableGrace and SyncOrphanGrace in SyncRigTestCase.sync_keys


class SyncPodKilled(SyncRigTestCase):

    def test_pod_killed_under_a_job_downs_the_node_and_the_job_reruns(self):
        with self.make_rig(short_requeue=True) as rig:
            self.kubelet(rig)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            marker = rig.workdir / "first-run"
            out = rig.workdir / "job.out"
            # The first run waits to be killed; the rerun finds the marker and ends.
            job = rig.sbatch(
                f"#!/bin/sh\nif [ -e {marker} ]; then hostname; exit 0; fi\n"
                f"touch {marker}\nsleep 600\n", ["-N1", "--requeue", "-o", str(out)])
            running = rig.wait_job(job, ("RUNNING",), timeout=120)
            node = running["NodeList"]
            wait_for(marker.exists, 60, "the first run to start")
            old_uid = self.pod(node)["metadata"]["uid"]

            self.kube.kubectl("delete", "pod", node, "--wait=false")

            n = rig.wait_reason(node, "k8sbridge: pod", 30,
                                lambda: f"{node} set DOWN; log:\n{d.log()[-3000:]}")
            self.assertIn("DOWN", n["State"])
            wait_for(lambda: int(rig.job(job).get("Restarts", "0")) >= 1, 30,
                     lambda: f"the job to be requeued; it is {rig.job(job)}")
            done = rig.wait_job(job, timeout=240)
            rerun_node = done["NodeList"]
            self.assertEqual(out.read_text().split(), [rerun_node])
            pod = self.pod(rerun_node)
            self.assertIsNotNone(pod)
            self.assertNotEqual(pod["metadata"]["uid"], old_uid)  # a fresh pod
        self.assertNoLeftovers()


class SyncFailedNodeReturns(SyncRigTestCase):
    """Slurm 24.11 keeps a node that went DOWN before its power-down DOWN for good
    (down~); k8sbridge-sync returns a node it failed to service once Slurm powered it
    down and its pod is gone."""

    def test_failed_node_returns_to_service_and_the_next_job_gets_a_fresh_pod(self):
        rig = self.make_rig()
        # Slurm's default: with the rig's ReturnToService=2 a DOWN node that answers
        # once more (a reply in flight as it goes DOWN) is returned by slurmctld
        # itself, which would hide whether the daemon does it. A later line wins.
        rig.config.slurm_conf_extra += "\nReturnToService=1\n"
        with rig:
            self.assertRegex(rig.check_output(["scontrol", "show", "config"]),
                             r"ReturnToService\s*=\s*1\b")
            self.kubelet(rig)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            job = rig.sbatch("#!/bin/sh\nsleep 600\n", ["-N1", "-w", "w-0", "--no-requeue"])
            rig.wait_job(job, ("RUNNING",), timeout=120)
            old_uid = self.pod("w-0")["metadata"]["uid"]

            # The pod's processes die with it (as under an eviction's SIGKILL).
            kill_pod_processes(rig, "w-0")
            self.kube.kubectl("delete", "pod", "w-0", "--wait=false")

            n = rig.wait_reason("w-0", "k8sbridge: pod", 30,
                                lambda: f"w-0 set DOWN; log:\n{d.log()[-3000:]}")
            self.assertIn("DOWN", n["State"])
            # SuspendProgram (SuspendTimeout=5), then the daemon's RESUME: IDLE, still
            # powered down, not DOWN.
            def in_service():
                state = rig.node("w-0")["State"]
                return state if state.startswith("IDLE") and "POWERED_DOWN" in state else None
            state = wait_for(in_service, 90,
                             lambda: f"w-0 back in service (now {rig.node('w-0')['State']}); "
                             f"log:\n{d.log()[-3000:]}")
            self.assertIn("sync: resume w-0", d.log())
            self.assertGreaterEqual(
                d.metric('k8sbridge_sync_actions_total{kind="resume",result="ok"}'), 1)

            out = rig.workdir / "next.out"
            nxt = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0", "-o", str(out)])
            rig.wait_job(nxt, timeout=240)
            self.assertEqual(out.read_text().split(), ["w-0"])
            pod = self.pod("w-0")
            self.assertIsNotNone(pod)
            self.assertNotEqual(pod["metadata"]["uid"], old_uid)  # a fresh pod
        self.assertNoLeftovers()


class SyncUnschedulable(SyncRigTestCase):
    cluster_args = {"nodes": 2, "gpus_per_node": 1}
    groups = (("gpu", "w-0", template(), "Gpus=8"), ("g1", "w-1", template()))

    def test_job_needing_more_gpus_than_exist_goes_back_to_pending(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            d = self.start_daemon(rig)
            self.wait_leader(d)
            job = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0"])

            def unschedulable():
                pod = self.pod("w-0")
                for c in (pod or {}).get("status", {}).get("conditions", []):
                    if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                        return c["message"]
                return None
            message = wait_for(unschedulable, 60, lambda: f"w-0's pod unschedulable; power.log:\n"
                               f"{self.power_log()}")
            seen = time.monotonic()
            self.assertIn("Insufficient nvidia.com/gpu", message)

            n = rig.wait_reason("w-0", "k8sbridge: 0/2 nodes", GRACE + 10,
                                lambda: f"w-0 DOWN within grace + 10 s; log:\n{d.log()[-3000:]}")
            print(f"unschedulable -> DOWN after {time.monotonic() - seen:.1f} s "
                  f"(grace {GRACE} s)", file=sys.stderr)
            self.assertIn("Insufficient nvidia.com/gpu", n["Reason"])
            self.assertIn("DOWN", n["State"])
            self.assertIn("POWER", n["State"])
            j = rig.job(job)
            self.assertEqual(j["JobState"], "PENDING", j)
            self.assertGreaterEqual(int(j["Restarts"]), 1, j)
            # Pending with a reason (BeginTime, then the node's unavailability).
            j = wait_for(lambda: (lambda j: j if j.get("Reason", "None") != "None" else None)(
                rig.job(job)), 60, "the pending job's reason")
            self.assertEqual(j["JobState"], "PENDING", j)
            # The pod goes with the power-down (SuspendProgram).
            wait_for(lambda: self.pod("w-0") is None, 60, "w-0's pod deleted")
            self.assertEqual(rig.job(job)["JobState"], "PENDING")
        self.assertNoLeftovers()


class SyncOrphans(SyncRigTestCase):

    def test_orphans_are_deleted_and_foreign_pods_never(self):
        with self.make_rig() as rig:
            d = self.start_daemon(rig)
            self.wait_leader(d)
            # w-1 is POWERED_DOWN; Slurm has no w-7.
            self.create_pod("w-1", self.owned_labels("w-1"))
            self.create_pod("w-7", self.owned_labels("w-7"))
            # Not ours: no labels (named like a Slurm node), or another cluster's.
            self.create_pod("w-0", {"app": "something-else"})
            self.create_pod("stray", self.owned_labels("stray", cluster="other"))

            # Deleted means the API server has the delete: the pod then terminates
            # for its grace period (30 s by default), which is the kubelet's, not ours
            # (kwok's nodes end their pods at once).
            def deleted(name):
                pod = self.pod(name)
                return pod is None or bool(pod["metadata"].get("deletionTimestamp"))
            try:
                wait_for(lambda: deleted("w-1") and deleted("w-7"), GRACE + 30,
                         "the orphans deleted")
            except Exception as e:  # the daemon's log says why
                raise AssertionError(f"{e}\nlog:\n{d.log()[-3000:]}") from None
            # Another orphan, made now: once it is deleted, the foreign pods have
            # been seen for more than two graces.
            self.create_pod("w-8", self.owned_labels("w-8"))
            wait_for(lambda: deleted("w-8"), GRACE + 30, "the later orphan deleted")
            self.assertIsNotNone(self.pod("w-0"))
            self.assertIsNotNone(self.pod("stray"))
            # Every pod DELETE the API server saw (its audit log: the daemon's, and
            # kwok's as the pods end) was for one of our orphans.
            deletes = {r["name"] for r in self.kube.requests_log()
                       if r["verb"] == "delete" and r["resource"] == "pods"}
            self.assertEqual(deletes, {"w-1", "w-7", "w-8"})
            self.assertGreaterEqual(d.metric('k8sbridge_sync_actions_total{kind="delete_pod",'
                                             'result="ok"}'), 3)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
