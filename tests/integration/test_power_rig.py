"""k8sbridge-power as a real slurmctld's ResumeProgram/SuspendProgram/ResumeFailProgram,
against the real Kubernetes (harness.kube.KubeCluster: API server, scheduler,
controllers, kwok's two fake nodes). The test plays the kubelet of the rig's nodes
(TestKubelet): it starts a node's slurmd in the rig when its pod is bound and stops
it when the pod is deleted.

- A job on powered-down CLOUD nodes: the pods appear with ownership labels, the
  slurmd register, the job completes, and after SuspendTime the pods are deleted
  and the nodes are POWERED_DOWN again.
- A pod the API rejects (422, from an admission webhook): the node goes DOWN and
  POWER_DOWN with the reason "k8sbridge: <message>" long before ResumeTimeout, and
  the job is requeued and pending.
- The same failed resume, read at every poll until the node is POWERED_DOWN: never
  DOWN, unregistered and outside the POWER states with its own name for an address
  (what crashed Slurm 24.11.5's registration agent, docs/power.md), and slurmctld
  still runs.
- Node groups pinned to leaves (PlacementDomain=), with k8sbridge-topology's
  topology.conf from the nodes' labels and TopologyPlugin=topology/tree: with one
  leaf's nodes partly busy, a `--switches=1` job takes the other leaf's nodes, and
  their pods run on Kubernetes nodes of that leaf. The same with topology/block (a
  block per leaf) and a `--segment=2` job.
- Slurm 25.05+: a node of an unpinned group (under cpu-only in the file) is
  registered by k8sbridge-sync (SyncTopology) under the leaf its pod landed on, once.
"""

import shutil
import tempfile
from pathlib import Path

from harness.cluster import (WORKER_TEMPLATE as TEMPLATE, TestKubelet, power_program_lines)
from harness.fabrics import PROGRAM as TOPOLOGY, expand_hostlist, run_program
from harness.kube import LEAF_LABEL, KubeCluster
from harness.paths import POWER, SYNC
from harness.rig import Rig, slurm_version, wait_for
from harness.sync import Daemon
from harness.testcase import RigTestCase, main


# Two node groups pinned to kwok's two leaves (node-0 is on leaf-0, node-1 on leaf-1).
PINNED_GROUPS = ("NodeGroup=a Nodes=w-[0-1] PodTemplate=worker.yaml PlacementDomain=leaf-0\n"
                 "NodeGroup=b Nodes=w-[2-3] PodTemplate=worker.yaml PlacementDomain=leaf-1\n")


