"""End to end: the fabric that ibsim simulates (2 leaves x 4 hosts, named as the rig
nodes) goes through ibnetdiscover and k8sbridge-topology into topology.conf, and real
slurmctld with topology/tree places jobs by it. The same jobs with a hand-written
topology.conf land on the same leaves. A changed fabric reaches slurmctld through
the program's refresh (atomic write + `scontrol reconfigure`). Node groups pinned to
leaves (k8sbridge.conf's PlacementDomain=), rendered from Kubernetes node labels
(--labels --config) though no Kubernetes node is named after a Slurm node, place
the same jobs on the same leaves."""

import json

from harness.fabrics import (IbSim, PROGRAM, expand_hostlist, fat_tree, parse_tree_conf,
                             run_program, tempdir)
from harness.rig import Rig, RigError, slurm_root, wait_for
from harness.testcase import RigTestCase, main

HAND_WRITTEN = """\
SwitchName=leaf0 Nodes=w-[0-3]
SwitchName=leaf1 Nodes=w-[4-7]
SwitchName=spine Switches=leaf[0-1]
"""


def expand(nodelist: str) -> set:
    return set(expand_hostlist(nodelist))


class TopologySlurmTest(RigTestCase):
    def setUp(self):
        super().setUp()
        if not PROGRAM.exists():
            self.skipTest(f"{PROGRAM} not built")
        self.dir = tempdir(self)

    def generated_conf(self, fabric) -> str:
        with IbSim(fabric, self.dir) as sim:
            dump = self.dir / "fabric.ibnetdiscover"
            dump.write_text(sim.ibnetdiscover())
        out = self.dir / "topology.conf"
        run = run_program(["--ibnetdiscover", str(dump), "--output", str(out),
                           "--no-reconfigure"])
        self.assertEqual(run.returncode, 0, run.stderr)
        return out.read_text()

    def place_jobs(self, rig) -> dict:
        """Runs the same job sequence on any rig; returns where each job landed."""
        rig.wait_nodes_idle(timeout=180)
        placed = {}
        quick = "#!/bin/sh\ntrue\n"
        hold = "#!/bin/sh\nsleep 600\n"
        out = ["-o", "/dev/null"]

        job = rig.sbatch(quick, ["-N4", *out])
        placed["empty"] = rig.wait_job(job)["NodeList"]

        blocker0 = rig.sbatch(hold, ["-N1", "-w", "w-0", *out])
        rig.wait_job(blocker0, ("RUNNING",))
        job = rig.sbatch(quick, ["-N4", *out])
        placed["w-0 busy"] = rig.wait_job(job)["NodeList"]

        # One node busy on each leaf: 6 nodes idle, but no leaf has 4.
        blocker4 = rig.sbatch(hold, ["-N1", "-w", "w-4", *out])
        rig.wait_job(blocker4, ("RUNNING",))
        waiting = rig.sbatch(quick, ["-N4", "--switches=1@10:00", *out])

        def evaluated():
            j = rig.job(waiting)
            return j if j.get("Reason") not in (None, "None") else None
        pending = wait_for(evaluated, 60, "the scheduler to look at the --switches=1 job")
        placed["switches=1 while split"] = pending["JobState"]
        rig.check_output(["scancel", str(blocker4)])
        placed["switches=1"] = rig.wait_job(waiting, timeout=180)["NodeList"]
        rig.check_output(["scancel", str(blocker0)])
        return placed

    def test_generated_topology_places_like_hand_written(self):
        fabric = fat_tree(hosts=8, hosts_per_leaf=4, spines=2)
        generated = self.generated_conf(fabric)
        conf = parse_tree_conf(generated)
        leaves = {name: set(sw["Nodes"]) for name, sw in conf.items() if "Nodes" in sw}
        self.assertEqual(sorted(leaves.values(), key=sorted),
                         [{f"w-{i}" for i in range(4)}, {f"w-{i}" for i in range(4, 8)}])

        results = {}
        for label, text in (("generated", generated), ("hand-written", HAND_WRITTEN)):
            with Rig(nodes=8, slurm_conf_extra="TopologyPlugin=topology/tree",
                     extra_files={"topology.conf": text}) as rig:
                if label == "generated":
                    shown = rig.check_output(["scontrol", "show", "topology"])
                    for name, nodes in leaves.items():
                        self.assertRegex(shown, rf"SwitchName={name} Level=0 .*Nodes=")
                    root = next(n for n in conf if "Switches" in conf[n])
                    self.assertRegex(shown, rf"SwitchName={root} Level=1 ")
                results[label] = self.place_jobs(rig)
            self.assertNoLeftovers()

        gen = results["generated"]
        for key in ("empty", "w-0 busy", "switches=1"):
            nodes = expand(gen[key])
            self.assertEqual(len(nodes), 4, key)
            self.assertTrue(any(nodes <= leaf for leaf in leaves.values()),
                            f"{key}: {gen[key]} spans leaves")
        self.assertEqual(expand(gen["w-0 busy"]), {"w-4", "w-5", "w-6", "w-7"})
        self.assertEqual(gen["switches=1 while split"], "PENDING")
        self.assertEqual(expand(gen["switches=1"]), {"w-4", "w-5", "w-6", "w-7"})
        self.assertEqual(results["generated"], results["hand-written"])

    def test_pinned_node_groups_place_like_the_fabric(self):
        leaf = "network.topology.nvidia.com/"
        nodes = {"items": [{"metadata": {"name": f"k-{i}", "labels": {
            f"{leaf}leaf": f"leaf-{i}", f"{leaf}spine": "spine-0"}}} for i in range(2)]}
        labels = self.dir / "nodes.json"
        labels.write_text(json.dumps(nodes))
        conf = self.dir / "k8sbridge.conf"
        conf.write_text(f"ClusterName=rig\nPlacementLabel={leaf}leaf\n"
                        "NodeGroup=a Nodes=w-[0-3] PodTemplate=w.yaml PlacementDomain=leaf-0\n"
                        "NodeGroup=b Nodes=w-[4-7] PodTemplate=w.yaml PlacementDomain=leaf-1\n")
        out = self.dir / "topology.conf"
        run = run_program(["--labels", str(labels), "--config", str(conf), "--output", str(out),
                           "--no-reconfigure"])
        self.assertEqual(run.returncode, 0, run.stderr)
        generated = out.read_text()
        tree = parse_tree_conf(generated)
        self.assertEqual(tree["k8s1-leaf-0"]["Nodes"], [f"w-{i}" for i in range(4)])
        self.assertEqual(tree["k8s1-leaf-1"]["Nodes"], [f"w-{i}" for i in range(4, 8)])
        self.assertEqual(tree["k8s2-spine-0"]["Switches"], ["k8s1-leaf-0", "k8s1-leaf-1"])
        with Rig(nodes=8, slurm_conf_extra="TopologyPlugin=topology/tree",
                 extra_files={"topology.conf": generated}) as rig:
            placed = self.place_jobs(rig)
        self.assertNoLeftovers()
        self.assertEqual(expand(placed["w-0 busy"]), {"w-4", "w-5", "w-6", "w-7"})
        self.assertEqual(placed["switches=1 while split"], "PENDING")
        self.assertEqual(expand(placed["switches=1"]), {"w-4", "w-5", "w-6", "w-7"})

    def test_refresh_reconfigures_running_slurmctld(self):
        if slurm_root():
            self.skipTest("--live scans through ibsim's libumad2sim, the host's: not in "
                          "another release's root (the refresh is not version-specific)")
        generated = self.generated_conf(fat_tree(hosts=8, hosts_per_leaf=4))
        with Rig(nodes=8, slurm_conf_extra="TopologyPlugin=topology/tree",
                 extra_files={"topology.conf": generated}) as rig:
            rig.wait_nodes_idle(timeout=180)
            out = rig.etc / "topology.conf"
            # Same fabric: nothing to do (the start-up run already counts as applied).
            (rig.etc / "topology.conf.applied").write_text(generated)
            scontrol = str(rig.prefix / "bin" / "scontrol")
            args = ["--live", "--output", str(out), "--scontrol", scontrol]
            with IbSim(fat_tree(hosts=8, hosts_per_leaf=4), self.dir) as sim:
                run = run_program(args, env=rig.env(sim.env_overrides()))
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("no reconfigure needed", run.stderr)
            # Re-cabled: 4 leaves of 2 hosts. slurmctld must pick it up.
            with IbSim(fat_tree(hosts=8, hosts_per_leaf=2), self.dir) as sim:
                run = run_program(args, env=rig.env(sim.env_overrides()))
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("slurmctld reconfigured", run.stderr)

            def four_leaves():
                r = rig.run(["scontrol", "show", "topology"])
                return r.returncode == 0 and r.stdout.count("Level=0") == 4
            try:
                wait_for(four_leaves, 120, "slurmctld to show the new hierarchy")
            except RigError:
                self.fail("slurmctld did not pick up the new topology.conf:\n" +
                          rig.run(["scontrol", "show", "topology"]).stdout)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
