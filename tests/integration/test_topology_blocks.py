"""topology.yaml (Slurm 25.05+) from k8sbridge-topology in a real slurmctld, with block
placement that survives power saving.

The fabric ibsim simulates (2 leaves x 4 hosts, named as the rig's nodes) goes through
ibnetdiscover and `k8sbridge-topology --format yaml` into the rig's topology.yaml: a
tree topology `fabric` (the cluster default, used by partition `main`) and a block
topology `fabric-blocks` (partition `blocks`, `Topology=fabric-blocks`). The nodes are
CLOUD nodes powered by k8sbridge-power (the real Kubernetes, harness.kube.KubeCluster
with eight kwok nodes; the test as the kubelet of the rig's nodes).

A 4-node `--segment=2` job in `blocks` lands in one block; with w-0 busy, it is made
of whole segments of two nodes, each inside one block (never w-[1-4], three and one).
Both hold with every node powered up from the start, and again after every node was
powered down and up. The file is the only source of topology (no per-node
`scontrol update Topology=` or `slurmd --conf Topology=`): under topology/block,
re-applying a node's block drops it from the block's bitmap and --segment is then
ignored (docs/versions.md), which the second placement would show.
"""

from pathlib import Path

from harness.cluster import (WORKER_TEMPLATE as TEMPLATE, TestKubelet, power_program_lines)
from harness.fabrics import IbSim, PROGRAM, expand_hostlist, fat_tree, run_program, tempdir
from harness.kube import KubeCluster
from harness.paths import POWER
from harness.rig import Rig, slurm_version, wait_for
from harness.testcase import RigTestCase, main

NODES = [f"w-{i}" for i in range(8)]
BLOCK_OF_W0 = {"w-0", "w-1", "w-2", "w-3"}
OTHER_BLOCK = {"w-4", "w-5", "w-6", "w-7"}
HOLD = "#!/bin/sh\nsleep 600\n"
QUICK = "#!/bin/sh\ntrue\n"


