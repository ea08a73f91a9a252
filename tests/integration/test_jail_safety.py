"""spank_jail's promises that a user cannot break: a job that leaves a tree too
deep for any recursion in its /tmp drains no node and leaves nothing behind;
root jobs are refused unless the administrator allows them; and with
`optional` in plugstack.conf (Slurm then ignores the plugin's errors) a task
whose jail set-up failed still never runs on the pod's root; and every task is
sealed: no_new_privs, nosuid mounts, a read-only jail, hidepid, and a /tmp of
limited size."""

import os
import textwrap

from harness.jail import (HOST_OS_RELEASE, JailRigTestCase, node_pid, os_release_id,
                          own_mountinfo_lines, slurmd_log)
from harness.rig import NodeSpec, wait_for
from harness.testcase import main

DEPTH = 20000
REFUSED_EXIT = 213  # jail::kTaskRefusedExitCode


class JailSafetyTest(JailRigTestCase):
    nodes = [NodeSpec("w-0", cpus=2), NodeSpec("w-1", cpus=2)]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.host_release = os_release_id(HOST_OS_RELEASE.read_text())

    def tearDown(self):
        self.plugstack.write_text(self.good_line)

    def assert_no_node_drained(self):
        for name in ("w-0", "w-1"):
            node = self.rig.node(name)
            self.assertNotIn("DRAIN", node["State"], f"{name}: {node.get('Reason', '')}")

    def test_deep_trees_left_in_tmp_drain_no_node_and_leave_nothing(self):
        own = {self.rig.id, self.fixture.id}

        def mounts():
            return {"host": own_mountinfo_lines(own),
                    **{n: own_mountinfo_lines(own, node_pid(self.rig, n)) for n in ("w-0", "w-1")}}
        before = mounts()
        # perl (Essential in Debian, so in every jail) makes the tree one
        # relative mkdir and chdir at a time: the path is far beyond PATH_MAX.
        script = textwrap.dedent(f"""\
            #!/bin/sh
            cd /tmp || exit 1
            perl -e 'for (1..{DEPTH}) {{ mkdir "d" or die "mkdir: $!"; chdir "d" or die "chdir: $!" }}
                     print "made\\n"'
            """)
        outdir = self.rig.workdir / "deep"
        outdir.mkdir(exist_ok=True)
        jobs = [self.rig.sbatch(script, ["-N1", "-n1", "-o", str(outdir / "%j.out")])
                for _ in range(10)]
        for job in jobs:
            done = self.rig.wait_job(job, timeout=300)
            self.assertEqual((outdir / f"{job}.out").read_text().strip(), "made", done)
        for job in jobs:
            node = self.rig.job(job)["NodeList"]
            wait_for(lambda: not self.fixture.job_tmp(node, job).exists(), 120,
                     f"job {job}'s private /tmp on {node} to be removed")
        self.assert_no_node_drained()
        self.assertEqual(mounts(), before)

    def test_root_jobs_are_refused_by_default_and_run_with_allow_root(self):
        # The rig's jobs are root's: this line leaves allow_root at its default.
        self.plugstack.write_text(self.fixture.plugstack_line(self.rig, allow_root=False) + "\n")
        r = self.rig.run(["srun", "-N1", "-w", "w-0", "cat", "/etc/os-release"], timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("VERSION_CODENAME", r.stdout)
        self.assertIn(f"exit code {REFUSED_EXIT}", r.stderr)
        log = slurmd_log(self.rig, "w-0")
        self.assertIn("runs as root (uid 0): spank_jail refuses root jobs", log)
        self.assertIn("set allow_root=yes", log)
        # A batch job too, and a root job is not a node problem: no drain.
        out = self.rig.workdir / "root-batch.out"
        job = self.rig.sbatch("#!/bin/sh\necho should not run\n", ["-N1", "-w", "w-0",
                                                                  "-o", str(out)])
        done = self.rig.wait_job(job, states=("FAILED",))
        self.assertEqual(done["ExitCode"], f"{REFUSED_EXIT}:0")
        self.assertNotIn("should not run", out.read_text() if out.exists() else "")
        self.assert_no_node_drained()

        self.plugstack.write_text(self.good_line)  # allow_root=yes
        r = self.rig.run(["srun", "-N1", "-w", "w-0", "cat", "/etc/os-release"], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("trixie", r.stdout)

    def test_optional_plugin_with_a_broken_jail_never_runs_tasks_on_the_pod_root(self):
        plugin = self.good_line.split()[1]
        unsafe = self.fixture.base / "unsafe"
        (unsafe / "etc").mkdir(parents=True)
        (unsafe / "etc" / "os-release").write_text("ID=fake\n")
        os.chmod(unsafe, 0o777)
        lines = {
            # The jail is refused in init_post_opt, which Slurm ignores.
            "unsafe jail": f"optional {plugin} jail={unsafe} tmp_base={self.fixture.tmp_base} "
                           "allow_root=yes drain=no",
            # The options do not parse: init fails, which Slurm ignores too.
            "bad option": f"optional {plugin} jail={self.fixture.jail} allow_root=yes colour=blue",
        }
        for what, line in lines.items():
            with self.subTest(what):
                self.plugstack.write_text(line + "\n")
                r = self.rig.run(["srun", "-N1", "-w", "w-0", "cat", "/etc/os-release"],
                                 timeout=120)
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertNotIn("VERSION_CODENAME", r.stdout)  # neither the host's nor a jail's
                self.assertIn(f"exit code {REFUSED_EXIT}", r.stderr)
                self.assertIn("ending the task before it runs", slurmd_log(self.rig, "w-0"))
        self.assert_no_node_drained()
        # The good jail, loaded as optional, still works.
        self.plugstack.write_text(self.good_line.replace("required", "optional", 1))
        r = self.rig.run(["srun", "-N1", "-w", "w-0", "cat", "/etc/os-release"], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os_release_id(r.stdout), "trixie")
        self.assertNotEqual(os_release_id(r.stdout), self.host_release)


    SEAL_SCRIPT = textwrap.dedent("""\
        #!/bin/sh
        grep '^NoNewPrivs:' /proc/self/status
        awk '("," $6 ",") !~ /,nosuid,/ {print "suid mount", $5}' /proc/self/mountinfo
        awk '$5 == "/" {split($6, o, ","); print "root", o[1]}' /proc/self/mountinfo
        awk '$5 == "/proc" && / - proc / {print "proc", $NF}' /proc/self/mountinfo
        if touch /etc/k8sbridge-written 2>/dev/null; then echo "etc writable"; fi
        touch /tmp/mine /var/tmp/mine && echo "tmp writable"
        echo "tmp $(stat -f -c %T /tmp) $(df -k --output=size /tmp | tail -1 | tr -d ' ')"
        if [ -e /proc/1 ]; then echo "pid 1 visible"; else echo "pid 1 hidden"; fi
        test -r "$SLURM_CONF" && echo "slurm conf readable"
        """)

    def test_every_task_is_sealed(self):
        # A user's batch job (uid 1, daemon, in the host's and the jail's
        # passwd): no_new_privs, no mount without nosuid, the jail's root
        # read-only but /tmp and /var/tmp writable, /tmp a tmpfs of tmp_size,
        # other users' processes (pid 1) invisible, and a SLURM_CONF it can read.
        self.plugstack.write_text(self.good_line.rstrip("\n") + " tmp_size=64m\n")
        outdir = self.rig.workdir / "sealed"
        outdir.mkdir(exist_ok=True)
        os.chmod(outdir, 0o777)
        job = self.rig.sbatch(self.SEAL_SCRIPT, ["-N1", "-w", "w-0", "--uid=1", "--gid=1",
                                                 "-D", str(outdir), "-o", str(outdir / "%j.out")])
        self.rig.wait_job(job)
        lines = (outdir / f"{job}.out").read_text().splitlines()
        self.assertIn("NoNewPrivs:\t1", lines)
        self.assertEqual([l for l in lines if l.startswith("suid mount")], [], lines)
        self.assertIn("root ro", lines)
        self.assertIn("proc rw,hidepid=invisible", lines)
        self.assertNotIn("etc writable", lines)
        self.assertIn("tmp writable", lines)
        self.assertIn("tmp tmpfs 65536", lines)
        self.assertIn("pid 1 hidden", lines)
        self.assertIn("slurm conf readable", lines)
        # An srun step's tasks too (root's, allowed on the rig: root sees pid 1).
        r = self.rig.run(["srun", "-N1", "-w", "w-0", "sh", "-c", self.SEAL_SCRIPT], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        step = r.stdout.splitlines()
        for want in ("NoNewPrivs:\t1", "root ro", "tmp writable", "tmp tmpfs 65536",
                     "slurm conf readable"):
            self.assertIn(want, step)
        self.assertEqual([l for l in step if l.startswith("suid mount")], [], step)
        self.assertNotIn("etc writable", step)
        self.assert_no_node_drained()


if __name__ == "__main__":
    main()
