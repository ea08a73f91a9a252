"""kubesim's OCI-mode kubelet runs the real worker image that scripts/images.py builds:
its slurmd, run as a pod's command, says the Slurm version the image was built with.
scripts/test.sh sets K8SBRIDGE_IMAGES for the artifacts suite (a directory such as
/var/cache/k8sbridge/images-<key>, whose image directories kubesim takes as its image
store as they are); without it the test skips.

Needs root (namespaces, a bridge, overlays, runc); its own bridge, network and runc
root (a rig slot this process holds).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness.deployment import images_or_skip
from harness.kubesim import KubeSim, remove_oci_kubelet_leftovers, wait_for
from harness.rig import claim_slot

IMAGES = os.environ.get("K8SBRIDGE_IMAGES")
SLOT = claim_slot() if os.geteuid() == 0 and IMAGES else None
BRIDGE = f"ksimi{SLOT.number if SLOT else 0}"
NETWORK = str(SLOT.pod_network) if SLOT else "10.232.0.0/24"
RUNC_ROOT = f"/run/kubesim-runc/{BRIDGE}"


class WorkerImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        images_or_skip()
        cls.info = json.loads((Path(IMAGES) / "k8sbridge-worker" / "image.json").read_text())
        cls.work = Path(tempfile.mkdtemp(prefix="kubesim-oci-images-"))
        try:
            cls.sim = KubeSim("--kubelet", "--bridge", BRIDGE, "--pod-network", NETWORK,
                              "--kubelet-state-dir", str(cls.work / "state"),
                              "--image-store", IMAGES, "--fake-nodes", "1", scheduler=True)
        except BaseException:
            cls.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.sim.close()
        finally:
            cls.cleanup()

    @classmethod
    def cleanup(cls):
        remove_oci_kubelet_leftovers(RUNC_ROOT, cls.work, BRIDGE)
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_slurmd_in_the_worker_image_says_its_version(self):
        image = f"{self.info['image']}:{self.info['tag']}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "slurmd-version", "namespace": "default"},
               "spec": {"restartPolicy": "Never",
                        "containers": [{"name": "slurmd", "image": image,
                                        "command": ["slurmd", "-V"]}]}}
        self._apply(pod)
        done = wait_for(lambda: (p := self.sim.kubectl_json("get", "pod", "slurmd-version"))
                        ["status"].get("phase") in ("Succeeded", "Failed") and p,
                        timeout=300, what="slurmd -V in the worker image")
        logs = self.sim.kubectl("logs", "slurmd-version").stdout
        self.assertEqual(done["status"]["phase"], "Succeeded", logs)
        self.assertRegex(logs, rf"^slurm(-wlm)? {re.escape(self.info['slurm'])}\n$")
        status = done["status"]["containerStatuses"][0]
        self.assertEqual(status["imageID"],
                         f"docker.io/library/{self.info['image']}@{self.info['digest']}")

    def _apply(self, obj):
        r = subprocess.run(
            ["/usr/bin/kubectl", "--kubeconfig", self.sim.kubeconfig, "apply", "-f", "-"],
            input=json.dumps(obj), capture_output=True, text=True, timeout=60,
            env={"HOME": str(self.sim.dir), "PATH": "/usr/bin:/bin"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
