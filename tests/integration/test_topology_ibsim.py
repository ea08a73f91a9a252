"""k8sbridge-topology against real InfiniBand tools: Debian's ibsim simulates each
generated fabric, the real ibnetdiscover dumps it, and the same fabric is scanned
live through libibnetdisc (umad2sim preload). Checks the canonical graph, the
topology.conf, that live == file, line-numbered errors on corrupt dumps, and the
refresh logic (atomic write, reconfigure only on structural change)."""

import json
import shutil
import unittest

from harness.fabrics import (IbSim, PROGRAM, add_cpu_hosts, fat_tree, parse_tree_conf,
                             run_program, tempdir)


def leaves_of(conf: dict) -> dict:
    return {name: set(sw["Nodes"]) for name, sw in conf.items() if "Nodes" in sw}


def parents(conf: dict) -> dict:
    out = {}
    for name, sw in conf.items():
        for child in sw.get("Switches", []):
            out[child] = name
    return out


def roots(conf: dict) -> set:
    p = parents(conf)
    return {name for name in conf if name not in p}


def root_of(conf: dict, name: str) -> str:
    p = parents(conf)
    while name in p:
        name = p[name]
    return name


class TopologyIbsimTest(unittest.TestCase):
    def setUp(self):
        for tool in ("ibsim", "ibnetdiscover"):
            if not shutil.which(tool):
                self.skipTest(f"{tool} not installed (Debian: ibsim-utils infiniband-diags)")
        if not PROGRAM.exists():
            self.skipTest(f"{PROGRAM} not built")
        self.dir = tempdir(self)

    # ---- helpers ---------------------------------------------------------------

    def discover(self, fabric, extra=()):
        """Returns (file graph, live graph, conf from file, conf from live)."""
        with IbSim(fabric, self.dir) as sim:
            dump = self.dir / f"{sim.sockname}.ibnetdiscover"
            dump.write_text(sim.ibnetdiscover())
            file_run = run_program(["--ibnetdiscover", str(dump), "--dump-graph",
                                    str(self.dir / "file.graph"), *extra])
            self.assertEqual(file_run.returncode, 0, file_run.stderr)
            live_run = sim.run_live(["--dump-graph", str(self.dir / "live.graph"), *extra])
            self.assertEqual(live_run.returncode, 0, live_run.stderr)
        return ((self.dir / "file.graph").read_text(), (self.dir / "live.graph").read_text(),
                file_run.stdout, live_run.stdout, dump)

    def check_graph(self, graph: str, fabric) -> None:
        kinds = {"switch": 0, "ca": 0}
        descriptions = set()
        for line in graph.splitlines():
            words = line.split(" ", 4)
            if words[0] == "node":
                kinds[words[2]] += 1
                descriptions.add(words[4][len('desc="'):-1])
        self.assertEqual(kinds, {"switch": len(fabric.switches), "ca": len(fabric.hcas)})
        self.assertEqual(descriptions, set(fabric.switches) | set(fabric.hcas))
        links = sum(1 for line in graph.splitlines() if line.startswith("link "))
        self.assertEqual(links, len(fabric.cables))

    def assert_live_equals_file(self, file_graph, live_graph, file_conf, live_conf):
        self.assertEqual(live_graph, file_graph)
        self.assertEqual(live_conf, file_conf)

    # ---- fabrics ---------------------------------------------------------------

    def test_two_tier_fat_tree(self):
        fabric = fat_tree(hosts=8, hosts_per_leaf=4, spines=2)
        file_graph, live_graph, conf_text, live_conf, _ = self.discover(fabric)
        self.check_graph(file_graph, fabric)
        self.assert_live_equals_file(file_graph, live_graph, conf_text, live_conf)
        conf = parse_tree_conf(conf_text)
        self.assertEqual(sorted(leaves_of(conf).values(), key=sorted),
                         [{f"w-{i}" for i in range(4)}, {f"w-{i}" for i in range(4, 8)}])
        self.assertEqual(len(roots(conf)), 1)
        root = conf[roots(conf).pop()]
        self.assertEqual(len(root["Switches"]), 2)

    def test_three_tier_fat_tree(self):
        # 8 leaves of 2 hosts, pods of 2 leaves with 2 aggregation switches, 2 core planes.
        fabric = fat_tree(hosts=16, hosts_per_leaf=2, spines=2, groups_per_pod=2, cores=1)
        file_graph, live_graph, conf_text, live_conf, _ = self.discover(fabric)
        self.check_graph(file_graph, fabric)
        self.assert_live_equals_file(file_graph, live_graph, conf_text, live_conf)
        conf = parse_tree_conf(conf_text)
        self.assertEqual(len(leaves_of(conf)), 8)
        pods = [n for n in conf if n.startswith("ib2-")]
        self.assertEqual(len(pods), 4)
        for pod in pods:
            self.assertEqual(len(conf[pod]["Switches"]), 2)
        self.assertEqual(len(roots(conf)), 1)
        top = roots(conf).pop()
        self.assertTrue(top.startswith("ib3-"), top)
        self.assertEqual(sorted(conf[top]["Switches"]), sorted(pods))
        # Hosts 0-3 share a pod, 4-7 another.
        leaf = {n: name for name, nodes in leaves_of(conf).items() for n in nodes}
        p = parents(conf)
        self.assertEqual(p[leaf["w-0"]], p[leaf["w-3"]])
        self.assertNotEqual(p[leaf["w-0"]], p[leaf["w-4"]])

    def test_rail_optimised_four_hcas_on_four_leaves(self):
        fabric = fat_tree(hosts=8, hosts_per_leaf=4, rails=4, spines=2)
        file_graph, live_graph, conf_text, live_conf, _ = self.discover(fabric)
        self.check_graph(file_graph, fabric)
        self.assert_live_equals_file(file_graph, live_graph, conf_text, live_conf)
        conf = parse_tree_conf(conf_text)
        leaves = leaves_of(conf)
        # Each host is under exactly one Slurm leaf, though its HCAs are on 4 switches.
        self.assertEqual(sorted(leaves.values(), key=sorted),
                         [{f"w-{i}" for i in range(4)}, {f"w-{i}" for i in range(4, 8)}])
        seen = [n for nodes in leaves.values() for n in nodes]
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(len(roots(conf)), 1)

    def test_cpu_only_hosts(self):
        fabric = fat_tree(hosts=8, hosts_per_leaf=4)
        add_cpu_hosts(fabric, ["c-0", "c-1"], "leaf-0-rail0")
        # c-0/c-1 have an HCA (storage) but are CPU-only by name; c-2/c-3 have none.
        args = ["--nodes", "w-[0-7],c-[0-3]", "--cpu-only-regex", "c-.*"]
        file_graph, live_graph, conf_text, live_conf, dump = self.discover(fabric, args)
        self.check_graph(file_graph, fabric)
        self.assert_live_equals_file(file_graph, live_graph, conf_text, live_conf)
        conf = parse_tree_conf(conf_text)
        self.assertEqual(set(conf["cpu-only"]["Nodes"]), {"c-0", "c-1", "c-2", "c-3"})
        self.assertEqual(roots(conf), {"cpu-only", root_of(conf, next(
            name for name, nodes in leaves_of(conf).items() if "w-0" in nodes))})
        self.assertEqual(sorted(leaves_of(conf).values(), key=sorted),
                         sorted([{f"c-{i}" for i in range(4)}, {f"w-{i}" for i in range(4)},
                                 {f"w-{i}" for i in range(4, 8)}], key=sorted))
        excluded = run_program(["--ibnetdiscover", str(dump), *args, "--cpu-only", "exclude"])
        self.assertEqual(excluded.returncode, 0, excluded.stderr)
        conf = parse_tree_conf(excluded.stdout)
        self.assertNotIn("cpu-only", conf)
        self.assertEqual({n for nodes in leaves_of(conf).values() for n in nodes},
                         {f"w-{i}" for i in range(8)})

    def test_two_separate_fabrics(self):
        a = fat_tree(hosts=4, hosts_per_leaf=2, prefix="a-", tag="A")
        b = fat_tree(hosts=4, hosts_per_leaf=2, prefix="b-", tag="B")
        dumps = []
        for fabric in (a, b):
            graph, live_graph, conf, live_conf, dump = self.discover(fabric)
            self.check_graph(graph, fabric)
            self.assert_live_equals_file(graph, live_graph, conf, live_conf)
            dumps.append(dump)
        # ibsim numbers GUIDs the same way in both simulators, as two real fabrics
        # never would; give fabric B its own GUID range.
        text = dumps[1].read_text()
        dumps[1].write_text(text.replace('"S-00000000', '"S-0000bbbb').replace(
            '"H-00000000', '"H-0000bbbb'))
        run = run_program(["--ibnetdiscover", str(dumps[0]), "--ibnetdiscover", str(dumps[1])])
        self.assertEqual(run.returncode, 0, run.stderr)
        conf = parse_tree_conf(run.stdout)
        self.assertEqual(len(roots(conf)), 2)
        leaf = {n: name for name, nodes in leaves_of(conf).items() for n in nodes}
        self.assertNotEqual(root_of(conf, leaf["a-0"]), root_of(conf, leaf["b-0"]))
        self.assertEqual(root_of(conf, leaf["a-0"]), root_of(conf, leaf["a-3"]))
        self.assertEqual(root_of(conf, leaf["b-0"]), root_of(conf, leaf["b-3"]))

    # ---- bad input -------------------------------------------------------------

    def test_corrupt_and_truncated_dumps_give_line_numbers(self):
        with IbSim(fat_tree(hosts=4, hosts_per_leaf=2), self.dir) as sim:
            text = sim.ibnetdiscover()
        lines = text.splitlines(keepends=True)
        header = next(i for i, line in enumerate(lines) if line.startswith("Switch"))
        port = header + 1
        cases = {
            "truncated": ("".join(lines)[: len("".join(lines)) // 2], None),
            "bad_port": ("".join(lines[:port]) + "[x]" + lines[port][3:] +
                         "".join(lines[port + 1:]), port + 1),
            "bad_header": ("".join(lines[:header]) + "Switch eight \"S-1\"\n" +
                           "".join(lines[header + 1:]), header + 1),
        }
        for name, (content, line_no) in cases.items():
            path = self.dir / f"{name}.txt"
            path.write_text(content)
            run = run_program(["--ibnetdiscover", str(path)])
            self.assertEqual(run.returncode, 1, name)
            self.assertIn(f"{path}:", run.stderr, name)
            if line_no is not None:
                self.assertIn(f"{path}:{line_no}:", run.stderr, name)
            self.assertIn("expected", run.stderr, name)
            self.assertNotIn("Traceback", run.stderr)

    # ---- refresh ---------------------------------------------------------------

    def test_refresh_reconfigures_only_on_structural_change(self):
        calls = self.dir / "scontrol.calls"
        scontrol = self.dir / "scontrol"
        scontrol.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
        scontrol.chmod(0o755)
        out = self.dir / "etc" / "topology.conf"
        out.parent.mkdir()

        def refresh(fabric):
            with IbSim(fabric, self.dir) as sim:
                run = sim.run_live(["--output", str(out), "--scontrol", str(scontrol)])
            self.assertEqual(run.returncode, 0, run.stderr)
            return calls.read_text().count("reconfigure") if calls.exists() else 0

        full = fat_tree(hosts=8, hosts_per_leaf=4)
        self.assertEqual(refresh(full), 1)
        first = out.read_text()
        self.assertEqual(refresh(full), 1)  # nothing changed
        # Hosts w-5..w-7 go down (their HCAs leave the fabric): churn, not structure.
        churn = fat_tree(hosts=8, hosts_per_leaf=4)
        churn.hcas = [h for h in churn.hcas if h.split()[0] not in ("w-5", "w-6", "w-7")]
        churn.cables = [c for c in churn.cables if c[0] in churn.hcas or c[0] in churn.switches]
        self.assertEqual(refresh(churn), 1)
        self.assertEqual(out.read_text(), first)
        # A new leaf with new hosts: the hierarchy changed.
        grown = fat_tree(hosts=12, hosts_per_leaf=4)
        self.assertEqual(refresh(grown), 2)
        conf = parse_tree_conf(out.read_text())
        self.assertEqual(len(leaves_of(conf)), 3)
        leftovers = [p.name for p in out.parent.iterdir() if ".tmp." in p.name]
        self.assertEqual(leftovers, [])


class TopologyLabelsTest(unittest.TestCase):
    """The Kubernetes label source through the program (no API server needed: it reads
    `kubectl get nodes -o json` output)."""

    def setUp(self):
        if not PROGRAM.exists():
            self.skipTest(f"{PROGRAM} not built")
        self.dir = tempdir(self)

    def test_tiered_labels(self):
        items = []
        for i in range(8):
            labels = {"topology.example.com/tier-1": f"leaf{i // 4}",
                      "topology.example.com/tier-2": "spine0"}
            items.append({"metadata": {"name": f"w-{i}", "labels": labels}})
        items.append({"metadata": {"name": "login-0", "labels": {}}})
        path = self.dir / "nodes.json"
        path.write_text(json.dumps({"kind": "NodeList", "items": items}))
        run = run_program(["--labels", str(path), "--label-prefix", "topology.example.com/",
                           "--label-tiers", "tier-1,tier-2"])
        self.assertEqual(run.returncode, 0, run.stderr)
        conf = parse_tree_conf(run.stdout)
        self.assertEqual(set(conf["k8s1-leaf0"]["Nodes"]), {f"w-{i}" for i in range(4)})
        self.assertEqual(set(conf["k8s1-leaf1"]["Nodes"]), {f"w-{i}" for i in range(4, 8)})
        self.assertEqual(set(conf["k8s2-spine0"]["Switches"]), {"k8s1-leaf0", "k8s1-leaf1"})
        self.assertEqual(conf["cpu-only"]["Nodes"], ["login-0"])
        path.write_text("{not json")
        run = run_program(["--labels", str(path)])
        self.assertEqual(run.returncode, 1)
        self.assertIn(f"{path}: not JSON", run.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
