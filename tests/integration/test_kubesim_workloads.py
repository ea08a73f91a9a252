"""kubesim's workload resources and controllers (StatefulSet with volumeClaimTemplates,
Deployment/ReplicaSet, Job, PVC binding with the hostPath provisioner, Service with
Endpoints) and Pod Security admission, through kubectl 1.32 (docs/kubesim.md,
"Workloads"). kubesim runs without a kubelet or scheduler: a thread of this test plays
the kubelet, marking pods Running and Ready (label play=ready) or Succeeded/Failed
(label outcome=succeed|fail) through the status subresource."""

import json
import os
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

from harness.kubesim import KubeSim, wait_for

STS = """\
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, play: ready}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: registry.example/web:1}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
"""

DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api, play: ready}}
    spec:
      containers: [{name: c, image: registry.example/api:1}]
"""

JOBS = """\
apiVersion: batch/v1
kind: Job
metadata: {name: ok}
spec:
  template:
    metadata: {labels: {outcome: succeed}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: registry.example/job:1}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: bad}
spec:
  backoffLimit: 1
  template:
    metadata: {labels: {outcome: fail}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: registry.example/job:1}]
"""

RWX = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: jail}
spec:
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 2Gi}}
"""

PRIVILEGED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  containers:
  - name: c
    image: registry.example/x:1
    securityContext: {privileged: true}
