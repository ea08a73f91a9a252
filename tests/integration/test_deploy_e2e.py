"""The in-cluster deployment end to end on a real Kubernetes: `kubectl kustomize
deploy/overlays/demo | kubectl apply -f -` (through a site kustomization that sets
only the images' names and tags) on RealCluster: the upstream control plane, CoreDNS
and two real nodes, each a kubelet with containerd, runc, a CNI bridge and
kube-proxy, on InfiniBand leaves leaf-0 and leaf-1, the three images imported into
their containerd (no registry). Then what a user and Slurm do:

- the controller pod (slurmctld-0 of the StatefulSet) runs slurmctld from the
  controller image, with k8sbridge-power as its power programs under the
  controller's own ServiceAccount token;
- a 4-node job submitted from the login pod (kubectl exec, through the kubelet)
  makes Slurm resume four CLOUD nodes: k8sbridge-power creates four worker pods,
  the scheduler puts them on one leaf (the placement pod affinity), the kubelet
  there runs the worker image through containerd and runc, their slurmd register
  (configless, through the cluster DNS name of slurmctld-0) with the features
  node_features_k8s read from their Kubernetes node's labels (k8sbridge.conf from
  the ConfigMap, the worker's root-only token), and the job's steps run in the
  jail the populate Job filled, each task in its job's cgroup;
- the pods' status, image IDs and events are the kubelet's: their containers are
  containerd's tasks on that node, the image is the one imported there, and the
  kubelet found it present (no pull);
- after SuspendTime the pods are deleted, their containers gone from containerd,
  and the nodes powered down again.

scripts/test.sh sets K8SBRIDGE_IMAGES for the artifacts suite; without it the test
skips. Needs root and what real nodes need (scripts/setup.sh).
"""

import ipaddress
import re
import time
import unittest

from harness.deployment import Deployment, images_or_skip, missing_images
from harness.kube import LEAF_LABEL
from harness.testcase import close_leaving_nothing

NODES = ["w-0", "w-1", "w-2", "w-3"]


