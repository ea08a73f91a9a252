"""deploy/: every kustomization renders with kubectl's built-in kustomize, and what
it renders holds together (docs/deploy.md, "On Kubernetes"): namespaces, the objects
each pod names, the images scripts/images.py builds, every component of
docs/deploy.md's table "What every overlay runs" in every kustomization, overlays
that differ from the base only in what a site sets, the worker pods' sizes against
slurm.conf, and the RBAC table of docs/deploy.md, which must list exactly the rules
of deploy/base/rbac.yaml."""

import copy
import functools
import json
import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

import yaml

from harness.kube import CLUSTER_DOMAIN, LEAF_LABEL, kubectl_program
from harness.paths import SOURCE_ROOT

KUBECTL = str(kubectl_program())  # the one scripts/build-kubernetes.sh built
DEPLOY = SOURCE_ROOT / "deploy"
KUSTOMIZATIONS = ["base", "overlays/demo", "overlays/example-gpu"]
NAMESPACE = "slurm"  # the controller and login pods
WORKER_NAMESPACE = "slurm-workers"  # the worker pods (k8sbridge.conf Namespace=)
# Created by the documented command, never rendered (the key is never committed).
# The Secrets a site makes before the first apply (docs/deploy.md), never committed.
OUT_OF_BAND = {("Secret", "slurm-munge-key"), ("Secret", "slurm-login-host-keys"),
               ("Secret", "slurm-db-password"), ("Secret", "slurm-sssd")}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
DEPLOY_DOC = SOURCE_ROOT / "docs" / "deploy.md"

sys.path.insert(0, str(SOURCE_ROOT / "scripts"))
import images  # noqa: E402  (scripts/images.py: the image table and tag rule)


@functools.lru_cache(maxsize=None)
def render(kustomization: str) -> list:
    """The objects `kubectl kustomize deploy/<kustomization>` renders (once per run:
    callers do not change them)."""
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


def config_files(objects: list) -> dict:
    """The slurm-conf ConfigMap's files: {name: text}."""
    return next(o["data"] for o in objects
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "slurm-conf")


def conf_keys(text: str) -> dict:
    """A Slurm-style configuration file (slurm.conf, cgroup.conf, k8sbridge.conf) as
    {key (lower case): [values, in file order]}; a line's value is all after the
    first '=' (NodeName's other words included)."""
    keys = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            keys.setdefault(key.strip().lower(), []).append(value.strip())
    return keys


def slurm_conf_keys(objects: list) -> dict:
    """slurm.conf of the slurm-conf ConfigMap as {key (lower case): [values]}."""
    return conf_keys(config_files(objects)["slurm.conf"])


def line_words(value: str) -> dict:
    """A line's value ("gpu-[001-004] CPUs=64 ..." of a NodeName line) as {key (lower
    case): value} of its Key=Value words, and its first word under the key ""."""
    words = value.split()
    out = {"": words[0] if words else ""}
    for word in words[1:]:
        key, _, v = word.partition("=")
        out[key.lower()] = v
    return out


def expand_hostlist(hostlist: str) -> set:
    """Slurm's hostlist ("gpu-[001-004,010]", "w-[0-3]", "a,b") as a set of names."""
    names = set()
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", hostlist):
        m = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part)
        if not m:
            names.add(part)
            continue
        for item in m[2].split(","):
            lo, _, hi = item.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                names.add(f"{m[1]}{i:0{len(lo)}d}{m[3]}")
    return names


def worker_templates(objects: list) -> dict:
    """{file name: pod spec} of every worker pod template in the slurm-conf ConfigMap."""
    out = {}
    for name, text in config_files(objects).items():
        if name.endswith(".yaml"):
            doc = yaml.safe_load(text)
            if isinstance(doc, dict) and doc.get("kind") == "PodTemplate":
                out[name] = doc["template"]["spec"]
    return out


def worker_container(spec: dict) -> dict:
    """The worker container, as k8sbridge-power picks it: "slurmd", else the first."""
    return next((c for c in spec["containers"] if c["name"] == "slurmd"), spec["containers"][0])


def workload_spec(objects: list, where: str) -> dict:
    """The pod spec of `where`: "worker-pod.yaml" (a file of the ConfigMap) or
    "<Kind>/<name>" of a workload."""
    if where.endswith(".yaml"):
        return worker_templates(objects)[where]
    kind, _, name = where.partition("/")
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o["spec"]["template"]["spec"]
    raise AssertionError(f"no {where} rendered")


MEBI = {"": 2**-20, "Ki": 2**-10, "Mi": 1, "Gi": 2**10, "Ti": 2**20,
        "k": 1e3 / 2**20, "M": 1e6 / 2**20, "G": 1e9 / 2**20, "T": 1e12 / 2**20}


