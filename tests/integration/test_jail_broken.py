"""A jail that is unsafe, hung or unmounted fails the step, never hangs it, and
drains the node with a reason starting `spank_jail:`. plugstack.conf is re-read at
every step launch, so one rig serves every case; the node is resumed between."""

import os

from harness.jail import JailRigTestCase, slurmd_log
from harness.rig import wait_for
from harness.testcase import main

DRAIN_DEADLINE = 60  # seconds: the probe deadline below plus slurmctld's round trip


class JailBrokenTest(JailRigTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.plugin = cls.good_line.split()[1]

    def tearDown(self):
        self.plugstack.write_text(self.good_line)
        self.rig.run(["scontrol", "update", "nodename=w-0", "state=resume"])
        self.rig.wait_nodes_idle()

    def use_jail(self, jail, extra=""):
        # allow_root=yes: the rig's jobs are root's (see JailFixture.plugstack_line).
        self.plugstack.write_text(f"required {self.plugin} jail={jail} "
                                  f"tmp_base={self.fixture.tmp_base} allow_root=yes {extra}\n")

    def assert_step_fails_and_node_drains(self, message: str) -> dict:
        r = self.rig.run(["srun", "-N1", "-w", "w-0", "true"], timeout=120)
        self.assertNotEqual(r.returncode, 0)

        def drained():
            node = self.rig.node("w-0")
            return node if "DRAIN" in node["State"] and node.get("Reason", "").startswith(
                "spank_jail:") else None
        node = wait_for(drained, DRAIN_DEADLINE, "w-0 to drain with a spank_jail: reason")
        self.assertIn(message, node["Reason"])
        self.assertIn(message, slurmd_log(self.rig, "w-0"))
        return node

    def fake_jail(self, name: str, mode: int):
        jail = self.fixture.base / name
        (jail / "etc").mkdir(parents=True)
        (jail / "etc" / "os-release").write_text("ID=fake\n")
        os.chmod(jail, mode)
        return jail

    def test_good_jail_runs(self):
        r = self.rig.run(["srun", "-N1", "cat", "/etc/os-release"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("trixie", r.stdout)

    def test_jail_writable_by_others_is_refused(self):
        jail = self.fake_jail("unsafe", 0o777)
        self.use_jail(jail)
        self.assert_step_fails_and_node_drains("writable by others")

    def test_bind_target_through_a_symlink_out_of_the_jail_is_refused(self):
        jail = self.fake_jail("escape", 0o755)
        (jail / "etc-link").symlink_to("/etc")  # inside the jail it would be the host's /etc
        source = self.fixture.base / "data"
        source.mkdir()
        self.use_jail(jail, f"binds={source}:/etc-link/k8sbridge-planted")
        self.assert_step_fails_and_node_drains("symlink out of the jail")
        self.assertFalse(os.path.exists("/etc/k8sbridge-planted"))

    def test_hung_jail_times_out_and_drains(self):
        # A FIFO without a writer blocks open(2) the way a dead NFS server blocks
        # every access to the jail.
        jail = self.fake_jail("hung", 0o755)
        fifo = jail / "probe-fifo"
        os.mkfifo(fifo)
        self.use_jail(jail, "probe=probe-fifo probe_timeout=1s")
        try:
            self.assert_step_fails_and_node_drains("did not answer within 1000 ms")
        finally:
            # Let the abandoned prober finish so nothing outlives the test.
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

    def test_zz_unmounted_jail_drains_the_node(self):
        r = self.rig.run(["srun", "-N1", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.fixture.unmount_jail(self.rig, "w-0")
        self.assert_step_fails_and_node_drains("looks unmounted")


if __name__ == "__main__":
    main()
