"""spank_jail on the rig, with a real debootstrapped jail (Debian 13 trixie) on a
Debian 12 host: what tasks see, where their files land, private /tmp, the
unknown-user error, --no-jail, and that no mount is left on the host."""

import os
import pwd
import textwrap

from harness.jail import (HOST_OS_RELEASE, JailRigTestCase, holders, node_pid, os_release_id,
                          own_mountinfo_lines)
from harness.rig import NodeSpec, RigError, wait_for
from harness.testcase import main


class JailStepsTest(JailRigTestCase):
    nodes = [NodeSpec("w-0", cpus=2), NodeSpec("w-1", cpus=2)]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.jail_release = os_release_id((cls.fixture.jail / "etc/os-release").read_text())
        cls.host_release = os_release_id(HOST_OS_RELEASE.read_text())

    def srun(self, *args, env=None, check=True):
        r = self.rig.run(["srun", *args], cwd=self.rig.workdir, env=env, timeout=120)
        if check and r.returncode != 0:
            raise RigError(f"srun {args} exited {r.returncode}: {r.stderr}")
        return r

    def batch(self, script: str, args=(), states=("COMPLETED",)) -> dict:
        job = self.rig.sbatch(textwrap.dedent(script), args)
        return self.rig.wait_job(job, states=states)

    # ---- what a task sees -------------------------------------------------------

    def test_releases_differ(self):
        self.assertNotEqual(self.jail_release, self.host_release)

    def test_srun_tasks_read_the_jails_os_release(self):
        out = self.srun("-N2", "cat", "/etc/os-release").stdout
        self.assertEqual(out.count("VERSION_CODENAME="), 2)
        for block in out.split("PRETTY_NAME=")[1:]:
            self.assertEqual(os_release_id("PRETTY_NAME=" + block), self.jail_release)

    def test_fresh_proc_dev_and_sys(self):
        out = self.srun("-N1", "sh", "-c",
                        "cat /proc/self/mountinfo; echo ==; ls -d /dev/null /sys/kernel "
                        "/sys/fs/cgroup").stdout
        mountinfo, devsys = out.split("==")
        points = {line.split()[4]: line for line in mountinfo.splitlines()}
        # The host's root was detached: nothing of the host's tree is mounted by
        # its host path, and /proc is a procfs of the task's own.
        self.assertNotIn(str(self.fixture.jail), "".join(points))
        self.assertIn("/proc", points)
        self.assertIn(" - proc ", points["/proc"])
        self.assertIn("/tmp", points)
        self.assertEqual(sorted(devsys.split()), ["/dev/null", "/sys/fs/cgroup", "/sys/kernel"])

    def test_batch_script_runs_in_jail_and_its_srun_reaches_both_nodes(self):
        out = self.rig.workdir / "batch-n2.out"
        done = self.batch("""\
            #!/bin/sh
            . /etc/os-release
            echo "batch $VERSION_CODENAME"
            srun -N2 sh -c '. /etc/os-release; echo "step $(uname -n) $VERSION_CODENAME"'
            echo "srun rc $?"
            """, ["-N2", "-o", str(out)])
        self.assertEqual(done["NodeList"], "w-[0-1]")
        lines = out.read_text().splitlines()
        self.assertIn(f"batch {self.jail_release}", lines)
        self.assertIn(f"step w-0 {self.jail_release}", lines)
        self.assertIn(f"step w-1 {self.jail_release}", lines)
        self.assertIn("srun rc 0", lines)

    def test_sbatch_task_reads_jail_os_release_and_files_land_at_expected_paths(self):
        outdir = self.rig.workdir / "outputs"
        outdir.mkdir(exist_ok=True)
        done = self.batch("""\
            #!/bin/sh
            cat /etc/os-release
            echo "written from the jail" > from-jail.txt
            echo "to stderr" >&2
            """, ["-N1", "-D", str(outdir), "-o", "%x-%j.out", "-e", "err-%j.txt",
                  "-J", "landing"])
        job_id = done["JobId"]
        out = outdir / f"landing-{job_id}.out"
        self.assertEqual(os_release_id(out.read_text()), self.jail_release)
        self.assertEqual((outdir / f"err-{job_id}.txt").read_text(), "to stderr\n")
        self.assertEqual((outdir / "from-jail.txt").read_text(), "written from the jail\n")
        # srun's own --output lands on the host too.
        step_out = outdir / "step.out"
        self.srun("-N1", "-o", str(step_out), "sh", "-c", "uname -n")
        self.assertIn(step_out.read_text().strip(), ("w-0", "w-1"))

    def test_two_jobs_on_one_node_have_private_tmp_var_tmp_and_dev_shm_removed_after_each(self):
        sync = self.rig.workdir / "tmp-sync"
        sync.mkdir(exist_ok=True)
        # Each job leaves a marker in its /tmp, /var/tmp and /dev/shm, waits
        # until both jobs run, then lists them: each must see only its own.
        script = f"""\
            #!/bin/sh
            for d in /tmp /var/tmp /dev/shm; do echo "$SLURM_JOB_ID" > $d/marker-$SLURM_JOB_ID; done
            touch {sync}/started-$SLURM_JOB_ID
            i=0
            while [ "$(ls {sync} | grep -c started-)" -lt 2 ] && [ $i -lt 600 ]; do
              sleep 0.1; i=$((i+1))
            done
            for d in /tmp /var/tmp /dev/shm; do
              echo "$d $(ls $d | grep marker- | tr '\\n' ' ')" >> {sync}/seen-$SLURM_JOB_ID
            done
            """
        ids = [self.rig.sbatch(textwrap.dedent(script), ["-w", "w-0", "-n1", "-o", "/dev/null"])
               for _ in range(2)]
        for job in ids:
            self.rig.wait_job(job)
        for job in ids:
            seen = dict(line.split(" ", 1) for line in
                        (sync / f"seen-{job}").read_text().splitlines())
            for d in ("/tmp", "/var/tmp", "/dev/shm"):
                self.assertEqual(seen[d].split(), [f"marker-{job}"], d)
            tmp = self.fixture.job_tmp("w-0", job)
            wait_for(lambda: not tmp.exists() and not tmp.with_name(tmp.name + ".var-tmp").exists(),
                     60, f"job {job}'s private /tmp and /var/tmp to be removed")
        # Nothing reached the jail's own, shared, directories.
        for d in ("var/tmp", "dev/shm"):
            self.assertEqual([p for p in os.listdir(self.fixture.jail / d) if p.startswith("marker-")],
                             [], d)

    def test_unknown_user_gets_the_named_error(self):
        jail_uids = {int(l.split(":")[2]) for l in
                     (self.fixture.jail / "etc/passwd").read_text().splitlines() if l.count(":") == 6}
        user = next((p for p in pwd.getpwall() if p.pw_uid not in jail_uids and p.pw_uid >= 100
                     and p.pw_uid != 65534), None)
        if user is None:
            self.skipTest("every host user also exists in the jail")
        outdir = self.rig.workdir / "unknown-user"
        outdir.mkdir(exist_ok=True)
        os.chmod(outdir, 0o777)
        job = self.rig.sbatch("#!/bin/sh\necho should not run\n",
                              [f"--uid={user.pw_uid}", f"--gid={user.pw_gid}", "-N1",
                               "-D", str(outdir), "-o", str(outdir / "out.txt")])
        done = self.rig.wait_job(job, states=("FAILED",))
        self.assertEqual(done["JobState"], "FAILED")
        text = (outdir / "out.txt").read_text()
        self.assertIn(f"user {user.pw_name} (uid {user.pw_uid}) does not exist in jail "
                      f"{self.fixture.jail}", text)
        self.assertNotIn("should not run", text)
        # A user problem is not a node problem.
        self.assertNotIn("DRAIN", self.rig.node(done["NodeList"])["State"])

    def test_no_jail_option_or_environment_does_nothing_when_not_allowed(self):
        for args, env in [(["--no-jail"], None),
                          ([], {"_SLURM_SPANK_OPTION_spank_jail_no_jail": ""}),
                          ([], {"SPANK_JAIL_DISABLE": "1", "K8SBRIDGE_NO_JAIL": "1"})]:
            with self.subTest(args=args, env=env):
                out = self.srun(*args, "-N1", "cat", "/etc/os-release", env=env).stdout
                self.assertEqual(os_release_id(out), self.jail_release)
        out = self.rig.workdir / "nojail-batch.out"
        self.batch("#!/bin/sh\ncat /etc/os-release\n", ["--no-jail", "-N1", "-o", str(out)])
        self.assertEqual(os_release_id(out.read_text()), self.jail_release)

    def test_steps_of_a_job_share_its_namespace(self):
        # PrologFlags=Contain: the extern step made the job's namespace, and the
        # batch task and each step's tasks joined it, in the jail.
        script = """\
            #!/bin/sh
            readlink /proc/self/ns/mnt
            srun -N1 -n2 readlink /proc/self/ns/mnt
            srun -N1 -n1 sh -c 'readlink /proc/self/ns/mnt; . /etc/os-release; echo "$ID $VERSION_CODENAME"'
            """
        out = self.rig.workdir / "ns.out"
        self.batch(script, ["-N1", "-n2", "-w", "w-0", "-o", str(out)])
        lines = out.read_text().split("\n")
        namespaces = [l for l in lines if l.startswith("mnt:")]
        self.assertEqual(len(namespaces), 4, lines)
        self.assertEqual(len(set(namespaces)), 1, lines)
        self.assertIn(f"debian {self.jail_release}", lines)
        node_ns = os.readlink(f"/proc/{node_pid(self.rig, 'w-0')}/ns/mnt")
        self.assertNotEqual(namespaces[0], node_ns)
        # The holder ended with its job.
        wait_for(lambda: not holders(), 60, "the job's namespace holder to end")

    def test_namespace_task_gives_each_task_its_own_namespace(self):
        plugstack = self.rig.etc / "plugstack.conf"
        original = plugstack.read_text()
        try:
            plugstack.write_text(original.rstrip("\n") + " namespace=task\n")
            out = self.srun("-N1", "-n2", "sh", "-c",
                            "readlink /proc/self/ns/mnt; cat /etc/os-release").stdout
            namespaces = [l for l in out.splitlines() if l.startswith("mnt:")]
            self.assertEqual(len(set(namespaces)), 2, out)
            self.assertEqual(os_release_id(out), self.jail_release)
        finally:
            plugstack.write_text(original)

    def test_no_jail_works_when_the_admin_allows_it(self):
        plugstack = self.rig.etc / "plugstack.conf"
        original = plugstack.read_text()
        try:
            # plugstack.conf is re-read at every step launch.
            plugstack.write_text(original.rstrip("\n") + " allow_no_jail=yes\n")
            out = self.srun("--no-jail", "-N1", "cat", "/etc/os-release").stdout
            self.assertEqual(os_release_id(out), self.host_release)
            out = self.srun("-N1", "cat", "/etc/os-release").stdout
            self.assertEqual(os_release_id(out), self.jail_release)
        finally:
            plugstack.write_text(original)

    def test_zz_no_mount_left_on_host_after_100_steps(self):
        # The host, and each node's own mount namespace (what a pod sees as its
        # host), must look the same after 100 steps, 20 of them failing. Other
        # tests' rigs on the machine come and go meanwhile: their mounts are left
        # out, ours are all in.
        own = {self.rig.id, self.fixture.id}

        def snapshot():
            return {"host": own_mountinfo_lines(own),
                    **{n: own_mountinfo_lines(own, node_pid(self.rig, n))
                       for n in ("w-0", "w-1")}}
        before = snapshot()
        failures = 0
        for i in range(100):
            if i % 10 == 3:
                r = self.srun("-N1", "false", check=False)            # the task fails
            elif i % 10 == 7:
                r = self.srun("-N1", "/no/such/program", check=False)  # exec fails in the jail
            else:
                r = self.srun("-N1", "true", check=False)
            failures += r.returncode != 0
        self.assertEqual(failures, 20)
        # Tasks are gone once srun returns, and their mount namespaces with them.
        after = snapshot()
        for where in before:
            self.assertEqual(after[where], before[where], where)
        # The job namespaces (one per job here) went with their jobs.
        wait_for(lambda: not holders(), 60, "the jobs' namespace holders to end")


if __name__ == "__main__":
    main()
