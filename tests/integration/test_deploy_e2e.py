"""The in-cluster deployment end to end: `kubectl kustomize deploy/overlays/demo |
kubectl apply -f -` on kubesim running as a cluster (RBAC, controllers, cluster DNS,
an OCI kubelet running the images with runc), then what a user and Slurm do:

- the controller pod (slurmctld-0 of the StatefulSet) runs slurmctld from the
  controller image, with k8sbridge-power as its power programs under the
  controller's own ServiceAccount token;
- a 4-node job submitted from the login pod (kubectl exec) makes Slurm resume four
  CLOUD nodes: k8sbridge-power creates four worker pods from the worker image, their
  slurmd register (configless, through the cluster's DNS name of slurmctld-0), and
  the job's steps run in the jail the populate Job filled;
- after SuspendTime the pods are gone and the nodes powered down again.

scripts/test.sh sets K8SBRIDGE_IMAGES for the artifacts suite; without it the test
skips. Needs root (namespaces, a bridge, overlays, runc).
"""

import re
import unittest

from harness.deployment import Deployment, images_or_skip, missing_images

NODES = ["w-0", "w-1", "w-2", "w-3"]


class InClusterDeployment(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        images = images_or_skip()
        missing = missing_images(images)
        if missing:
            raise AssertionError(f"K8SBRIDGE_IMAGES={images} lacks {missing}")
        cls.d = Deployment(images).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.d.close()

    def test_a_job_from_the_login_pod_runs_in_worker_pods_the_controller_pod_resumed(self):
        d = self.d
        d.wait_ready()
        ctld = d.get("pod", "slurmctld-0")
        self.assertEqual(ctld["spec"]["serviceAccountName"], "k8sbridge-controller")
        self.assertEqual(d.worker_pods(), [], "no worker pod before Slurm asks for one")
        nodes = d.slurm_nodes()
        self.assertEqual(sorted(nodes), NODES)
        for name in NODES:
            self.assertIn("POWERED_DOWN", nodes[name]["State"], name)

        # What a user types (README): srun from the login pod, through kubectl exec,
        # as a user (nobody: in the login image and so in the jail it populated).
        run = d.login(["srun", "-N4", "-l", "sh", "-c",
                       "echo $(hostname) $(grep ^VERSION_CODENAME= /etc/os-release) "
                       "$(cat /.k8sbridge-jail 2>/dev/null || echo no-jail)"],
                      check=False, timeout=600, user="nobody")
        self.assertEqual(run.returncode, 0, f"{run.stdout}{run.stderr}\n{d.describe()}")
        lines = sorted(run.stdout.splitlines())
        self.assertEqual(len(lines), 4, run.stdout)
        for i, line in enumerate(lines):
            # Each task on its own node, in the jail populated from the login image.
            self.assertRegex(line, rf"^{i}: w-{i} VERSION_CODENAME=trixie populated from "
                                   r"the login image")

        pods = {p["metadata"]["name"]: p for p in d.worker_pods()}
        self.assertEqual(sorted(pods), NODES)
        controller_image = ctld["spec"]["containers"][0]["image"]
        for name, pod in pods.items():
            worker = pod["spec"]["containers"][0]
            self.assertRegex(worker["image"], r"^k8sbridge-worker:", name)
            status = pod["status"]["containerStatuses"][0]
            # The kubelet ran the worker image itself (its digest), not the host's files.
            self.assertRegex(status["imageID"],
                             r"^docker\.io/library/k8sbridge-worker@sha256:[0-9a-f]{64}$")
            self.assertIn("running", status["state"], name)
        self.assertRegex(controller_image, r"^k8sbridge-controller:")
        nodes = d.slurm_nodes()
        for name in NODES:
            self.assertEqual(nodes[name]["NodeAddr"], pods[name]["status"]["podIP"], name)

        # The power programs ran in the controller pod (their log is in its log
        # volume), found the API server through the entrypoint's service file and
        # authenticated with the pod's own token: nothing else here can make pods.
        log = d.pod_file(ctld, "log", "k8sbridge-power.log")
        self.assertIsNotNone(log, "k8sbridge-power.log in the controller pod's log volume")
        self.assertNotRegex(log.read_text(), r"forbidden|in-cluster config")

        # SuspendTime (30 s in the demo overlay): Slurm suspends the idle nodes, and
        # k8sbridge-suspend deletes their pods.
        def powered_down_without_pods():
            if d.worker_pods():
                return False
            states = d.slurm_nodes()
            return all("POWERED_DOWN" in states[n]["State"] and
                       not re.search(r"DOWN\*|DRAIN|FAIL", states[n]["State"]) for n in NODES)
        d.wait(powered_down_without_pods, 300, "the worker pods deleted after SuspendTime")


if __name__ == "__main__":
    unittest.main(verbosity=2)