def quantity_mib(quantity: str) -> float:
    """A Kubernetes memory quantity ("1800Gi", "64Mi", "2G") in MiB, Slurm's MB."""
    m = re.fullmatch(r"([0-9.]+)([KMGT]i|[kMGT]|)", str(quantity))
    if not m:
        raise AssertionError(f"cannot read the memory quantity {quantity!r}")
    return float(m[1]) * MEBI[m[2]]


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
                # slurmdbd runs beside slurmctld (docs/deploy.md, "Accounting"): its
                # host is the controller pod's address.
                host = re.search(r"\((.*)\)", keys["slurmctldhost"][0])[1]
                self.assertEqual(keys.get("accountingstoragehost"), [host])


def component_rows() -> list:
    """(component, where, setting) of each row of docs/deploy.md's table "What every
    overlay runs": the one list of what every kustomization must turn on."""
    text = DEPLOY_DOC.read_text()
    section = text[text.index("### What every overlay runs"):]
    section = section[:section.index("\n#", 1)] if "\n#" in section[1:] else section
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    out = []
    for row in rows:
        component, where, setting = (c.strip() for c in row.strip().strip("|").split("|"))
        out.append((component, where.strip("`"), setting))
    return out


POD_SETTING = re.compile(r"(init container|container|port|env|mount|search|token) `([^`]+)`")


def pod_has(spec: dict, form: str, value: str) -> bool:
    """Whether pod spec `spec` has the setting `form` `value` (docs/deploy.md, "What
    every overlay runs", says what each form means)."""
    containers = spec.get("containers", [])
    if form == "init container":
        return value in [c["name"] for c in spec.get("initContainers", [])]
    if form == "container":
        return value in [c["name"] for c in containers]
    if form == "port":
        return value in [p.get("name") for c in containers for p in c.get("ports", [])]
    if form == "env":
        name, _, v = value.partition("=")
        return {"name": name, "value": v} in [e for c in containers for e in c.get("env", [])]
    if form == "search":
        return value in spec.get("dnsConfig", {}).get("searches", [])
    mounts = [m for c in containers for m in c.get("volumeMounts", [])
              if m["mountPath"].rstrip("/") == value.rstrip("/")]
    if form == "mount":
        return bool(mounts)
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in mounts:  # form == "token": a root-only projected token at `value`
        projected = volumes.get(m["name"], {}).get("projected", {})
        if projected.get("defaultMode") == 0o400 and any(
                "serviceAccountToken" in source for source in projected.get("sources", [])):
            return True
    return False


def component_on(objects: list, where: str, setting: str) -> bool:
    """Whether the rendered `objects` turn on the row's setting at `where`."""
    pod = POD_SETTING.fullmatch(setting)
    if pod:
        return pod_has(workload_spec(objects, where), pod[1], pod[2])
    setting = setting.strip("`")
    text = config_files(objects).get(where)
    if text is None:
        return False
    if where == "plugstack.conf":
        wanted = setting.split()
        return any(line.split()[:len(wanted)] == wanted for line in text.splitlines()
                   if not line.lstrip().startswith("#"))
    key, has_value, value = setting.partition("=")
    values = conf_keys(text).get(key.lower(), [])
    if not has_value:
        return bool(values)
    return any(v == value or value in [i.strip() for i in v.split(",")] for v in values)


class Components(unittest.TestCase):
    """Nothing that docs/deploy.md says every overlay runs is off in any of them:
    neither for the demo nor for a test."""

    def test_the_table_is_read(self):
        rows = component_rows()
        self.assertGreater(len(rows), 10, "docs/deploy.md's table \"What every overlay runs\"")
        for component, where, setting in rows:
            with self.subTest(component=component, where=where):
                pod = where.endswith(".yaml") or "/" in where
                self.assertEqual(bool(POD_SETTING.fullmatch(setting)), pod,
                                 f"{setting}: a pod's setting is `form` `value`, a file's "
                                 "`Key=Value`")

    def test_every_kustomization_runs_every_component(self):
        rows = component_rows()
        for k in KUSTOMIZATIONS:
            objects = render(k)
            for component, where, setting in rows:
                with self.subTest(kustomization=k, component=component, where=where):
                    self.assertTrue(component_on(objects, where, setting),
                                    f"deploy/{k}: {where} lacks {setting} ({component})")


