"""deploy/: every kustomization renders with kubectl's built-in kustomize, and what
it renders holds together (docs/deploy.md, "On Kubernetes"): namespaces, the objects
each pod names, the images scripts/images.py builds, and the RBAC table of
docs/deploy.md, which must list exactly the rules of deploy/base/rbac.yaml."""

import json
import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

import yaml

from harness.kube import kubectl_program
from harness.paths import SOURCE_ROOT

KUBECTL = str(kubectl_program())  # the one scripts/build-kubernetes.sh built
DEPLOY = SOURCE_ROOT / "deploy"
KUSTOMIZATIONS = ["base", "overlays/demo", "overlays/example-gpu"]
NAMESPACE = "slurm"  # the controller and login pods
WORKER_NAMESPACE = "slurm-workers"  # the worker pods (k8sbridge.conf Namespace=)
# Created by the documented command, never rendered (the key is never committed).
OUT_OF_BAND = {("Secret", "slurm-munge-key")}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

sys.path.insert(0, str(SOURCE_ROOT / "scripts"))
import images  # noqa: E402  (scripts/images.py: the image table and tag rule)


def render(kustomization: str) -> list:
    out = subprocess.run([KUBECTL, "kustomize", str(DEPLOY / kustomization)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"kubectl kustomize deploy/{kustomization}: {out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def conf_namespace(k8sbridge_conf: str) -> str:
    """Namespace= of a k8sbridge.conf: where its worker pods live."""
    return re.search(r"^Namespace=(\S+)", k8sbridge_conf, re.M)[1]


def pod_specs_in(objects: list):
    """(where, namespace, pod spec) of every workload's template and of the worker pod
    template of the slurm-conf ConfigMap that k8sbridge-power reads (the controller's,
    in slurm), whose pods live in its k8sbridge.conf's Namespace=."""
    for o in objects:
        spec = o.get("spec", {})
        ns = o["metadata"].get("namespace")
        if o["kind"] in ("StatefulSet", "Deployment", "Job"):
            yield f'{o["kind"]}/{o["metadata"]["name"]}', ns, spec["template"]["spec"]
        if (o["kind"] == "ConfigMap" and ns == NAMESPACE and
                "worker-pod.yaml" in o.get("data", {})):
            tmpl = yaml.safe_load(o["data"]["worker-pod.yaml"])
            yield ("worker-pod.yaml", conf_namespace(o["data"]["k8sbridge.conf"]),
                   tmpl["template"]["spec"])


def pod_specs(objects: list):
    """(where, pod spec) of pod_specs_in."""
    for where, _, spec in pod_specs_in(objects):
        yield where, spec


def references(spec: dict):
    """(kind, name) of every object a pod spec needs to start."""
    yield "ServiceAccount", spec.get("serviceAccountName", "default")
    for v in spec.get("volumes", []):
        if "configMap" in v:
            yield "ConfigMap", v["configMap"]["name"]
        if "secret" in v:
            yield "Secret", v["secret"]["secretName"]
        if "persistentVolumeClaim" in v:
            yield "PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]


def slurm_version() -> str:
    """The Slurm the tests run (and the packages and images are built for)."""
    header = Path(os.environ["K8SBRIDGE_SLURM_PREFIX"]) / "include/slurm/slurm_version.h"
    out = subprocess.run(["sh", str(SOURCE_ROOT / "scripts" / "slurm-version.sh"), str(header)],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


class Render(unittest.TestCase):
    def test_every_kustomization_renders_and_holds_together(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                have = {(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
                        for o in objects}
                for o in objects:
                    ns = o["metadata"].get("namespace")
                    where = f'{o["kind"]}/{o["metadata"]["name"]}'
                    if o["kind"] in CLUSTER_SCOPED:
                        self.assertIsNone(ns, where)
                    elif o["metadata"]["name"] == "k8sbridge-node-events":
                        self.assertEqual(ns, "default", where)
                    else:
                        self.assertIn(ns, (NAMESPACE, WORKER_NAMESPACE), where)
                    for s in o.get("subjects", []):
                        self.assertIn(("ServiceAccount", s["name"], s.get("namespace")), have,
                                      f"{where} subject")
                for where, ns, spec in pod_specs_in(objects):
                    for ref in references(spec):
                        if ref not in OUT_OF_BAND:
                            self.assertIn((*ref, ns), have,
                                          f"{where} needs {ref[0]} {ref[1]} in {ns}")

    def test_images_are_the_ones_scripts_images_py_builds(self):
        tag = images.tag(slurm_version())
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                for where, spec in pod_specs(render(k)):
                    for c in spec.get("initContainers", []) + spec["containers"]:
                        repo, _, image_tag = c["image"].rpartition(":")
                        self.assertIn(repo.rsplit("/", 1)[-1], images.IMAGES, where)
                        self.assertEqual(image_tag, tag, f"{where} container {c['name']}")

    def test_only_the_workers_need_more_than_baseline(self):
        # The namespace enforces privileged for the worker pods' sake; every other pod
        # must pass baseline (the namespace audits it): no privilege, no host paths.
        for where, spec in pod_specs(render("base")):
            privileged = any(c.get("securityContext", {}).get("privileged")
                             for c in spec["containers"])
            host = any("hostPath" in v for v in spec.get("volumes", [])) or any(
                spec.get(f) for f in ("hostNetwork", "hostPID", "hostIPC"))
            self.assertEqual(privileged, where == "worker-pod.yaml", where)
            self.assertFalse(host, where)


def rbac_rules() -> set:
    """(account, scope, group, resource, verb) granted by deploy/base/rbac.yaml."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "base" / "rbac.yaml").read_text()) if d]
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"].endswith("Role")}
    granted = set()
    for b in (d for d in docs if d["kind"].endswith("Binding")):
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
        scope = b["metadata"].get("namespace", "cluster" if b["kind"] == "ClusterRoleBinding"
                                  else NAMESPACE)  # the kustomization's namespace
        for s in b["subjects"]:
            for rule in role["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            granted.add((s["name"], scope, g, r, v))
    return granted


def documented_rules() -> set:
    """The same tuples, read from the RBAC table of docs/deploy.md."""
    text = (SOURCE_ROOT / "docs" / "deploy.md").read_text()
    table = text[text.index("### RBAC"):]
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # no header
    documented, account = set(), None
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        account = cells[0].strip("`") or account
        m = re.match(r"(?:`(?P<group>[a-z0-9.]+)` )?(?P<res>[a-z/]+)(?P<where>[^:]*):"
                     r" (?P<verbs>.*)", cells[1])
        if not m:
            continue  # "none": an account without rules
        named = re.search(r"`([a-z0-9-]+)`", m["where"])
        scope = (named[1] if named else
                 "cluster" if m["res"].startswith("nodes") else NAMESPACE)
        for verb in re.findall(r"`([a-z]+)`", m["verbs"]):
            documented.add((account, scope, m["group"] or "", m["res"], verb))
    return documented


def slurm_conf_keys(objects: list) -> dict:
    """slurm.conf of the slurm-conf ConfigMap as {key (lower case): [values]}."""
    conf = next(o["data"]["slurm.conf"] for o in objects
                if o["kind"] == "ConfigMap" and "slurm.conf" in o.get("data", {}))
    keys = {}
    for line in conf.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            keys.setdefault(key.strip().lower(), []).append(value.strip())
    return keys


class SlurmConf(unittest.TestCase):
    def test_what_the_manifests_promise_holds_in_every_slurm_conf(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                keys = slurm_conf_keys(render(k))
                # idle_on_node_suspend clears an admin's DRAIN and FAIL whenever a
                # node powers down (Slurm's power_save.c): never in ours.
                params = ",".join(keys.get("slurmctldparameters", [])).split(",")
                self.assertNotIn("idle_on_node_suspend", params)
                # A job starts once its nodes are up, and Slurm hands ResumeProgram
                # every node at once (docs/power.md).
                self.assertEqual(keys.get("prologslurmctld"), ["/usr/sbin/k8sbridge-prolog"])
                self.assertEqual(keys.get("resumerate"), ["0"])
                self.assertEqual(keys.get("suspendrate"), ["0"])
                # An admin's DOWN stays DOWN (2 returns any DOWN node that registers).
                self.assertEqual(keys.get("returntoservice"), ["1"])


class RbacTable(unittest.TestCase):
    def test_docs_list_exactly_the_granted_rules(self):
        granted, documented = rbac_rules(), documented_rules()
        self.assertEqual(sorted(granted - documented), [], "granted but not in docs/deploy.md")
        self.assertEqual(sorted(documented - granted), [], "in docs/deploy.md but not granted")


class ApplyToKubernetes(unittest.TestCase):
    """`kubectl kustomize deploy/overlays/demo | kubectl apply -f -` against the real
    API server and controllers (tests/harness/kube.py), with a PersistentVolume for
    each claim as a site without a dynamic provisioner makes them: everything is
    created, the controllers make the pods and the claims bind (kwok's fake nodes
    run no containers here; tests/integration/test_deploy_e2e.py runs them)."""

    def test_the_demo_overlay_applies_and_the_controllers_act(self):
        from harness.kube import KubeCluster, wait_for_condition
        with KubeCluster(nodes=2) as kube:
            rendered = kube.kubectl("kustomize", str(DEPLOY / "overlays" / "demo")).stdout
            kube.create_host_path_volume("jail", "2Gi", ["ReadWriteMany"], kube.dir / "jail")
            kube.create_host_path_volume("state", "1Gi", ["ReadWriteOnce"], kube.dir / "state")
            for ns in (NAMESPACE, WORKER_NAMESPACE):
                kube.kubectl("create", "namespace", ns)
                kube.kubectl("-n", ns, "create", "secret", "generic", "slurm-munge-key",
                             "--from-literal=munge.key=" + "k" * 1024)
            kube.kubectl("apply", "-f", "-", input=rendered)
            for o in (d for d in yaml.safe_load_all(rendered) if d):
                ns = o["metadata"].get("namespace")
                args = ["get", o["kind"].lower() + "." + o["apiVersion"].split("/")[0]
                        if "/" in o["apiVersion"] else o["kind"].lower(), o["metadata"]["name"]]
                kube.kubectl(*(["-n", ns] if ns else []), *args)

            def get(kind, name, ns=NAMESPACE):
                r = kube.kubectl("-n", ns, "get", kind, name, "-o", "json", check=False)
                return json.loads(r.stdout) if r.returncode == 0 else None
            wait_for_condition(lambda: get("pod", "slurmctld-0"), 60, "the StatefulSet's pod")
            claim = wait_for_condition(lambda: get("pvc", "state-slurmctld-0"), 60,
                                       "its state claim")
            wait_for_condition(lambda: (get("pvc", "state-slurmctld-0") or {}).get(
                "status", {}).get("phase") == "Bound", 60, "the state claim bound")
            self.assertEqual(claim["spec"]["accessModes"], ["ReadWriteOnce"])
            wait_for_condition(lambda: (get("pvc", "slurm-jail", WORKER_NAMESPACE) or {})
                               .get("status", {}).get("phase") == "Bound", 60,
                               "the jail claim bound")

            def workload_pods():
                pods = [p for ns in (NAMESPACE, WORKER_NAMESPACE)
                        for p in kube.kubectl_json("-n", ns, "get", "pods")["items"]]
                return pods if len(pods) >= 3 else None
            pods = wait_for_condition(workload_pods, 60, "the workloads' pods")
            owners = sorted({p["metadata"]["ownerReferences"][0]["kind"] for p in pods})
            self.assertEqual(owners, ["Job", "ReplicaSet", "StatefulSet"])
            ctld = get("pod", "slurmctld-0")
            self.assertEqual(ctld["spec"]["serviceAccountName"], "k8sbridge-controller")
            self.assertEqual(ctld["spec"]["hostname"], "slurmctld-0")
            self.assertEqual(ctld["spec"]["subdomain"], "slurmctld")

if __name__ == "__main__":
    unittest.main()