class InClusterDeployment(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        images = images_or_skip()
        missing = missing_images(images)
        if missing:
            raise AssertionError(f"K8SBRIDGE_IMAGES={images} lacks {missing}")
        cls.d = Deployment(images, progress=lambda text: print(
            f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)).__enter__()

    @classmethod
    def tearDownClass(cls):
        close_leaving_nothing(cls.d.close, cls.d.rc.rig_ids, "the deployment")

    def assert_kubelet_ran(self, pod, image):
        """`pod`'s first container is a containerd task on the pod's real node, of the
        image imported there, and its status is that kubelet's."""
        d = self.d
        name = pod["metadata"]["name"]
        node = d.node(pod["spec"]["nodeName"])
        status = pod["status"]
        self.assertEqual(status["hostIP"], node.address, name)
        self.assertIn(ipaddress.ip_address(status["podIP"]),
                      ipaddress.ip_network(node.pod_cidr), name)
        container = status["containerStatuses"][0]
        self.assertIn("running", container["state"], name)
        # containerd's ID of the image imported into the node (its configuration's
        # digest), which only the runtime knows.
        self.assertEqual(container["imageID"], d.image(image).id, name)
        self.assertRegex(container["containerID"], r"^containerd://[0-9a-f]{64}$", name)
        cid = container["containerID"].split("://", 1)[1]
        self.assertIn(cid, node.tasks(), f"{name}: a running task in {node.name}'s containerd")
        return node, cid

    def assert_kubelet_events(self, pod):
        """The kubelet of the pod's node reported pulling (found present), creating and
        starting the container."""
        d = self.d
        name, host = pod["metadata"]["name"], pod["spec"]["nodeName"]
        namespace = pod["metadata"]["namespace"]

        def kubelet_reasons():
            return {e["reason"] for e in d.events(name, namespace)
                    if e.get("source") == {"component": "kubelet", "host": host}}
        d.wait(lambda: {"Pulled", "Created", "Started"} <= kubelet_reasons(), 60,
               f"the kubelet's Pulled, Created and Started events of {name}")
        for e in d.events(name, namespace):
            if e["reason"] == "Pulled":
                self.assertIn("already present on machine", e["message"], name)
        self.assertFalse([e for e in d.events(name, namespace) if e["reason"] == "Pulling"],
                         f"{name}: the kubelet tried to pull")

    def test_a_job_from_the_login_pod_runs_in_worker_pods_the_controller_pod_resumed(self):
        d = self.d
        d.wait_ready()
        ctld = d.get("pod", "slurmctld-0")
        self.assertEqual(ctld["spec"]["serviceAccountName"], "k8sbridge-controller")
        self.assert_kubelet_ran(ctld, "k8sbridge-controller")
        self.assertEqual(d.worker_pods(), [], "no worker pod before Slurm asks for one")
        nodes = d.slurm_nodes()
        self.assertEqual(sorted(nodes), NODES)
        for name in NODES:
            self.assertIn("POWERED_DOWN", nodes[name]["State"], name)

        # What a user types (README): srun from the login pod, through kubectl exec,
        # as a user (nobody: in the login image and so in the jail it populated).
        d.kube.clear_requests()
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
        # The exec went to the login pod's kubelet (the stream it answered).
        self.assertIn(("exec", 101), {(r["subresource"], r["code"])
                                      for r in d.kube.requests_log()
                                      if r["resource"] == "pods" and
                                      (r["name"] or "").startswith("slurm-login")})

        pods = {p["metadata"]["name"]: p for p in d.worker_pods()}
        self.assertEqual(sorted(pods), NODES)
        controller_image = ctld["spec"]["containers"][0]["image"]
        self.assertRegex(controller_image, r"^k8sbridge-controller:")
        containers = {}
        for name, pod in pods.items():
            self.assertRegex(pod["spec"]["containers"][0]["image"], r"^k8sbridge-worker:", name)
            self.assertEqual(pod["metadata"]["labels"].get("app.kubernetes.io/managed-by"),
                             "k8sbridge", name)
            containers[name] = self.assert_kubelet_ran(pod, "k8sbridge-worker")
            self.assert_kubelet_events(pod)
        # The placement pod affinity (PlacementLabel, required): one leaf for the job.
        leaves = {d.kube.kubectl_json("get", "node", p["spec"]["nodeName"])["metadata"]
                  ["labels"][LEAF_LABEL] for p in pods.values()}
        self.assertEqual(len(leaves), 1, leaves)
        nodes = d.slurm_nodes()
        for name in NODES:
            self.assertEqual(nodes[name]["NodeAddr"], pods[name]["status"]["podIP"], name)
            # slurmd's node_features_k8s read the H100 label of its Kubernetes node
            # (tests/harness/deployment.py labels every node so).
            self.assertIn("h100", nodes[name].get("ActiveFeatures", "").split(","),
                          f"{name}: {nodes[name]}\n{d.describe()}")
        # proctrack/cgroup and task/cgroup, as shipped: each task is in its job's
        # cgroup inside the pod.
        run = d.login(["srun", "-N4", "-l", "grep", "-c", "/job_", "/proc/self/cgroup"],
                      check=False, timeout=300, user="nobody")
        self.assertEqual(run.returncode, 0, f"{run.stdout}{run.stderr}\n{d.describe()}")
        for line in run.stdout.splitlines():
            self.assertRegex(line, r"^\d+: [1-9]\d*$", run.stdout)

        # The power programs ran in the controller pod (their log is in its log
        # volume, on its node), found the API server through the entrypoint's service
        # file and authenticated with the pod's own token: nothing else here can
        # make pods.
        log = d.pod_file(ctld, "log", "k8sbridge-power.log")
        self.assertIsNotNone(log, "k8sbridge-power.log in the controller pod's log volume")
        self.assertNotRegex(log.read_text(), r"forbidden|in-cluster config")

        # SuspendTime (30 s in the demo overlay): Slurm suspends the idle nodes, and
        # k8sbridge-suspend deletes their pods; their kubelet stops the containers.
        def powered_down_without_pods():
            if d.worker_pods():
                return False
            states = d.slurm_nodes()
            return all("POWERED_DOWN" in states[n]["State"] and
                       not re.search(r"DOWN\*|DRAIN|FAIL", states[n]["State"]) for n in NODES)
        d.wait(powered_down_without_pods, 300, "the worker pods deleted after SuspendTime")
        for name, (node, cid) in containers.items():
            d.wait(lambda: cid not in node.containers(), 60,
                   f"{name}'s container gone from {node.name}'s containerd")


if __name__ == "__main__":
    unittest.main(verbosity=2)
