"""GPUs and health in the deployed form (docs/deploy.md, "GPUs"): in every
kustomization whose nodes have GPUs, what Slurm needs to schedule them and what
the worker pod needs to check them is there. Rendered with kubectl's kustomize,
as test_deploy_manifests.py does; the rig test of the same files' mechanism is
test_gres_devices.py."""

import re
import unittest

import yaml

from harness.fabrics import expand_hostlist
from test_deploy_manifests import KUSTOMIZATIONS, render

HEALTH_CONF = "/etc/slurm/k8sbridge-health.conf"


def conf_map(objects: list) -> dict:
    return next(o["data"] for o in objects
                if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "slurm-conf")


def lines(text: str) -> list:
    return [line.split("#", 1)[0].strip() for line in text.splitlines()
            if line.split("#", 1)[0].strip()]


def keys(line: str) -> dict:
    return dict(item.split("=", 1) for item in line.split())


def gpu_nodes(slurm_conf: str) -> dict:
    """Node name -> GPU count of every NodeName line with a gpu Gres."""
    nodes = {}
    for line in lines(slurm_conf):
        fields = keys(line)
        m = re.search(r"(?:^|,)gpu(?::[^:,]+)?:(\d+)", fields.get("Gres", ""))
        if "NodeName" in fields and m:
            for name in expand_hostlist(fields["NodeName"]):
                nodes[name] = int(m.group(1))
    return nodes


def setting(text: str, key: str) -> str:
    values = [v for line in lines(text) for k, v in keys(line).items() if k.lower() == key.lower()]
    return values[-1] if values else ""


class DeployedGpus(unittest.TestCase):
    def gpu_kustomizations(self):
        found = []
        for k in KUSTOMIZATIONS:
            objects = render(k)
            data = conf_map(objects)
            if gpu_nodes(data["slurm.conf"]):
                found.append((k, objects, data))
        self.assertIn("overlays/example-gpu", [k for k, _, _ in found])
        return found

    def test_slurm_keeps_every_gpu_and_knows_its_device_files(self):
        for k, _, data in self.gpu_kustomizations():
            with self.subTest(kustomization=k):
                self.assertIn("gpu", setting(data["slurm.conf"], "GresTypes").split(","))
                self.assertIn("gres.conf", data, "the ConfigMap has no gres.conf")
                gres = data["gres.conf"]
                files = {}
                for line in lines(gres):
                    fields = keys(line)
                    if fields.get("Name") == "gpu" and "NodeName" in fields:
                        for name in expand_hostlist(fields["NodeName"]):
                            files[name] = expand_hostlist(fields["File"])
                for node, count in gpu_nodes(data["slurm.conf"]).items():
                    self.assertEqual(len(files.get(node, [])), count, f"gres.conf for {node}")
                # No AutoDetect (or off): slurmctld then skips gres.conf for CLOUD
                # nodes, and a job allocated while its nodes power up gets a GPU
                # count without devices (docs/deploy.md, "GPUs").
                self.assertIn(setting(gres, "AutoDetect").lower(), ("", "off"),
                              "gres.conf: AutoDetect on CLOUD nodes")
                self.assertEqual(setting(data["cgroup.conf"], "ConstrainDevices").lower(), "yes")

    def test_every_worker_pod_checks_its_health_without_a_token(self):
        for k, _, data in self.gpu_kustomizations():
            with self.subTest(kustomization=k):
                self.assertEqual(setting(data["slurm.conf"], "HealthCheckProgram"),
                                 "/usr/sbin/k8sbridge-health")
                self.assertGreater(int(setting(data["slurm.conf"], "HealthCheckInterval") or 0), 0)
                self.assertIn("k8sbridge-health.conf", data)
                self.assertNotEqual(setting(data["k8sbridge-health.conf"], "KubePublish").lower(),
                                    "yes")
                spec = yaml.safe_load(data["worker-pod.yaml"])["template"]["spec"]
                container = next(c for c in spec["containers"] if c["name"] == "slurmd")
                mount = next(m for m in container.get("volumeMounts", [])
                             if m["mountPath"] == HEALTH_CONF)
                volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
                self.assertEqual(volume["configMap"]["name"], "slurm-conf")
                key = next(i["key"] for i in volume["configMap"]["items"]
                           if i["path"] == mount["subPath"])
                self.assertEqual(key, "k8sbridge-health.conf")


if __name__ == "__main__":
    unittest.main(verbosity=2)