# What a site sets, and so what an overlay may change in the base's files
# (docs/deploy.md, "What every overlay runs"): Slurm-style files by key; the worker
# pod template by field of its spec and of its worker container.
SUBSTITUTIONS = {
    "slurm.conf": {"clustername", "nodename", "partitionname", "suspendtime"},
    "gres.conf": {"nodename"},
    "k8sbridge.conf": {"clustername", "nodegroup", "feature", "featurelabelprefix",
                       "placementlabel", "placementaffinity"},
}
POD_SUBSTITUTIONS = {"nodeSelector", "tolerations", "affinity", "imagePullSecrets"}
WORKER_CONTAINER_SUBSTITUTIONS = {"image", "resources"}


def without_substitutions(name: str, text: str):
    """File `name` of the ConfigMap without what a site may change in it."""
    if name.endswith(".yaml"):
        spec = copy.deepcopy(yaml.safe_load(text)["template"]["spec"])
        for field in POD_SUBSTITUTIONS:
            spec.pop(field, None)
        for field in WORKER_CONTAINER_SUBSTITUTIONS:
            worker_container(spec).pop(field, None)
        return spec
    if name == "plugstack.conf":
        return [line.split() for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    return {k: v for k, v in conf_keys(text).items() if k not in SUBSTITUTIONS.get(name, ())}


class Overlays(unittest.TestCase):
    def test_overlays_change_only_what_a_site_sets(self):
        base = config_files(render("base"))
        for k in KUSTOMIZATIONS[1:]:
            files = config_files(render(k))
            self.assertEqual(sorted(files), sorted(base), f"deploy/{k}: the ConfigMap's files")
            for name, text in base.items():
                with self.subTest(kustomization=k, file=name):
                    self.assertEqual(without_substitutions(name, files[name]),
                                     without_substitutions(name, text),
                                     f"deploy/{k}'s {name} differs from the base's in more "
                                     "than a site's substitutions")


# What slurmd, slurmstepd and munged need in a worker pod beside the jobs' memory.
WORKER_OVERHEAD_MIB = 256
# The kustomizations whose clusters are known to label every worker node with the
# placement label (tests/harness/deployment.py labels the test cluster's).
LABELLED_CLUSTERS = {"overlays/demo": LEAF_LABEL}


class WorkerPods(unittest.TestCase):
    def node_groups(self, objects):
        """(node names, NodeName line's words, pod spec of its group's template) of
        every NodeName line of slurm.conf."""
        keys = slurm_conf_keys(objects)
        bridge = conf_keys(config_files(objects)["k8sbridge.conf"])
        templates = worker_templates(objects)
        groups = [line_words(g) for g in bridge.get("nodegroup", [])]
        for line in keys.get("nodename", []):
            words = line_words(line)
            nodes = expand_hostlist(words[""])
            group = next((g for g in groups if nodes <= expand_hostlist(g["nodes"])), None)
            self.assertIsNotNone(group, f"no NodeGroup holds NodeName={words['']}")
            yield nodes, words, templates[os.path.basename(group["podtemplate"])]

    def test_real_memory_fits_in_the_worker_pods_memory_limit(self):
        for k in KUSTOMIZATIONS:
            for nodes, words, spec in self.node_groups(render(k)):
                with self.subTest(kustomization=k, nodes=words[""]):
                    limit = worker_container(spec).get("resources", {}).get(
                        "limits", {}).get("memory")
                    self.assertIsNotNone(limit, "the worker pod sets no memory limit")
                    self.assertLessEqual(int(words["realmemory"]) + WORKER_OVERHEAD_MIB,
                                         quantity_mib(limit),
                                         f"RealMemory={words['realmemory']} (MiB) and "
                                         f"{WORKER_OVERHEAD_MIB} MiB for slurmd and munged "
                                         f"exceed the pod's memory limit {limit}")

    def test_node_features_have_mappings_and_the_nodes_list_them(self):
        # node_features_k8s refuses (and slurmctld and slurmd stop) without Feature=
        # or FeatureLabelPrefix; a changeable feature a node does not list is never
        # one a job can resume it into (docs/features.md).
        for k in KUSTOMIZATIONS:
            objects = render(k)
            if "node_features/k8s" not in slurm_conf_keys(objects).get("nodefeaturesplugins", []):
                continue
            bridge = conf_keys(config_files(objects)["k8sbridge.conf"])
            features = {line_words(f)[""] for f in bridge.get("feature", [])}
            with self.subTest(kustomization=k):
                self.assertTrue(features or bridge.get("featurelabelprefix"),
                                "k8sbridge.conf has neither Feature= nor FeatureLabelPrefix=")
            for nodes, words, _ in self.node_groups(objects):
                with self.subTest(kustomization=k, nodes=words[""]):
                    listed = set(words.get("features", "").split(",")) - {""}
                    self.assertEqual(features - listed, set(), "Feature= names not in Features=")

    def test_a_required_leaf_affinity_only_where_every_node_has_the_label(self):
        for k in KUSTOMIZATIONS:
            bridge = conf_keys(config_files(render(k))["k8sbridge.conf"])
            label = bridge.get("placementlabel", [""])[-1]
            affinity = bridge.get("placementaffinity", ["required"])[-1]  # its default
            for group in map(line_words, bridge.get("nodegroup", [])):
                with self.subTest(kustomization=k, group=group[""]):
                    if group.get("placementaffinity", affinity).lower() != "required":
                        continue
                    self.assertEqual(group.get("placementlabel", label),
                                     LABELLED_CLUSTERS.get(k),
                                     "a required placement affinity on a label the cluster's "
                                     "nodes may lack leaves multi-node jobs Unschedulable")

    def test_each_login_pod_has_a_name_of_its_own_that_resolves(self):
        for k in KUSTOMIZATIONS:
            objects = render(k)
            with self.subTest(kustomization=k):
                login = next(o for o in objects if o["metadata"]["name"] == "slurm-login" and
                             o["kind"] in ("Deployment", "StatefulSet"))
                self.assertEqual(login["kind"], "StatefulSet", "pods named after their ordinal")
                self.assertNotIn("hostname", login["spec"]["template"]["spec"],
                                 "a hostname every replica shares")
                service = login["spec"]["serviceName"]
                headless = next(o for o in objects
                                if o["kind"] == "Service" and o["metadata"]["name"] == service)
                self.assertEqual(headless["spec"]["clusterIP"], "None")
                self.assertEqual(headless["spec"]["selector"],
                                 login["spec"]["selector"]["matchLabels"])
                # slurmctld and slurmstepd reach srun at the bare hostname.
                search = f"{service}.{NAMESPACE}.svc.{CLUSTER_DOMAIN}"
                for where in ("StatefulSet/slurmctld", "worker-pod.yaml"):
                    self.assertIn(search, workload_spec(objects, where).get(
                        "dnsConfig", {}).get("searches", []), where)


def debian_plugin_dir() -> str:
    """Where the k8sbridge-slurm-plugins package installs the plugins (debian/rules)."""
    rules = (SOURCE_ROOT / "debian" / "rules").read_text()
    plugindir = re.search(r"^SLURM_PLUGINDIR := (\S+)", rules, re.M)[1]
    return plugindir.replace("$(DEB_HOST_MULTIARCH)", "x86_64-linux-gnu")


class PlugstackConf(unittest.TestCase):
    def test_every_plugstack_conf_names_the_plugin_where_the_packages_put_it(self):
        texts = {"conf-templates/plugstack.conf":
                 (SOURCE_ROOT / "conf-templates" / "plugstack.conf").read_text()}
        for k in KUSTOMIZATIONS:
            texts[f"deploy/{k}"] = config_files(render(k))["plugstack.conf"]
        for where, text in texts.items():
            lines = [line.split() for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("#")]
            with self.subTest(where=where):
                self.assertTrue(lines)
                for words in lines:
                    self.assertEqual(os.path.dirname(words[1]), debian_plugin_dir(), words)


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
            kube.create_host_path_volume("db", "10Gi", ["ReadWriteOnce"], kube.dir / "db",
                                         claim=(NAMESPACE, "data-slurm-db-0"))
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
            wait_for_condition(lambda: (get("pvc", "data-slurm-db-0") or {})
                               .get("status", {}).get("phase") == "Bound", 60,
                               "the accounting database's claim bound")

            def workload_pods():
                pods = [p for ns in (NAMESPACE, WORKER_NAMESPACE)
                        for p in kube.kubectl_json("-n", ns, "get", "pods")["items"]]
                return pods if len(pods) >= 3 else None
            pods = wait_for_condition(workload_pods, 60, "the workloads' pods")
            owners = sorted({p["metadata"]["ownerReferences"][0]["kind"] for p in pods})
            self.assertEqual(owners, ["Job", "StatefulSet"])
            ctld = get("pod", "slurmctld-0")
            self.assertEqual(ctld["spec"]["serviceAccountName"], "k8sbridge-controller")
            self.assertEqual(ctld["spec"]["hostname"], "slurmctld-0")
            self.assertEqual(ctld["spec"]["subdomain"], "slurmctld")
            login = wait_for_condition(lambda: get("pod", "slurm-login-0"), 60, "the login pod")
            self.assertEqual(login["spec"]["hostname"], "slurm-login-0")
            self.assertEqual(login["spec"]["subdomain"], "slurm-login")

if __name__ == "__main__":
    unittest.main()
