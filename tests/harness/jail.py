"""Shared set-up for the spank_jail integration tests.

`JailFixture` gives a test its own view of the debootstrapped jail (Debian 13
trixie, built and cached by scripts/make-jail.sh; the host is Debian 12): an
overlay whose lower layer is the cached rootfs, read-only, and whose upper layer
is the fixture's own, mounted (privately) at /run/k8sbridge-jailtest-<id>/jail and
prepared there with k8sbridge-jail-prepare. What the preparation or a job writes
into the jail lands in the fixture, so tests running at the same time never write
to the cache or see each other's changes, and a test can unmount or break its
jail without touching either. Teardown undoes the preparation, unmounts
everything under the fixture's directory and removes it only once nothing is
mounted there any more, also when the test failed.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import os
import unittest

from harness.paths import SLURM_BUILD, SOURCE_ROOT
from harness.rig import Rig, RigError, live_processes, made_rig_ids, slurm_prefix
from harness.testcase import RigTestCase

FIXTURE_PREFIX = "/run/k8sbridge-jailtest-"
HOST_OS_RELEASE = Path("/etc/os-release")


def os_release_id(text: str) -> str:
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return fields.get("VERSION_CODENAME", "").strip('"') or fields.get("PRETTY_NAME", "")


def plugin_path() -> Path:
    return SLURM_BUILD / "plugins" / "spank_jail" / "spank_jail.so"


def prepare_path() -> Path:
    return SLURM_BUILD / "programs" / "jail-prepare" / "k8sbridge-jail-prepare"


def cached_jail() -> Path:
    """The debootstrapped jail; builds it (minutes, once) when it is not cached."""
    out = subprocess.run([str(SOURCE_ROOT / "scripts" / "make-jail.sh")], check=True,
                         capture_output=True, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            points.append(line.split()[4].encode().decode("unicode_escape"))
    return points


def mountinfo_lines(pid: str | int = "self") -> list[str]:
    """/proc/PID/mountinfo without mount ids (those change with every mount)."""
    with open(f"/proc/{pid}/mountinfo") as f:
        return sorted(" ".join(line.split()[3:]) for line in f)


# Mounts that other tests' rigs, jail fixtures and benchmarks make and remove on
# the host while a test runs (other engineers share the machine): network
# namespace files, rig directories, fixture and benchmark directories, each
# named after its owner's id (six hex digits; a real cluster's, eight). They
# change in a node's private mount namespace too: unlinking a mount point
# (`ip netns delete`) detaches it in every namespace.
OWNED_MOUNT = re.compile(r"/(?:run/netns/k8sb-|tmp/k8sbridge-rig-|run/k8sbridge-jailtest-|"
                         r"run/k8sbridge-bench-)([0-9a-f]{6}(?:[0-9a-f]{2})?)\b")


# Mounts that other tests running beside a rig make and that a rig never does: runc
# containers of the image tests and mmdebstrap's build roots (the artifacts build: in /tmp, or made in place under
# the cache on a cold run, scripts/build-root.sh).
OTHER_TESTS_MOUNT = re.compile(r"/k8sb-oci-|/tmp/mmdebstrap\.|"
                               r"/buildroot-[a-z]+-[0-9a-f]+(?:\.tmp)?/")


def own_mountinfo_lines(own_ids: set[str], pid: str | int = "self") -> list[str]:
    """mountinfo_lines(pid) without other rigs', fixtures' and benchmarks' mounts
    (the ones whose owner id is not in own_ids) and other tests' (OTHER_TESTS_MOUNT)."""
    def foreign(line: str) -> bool:
        if OTHER_TESTS_MOUNT.search(line):
            return True
        m = OWNED_MOUNT.search(line)
        return m is not None and m.group(1) not in own_ids
    return [line for line in mountinfo_lines(pid) if not foreign(line)]


def node_pid(rig: Rig, node: str) -> int:
    """slurmd's pid: the rig execs it (nsenter, unshare, sh all exec), so the pid
    of the process the rig started is slurmd's, in the node's mount namespace."""
    return rig.workers[node].proc.pid


