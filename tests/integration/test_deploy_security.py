"""The deployed form's security, as every kustomization renders it with kubectl's
built-in kustomize (docs/deploy.md, "Namespaces and Pod Security"):

- the worker pods live in a namespace of their own that enforces privileged; the
  controller and login pods in one that enforces baseline, and pass it;
- every pod sets a securityContext: no privilege escalation, every capability
  dropped but the few its program needs, the runtime's seccomp filter; only the
  worker is privileged;
- the worker namespace has its own copy of slurm-conf, equal to the controller's.
"""

import unittest

from test_deploy_manifests import KUSTOMIZATIONS, conf_namespace, pod_specs_in, render

# What Pod Security "baseline" lets a container add (its capabilities check).
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}


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
                if c["name"] in ("slurm-etc", "topology-init", "sync", "topology"):
                    self.assertEqual(added, [], c["name"])


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




if __name__ == "__main__":
    unittest.main()
