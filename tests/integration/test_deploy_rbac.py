"""The shipped RBAC (deploy/base/rbac.yaml) is what k8sbridge's programs run with, and
nothing less works: kube-apiserver's RBAC authorizer (a real cluster, KubeCluster,
with one kwok node) decides every request of the ServiceAccount's token.

With a real slurmctld/slurmd (the rig), k8sbridge-power and k8sbridge-sync use the
token of k8sbridge-controller. One verb taken from its Role (pods: create) makes a
resume fail, and the Slurm node's reason names the missing permission as the API
server words it; the verb given back, the node returns to service (k8sbridge-sync)
and a job runs on it.
"""

from harness.rig import wait_for
from harness.sync import SyncRigTestCase, template
from harness.testcase import main


class ShippedRbac(SyncRigTestCase):
    groups = (("g0", "w-0", template("node-0")),)
    cluster_args = {"nodes": 1}

    def role_pods_verbs(self, verbs):
        self.kube.kubectl("-n", self.namespace, "patch", "role", "k8sbridge-controller",
                          "--type=json", "-p",
                          f'[{{"op":"replace","path":"/rules/0/verbs","value":{list(verbs)}}}]'
                          .replace("'", '"'))

    def test_a_verb_missing_from_the_role_is_named_and_its_return_recovers(self):
        rig = self.make_rig(nodes=1)
        rig.config.slurm_conf_extra += "\nReturnToService=1\n"
        with rig:
            self.kubelet(rig, ["w-0"])
            d = self.start_daemon(rig)
            self.wait_leader(d)
            user = f"system:serviceaccount:{self.namespace}:k8sbridge-controller"
            self.role_pods_verbs(["get", "list", "watch", "delete", "patch"])

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=power_up"])
            n = rig.wait_reason("w-0", "k8sbridge: pods is forbidden", 60,
                                lambda: f"w-0 failed by the resume; power log:\n"
                                        f"{self.power_log()[-3000:]}")
            self.assertIn(f'User "{user}" cannot create resource "pods" in API group "" '
                          f'in the namespace "{self.namespace}"', n["Reason"])
            self.assertIn("DOWN", n["State"])

            self.role_pods_verbs(["get", "list", "watch", "create", "delete", "patch"])
            # Slurm powers the failed node down; the daemon returns it to service.
            wait_for(lambda: rig.node("w-0")["State"].startswith("IDLE"), 120,
                     lambda: f"w-0 back in service (now {rig.node('w-0')['State']}); "
                             f"log:\n{d.log()[-3000:]}")
            out = rig.workdir / "job.out"
            job = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0", "-o", str(out)])
            self.assertEqual(rig.wait_job(job, timeout=180)["JobState"], "COMPLETED")
            self.assertEqual(out.read_text().split(), ["w-0"])
            self.assertEqual(self.pod("w-0")["metadata"]["labels"]["k8sbridge.io/node"], "w-0")
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
