"""A real node runs the worker image that scripts/images.py builds: its docker-archive
imported into the node's containerd (no registry), a pod naming the image as the
overlays do (k8sbridge-worker:<tag>) runs `slurmd -V` through the kubelet,
containerd and runc, and says the Slurm version the image was built with. The
container's imageID is the one containerd gave the imported image.

scripts/test.sh sets K8SBRIDGE_IMAGES for the artifacts suite (a directory such as
/var/cache/k8sbridge/images-<key>); without it the test skips. Needs root and what
real nodes need (scripts/setup.sh).
"""

import re
import unittest

from harness.deployment import image_info, images_or_skip, node_image
from harness.kube import wait_for_condition
from harness.kubelet_node import RealCluster
from harness.testcase import close_leaving_nothing


class WorkerImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        images = images_or_skip()
        cls.info = image_info(images, "k8sbridge-worker")
        cls.image = node_image(images, "k8sbridge-worker")
        cls.rc = RealCluster(nodes=1, images=[cls.image])
        cls.kube = cls.rc.kube

    @classmethod
    def tearDownClass(cls):
        close_leaving_nothing(cls.rc.close, cls.rc.rig_ids, "the real node")

    def test_slurmd_in_the_worker_image_says_its_version(self):
        image = f"{self.info['image']}:{self.info['tag']}"
        self.kube.create("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "slurmd-version", "namespace": "default"},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "slurmd", "image": image,
                                     "command": ["slurmd", "-V"]}]}}, ok=(201,))

        def ended():
            pod = self.kube.kubectl_json("get", "pod", "slurmd-version")
            return pod if pod["status"].get("phase") in ("Succeeded", "Failed") else None
        done = wait_for_condition(ended, 300, "slurmd -V in the worker image", interval=0.5)
        logs = self.kube.kubectl("logs", "slurmd-version").stdout
        self.assertEqual(done["status"]["phase"], "Succeeded", logs)
        self.assertRegex(logs, rf"^slurm(-wlm)? {re.escape(self.info['slurm'])}\n$")
        self.assertEqual(done["spec"]["nodeName"], self.rc.nodes[0].name)
        status = done["status"]["containerStatuses"][0]
        self.assertEqual(status["state"]["terminated"]["exitCode"], 0)
        self.assertTrue(status["containerID"].startswith("containerd://"), status)
        self.assertEqual(status["imageID"], self.image.id)


if __name__ == "__main__":
    unittest.main(verbosity=2)
