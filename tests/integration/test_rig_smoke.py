"""The rig runs real slurmctld and two slurmd in their own namespaces, and real
srun and sbatch jobs reach both nodes at their own addresses."""

from harness.rig import Rig
from harness.testcase import RigTestCase, main


class RigSmokeTest(RigTestCase):
    def test_srun_and_sbatch_name_both_nodes_and_addresses(self):
        with Rig(nodes=2) as rig:
            nodes = rig.wait_nodes_idle()
            expected = {name: rig.node_address(name) for name in ("w-0", "w-1")}
            # Addresses come from slurmd's registration, not from slurm.conf.
            self.assertNotIn("NodeAddr", rig.slurm_conf.read_text())
            for name, address in expected.items():
                self.assertEqual(nodes[name]["NodeAddr"], address)

            out = rig.check_output(["srun", "-N2", "sh", "-c", 'echo "$(hostname) $(hostname -I)"'])
            self.assertEqual(parse_pairs(out), expected)

            out_path = rig.workdir / "batch.out"
            job = rig.sbatch("#!/bin/sh\nsrun sh -c 'echo \"$(hostname) $(hostname -I)\"'\n",
                             ["-N2", "-o", str(out_path)])
            done = rig.wait_job(job)
            self.assertEqual(done["NodeList"], "w-[0-1]")
            self.assertEqual(parse_pairs(out_path.read_text()), expected)
        self.assertNoLeftovers()


def parse_pairs(text: str) -> dict:
    pairs = {}
    for line in text.splitlines():
        words = line.split()
        if words:
            pairs[words[0]] = words[1] if len(words) > 1 else ""
    return pairs


if __name__ == "__main__":
    main()
