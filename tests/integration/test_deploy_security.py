"""The deployed form's security, as every kustomization renders it with kubectl's
built-in kustomize (docs/deploy.md, "Namespaces and Pod Security", "Admission
policies", "NetworkPolicies"):

- the worker pods live in a namespace of their own that enforces privileged; the
  controller and login pods in one that enforces baseline, and pass it;
- every pod sets a securityContext: no privilege escalation, every capability
  dropped but the few its program needs, the runtime's seccomp filter; only the
  worker is privileged;
- the worker namespace has its own copy of slurm-conf, equal to the controller's;
- each overlay's worker pod template passes what the admission policy's parameters
  allow (tests/integration/test_deploy_rbac.py checks the policy itself on the
  real API server);
- NetworkPolicies let only the cluster's namespaces reach slurmctld's 6817 and
  slurmd's 6818, and leave every other port as it was;
- no shipped Role or ClusterRole lets anyone exec, attach or port-forward into a
  pod or read Secrets (users get SSH); the login pods serve SSH (keys only, no
  root) with host keys from their Secret, the same users and homes everywhere;
  in directory mode every pod that looks users up has the sssd sidecar, which
  starts before its containers, and they see only its socket, read-only."""

import re
import unittest

from harness.deployment import WORKER_NAMESPACE
from test_deploy_manifests import KUSTOMIZATIONS, conf_namespace, pod_specs_in, render

# What Pod Security "baseline" lets a container add (its capabilities check).
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}
# The environment variables that name a program the worker runs as root.
PROGRAM_ENV = {"K8SBRIDGE_SLURMD", "K8SBRIDGE_MUNGED", "K8SBRIDGE_JAIL_PREPARE"}
SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib64", "/usr")
SAFE_VOLUMES = {"configMap", "secret", "emptyDir", "persistentVolumeClaim", "projected",
                "downwardAPI"}


def find(objects, kind, name, namespace):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name
                and o["metadata"].get("namespace") == namespace)


def controller_conf(objects) -> str:
    return next(o["data"]["k8sbridge.conf"] for o in objects if o["kind"] == "ConfigMap"
                and o["metadata"]["name"] == "slurm-conf"
                and o["metadata"]["namespace"] == "slurm")


def namespaces(objects) -> dict:
    return {o["metadata"]["name"]: o["metadata"].get("labels", {}) for o in objects
            if o["kind"] == "Namespace"}


def policy_refusals(pod_spec: dict, params: dict, worker_command: str) -> list:
    """What admission.yaml's k8sbridge-controller-pods would refuse in a pod rendered
    from this template (k8sbridge-power adds the command when the template has none,
    and K8SBRIDGE_* variables)."""
    out = []
    config_volumes = {v["name"] for v in pod_spec.get("volumes", [])
                      if {"configMap", "secret", "projected", "downwardAPI"} & set(v)}
    images = [p for p in params.get("images", "").split(",") if p]
    env_names = [n for n in params.get("env", "").split(",") if n]
    if pod_spec.get("serviceAccountName", "default") != params.get("serviceAccount"):
        out.append(f"serviceAccountName {pod_spec.get('serviceAccountName')}")
    for f in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(f):
            out.append(f)
    for v in pod_spec.get("volumes", []):
        if not SAFE_VOLUMES & set(v):
            out.append(f"volume {v['name']}")
    for c in pod_spec["containers"] + pod_spec.get("initContainers", []):
        name = c["name"]
        if not any(c["image"].startswith(p) for p in images):
            out.append(f"{name}: image {c['image']} not in {images}")
        if c.get("command", [worker_command]) != [worker_command] or c.get("args"):
            out.append(f"{name}: command {c.get('command')} {c.get('args')}")
        if "envFrom" in c or "lifecycle" in c:
            out.append(f"{name}: envFrom or lifecycle")
        for e in c.get("env", []):
            if not (e["name"].startswith("K8SBRIDGE_") or e["name"] in env_names):
                out.append(f"{name}: env {e['name']}")
            if e["name"] in PROGRAM_ENV and e.get("value") != params.get(e["name"]):
                out.append(f"{name}: env {e['name']}={e.get('value')!r}")
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if "exec" in c.get(probe, {}):
                out.append(f"{name}: exec {probe}")
        for m in c.get("volumeMounts", []):
            sub_path = "subPath" in m or "subPathExpr" in m
            if sub_path and m["name"] not in config_volumes or any(
                    m["mountPath"] == d or m["mountPath"].startswith(d + "/")
                    for d in SYSTEM_DIRS):
                out.append(f"{name}: mount {m['mountPath']}")
    return out