class PowerRig(RigTestCase):
    def setUp(self):
        super().setUp()
        if not POWER.exists():
            self.skipTest(f"{POWER} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="power-rig-"))
        self.dir.chmod(0o755)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.kube = KubeCluster(nodes=2)
        self.addCleanup(self.kube.close)
        # k8sbridge-power runs as the deployment's controller ServiceAccount.
        self.kube.apply_deploy_rbac("default")
        self.kubeconfig = self.kube.service_account_kubeconfig(
            "default", "k8sbridge-controller", expiration_seconds=24 * 3600)

    def programs(self, slurm_conf_path, suspend_timeout=5,
                 groups="NodeGroup=w Nodes=w-[0-1] PodTemplate=worker.yaml\n"):
        """Wrapper scripts, the way an admin points slurm.conf at k8sbridge-power with
        a configuration of its own; returns the slurm.conf power-saving lines."""
        (self.dir / "worker.yaml").write_text(TEMPLATE)
        (self.dir / "k8sbridge.conf").write_text(
            f"ClusterName=rig\nKubeconfig={self.kubeconfig}\nNamespace=default\n"
            f"RetryDeadline=5\nLogFile={self.dir / 'power.log'}\n{groups}")
        lines = [power_program_lines(self.dir, self.dir / "k8sbridge.conf", slurm_conf_path)]
        return "\n".join(lines + [f"SuspendTimeout={suspend_timeout}", "ResumeTimeout=300"])

    def pod(self, name):
        status, _, body = self.kube.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        return body if status == 200 else None

    def log(self):
        path = self.dir / "power.log"
        return path.read_text() if path.exists() else "(no power.log)"

    def make_rig(self, suspend_time, suspend_timeout=5):
        # The rig writes slurm.conf under its own directory, known only once built.
        rig = Rig(nodes=2, start_slurmd=False)
        rig.config.slurm_conf_extra = (self.programs(rig.slurm_conf, suspend_timeout) +
                                       f"\nSuspendTime={suspend_time}\n")
        return rig

    def test_job_resumes_pods_runs_and_suspends(self):
        with self.make_rig(suspend_time=8) as rig:
            out = rig.workdir / "job.out"
            job = rig.sbatch("#!/bin/sh\nsrun hostname\n", ["-N2", "-o", str(out)])
            # Our kubelet: a node's slurmd starts when its pod is bound.
            kubelet = TestKubelet(self.kube, rig).start()
            self.addCleanup(kubelet.stop)
            wait_for(lambda: len(kubelet.started) == 2, 60,
                     lambda: f"both pods; power.log:\n{self.log()}")
            for name in ("w-0", "w-1"):
                labels = self.pod(name)["metadata"]["labels"]
                self.assertEqual(labels["app.kubernetes.io/managed-by"], "k8sbridge")
                self.assertEqual(labels["k8sbridge.io/cluster"], "rig")
                self.assertEqual(labels["k8sbridge.io/node"], name)
                self.assertEqual(labels["k8sbridge.io/job"], str(job))
            rig.wait_job(job, timeout=120)
            self.assertEqual(sorted(out.read_text().split()), ["w-0", "w-1"])
            # k8sbridge-prolog (PrologSlurmctld) ended once both nodes were up, and
            # its end released the job, not slurmctld's 30 s periodic check.
            ctld = (rig.logdir / "slurmctld.log").read_text()
            self.assertIn(f"prolog_running_decr: Configuration for JobId={job} is complete", ctld)
            self.assertNotIn(f"job_time_limit: Configuration for JobId={job} complete", ctld)
            self.assertRegex(self.log(), rf"prolog: job {job}: w-\[0-1\] up after \d+ ms")

            # Idle for SuspendTime: SuspendProgram deletes the pods.
            wait_for(lambda: not self.pod("w-0") and not self.pod("w-1"), 90,
                     lambda: f"the pods to be deleted; power.log:\n{self.log()}")
            # The kubelet stops their slurmd.
            wait_for(lambda: all("POWERED_DOWN" in rig.node(n)["State"] for n in ("w-0", "w-1")),
                     60, "the nodes to be POWERED_DOWN")
        self.assertNoLeftovers()

    def leaf_rig(self, nodes, groups, topology_format):
        """A rig whose CLOUD nodes are the node groups `groups` (PlacementLabel the
        leaf), with k8sbridge-topology's topology.conf from `--kube --config` in
        `topology_format` (tree or block, the TopologyPlugin), as the controller pod's
        init container writes it before slurmctld starts."""
        if not TOPOLOGY.exists():
            self.skipTest(f"{TOPOLOGY} is not built")
        rig = Rig(nodes=nodes, start_slurmd=False)
        self.addCleanup(rig.stop)  # its slot, should the topology run fail before it starts
        lines = self.programs(rig.slurm_conf, groups=f"PlacementLabel={LEAF_LABEL}\n" + groups)
        topology = self.dir / "topology.conf"
        run = run_program(["--kube", "--config", str(self.dir / "k8sbridge.conf"),
                           "--format", topology_format, "--output", str(topology),
                           "--no-reconfigure"])
        self.assertEqual(run.returncode, 0, run.stderr)
        rig.config.slurm_conf_extra = (lines + "\nSuspendTime=600\n"
                                       f"TopologyPlugin=topology/{topology_format}\n")
        rig.config.extra_files["topology.conf"] = topology.read_text()
        return rig

    def leaf_of_pod(self, name):
        host = self.pod(name)["spec"]["nodeName"]
        _, _, node = self.kube.request("GET", f"/api/v1/nodes/{host}")
        return node["metadata"]["labels"][LEAF_LABEL]

    def one_leaf_job(self, rig, placement):
        """With w-0 busy, leaf-0 has one free node: a 2-node job with `placement`
        (without it Slurm would take w-[1-2]) takes leaf-1's w-[2-3], and their pods
        run on Kubernetes nodes of leaf-1."""
        kubelet = TestKubelet(self.kube, rig).start()
        self.addCleanup(kubelet.stop)
        quiet = ["-o", "/dev/null"]
        hold = rig.sbatch("#!/bin/sh\nsleep 600\n", ["-N1", "-w", "w-0", *quiet])
        rig.wait_job(hold, ("RUNNING",), timeout=120)
        job = rig.sbatch("#!/bin/sh\nsrun true\n", ["-N2", *placement, *quiet])
        done = rig.wait_job(job, timeout=120)
        self.assertEqual(set(expand_hostlist(done["NodeList"])), {"w-2", "w-3"},
                         f"power.log:\n{self.log()}")
        self.assertEqual({self.leaf_of_pod(n) for n in ("w-2", "w-3")}, {"leaf-1"})
        self.assertEqual(self.leaf_of_pod("w-0"), "leaf-0")
        terms = self.pod("w-2")["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        self.assertEqual(terms, [{"matchExpressions": [
            {"key": LEAF_LABEL, "operator": "In", "values": ["leaf-1"]}]}])
        rig.check_output(["scancel", str(hold)])

    def test_a_switches_job_of_pinned_groups_gets_pods_on_one_leaf(self):
        # kwok's node-0 is on leaf-0, node-1 on leaf-1.
        with self.leaf_rig(4, PINNED_GROUPS, "tree") as rig:
            self.one_leaf_job(rig, ["--switches=1"])
        self.assertNoLeftovers()

    def test_a_segment_job_of_pinned_groups_gets_pods_on_one_leaf(self):
        # topology/block: a block per leaf, of the leaf's two nodes; a segment of two
        # fits only in a block with both nodes free.
        with self.leaf_rig(4, PINNED_GROUPS, "block") as rig:
            blocks = rig.check_output(["scontrol", "show", "topology"])
            self.assertEqual(self.units(blocks, "BlockName"),
                             {"k8s1-leaf-0": {"w-0", "w-1"}, "k8s1-leaf-1": {"w-2", "w-3"}},
                             blocks)
            self.one_leaf_job(rig, ["--segment=2"])
        self.assertNoLeftovers()

    @staticmethod
    def units(shown, key):
        """{unit: its nodes} of `scontrol show topology` lines naming `key` (SwitchName,
        BlockName), aggregated blocks left out."""
        out = {}
        for line in shown.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if key in fields and "Nodes" in fields and "[" not in fields[key]:
                out[fields[key]] = set(expand_hostlist(fields["Nodes"]))
        return out

    def test_a_resumed_node_of_an_unpinned_group_is_registered_under_its_pods_leaf(self):
        """Slurm 25.05+, SyncTopology: the file puts an unpinned group under cpu-only;
        once a node's pod runs, k8sbridge-sync moves the node under its pod's leaf,
        once (an unchanged unit is never sent again)."""
        if slurm_version() < (25, 5, 0):
            self.skipTest("a node's topology update (scontrol update Topology=) is 25.05+")
        if not SYNC.exists():
            self.skipTest(f"{SYNC} is not built")
        rig = self.leaf_rig(6, PINNED_GROUPS + "NodeGroup=c Nodes=w-[4-5] "
                            "PodTemplate=worker.yaml\n", "tree")
        with rig:
            shown = rig.check_output(["scontrol", "show", "topology"])
            self.assertIn("w-4", self.units(shown, "SwitchName").get("cpu-only", set()), shown)
            kubelet = TestKubelet(self.kube, rig).start()
            self.addCleanup(kubelet.stop)
            conf = self.dir / "sync.conf"
            conf.write_text((self.dir / "k8sbridge.conf").read_text() +
                            "SyncMetricsListen=127.0.0.1:0\nSyncTopology=default\n")
            daemon = Daemon.for_rig(rig, conf, self.dir)
            self.addCleanup(daemon.stop)
            job = rig.sbatch("#!/bin/sh\nsleep 600\n", ["-N1", "-w", "w-4", "-o", "/dev/null"])
            rig.wait_job(job, ("RUNNING",), timeout=120)
            leaf = f"k8s1-{self.leaf_of_pod('w-4')}"
            sync_log = Path(daemon.log_path)

            def registered():
                shown = rig.check_output(["scontrol", "show", "topology"])
                return shown if "w-4" in self.units(shown, "SwitchName").get(leaf, set()) else None
            shown = wait_for(registered, 60, lambda: f"w-4 under {leaf}; k8sbridge-sync's log:\n"
                             f"{sync_log.read_text()}")
            self.assertNotIn("w-4", self.units(shown, "SwitchName").get("cpu-only", set()), shown)
            self.assertIn(f"Topology=default:{leaf}",
                          rig.check_output(["scontrol", "show", "node", "w-4"]))
            # A later pass (the job's end changes the node) sends nothing again.
            rig.check_output(["scancel", str(job)])
            wait_for(lambda: "JobState=CANCELLED" in rig.check_output(
                ["scontrol", "show", "job", str(job)]), 60, "the job to end")
            wait_for(lambda: "IDLE" in rig.node("w-4")["State"], 60, "w-4 idle")
            updates = [line for line in sync_log.read_text().splitlines()
                       if "node w-4: topology" in line]
            self.assertEqual(len(updates), 1, sync_log.read_text())
            daemon.stop()
        self.assertNoLeftovers()

    def test_rejected_pod_downs_the_node_and_requeues_the_job(self):
        self.kube.add_fault("pods", "create", 422, times=0, message="pod refused by policy")
        with self.make_rig(suspend_time=600) as rig:
            job = rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0"])

            # Well inside ResumeTimeout (300 s).
            node = rig.wait_reason("w-0", "k8sbridge:", 30,
                                   lambda: f"w-0 to be set down; power.log:\n{self.log()}")
            # The API server's own message for a webhook's refusal.
            self.assertTrue(node["Reason"].startswith(
                'k8sbridge: admission webhook "faults.test.k8sbridge.io" denied the request: '
                'pod refused by policy'), node["Reason"])
            self.assertIn("DOWN", node["State"])
            self.assertIn("POWER", node["State"])
            wait_for(lambda: rig.job(job)["JobState"] == "PENDING" and
                     int(rig.job(job).get("Restarts", "0")) >= 1, 30,
                     "the job to be requeued")
            self.assertIsNone(self.pod("w-0"))
        self.assertNoLeftovers()

    def test_failed_resume_never_leaves_the_node_named_by_its_name_outside_the_power_states(self):
        self.kube.add_fault("pods", "create", 422, times=0, message="pod refused by policy")
        # A long power-down: the node is read many times while it is POWERING_DOWN.
        with self.make_rig(suspend_time=600, suspend_timeout=30) as rig:
            rig.sbatch("#!/bin/sh\nhostname\n", ["-N1", "-w", "w-0"])
            reads = []

            def failed_and_powered_down():
                node = rig.node("w-0")
                flags = set(node["State"].split("+"))
                reads.append((node["State"], node.get("NodeAddr"), node.get("Reason", "")))
                unregistered_outside = ("DOWN" in flags and not flags & {
                    "POWERING_UP", "POWERING_DOWN", "POWERED_DOWN"})
                # The state in which ping_nodes packs the node's address: it must resolve.
                self.assertFalse(unregistered_outside and node.get("NodeAddr") == "w-0",
                                 f"w-0 read as {node['State']} NodeAddr=w-0")
                ours = node.get("Reason", "").startswith("k8sbridge:")
                return node if ours and "POWERED_DOWN" in flags else None

            node = wait_for(failed_and_powered_down, 120,
                            lambda: f"w-0 to fail and power down; reads {reads[-5:]}; "
                                    f"power.log:\n{self.log()}")
            self.assertIn("DOWN", node["State"].split("+"))
            # The address went with the POWER_DOWN and lasted the power-down.
            powering_down = [r for r in reads if "POWERING_DOWN" in r[0].split("+")]
            self.assertTrue(powering_down, f"no read while POWERING_DOWN: {reads}")
            self.assertEqual({r[1] for r in powering_down}, {"255.255.255.255"}, powering_down)
            # slurmctld gave the node its name back once it was POWERED_DOWN.
            self.assertEqual(node["NodeAddr"], "w-0")
            self.assertIsNone(rig.slurmctld.poll(), "slurmctld exited")
            rig.check_output(["scontrol", "ping"])
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
