"""k8sbridge-topology --kube against the real Kubernetes (harness.kube.KubeCluster, four
kwok nodes w-0..w-3 with the fabric's leaf and spine labels), as the controller pod's topology
sidecar runs it (deploy/base/controller.yaml): it reads the nodes' tiered labels
with the ServiceAccount of deploy/base/rbac.yaml (k8sbridge-controller), its Slurm
nodes are the NodeGroups of k8sbridge.conf, and with --interval it rewrites
topology.conf (and runs `scontrol reconfigure`) once per real change and never
when nothing changed. A verb missing from the ClusterRole stops the start with
the permission named (the RBAC authorizer's refusal). A node group pinned to a leaf
(PlacementDomain=) is under that leaf and its spine, though no Kubernetes node is
named after its nodes and no pod of theirs runs."""

import os
import signal
import subprocess
import unittest

from harness.fabrics import PROGRAM, parse_tree_conf, run_program, tempdir
from harness.cluster import WORKER_TEMPLATE
from harness.kube import KubeCluster, wait_for_condition

NAMESPACE = "slurm"
LEAF = "network.topology.nvidia.com/leaf"


class TopologyKubeTest(unittest.TestCase):
    def setUp(self):
        if not PROGRAM.exists():
            self.skipTest(f"{PROGRAM} not built")
        self.dir = tempdir(self)
        # w-0, w-1 on leaf-0; w-2, w-3 on leaf-1; both under spine-0. Nothing here
        # makes pods: no scheduler.
        self.kube = KubeCluster(nodes=4, node_prefix="w-", ib_leaves=2, scheduler=False)
        self.addCleanup(self.kube.close)
        self.kube.apply_deploy_rbac(NAMESPACE)
        kubeconfig = self.kube.service_account_kubeconfig(NAMESPACE, "k8sbridge-controller")
        (self.dir / "worker-pod.yaml").write_text(WORKER_TEMPLATE)
        # w-4 is a Slurm node that no Kubernetes node is named after: CPU-only.
        self.conf = self.dir / "k8sbridge.conf"
        self.conf.write_text(f"ClusterName=t\nKubeconfig={kubeconfig}\nNamespace={NAMESPACE}\n"
                             "NodeGroup=cpu Nodes=w-[0-4] PodTemplate=worker-pod.yaml\n")
        self.out = self.dir / "etc" / "topology.conf"
        self.out.parent.mkdir()
        self.calls = self.dir / "scontrol-calls"
        self.scontrol = self.dir / "scontrol"
        self.scontrol.write_text(f'#!/bin/sh\necho "$@" >> {self.calls}\n')
        self.scontrol.chmod(0o755)

    def args(self, *extra):
        return ["--kube", "--config", str(self.conf), "--output", str(self.out),
                "--scontrol", str(self.scontrol), *extra]

    def reconfigures(self):
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def set_clusterrole_verbs(self, verbs):
        patch = '[{"op":"replace","path":"/rules/0/verbs","value":%s}]' % str(verbs).replace(
            "'", '"')
        self.kube.kubectl("patch", "clusterrole", "k8sbridge-controller-nodes", "--type=json",
                          "-p", patch)
        # The RBAC authorizer reads roles from its informer: wait until it grants
        # exactly `verbs` on nodes to the ServiceAccount.
        user = f"system:serviceaccount:{NAMESPACE}:k8sbridge-controller"

        def granted():
            return all((self.kube.kubectl("auth", "can-i", verb, "nodes", "--as", user,
                                          check=False).stdout.strip() == "yes") == (verb in verbs)
                       for verb in ("get", "list", "watch", "update"))
        wait_for_condition(granted, 30, f"RBAC to grant {verbs} on nodes")

    def start_sidecar(self):
        log = open(self.dir / "sidecar.log", "w+")
        self.addCleanup(log.close)
        proc = subprocess.Popen([str(PROGRAM), *self.args("--interval", "1s", "-v")],
                                stdout=log, stderr=subprocess.STDOUT)

        def stop():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.addCleanup(stop)
        return proc, lambda: (self.dir / "sidecar.log").read_text()

    def test_the_sidecar_rewrites_once_per_change_and_never_otherwise(self):
        # The init container's run: Slurm is not up yet, nothing is reconfigured.
        run = run_program(self.args("--no-reconfigure"))
        self.assertEqual(run.returncode, 0, run.stderr)
        conf = parse_tree_conf(self.out.read_text())
        self.assertEqual(conf["k8s1-leaf-0"]["Nodes"], ["w-0", "w-1"])
        self.assertEqual(conf["k8s1-leaf-1"]["Nodes"], ["w-2", "w-3"])
        self.assertEqual(conf["k8s2-spine-0"]["Switches"], ["k8s1-leaf-0", "k8s1-leaf-1"])
        self.assertEqual(conf["cpu-only"]["Nodes"], ["w-4"])
        self.assertEqual(self.reconfigures(), [])

        proc, log = self.start_sidecar()
        first = os.stat(self.out)

        def rounds():
            return log().count("switches,")
        # Rounds over an unchanged cluster: the file is not touched, Slurm not asked.
        wait_for_condition(lambda: rounds() >= 3 or proc.poll() is not None, 30, "three rounds")
        self.assertIsNone(proc.poll(), log())
        self.assertEqual(os.stat(self.out).st_ino, first.st_ino, log())
        self.assertEqual(self.reconfigures(), [])

        # w-1 moves to leaf-1: one rewrite, one reconfigure.
        self.kube.kubectl("label", "node", "w-1", f"{LEAF}=leaf-1", "--overwrite")
        wait_for_condition(lambda: self.reconfigures(), 30, "a reconfigure after the relabel")
        conf = parse_tree_conf(self.out.read_text())
        self.assertEqual(conf["k8s1-leaf-0"]["Nodes"], ["w-0"])
        self.assertEqual(conf["k8s1-leaf-1"]["Nodes"], ["w-1", "w-2", "w-3"])
        second = os.stat(self.out)
        seen = rounds()
        wait_for_condition(lambda: rounds() >= seen + 3 or proc.poll() is not None, 30,
                           "three more rounds")
        self.assertEqual(self.reconfigures(), ["reconfigure"], log())
        self.assertEqual(os.stat(self.out).st_ino, second.st_ino, log())
        self.assertEqual(log().count("wrote new topology"), 1, log())

        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=30), 0, log())
        self.assertIn("SIGTERM: stopping", log())
        self.assertEqual([p.name for p in self.out.parent.iterdir() if ".tmp." in p.name], [])

    def test_a_pinned_group_is_under_its_leaf_before_any_pod_runs(self):
        self.conf.write_text(self.conf.read_text() + f"PlacementLabel={LEAF}\n"
                             "NodeGroup=a Nodes=a-[0-1] PodTemplate=worker-pod.yaml "
                             "PlacementDomain=leaf-1\n"
                             "NodeGroup=b Nodes=b-0 PodTemplate=worker-pod.yaml "
                             "PlacementDomain=leaf-9\n")
        run = run_program(self.args("--no-reconfigure"))
        self.assertEqual(run.returncode, 0, run.stderr)
        conf = parse_tree_conf(self.out.read_text())
        self.assertEqual(conf["k8s1-leaf-1"]["Nodes"], ["a-0", "a-1", "w-2", "w-3"])
        self.assertEqual(conf["k8s2-spine-0"]["Switches"], ["k8s1-leaf-0", "k8s1-leaf-1"])
        # No Kubernetes node is on leaf-9 yet: the leaf is a root of its own.
        self.assertEqual(conf["k8s1-leaf-9"]["Nodes"], ["b-0"])
        self.assertNotIn("Switches", conf["k8s1-leaf-9"])
        self.assertEqual(conf["cpu-only"]["Nodes"], ["w-4"])

        # The same domains as blocks.
        run = run_program(["--kube", "--config", str(self.conf), "--format", "block"])
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("BlockName=k8s1-leaf-1 Nodes=a-[0-1],w-[2-3]\n", run.stdout)
        self.assertIn("BlockName=k8s1-leaf-9 Nodes=b-0\n", run.stdout)

        # A group pinned by a label that is no leaf tier: the run fails and says why.
        self.conf.write_text(self.conf.read_text() + "NodeGroup=z Nodes=z-0 "
                             "PodTemplate=worker-pod.yaml PlacementLabel="
                             "topology.kubernetes.io/zone PlacementDomain=a\n")
        run = run_program(self.args("--no-reconfigure"))
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn("node group z is pinned to topology.kubernetes.io/zone=a", run.stderr)
        self.assertEqual(self.reconfigures(), [])

    def test_a_missing_verb_is_named(self):
        self.set_clusterrole_verbs(["get", "list", "update"])
        proc, log = self.start_sidecar()
        self.assertEqual(proc.wait(timeout=60), 1, log())
        self.assertIn('needs "watch" on nodes', log())
        self.assertIn('cannot watch resource "nodes"', log())
        self.assertFalse(self.out.exists())

        self.set_clusterrole_verbs(["get", "update"])
        run = run_program(self.args())
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assertIn('needs "list" on nodes', run.stderr)
        self.assertIn("k8sbridge-controller-nodes", run.stderr)
        self.assertFalse(self.out.exists())


if __name__ == "__main__":
    unittest.main(verbosity=2)
