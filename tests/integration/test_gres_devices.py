"""GPUs as the deployed slurm.conf, gres.conf and cgroup.conf declare them
(docs/deploy.md, "GPUs"): GresTypes=gpu keeps a node's Gres, gres.conf's File=
names its device files, and ConstrainDevices=yes lets a job's tasks open only the
devices Slurm allocated it. Fake device files stand in for the GPUs: character
devices of a major no driver holds, so opening an allowed one fails with ENXIO
(no device behind it) and a denied one with EPERM (the job's device cgroup)."""

import os
import re
import unittest

from harness.gpu_toolkit import free_char_major
from harness.rig import NodeSpec, Rig, RigConfig
from harness.testcase import RigTestCase, main

GPUS = 2
# Opens each file and prints its name and the error (or "open").
PROBE = ("import os, errno, sys\n"
         "for f in sys.argv[1:]:\n"
         "    try:\n"
         "        os.close(os.open(f, os.O_RDONLY))\n"
         "        print(os.path.basename(f), 'open')\n"
         "    except OSError as e:\n"
         "        print(os.path.basename(f), errno.errorcode[e.errno])\n"
         "print('CUDA_VISIBLE_DEVICES', os.environ.get('CUDA_VISIBLE_DEVICES', '-'))\n")


class GresDevicesTest(RigTestCase):
    def test_a_job_opens_only_its_own_gpus(self):
        if not os.path.isdir("/sys/fs/cgroup"):
            raise unittest.SkipTest("no /sys/fs/cgroup on this host")
        # One node: rig nodes share the host's cgroup tree (test_jail_cgroup.py).
        rig = Rig(nodes=[NodeSpec("w-0", cpus=2, gres=f"gpu:{GPUS}")], config=RigConfig(
            slurm_conf_extra="ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\n"
                             "GresTypes=gpu\n",
            cgroup_conf="CgroupPlugin=autodetect\nIgnoreSystemd=yes\nConstrainDevices=yes\n"))
        devices = rig.workdir / "dev"
        devices.mkdir()
        major = free_char_major()
        files = [devices / f"fakegpu{i}" for i in range(GPUS)]
        for i, f in enumerate(files):
            os.mknod(f, 0o666 | 0o020000, os.makedev(major, i))
        # What the deployed gres.conf says: the files, no AutoDetect.
        rig.config.extra_files["gres.conf"] = (
            f"NodeName=w-0 Name=gpu File={devices}/fakegpu[0-{GPUS - 1}]\n")
        probe = rig.workdir / "probe.py"
        probe.write_text(PROBE)
        with rig:
            rig.wait_nodes_idle()
            node = rig.check_output(["scontrol", "-o", "show", "node", "w-0"])
            self.assertIn(f"Gres=gpu:{GPUS}", node)

            def seen(*srun_args):
                out = rig.check_output(["srun", "-N1", *srun_args, "python3", str(probe),
                                        *map(str, files)], cwd=rig.workdir)
                return dict(re.findall(r"^(\S+) (\S+)$", out, re.M))

            one = seen("--gres=gpu:1")
            self.assertEqual(sorted(one[f.name] for f in files), ["ENXIO", "EPERM"], one)
            self.assertEqual(one["CUDA_VISIBLE_DEVICES"], "0", one)
            both = seen(f"--gres=gpu:{GPUS}")
            self.assertEqual([both[f.name] for f in files], ["ENXIO"] * GPUS, both)
            self.assertEqual(both["CUDA_VISIBLE_DEVICES"], "0,1", both)
            none = seen()
            self.assertEqual([none[f.name] for f in files], ["EPERM"] * GPUS, none)
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