class TopologyBlocks(RigTestCase):
    def setUp(self):
        super().setUp()
        if slurm_version() < (25, 5, 0):
            self.skipTest("topology.yaml and partition Topology= are Slurm 25.05+")
        for need in (PROGRAM, POWER):
            if not need.exists():
                self.skipTest(f"{need} is not built")
        self.dir = tempdir(self)
        self.dir.chmod(0o755)
        self.kube = KubeCluster(nodes=8)
        self.addCleanup(self.kube.close)
        self.kube.apply_deploy_rbac("default")
        self.kubeconfig = self.kube.service_account_kubeconfig(
            "default", "k8sbridge-controller", expiration_seconds=24 * 3600)

    def topology_yaml(self) -> str:
        with IbSim(fat_tree(hosts=8, hosts_per_leaf=4, spines=2), self.dir) as sim:
            dump = self.dir / "fabric.ibnetdiscover"
            dump.write_text(sim.ibnetdiscover())
        out = self.dir / "topology.yaml"
        run = run_program(["--ibnetdiscover", str(dump), "--format", "yaml", "--output",
                           str(out), "--no-reconfigure"])
        self.assertEqual(run.returncode, 0, run.stderr)
        return out.read_text()

    def make_rig(self, topology: str) -> Rig:
        rig = Rig(nodes=len(NODES), start_slurmd=False)
        (self.dir / "worker.yaml").write_text(TEMPLATE)
        conf = self.dir / "k8sbridge.conf"
        conf.write_text(f"ClusterName=rig\nKubeconfig={self.kubeconfig}\nNamespace=default\n"
                        f"RetryDeadline=5\nLogFile={self.dir / 'power.log'}\n"
                        "NodeGroup=w Nodes=w-[0-7] PodTemplate=worker.yaml\n")
        rig.config.slurm_conf_extra = "\n".join([
            power_program_lines(self.dir, conf, rig.slurm_conf),
            "SuspendTimeout=5", "ResumeTimeout=300", "SuspendTime=8",
            "PartitionName=blocks Nodes=w-[0-7] Topology=fabric-blocks MaxTime=INFINITE "
            "State=UP"]) + "\n"
        rig.config.extra_files = {"topology.yaml": topology}
        return rig

    def power_log(self) -> str:
        path = self.dir / "power.log"
        return path.read_text() if path.exists() else "(no power.log)"

    def segment_job(self, rig: Rig) -> set:
        """Where a 4-node --segment=2 job in partition `blocks` lands."""
        job = rig.sbatch(QUICK, ["-p", "blocks", "-N4", "--segment=2", "-o", "/dev/null"])
        return set(expand_hostlist(rig.wait_job(job, timeout=240)["NodeList"]))

    def place(self, rig: Rig) -> dict:
        """The segment job on idle nodes, then with w-0 held by another job."""
        placed = {"idle": self.segment_job(rig)}
        blocker = rig.sbatch(HOLD, ["-N1", "-w", "w-0", "-o", "/dev/null"])
        rig.wait_job(blocker, ("RUNNING",), timeout=180)
        placed["w-0 busy"] = self.segment_job(rig)
        rig.check_output(["scancel", str(blocker)])
        return placed

    def assertSegmentsHonoured(self, placed: dict) -> None:
        log = f"placed: {placed}; power.log:\n{self.power_log()}"
        # Idle: the whole job in one block.
        self.assertIn(placed["idle"], (BLOCK_OF_W0, OTHER_BLOCK), log)
        # w-0 busy: whole segments of 2, each inside one block (not w-[1-4]: 3 + 1).
        busy = placed["w-0 busy"]
        self.assertEqual(len(busy), 4, log)
        self.assertNotIn("w-0", busy, log)
        for block in (BLOCK_OF_W0, OTHER_BLOCK):
            self.assertEqual(len(busy & block) % 2, 0, log)

    def wait_all_powered_down(self, rig: Rig) -> None:
        def down():
            nodes = rig.nodes()
            return all("POWERED_DOWN" in nodes[n]["State"] and "DRAIN" not in nodes[n]["State"]
                       and "DOWN+" not in nodes[n]["State"] for n in NODES)
        wait_for(down, 180, lambda: f"every node POWERED_DOWN; power.log:\n{self.power_log()}")

    def test_yaml_loads_and_segments_stay_in_one_block_across_power_cycles(self):
        topology = self.topology_yaml()
        with self.make_rig(topology) as rig:
            # The cluster default: the tree, two leaves under one spine.
            tree = rig.check_output(["scontrol", "show", "topology"])
            leaves = [line for line in tree.splitlines() if "Level=0" in line]
            self.assertEqual(len(leaves), 2, tree)
            self.assertIn("Nodes=w-[0-3]", tree)
            self.assertIn("Nodes=w-[4-7]", tree)
            shown = rig.check_output(["scontrol", "show", "topology", "fabric-blocks"])
            blocks = [line for line in shown.splitlines() if "BlockName=" in line]
            self.assertEqual(len(blocks), 2, shown)
            self.assertTrue(any("Nodes=w-[0-3]" in b for b in blocks), shown)
            self.assertTrue(any("Nodes=w-[4-7]" in b for b in blocks), shown)
            partition = rig.check_output(["scontrol", "show", "partition", "blocks"])
            self.assertIn("Topology=fabric-blocks", partition)

            kubelet = TestKubelet(self.kube, rig).start()
            self.addCleanup(kubelet.stop)
            self.assertSegmentsHonoured(self.place(rig))

            # Idle for SuspendTime: every pod deleted, every node POWERED_DOWN again,
            # none down or drained; then the same jobs power them up again.
            self.wait_all_powered_down(rig)
            self.assertEqual(rig.check_output(["scontrol", "show", "topology", "fabric-blocks"]),
                             shown)
            self.assertSegmentsHonoured(self.place(rig))
            self.wait_all_powered_down(rig)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