class PodSecurity(unittest.TestCase):
    def test_workers_alone_in_a_privileged_namespace_the_rest_baseline(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                levels = {ns: labels.get("pod-security.kubernetes.io/enforce")
                          for ns, labels in namespaces(objects).items()}
                worker_ns = conf_namespace(controller_conf(objects))
                self.assertEqual(levels[worker_ns], "privileged")
                for where, ns, spec in pod_specs_in(objects):
                    if where == "worker-pod.yaml":
                        self.assertEqual(ns, worker_ns)
                    elif where != "Job/slurm-jail-populate":
                        # The controller and login pods: a baseline namespace.
                        self.assertEqual(levels[ns], "baseline", where)

    def test_every_pod_sets_a_security_context(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                for where, _, spec in pod_specs_in(render(k)):
                    pod_seccomp = spec.get("securityContext", {}).get("seccompProfile")
                    for c in spec.get("initContainers", []) + spec["containers"]:
                        sc = c.get("securityContext")
                        self.assertIsNotNone(sc, f"{where} {c['name']}")
                        if where == "worker-pod.yaml":
                            # slurmd manages cgroups and mounts the jail; a privileged
                            # container runs without seccomp whatever the pod says.
                            self.assertTrue(sc.get("privileged"), where)
                            continue
                        self.assertFalse(sc.get("privileged", False), where)
                        self.assertIs(sc.get("allowPrivilegeEscalation"), False,
                                      f"{where} {c['name']}")
                        caps = sc.get("capabilities", {})
                        self.assertEqual(caps.get("drop"), ["ALL"], f"{where} {c['name']}")
                        self.assertLessEqual(set(caps.get("add", [])), BASELINE_CAPABILITIES,
                                             f"{where} {c['name']}")
                        self.assertEqual(sc.get("seccompProfile", pod_seccomp),
                                         {"type": "RuntimeDefault"}, f"{where} {c['name']}")

    def test_the_controller_sidecars_and_init_steps_keep_no_capability(self):
        for where, _, spec in pod_specs_in(render("base")):
            if where != "StatefulSet/slurmctld":
                continue
            for c in spec.get("initContainers", []) + spec["containers"]:
                added = c["securityContext"].get("capabilities", {}).get("add", [])
                if c["name"] in ("slurm-etc", "topology-init", "sync", "topology", "accounts"):
                    self.assertEqual(added, [], c["name"])


class Users(unittest.TestCase):
    """Users come in over SSH as themselves (docs/deploy.md, "Users", "Security
    model"): nothing shipped lets anyone into a pod or at its Secrets."""

    # A pod's shell (as its root: the munge key), and the Secrets themselves.
    INTO_PODS = {"pods/exec", "pods/attach", "pods/portforward", "secrets", "*"}

    def test_no_shipped_role_grants_exec_attach_or_secrets(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                for o in render(k):
                    if o["kind"] not in ("Role", "ClusterRole"):
                        continue
                    for rule in o.get("rules", []):
                        where = f"{k}: {o['kind']}/{o['metadata']['name']} {rule}"
                        self.assertFalse(self.INTO_PODS & set(rule.get("resources", [])),
                                         where)
                        self.assertNotIn("*", rule.get("verbs", []), where)
                    self.assertNotIn("aggregationRule", o, o["metadata"]["name"])

    def test_the_login_pods_serve_ssh_with_the_site_users_and_homes(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                service = find(objects, "Service", "slurm-login-ssh", "slurm")
                self.assertEqual(service["spec"]["type"], "NodePort")
                self.assertEqual([(p["port"], p["targetPort"]) for p in service["spec"]["ports"]],
                                 [(22, "ssh")])
                spec = next(s for where, _, s in pod_specs_in(objects)
                            if where == "StatefulSet/slurm-login")
                self.assertIs(spec.get("automountServiceAccountToken"), False)
                volumes = {v["name"]: v for v in spec["volumes"]}
                self.assertEqual(volumes["host-keys"]["secret"]["secretName"],
                                 "slurm-login-host-keys")
                self.assertEqual(volumes["host-keys"]["secret"]["defaultMode"], 0o400)
                self.assertEqual(volumes["munge-key"]["secret"]["defaultMode"], 0o400)
                command = " ".join(spec["containers"][0]["args"])
                for option in ("PasswordAuthentication=no", "KbdInteractiveAuthentication=no",
                               "PermitRootLogin=no", "AuthorizedKeysFile=.ssh/authorized_keys"):
                    self.assertIn(f"-o {option}", command)
                # Every namespace's users and homes are the same.
                for ns in ("slurm", WORKER_NAMESPACE):
                    self.assertEqual(find(objects, "ConfigMap", "slurm-users", ns)["data"],
                                     find(objects, "ConfigMap", "slurm-users", "slurm")["data"])
                    self.assertEqual(find(objects, "PersistentVolumeClaim", "slurm-home", ns)
                                     ["spec"]["accessModes"], ["ReadWriteMany"])


    # Directory mode (deploy/components/sssd): the pods whose containers look users
    # up, and those containers.
    DIRECTORY_LOOKUPS = {"StatefulSet/slurm-login": {"login"},
                         "StatefulSet/slurmctld": {"slurmctld", "slurmdbd", "accounts"},
                         "Job/slurm-jail-populate": {"populate"}}

    def test_directory_mode_runs_sssd_before_every_lookup(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                group = find(objects, "ConfigMap", "slurm-users", "slurm")["data"][
                    "directory-group"]
                directory = any(line.split("#", 1)[0].strip() for line in group.splitlines())
                specs = {where: spec for where, _, spec in pod_specs_in(objects)}
                for where, users in self.DIRECTORY_LOOKUPS.items():
                    spec = specs[where]
                    sidecars = [c for c in spec.get("initContainers", []) if c["name"] == "sssd"]
                    self.assertEqual(len(sidecars), int(directory), f"{k} {where}")
                    if not directory:
                        continue
                    # A native sidecar, first among the init containers: the rest
                    # of the pod starts once its startup probe passes.
                    self.assertEqual(spec["initContainers"][0]["name"], "sssd", where)
                    self.assertEqual(sidecars[0].get("restartPolicy"), "Always", where)
                    self.assertIn("startupProbe", sidecars[0], where)
                    volumes = {v["name"]: v for v in spec["volumes"]}
                    self.assertEqual(volumes["sssd-conf"]["secret"],
                                     {"secretName": "slurm-sssd", "defaultMode": 0o400,
                                      "optional": True}, where)
                    for c in spec["containers"]:
                        mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
                        pipes = mounts.get("/var/lib/sss/pipes")
                        self.assertEqual(pipes and (pipes["name"], pipes.get("readOnly")),
                                         ("sss-pipes", True) if c["name"] in users else None,
                                         f"{where} {c['name']}")
                        self.assertNotIn("/etc/sssd-conf", mounts, f"{where} {c['name']}")


class WorkerNamespace(unittest.TestCase):
    def test_the_worker_namespace_holds_what_the_worker_pods_mount(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                worker_ns = conf_namespace(controller_conf(objects))
                copy = find(objects, "ConfigMap", "slurm-conf", worker_ns)
                self.assertEqual(copy["data"], find(objects, "ConfigMap", "slurm-conf",
                                                    "slurm")["data"])
                self.assertEqual(find(objects, "PersistentVolumeClaim", "slurm-jail",
                                      worker_ns)["metadata"]["name"], "slurm-jail")
                self.assertEqual(namespaces(objects)[worker_ns].get("k8sbridge.io/worker-pods"),
                                 "true", "the admission policy's binding selects it")

    def test_each_worker_template_passes_the_admission_policy_parameters(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                conf = controller_conf(objects)
                worker_ns = conf_namespace(conf)
                params = find(objects, "ConfigMap", "k8sbridge-worker-policy", worker_ns)["data"]
                command = re.search(r"^WorkerCommand=(\S+)", conf, re.M)
                command = command[1] if command else "/usr/sbin/k8sbridge-worker"
                self.assertEqual(params["command"], command)
                for where, _, spec in pod_specs_in(objects):
                    if where == "worker-pod.yaml":
                        self.assertEqual(policy_refusals(spec, params, command), [])

    def test_a_pod_not_from_the_template_breaks_the_parameters(self):
        # The check above is not vacuous: what an attacker's pod would add is caught.
        params = find(render("base"), "ConfigMap", "k8sbridge-worker-policy",
                      "slurm-workers")["data"]
        cmd = params["command"]
        ok = {"serviceAccountName": "k8sbridge-worker", "containers": [
            {"name": "slurmd", "image": "k8sbridge-worker:1", "env": [
                {"name": "K8SBRIDGE_JAIL_PREPARE", "value": params["K8SBRIDGE_JAIL_PREPARE"]}]}]}
        self.assertEqual(policy_refusals(ok, params, cmd), [])
        bad = [
            {**ok, "hostPID": True},
            {**ok, "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
            {**ok, "containers": [{"name": "x", "image": "debian:trixie"}]},
            {**ok, "containers": [{"name": "x", "image": "k8sbridge-worker:1",
                                   "command": ["sh", "-c", "id"]}]},
            {**ok, "containers": [{"name": "x", "image": "k8sbridge-worker:1",
                                   "env": [{"name": "LD_PRELOAD", "value": "/jail/tmp/x"}]}]},
            {**ok, "containers": [{"name": "x", "image": "k8sbridge-worker:1", "env": [
                {"name": "K8SBRIDGE_JAIL_PREPARE", "value": "sh -c id"}]}]},
            {**ok, "containers": [{"name": "x", "image": "k8sbridge-worker:1", "volumeMounts": [
                {"name": "jail", "mountPath": "/usr/sbin", "subPath": "tmp"}]}]},
        ]
        for pod in bad:
            self.assertNotEqual(policy_refusals(pod, params, cmd), [], pod)


def selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def port_open_to(policy: dict, port: int, protocol="TCP"):
    """The `from` lists of the policy's rules that allow `port`; [] means from anywhere."""
    for rule in policy["spec"].get("ingress", []):
        for p in rule.get("ports", []):
            if p.get("protocol", "TCP") == protocol and (
                    p["port"] == port or p["port"] <= port <= p.get("endPort", p["port"])):
                yield rule.get("from", [])


class NetworkPolicies(unittest.TestCase):
    def test_slurm_ports_only_from_the_cluster_namespaces_other_ports_open(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                ns_labels = namespaces(objects)
                worker_ns = conf_namespace(controller_conf(objects))
                ctld = find(objects, "StatefulSet", "slurmctld", "slurm")
                ctld_labels = ctld["spec"]["template"]["metadata"]["labels"]
                # k8sbridge-power's ownership label on every worker pod.
                worker_labels = {"app.kubernetes.io/managed-by": "k8sbridge"}
                # slurmctld's, slurmdbd's beside it, slurmd's.
                for ns, labels, port in (("slurm", ctld_labels, 6817),
                                         ("slurm", ctld_labels, 6819),
                                         (worker_ns, worker_labels, 6818)):
                    policies = [o for o in objects if o["kind"] == "NetworkPolicy"
                                and o["metadata"]["namespace"] == ns
                                and selects(o["spec"]["podSelector"], labels)]
                    self.assertTrue(policies, f"no NetworkPolicy selects the pods of {port}")
                    sources = [f for pol in policies for f in port_open_to(pol, port)]
                    self.assertTrue(sources, f"{port} is closed to everyone")
                    for frm in sources:
                        self.assertTrue(frm, f"{port} is open to every source")
                        for peer in frm:
                            self.assertEqual(set(peer), {"namespaceSelector"}, peer)
                            reached = {n for n, lab in ns_labels.items()
                                       if selects(peer["namespaceSelector"], lab)}
                            self.assertEqual(reached, {"slurm", worker_ns}, peer)
                    # Every other port stays as open as it was, e.g. srun's and metrics.
                    for other in (port - 1, port + 1, 8080, 60001):
                        self.assertIn([], [f for pol in policies
                                           for f in port_open_to(pol, other)], other)

    def test_the_database_only_from_the_controller_pod(self):
        for k in KUSTOMIZATIONS:
            with self.subTest(kustomization=k):
                objects = render(k)
                db = find(objects, "StatefulSet", "slurm-db", "slurm")
                db_labels = db["spec"]["template"]["metadata"]["labels"]
                ctld = find(objects, "StatefulSet", "slurmctld", "slurm")
                ctld_labels = ctld["spec"]["template"]["metadata"]["labels"]
                policies = [o for o in objects if o["kind"] == "NetworkPolicy"
                            and o["metadata"]["namespace"] == "slurm"
                            and selects(o["spec"]["podSelector"], db_labels)]
                self.assertTrue(policies, "no NetworkPolicy selects the database's pod")
                sources = [f for pol in policies for f in port_open_to(pol, 3306)]
                self.assertTrue(sources, "3306 is closed to everyone")
                for frm in sources:
                    self.assertTrue(frm, "3306 is open to every source")
                    for peer in frm:
                        # A podSelector alone: pods of the policy's own namespace.
                        self.assertEqual(set(peer), {"podSelector"}, peer)
                        self.assertTrue(selects(peer["podSelector"], ctld_labels), peer)
                        login = {"app.kubernetes.io/name": "slurm-login"}
                        self.assertFalse(selects(peer["podSelector"], login), peer)
                # Nothing else reaches it.
                for other in (22, 3305, 3307, 6817, 60001):
                    self.assertEqual([f for pol in policies for f in port_open_to(pol, other)],
                                     [], other)


if __name__ == "__main__":
    unittest.main()