"""


class PlayedKubelet(threading.Thread):
    """Marks pods as a kubelet would report them, by their labels."""

    def __init__(self, sim):
        super().__init__(daemon=True)
        self.sim = sim
        self.stopping = threading.Event()
        self.paused = set()  # pod names left Pending
        self.counter = 0

    def status_for(self, pod):
        labels = pod["metadata"].get("labels", {})
        self.counter += 1
        ip = f"10.232.9.{self.counter % 250 + 2}"
        if labels.get("play") == "ready":
            return {"phase": "Running", "podIP": ip,
                    "conditions": [{"type": "Ready", "status": "True"}]}
        if labels.get("outcome") in ("succeed", "fail"):
            return {"phase": "Succeeded" if labels["outcome"] == "succeed" else "Failed"}
        return None

    def run(self):
        while not self.stopping.is_set():
            code, _, body = self.sim.request("GET", "/api/v1/pods")
            for pod in body.get("items", []) if code == 200 else []:
                meta = pod["metadata"]
                if (pod["status"].get("phase") != "Pending" or "deletionTimestamp" in meta
                        or meta["name"] in self.paused):
                    continue
                status = self.status_for(pod)
                if status:
                    self.sim.request(
                        "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                        {"status": status}, content_type="application/merge-patch+json")
            self.stopping.wait(0.05)


class Workloads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.state = Path(tempfile.mkdtemp(prefix="kubesim-workloads-"))
        cls.sim = KubeSim("--fake-nodes", "2", "--kubelet-state-dir", str(cls.state))
        cls.kubelet = PlayedKubelet(cls.sim)
        cls.kubelet.start()

    @classmethod
    def tearDownClass(cls):
        cls.kubelet.stopping.set()
        cls.kubelet.join()
        cls.sim.close()
        subprocess.run(["rm", "-rf", str(cls.state)], check=False)

    def kubectl(self, *args, stdin=None, check=True, timeout=90):
        argv = ["/usr/bin/kubectl", "--kubeconfig", self.sim.kubeconfig] + list(args)
        env = dict(os.environ, HOME=str(self.sim.dir))
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                                timeout=timeout, env=env)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result

    def get(self, *args):
        result = self.kubectl("get", *args, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    def pod_names(self, selector):
        return sorted(p["metadata"]["name"] for p in self.get("pods", "-l", selector)["items"]
                      if "deletionTimestamp" not in p["metadata"])

    def test_statefulset_with_claims(self):
        self.addCleanup(self.kubectl, "delete", "pvc", "data-web-0", "data-web-1", "data-web-2",
                        "--ignore-not-found", check=False)
        self.addCleanup(self.kubectl, "delete", "-f", "-", "--ignore-not-found", stdin=STS,
                        check=False)
        self.kubelet.paused.add("web-0")
        self.kubectl("apply", "-f", "-", stdin=STS)
        wait_for(lambda: self.get("pod", "web-0"), what="web-0")
        # OrderedReady: the controller has seen web-0 (status counts it), not Ready, so
        # it has not made web-1.
        wait_for(lambda: self.get("sts", "web")["status"].get("replicas") == 1, what="status")
        self.assertIsNone(self.get("pod", "web-1"))
        self.kubelet.paused.clear()
        wait_for(lambda: self.get("pod", "web-1"), what="web-1 after web-0 is Ready")
        self.kubectl("rollout", "status", "sts/web", "--timeout=60s")

        pod = self.get("pod", "web-1")
        labels = pod["metadata"]["labels"]
        self.assertEqual(labels["statefulset.kubernetes.io/pod-name"], "web-1")
        self.assertEqual(labels["apps.kubernetes.io/pod-index"], "1")
        sts = self.get("sts", "web")
        self.assertEqual(labels["controller-revision-hash"], sts["status"]["updateRevision"])
        self.assertEqual((pod["spec"]["hostname"], pod["spec"]["subdomain"]), ("web-1", "web"))
        owner = pod["metadata"]["ownerReferences"][0]
        self.assertEqual((owner["kind"], owner["controller"], owner["blockOwnerDeletion"]),
                         ("StatefulSet", True, True))
        claim_volume = [v for v in pod["spec"]["volumes"] if v["name"] == "data"][0]
        self.assertEqual(claim_volume["persistentVolumeClaim"]["claimName"], "data-web-1")

        for ordinal in (0, 1):
            pvc = wait_for(lambda: (lambda c: c if c and c["status"]["phase"] == "Bound" else None)(
                self.get("pvc", f"data-web-{ordinal}")), what="claim bound")
            self.assertEqual(pvc["spec"]["storageClassName"], "standard")
            self.assertEqual(pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"], "yes")
            pv = self.get("pv", pvc["spec"]["volumeName"])
            self.assertEqual(pv["metadata"]["name"], "pvc-" + pvc["metadata"]["uid"])
            path = Path(pv["spec"]["hostPath"]["path"])
            self.assertEqual(path, self.state / "volumes" / pv["metadata"]["name"])
            self.assertTrue(path.is_dir())
            self.assertEqual(pv["status"]["phase"], "Bound")

        # A deleted pod comes back with its name and its claim.
        old_uid = pod["metadata"]["uid"]
        self.kubectl("delete", "pod", "web-1", "--wait=false")
        wait_for(lambda: (self.get("pod", "web-1") or {}).get("metadata", {}).get("uid")
                 not in (None, old_uid), what="web-1 recreated")
        again = self.get("pod", "web-1")
        self.assertIn({"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                      again["spec"]["volumes"])

        # Endpoints of the headless service: the ready pods.
        wait_for(lambda: len((self.get("endpoints", "web") or {}).get("subsets", [])) == 2,
                 what="endpoints")

        self.kubectl("scale", "sts", "web", "--replicas=3")
        wait_for(lambda: self.get("pod", "web-2"), what="web-2")
        self.kubectl("rollout", "status", "sts/web", "--timeout=60s")
        self.kubectl("scale", "sts", "web", "--replicas=2")
        wait_for(lambda: self.pod_names("app=web") == ["web-0", "web-1"], what="scale down")
        self.assertIsNotNone(self.get("pvc", "data-web-2"))  # Retain

        # A template change rolls every pod, highest ordinal first.
        before = {n: self.get("pod", n)["metadata"]["uid"] for n in ("web-0", "web-1")}
        before_revision = self.get("sts", "web")["status"]["updateRevision"]
        self.kubectl("patch", "sts", "web", "--type", "merge", "-p",
                     '{"spec":{"template":{"metadata":{"annotations":{"rev":"2"}}}}}')
        self.kubectl("rollout", "status", "sts/web", "--timeout=60s")
        sts = self.get("sts", "web")
        self.assertEqual(sts["status"]["currentRevision"], sts["status"]["updateRevision"])
        for name in ("web-0", "web-1"):
            p = self.get("pod", name)
            self.assertNotEqual(p["metadata"]["uid"], before[name])
            self.assertEqual(p["metadata"]["annotations"]["rev"], "2")

        revisions = [r for r in self.get("controllerrevisions")["items"]
                     if r["metadata"]["name"].startswith("web-")]
        self.assertEqual(sorted((r["metadata"]["name"], r["revision"]) for r in revisions),
                         sorted([(before_revision, 1), (sts["status"]["updateRevision"], 2)]))
        history = self.kubectl("rollout", "history", "sts/web").stdout
        self.assertEqual([line.split()[0] for line in history.strip().split("\n")[-2:]], ["1", "2"])

        # Forbidden spec change.
        bad = self.kubectl("patch", "sts", "web", "--type", "merge", "-p",
                           '{"spec":{"serviceName":"other"}}', check=False)
        self.assertIn("updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                      "'template', 'updateStrategy', 'revisionHistoryLimit', "
                      "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
                      bad.stderr)

        # Deleting the set (background propagation) takes its pods, keeps the claims.
        self.kubectl("delete", "sts", "web")
        wait_for(lambda: self.pod_names("app=web") == [], what="pods collected")
        wait_for(lambda: not [r for r in self.get("controllerrevisions")["items"]
                              if r["metadata"]["name"].startswith("web-")],
                 what="revisions collected")
        self.assertIsNotNone(self.get("pvc", "data-web-0"))
        self.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=STS)
        paths = [Path(self.get("pv", self.get("pvc", f"data-web-{i}")["spec"]["volumeName"])
                      ["spec"]["hostPath"]["path"]) for i in range(3)]
        self.kubectl("delete", "pvc", "data-web-0", "data-web-1", "data-web-2")
        wait_for(lambda: not any(p.exists() for p in paths), what="volumes deleted")
        wait_for(lambda: self.get("pv")["items"] == [], what="PVs deleted")

    def test_claim_retention_policy_delete(self):
        sts = STS.split("---\n")[1].replace("name: web", "name: tmp").replace(
            "app: web", "app: tmp").replace(
            "  replicas: 2\n",
            "  replicas: 2\n  persistentVolumeClaimRetentionPolicy: "
            "{whenDeleted: Delete, whenScaled: Delete}\n")
        self.addCleanup(self.kubectl, "delete", "pvc", "data-tmp-0", "data-tmp-1",
                        "--ignore-not-found", check=False)
        self.addCleanup(self.kubectl, "delete", "sts", "tmp", "--ignore-not-found", check=False)
        self.kubectl("apply", "-f", "-", stdin=sts)
        self.kubectl("rollout", "status", "sts/tmp", "--timeout=60s")
        owner = self.get("pvc", "data-tmp-0")["metadata"]["ownerReferences"][0]
        self.assertEqual((owner["kind"], owner["name"]), ("StatefulSet", "tmp"))
        self.kubectl("scale", "sts", "tmp", "--replicas=1")
        wait_for(lambda: self.get("pvc", "data-tmp-1") is None, what="scaled-away claim deleted")
        self.kubectl("delete", "sts", "tmp")
        wait_for(lambda: self.get("pvc", "data-tmp-0") is None, what="claims deleted with the set")

    def test_deployment_rolls_through_replicasets(self):
        self.kubectl("apply", "-f", "-", stdin=DEPLOY)
        self.kubectl("rollout", "status", "deploy/api", "--timeout=60s")
        rs = self.get("rs", "-l", "app=api")["items"]
        self.assertEqual(len(rs), 1)
        rs_hash = rs[0]["metadata"]["labels"]["pod-template-hash"]
        self.assertEqual(rs[0]["metadata"]["name"], "api-" + rs_hash)
        pods = self.pod_names("app=api")
        self.assertEqual(len(pods), 1)
        self.assertTrue(pods[0].startswith(f"api-{rs_hash}-") and len(pods[0]) == len(f"api-{rs_hash}-") + 5)
        self.kubectl("delete", "pod", pods[0], "--wait=false")
        wait_for(lambda: len(self.pod_names("app=api")) == 1 and self.pod_names("app=api") != pods,
                 what="replacement pod")
        self.kubectl("set", "image", "deploy/api", "c=registry.example/api:2")
        self.kubectl("rollout", "status", "deploy/api", "--timeout=60s")
        rs = {r["metadata"]["name"]: r for r in self.get("rs", "-l", "app=api")["items"]}
        self.assertEqual(len(rs), 2)
        self.assertEqual(rs["api-" + rs_hash]["spec"]["replicas"], 0)
        deploy = self.get("deploy", "api")
        conditions = {c["type"]: c for c in deploy["status"]["conditions"]}
        self.assertEqual(conditions["Available"]["status"], "True")
        self.assertEqual(conditions["Progressing"]["reason"], "NewReplicaSetAvailable")
        self.kubectl("delete", "-f", "-", stdin=DEPLOY)
        wait_for(lambda: self.pod_names("app=api") == [] and self.get("rs", "-l", "app=api")["items"] == [],
                 what="deployment collected")

    def test_jobs_complete_and_fail(self):
        self.kubectl("apply", "-f", "-", stdin=JOBS)
        self.kubectl("wait", "--for=condition=complete", "job/ok", "--timeout=60s")
        job = self.get("job", "ok")
        self.assertEqual(job["status"]["succeeded"], 1)
        self.assertIn("completionTime", job["status"])
        types = [c["type"] for c in job["status"]["conditions"]]
        self.assertEqual(types, ["SuccessCriteriaMet", "Complete"])
        pod = self.get("pods", "-l", "job-name=ok")["items"][0]
        self.assertEqual(pod["metadata"]["labels"]["batch.kubernetes.io/controller-uid"],
                         job["metadata"]["uid"])
        self.assertNotIn("finalizers", pod["metadata"])  # job-tracking removed once counted
        # backoffLimit 1: two failed pods (the second after the 10 s backoff), then Failed.
        self.kubectl("wait", "--for=condition=failed", "job/bad", "--timeout=90s", timeout=120)
        job = self.get("job", "bad")
        self.assertEqual(job["status"]["failed"], 2)
        failed = [c for c in job["status"]["conditions"] if c["type"] in ("FailureTarget", "Failed")]
        self.assertEqual([(c["type"], c["reason"]) for c in failed],
                         [("FailureTarget", "BackoffLimitExceeded"), ("Failed", "BackoffLimitExceeded")])
        self.kubectl("delete", "-f", "-", stdin=JOBS)
        wait_for(lambda: self.get("pods", "-l", "batch.kubernetes.io/job-name")["items"] == [],
                 what="job pods collected")

    def test_read_write_many_claim_gets_a_host_path_volume(self):
        self.kubectl("apply", "-f", "-", stdin=RWX)
        pvc = wait_for(lambda: (lambda c: c if c["status"]["phase"] == "Bound" else None)(
            self.get("pvc", "jail")), what="jail bound")
        self.assertEqual(pvc["spec"]["storageClassName"], "standard")
        self.assertEqual(pvc["status"]["accessModes"], ["ReadWriteMany"])
        self.assertEqual(pvc["status"]["capacity"]["storage"], "2Gi")
        self.assertIn("kubernetes.io/pvc-protection", pvc["metadata"]["finalizers"])
        pv = self.get("pv", pvc["spec"]["volumeName"])
        self.assertEqual(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete")
        self.assertEqual(pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
                         "kubernetes.io/host-path")
        path = Path(pv["spec"]["hostPath"]["path"])
        self.assertTrue(path.is_dir())
        self.kubectl("delete", "-f", "-", stdin=RWX)
        wait_for(lambda: not path.exists(), what="volume directory removed")

    def test_pod_security_admission(self):
        self.kubectl("create", "namespace", "locked")
        self.kubectl("label", "namespace", "locked", "pod-security.kubernetes.io/enforce=baseline")
        self.kubectl("create", "namespace", "open")
        self.kubectl("label", "namespace", "open", "pod-security.kubernetes.io/enforce=privileged")
        try:
            refused = self.kubectl("-n", "locked", "apply", "-f", "-", stdin=PRIVILEGED_POD,
                                   check=False)
            self.assertNotEqual(refused.returncode, 0)
            self.assertIn('Error from server (Forbidden): error when creating "STDIN": pods "priv" '
                          'is forbidden: violates PodSecurity "baseline:latest": privileged '
                          '(container "c" must not set securityContext.privileged=true)',
                          refused.stderr)
            self.kubectl("-n", "open", "apply", "-f", "-", stdin=PRIVILEGED_POD)
            # A workload's template only warns.
            warned = self.kubectl("-n", "locked", "apply", "-f", "-",
                                  stdin=DEPLOY.replace("containers: [{name: c, image: registry.example/api:1}]",
                                                       "containers: [{name: c, image: registry.example/api:1, "
                                                       "securityContext: {privileged: true}}]"))
            self.assertIn('Warning: would violate PodSecurity "baseline:latest": privileged '
                          '(container "c" must not set securityContext.privileged=true)',
                          warned.stderr)
        finally:
            self.kubectl("delete", "namespace", "locked", "open", "--wait=false", check=False)

    def test_services_tables_and_cluster_ips(self):
        svc = ("apiVersion: v1\nkind: Service\nmetadata: {name: plain}\n"
               "spec:\n  selector: {app: x}\n  ports: [{name: http, port: 80}]\n")
        self.kubectl("apply", "-f", "-", stdin=svc)
        ip = self.get("svc", "plain")["spec"]["clusterIP"]
        self.assertTrue(ip.startswith("10.96."), ip)
        # A changed port list through client-side apply (a strategic-merge patch).
        self.kubectl("apply", "-f", "-", stdin=svc.replace(
            "ports: [{name: http, port: 80}]",
            "ports: [{name: http, port: 80}, {name: https, port: 443}]"))
        self.assertEqual([p["port"] for p in self.get("svc", "plain")["spec"]["ports"]], [80, 443])
        self.assertEqual(self.get("svc", "plain")["spec"]["clusterIP"], ip)
        table = self.kubectl("get", "svc", "plain").stdout.split("\n")
        self.assertEqual(table[0].split(), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"])
        self.assertEqual(table[1].split()[:5], ["plain", "ClusterIP", ip, "<none>", "80/TCP,443/TCP"])
        taken = self.kubectl("apply", "-f", "-", check=False, stdin=svc.replace(
            "name: plain}", "name: twin}").replace("spec:\n", f"spec:\n  clusterIP: {ip}\n"))
        self.assertIn(f'The Service "twin" is invalid: spec.clusterIPs: Invalid value: '
                      f'[]string{{"{ip}"}}: failed to allocate IP {ip}: provided IP is already '
                      f'allocated', taken.stderr)
        classes = self.kubectl("get", "storageclass").stdout.split("\n")
        self.assertEqual(classes[1].split()[:5],
                         ["standard", "(default)", "kubernetes.io/host-path", "Delete", "Immediate"])
        self.kubectl("delete", "-f", "-", stdin=svc)

    def test_validation_refuses_mismatched_selectors(self):
        bad = STS.split("---\n")[1].replace("selector: {matchLabels: {app: web}}",
                                            "selector: {matchLabels: {app: other}}")
        result = self.kubectl("apply", "-f", "-", stdin=bad, check=False)
        self.assertIn('The StatefulSet "web" is invalid: spec.template.metadata.labels: Invalid value: '
                      'map[string]string{"app":"web", "play":"ready"}: `selector` does not match '
                      'template `labels`', result.stderr)
        job = JOBS.split("---\n")[0].replace("      restartPolicy: Never\n", "")
        result = self.kubectl("apply", "-f", "-", stdin=job, check=False)
        self.assertIn('spec.template.spec.restartPolicy: Unsupported value: "Always": supported '
                      'values: "OnFailure", "Never"', result.stderr)
        # kubectl validates strictly by default: an unknown field is refused.
        typo = DEPLOY.replace("  replicas: 1\n", "  replicas: 1\n  replica: 2\n")
        result = self.kubectl("apply", "-f", "-", stdin=typo, check=False)
        self.assertIn('strict decoding error: unknown field "spec.replica"', result.stderr)


if __name__ == "__main__":
    unittest.main()
