"""k8sbridge-power resume/suspend against the real API server (kwok plays the nodes).

Checks the pods the real program creates (name, ownership labels, node selector
from the job's features, GPU resources, a node group's RuntimeClass, pod affinity
on the placement label), that a second resume creates nothing, that suspend
deletes only k8sbridge's pods (404 is success, a foreign pod is never touched),
that injected 503s are retried, and that a pod the API rejects (422) fails only
that node and names the reason it would set in Slurm. The Slurm side here is a slurm.conf whose slurmctld does not exist: the
program logs the DOWN/POWER_DOWN it tried (the rig tests do it against a real one).
"""

import json
import os
import subprocess
import shutil
import tempfile
import unittest
from pathlib import Path

from harness.kube import KubeCluster, wait_for_condition
from harness.paths import BUILD_ROOT

POWER = Path(os.environ.get("K8SBRIDGE_POWER",
                            BUILD_ROOT / "programs" / "power" / "k8sbridge-power"))
LEAF = "network.topology.nvidia.com/leaf"
PRODUCT = "NVIDIA-H100-80GB-HBM3"

TEMPLATE = """\
kind: PodTemplate
template:
  metadata:
    labels: {team: hpc}
  spec:
    terminationGracePeriodSeconds: 5
    containers:
    - name: slurmd
      image: registry.example/slurm-worker:24.11
"""


class PowerApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not POWER.exists():
            raise unittest.SkipTest(f"{POWER} is not built")
        cls.sim = KubeCluster(nodes=2, gpus_per_node=8, gpu_product=PRODUCT, ib_leaves=2)
        # k8sbridge-power runs as the deployment's controller ServiceAccount.
        cls.sim.apply_deploy_rbac("default")
        cls.kubeconfig = cls.sim.service_account_kubeconfig(
            "default", "k8sbridge-controller", expiration_seconds=24 * 3600)
        cls.dir = Path(tempfile.mkdtemp(prefix="power-api-"))
        (cls.dir / "worker.yaml").write_text(TEMPLATE)
        # slurmctld at a port where nothing listens: FailNode's RPC fails fast.
        (cls.dir / "slurm.conf").write_text(
            "ClusterName=hpc1\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=9\n"
            "MessageTimeout=2\nNodeName=w-[0-3] State=CLOUD\n")

    @classmethod
    def tearDownClass(cls):
        cls.sim.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.sim.clear_faults()
        status, _, pods = self.sim.request("GET", "/api/v1/namespaces/default/pods")
        self.assertEqual(status, 200)
        for pod in pods["items"]:
            self.sim.request("DELETE", f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}"
                             "?gracePeriodSeconds=0")
        self.sim.clear_requests()

    def write_conf(self, concurrency=8, group_extra=""):
        conf = self.dir / "k8sbridge.conf"
        conf.write_text(
            f"ClusterName=hpc1\nKubeconfig={self.kubeconfig}\nNamespace=default\n"
            f"Concurrency={concurrency}\nRetryDeadline=15\nPlacementLabel={LEAF}\n"
            f"LogFile={self.dir / 'power.log'}\n"
            "MungeCheck=no\n"
            f"NodeGroup=gpu Nodes=w-[0-3] PodTemplate=worker.yaml Gpus=4{group_extra}\n"
            f"Feature=h100 Selector=nvidia.com/gpu.product={PRODUCT}\n")
        return conf

    def run_power(self, *args, resume_jobs=None, concurrency=8, group_extra=""):
        env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"), HOME=str(self.dir))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        env.pop("SLURM_RESUME_FILE", None)
        if resume_jobs is not None:
            resume = self.dir / "resume.json"
            resume.write_text(json.dumps(resume_jobs))
            env["SLURM_RESUME_FILE"] = str(resume)
        argv = [str(POWER), "--config", str(self.write_conf(concurrency, group_extra)), *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)

    def pod(self, name):
        status, _, body = self.sim.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        return body if status == 200 else None

    def creates(self):
        return [r for r in self.sim.requests_log()
                if r["verb"] == "create" and r["resource"] == "pods" and not r["subresource"]]

    @staticmethod
    def job(job_id, nodes, features=None):
        return {"all_nodes_resume": nodes, "jobs": [
            {"extra": None, "job_id": job_id, "features": features, "nodes_alloc": nodes,
             "nodes_resume": nodes, "oversubscribe": "OK", "partition": "main",
             "reservation": None}]}

    def test_a_groups_runtime_class_names_the_pods_runtime(self):
        # The RuntimeClass a site's GPU stack installs (the NVIDIA container toolkit's);
        # the API server refuses a pod that names one it does not have.
        status, _, body = self.sim.request("POST", "/apis/node.k8s.io/v1/runtimeclasses", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"}, "handler": "nvidia"})
        self.assertIn(status, (201, 409), body)
        r = self.run_power("resume", "w-2", resume_jobs=self.job(9, "w-2"),
                           group_extra=" RuntimeClass=nvidia")
        self.assertEqual(r.returncode, 0, r.stderr)
        pod = self.pod("w-2")
        self.assertIsNotNone(pod, r.stderr)
        self.assertEqual(pod["spec"]["runtimeClassName"], "nvidia")
        self.assertEqual(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
                         "4")

    def test_resume_creates_rendered_pods_once(self):
        r = self.run_power("resume", "w-[0-1]", resume_jobs=self.job(7, "w-[0-1]", "h100"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("w-0", "w-1"):
            pod = self.pod(name)
            self.assertIsNotNone(pod, f"pod {name} missing; log:\n{r.stderr}")
            labels = pod["metadata"]["labels"]
            self.assertEqual(labels["app.kubernetes.io/managed-by"], "k8sbridge")
            self.assertEqual(labels["k8sbridge.io/cluster"], "hpc1")
            self.assertEqual(labels["k8sbridge.io/node"], name)
            self.assertEqual(labels["k8sbridge.io/job"], "7")
            self.assertEqual(labels["team"], "hpc")
            self.assertEqual(pod["spec"]["nodeSelector"], {"nvidia.com/gpu.product": PRODUCT})
            container = pod["spec"]["containers"][0]
            self.assertEqual(container["resources"]["requests"]["nvidia.com/gpu"], "4")
            self.assertEqual(container["resources"]["limits"]["nvidia.com/gpu"], "4")
            terms = pod["spec"]["affinity"]["podAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]
            self.assertEqual(terms[0]["topologyKey"], LEAF)
            self.assertEqual(terms[0]["labelSelector"]["matchLabels"]["k8sbridge.io/job"], "7")
        self.assertEqual(len(self.creates()), 2)
        self.assertIn("resume w-[0-1]", (self.dir / "power.log").read_text())

        # Again: the healthy pods count as success, nothing is created.
        self.sim.clear_requests()
        r = self.run_power("resume", "w-[0-1]", resume_jobs=self.job(7, "w-[0-1]", "h100"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len([c for c in self.creates() if c.get("code") == 201]), 0)

    def test_suspend_deletes_only_owned_pods(self):
        r = self.run_power("resume", "w-[0-1]", resume_jobs=self.job(8, "w-[0-1]"))
        self.assertEqual(r.returncode, 0, r.stderr)
        foreign = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "w-3", "labels": {"app": "not-k8sbridge"}},
                   "spec": {"containers": [{"name": "c", "image": "x"}]}}
        status, _, body = self.sim.request("POST", "/api/v1/namespaces/default/pods", foreign)
        self.assertEqual(status, 201, body)

        r = self.run_power("suspend", "w-[0-3]")
        self.assertEqual(r.returncode, 1, r.stderr)  # w-3 is not ours
        # Deleted: the kubelet (kwok here) removes them once their containers end.
        wait_for_condition(lambda: self.pod("w-0") is None and self.pod("w-1") is None, 60,
                           "w-0's and w-1's pods to be gone")
        self.assertIsNotNone(self.pod("w-3"))
        self.assertIn("lacks k8sbridge's ownership labels", r.stderr)
        self.assertEqual([x for x in self.sim.requests_log()
                          if x["verb"] == "delete" and x["name"] == "w-3"], [])

    def test_unavailable_answers_are_retried(self):
        self.sim.add_fault("pods", "create", 503, times=2)
        r = self.run_power("resume", "w-2", resume_jobs=self.job(9, "w-2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNotNone(self.pod("w-2"))
        self.assertEqual([c.get("code") for c in self.creates()], [503, 503, 201])

    def test_rejected_pod_fails_only_that_node(self):
        self.sim.add_fault("pods", "create", 422, times=1, message="pod refused by policy")
        # One at a time, so the first node (w-0) takes the fault.
        r = self.run_power("resume", "w-[0-1]", resume_jobs=self.job(10, "w-[0-1]"),
                           concurrency=1)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIsNone(self.pod("w-0"))
        self.assertIsNotNone(self.pod("w-1"))
        self.assertIn('node w-0: resume failed', r.stderr)
        self.assertIn('setting it DOWN and POWER_DOWN with reason "k8sbridge: admission webhook '
                      '"faults.test.k8sbridge.io" denied the request: pod refused by policy"',
                      r.stderr)
        # No slurmctld here: the attempt is logged, not hidden.
        self.assertIn("node w-0: could not set it DOWN/POWER_DOWN", r.stderr)

    def test_bad_config_touches_nothing(self):
        conf = self.dir / "broken.conf"
        conf.write_text("ClusterName=hpc1\nNodeGroup=gpu Nodes=w-[0-3] PodTemplate=missing.yaml\n")
        r = subprocess.run([str(POWER), "--config", str(conf), "resume", "w-0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.yaml", r.stderr)
        self.assertEqual(self.creates(), [])

    def test_prolog_outside_slurmctld_names_what_it_needs(self):
        env = {k: v for k, v in os.environ.items() if k != "SLURM_JOB_NODELIST"}
        r = subprocess.run([str(POWER), "prolog"], capture_output=True, text=True, timeout=60,
                           env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("SLURM_JOB_NODELIST is not set: k8sbridge-prolog is slurm.conf's "
                      "PrologSlurmctld", r.stderr)
        r = subprocess.run([str(POWER), "prolog", "w-0"], capture_output=True, text=True,
                           timeout=60, env=dict(env, SLURM_JOB_NODELIST="w-0"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("prolog: takes no arguments (the job's nodes come from "
                      "SLURM_JOB_NODELIST), got 'w-0'", r.stderr)

    def test_prolog_never_fails_the_job(self):
        # A job's nodelist that does not parse is logged, and the job goes on (a
        # PrologSlurmctld's non-zero exit would requeue or kill it).
        env = dict(os.environ, SLURM_CONF=str(self.dir / "slurm.conf"),
                   SLURM_JOB_NODELIST="w-[0-1", SLURM_JOB_ID="7")
        r = subprocess.run([str(POWER), "--config", str(self.write_conf()), "prolog"],
                           capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("prolog: SLURM_JOB_NODELIST:", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