class JailFixture:
    def __init__(self, prepare: bool = True):
        self.id = secrets.token_hex(3)
        self.base = Path(f"{FIXTURE_PREFIX}{self.id}")
        self.jail = self.base / "jail"
        self.upper = self.base / "upper"  # the overlay's writable layer, and its workdir
        self.overlay_work = self.base / "overlay-work"
        self.tmp_base = self.base / "tmp"
        self.state_file = self.base / "prepare.state"
        self.prepare = prepare
        self.source = cached_jail()

    def __enter__(self) -> "JailFixture":
        try:
            self.base.mkdir(mode=0o755)
            for d in (self.jail, self.upper, self.overlay_work):
                d.mkdir(mode=0o755)
            self._run(["mount", "-t", "overlay", "overlay", "-o",
                       f"lowerdir={self.source},upperdir={self.upper},"
                       f"workdir={self.overlay_work}", str(self.jail)])
            self._run(["mount", "--make-rprivate", str(self.jail)])
            if self.prepare:
                self.run_prepare()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def run_prepare(self, *extra: str) -> subprocess.CompletedProcess:
        return self._run([str(prepare_path()), "--jail", str(self.jail),
                          "--slurm-prefix", str(slurm_prefix()),
                          "--state-file", str(self.state_file), *extra])

    def plugstack_line(self, rig: Rig, extra: str = "", allow_root: bool = True) -> str:
        # The rig keeps slurm.conf, the munge socket and the spool under its
        # workdir in /tmp: bind it into every task's private /tmp. srun inside
        # the jail loads the plugin too, so it is copied there as well (in
        # production it sits in Slurm's plugin directory, which is bound).
        # The rig submits its jobs as root, which spank_jail refuses unless
        # allow_root=yes: the tests that are not about root jobs allow them.
        plugin = rig.workdir / "plugins" / "spank_jail.so"
        plugin.parent.mkdir(exist_ok=True)
        shutil.copy2(plugin_path(), plugin)
        root = "allow_root=yes " if allow_root else ""
        return (f"required {plugin} jail={self.jail} tmp_base={self.tmp_base} "
                f"binds={rig.workdir} probe_timeout=3s {root}{extra}").strip()

    def job_tmp(self, node: str, job_id: int) -> Path:
        return self.tmp_base / node / f"job{job_id}"

    def unmount_jail(self, rig: Optional[Rig] = None, node: str = "") -> None:
        """Makes the jail look like an unmounted volume, an empty directory: on the
        host, or (with rig and node) in that node's own mount namespace."""
        cmd = ["umount", "-R", "-l", str(self.jail)]
        if rig is not None:
            cmd = ["nsenter", f"--mount=/proc/{node_pid(rig, node)}/ns/mnt", *cmd]
        self._run(cmd)

    def close(self) -> None:
        if self.state_file.exists():
            subprocess.run([str(prepare_path()), "--jail", str(self.jail), "--undo",
                            "--state-file", str(self.state_file)], capture_output=True)
        root = str(self.base)
        for point in sorted((p for p in mount_points() if p == root or p.startswith(root + "/")),
                            key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
        left = [p for p in mount_points() if p == root or p.startswith(root + "/")]
        if left:
            # Never remove a directory that still has a mount of the jail in it.
            raise RigError(f"mounts left under {root}, not removing it: {left}")
        if self.base.exists():
            remove_tree(self.base)

    @staticmethod
    def _run(cmd: list[str]) -> subprocess.CompletedProcess:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RigError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
        return r


def remove_tree(path: Path) -> None:
    """Removes `path` and everything below it, however deep (a job may leave a
    tree 20,000 levels deep, which shutil.rmtree's recursion cannot follow),
    never crossing into another mount."""
    r = subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0 or path.exists():
        raise RigError(f"cannot remove {path}: {r.stderr.strip()}")


def jail_rig(fixture: JailFixture, nodes=1, plugstack_extra: str = "", contain: bool = True,
             **kw) -> Rig:
    """A rig (not started yet) whose plugstack.conf loads spank_jail for `fixture`.

    With `contain` (the documented set-up) slurm.conf has PrologFlags=Contain, so
    each job's extern step makes the job namespace that its tasks join; without
    it there is no extern step and every task enters the jail on its own."""
    if contain:
        kw["slurm_conf_extra"] = "PrologFlags=Contain\n" + kw.get("slurm_conf_extra", "")
    rig = Rig(nodes=nodes, **kw)
    rig.config.plugstack_lines = [fixture.plugstack_line(rig, plugstack_extra)]
    return rig


class JailRigTestCase(RigTestCase):
    """One jail fixture and one jail rig (`nodes`, started and idle) for the
    whole class, torn down also when the set-up fails half-way. `plugstack`
    is the rig's plugstack.conf and `good_line` the line it started with."""

    nodes = 1

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        cls.fixture = JailFixture().__enter__()
        try:
            cls.rig = jail_rig(cls.fixture, nodes=cls.nodes)
            cls.rig.__enter__()
            cls.rig.wait_nodes_idle()
        except BaseException:
            cls.fixture.close()
            raise
        cls.plugstack = cls.rig.etc / "plugstack.conf"
        cls.good_line = cls.plugstack.read_text()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.rig.__exit__(None, None, None)
        finally:
            cls.fixture.close()


def holders() -> list[int]:
    """Live spank_jail job namespace holders of this process's rigs (other tests'
    rigs run at the same time)."""
    return live_processes("spank_jail_ns", rig_ids=made_rig_ids())


def slurmd_log(rig: Rig, node: str) -> str:
    p = rig.logdir / f"slurmd-{node}.log"
    return p.read_text(errors="replace") if p.exists() else ""
