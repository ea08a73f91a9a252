"""The container entrypoints (k8sbridge-entrypoint, k8sbridge-worker) as a
container's PID 1: each runs as PID 1 of a new PID namespace (unshare --pid --fork
--mount-proc), with the real munged and a stand-in daemon script, and shows that
the runtime's signal reaches the daemon, that an orphan the daemon leaves is
reaped (no zombie), that the exit code is the daemon's, and that the munged the
entrypoint started is stopped with SIGTERM. The rig's real slurmctld starts under
the entrypoint from a ConfigMap-style directory and answers scontrol ping; the
rig's real slurmd under the worker registers, runs a step, and ends with 0 on
SIGTERM, with nothing left unreaped. A missing munge key, a wrong key (worker),
a missing slurm.conf and a Slurm version mismatch each exit non-zero with a
one-line error (docs/deploy.md, "Entrypoints"; docs/power.md)."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness.paths import BUILD_ROOT, ENTRYPOINT, WORKER
from harness.rig import GaveUp, Rig, slurm_prefix, wait_for
from harness.testcase import main, require_root

# The stand-in for slurmctld, slurmd and a login command. `-V` answers like
# Slurm's daemons (FAKE_VERSION changes the release). Otherwise it leaves an
# orphan (a subshell's sleep, reparented to PID 1), reports under STATE when
# /proc shows it gone (reaped: a zombie stays in /proc until PID 1 waits for it),
# and exits 7 on SIGTERM.
DAEMON = r"""#!/bin/bash
if [ "$1" = -V ]; then echo "slurm ${FAKE_VERSION}"; exit 0; fi
echo "$*" > "$STATE/args"
trap 'echo TERM > "$STATE/signal"; exit 7' TERM
( sleep 0.1 & echo $! > "$STATE/orphan" )
orphan=$(cat "$STATE/orphan")
while [ -e /proc/$orphan ]; do sleep 0.05; done
echo reaped > "$STATE/orphan-reaped"
while :; do sleep 0.05; done
"""


def built_for_slurm() -> str:
    header = BUILD_ROOT / "libk8sbridge" / "k8sbridge_version.h"
    return re.search(r'K8SBRIDGE_SLURM_VERSION "([^"]+)"', header.read_text()).group(1)


def error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines() if ": error: " in line]


class EntrypointTestCase(unittest.TestCase):
    def setUp(self):
        require_root(self)
        for program in (ENTRYPOINT, WORKER):
            if not program.exists():
                self.fail(f"{program} is not built")
        self.dir = Path(tempfile.mkdtemp(prefix="k8sbridge-entrypoint-"))
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        os.chmod(self.dir, 0o755)  # munged refuses sockets under world-writable dirs
        self.state = self.dir / "state"
        self.state.mkdir()
        self.key = self.make_key("munge.key")
        self.daemon = self.dir / "daemon"
        self.daemon.write_text(DAEMON)
        self.daemon.chmod(0o755)
        self.conf_dir = self.config_map({"slurm.conf": "ClusterName=entry\n"})
        self.procs = []
        self.addCleanup(self.kill_all)

    def make_key(self, name: str) -> Path:
        path = self.dir / name
        subprocess.run(["mungekey", "--create", f"--keyfile={path}"], check=True)
        return path

    def config_map(self, files: dict) -> Path:
        """A directory laid out as a ConfigMap volume: every key a symlink into
        ..data, itself a symlink to the timestamped directory with the files."""
        root = self.dir / "configmap"
        data = root / "..2026_12_01_00_00_00.000000001"
        data.mkdir(parents=True)
        for name, text in files.items():
            (data / name).write_text(text)
        (root / "..data").symlink_to(data.name)
        for name in files:
            (root / name).symlink_to(f"..data/{name}")
        return root

    def env(self, **more) -> dict:
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "STATE": str(self.state),
            "FAKE_VERSION": built_for_slurm(),
            "K8SBRIDGE_MUNGED_KEY": str(self.key),
            "K8SBRIDGE_MUNGED_DIR": str(self.dir / "munged"),
            "K8SBRIDGE_MUNGE_SOCKET": str(self.dir / "socket" / "munge.socket"),
            "K8SBRIDGE_SLURM_CONF_DIR": str(self.conf_dir),
            "K8SBRIDGE_SLURMCTLD": str(self.daemon),
            "K8SBRIDGE_SRUN": str(self.daemon),
            "K8SBRIDGE_SLURMD": str(self.daemon),
        }
        env.update(more)
        return env

    def start_as_pid1(self, argv: list, env: dict) -> subprocess.Popen:
        proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", *map(str, argv)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        self.procs.append(proc)
        return proc

    def run_as_pid1(self, argv: list, env: dict) -> subprocess.CompletedProcess:
        proc = self.start_as_pid1(argv, env)
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def kill_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()  # unshare; its child, PID 1, then takes the namespace down
                proc.communicate(timeout=30)

    def pid1_of(self, unshare: subprocess.Popen) -> int:
        """The host pid of the entrypoint: unshare's one child."""
        def child():
            if unshare.poll() is not None:
                raise GaveUp(f"unshare exited {unshare.returncode}: {unshare.stderr.read()}")
            path = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
            pids = path.read_text().split() if path.exists() else []
            return int(pids[0]) if pids else 0
        return wait_for(child, 30, "unshare to start the entrypoint")

    def munged_log(self) -> str:
        path = self.dir / "munged" / "munged.log"
        return path.read_text() if path.exists() else ""

    def assert_supervised(self, argv: list, env: dict, daemon_args: str):
        proc = self.start_as_pid1(argv, env)
        pid1 = self.pid1_of(proc)
        wait_for(lambda: (self.state / "orphan-reaped").exists() or proc.poll() is not None, 30,
                 "the daemon's orphan to be reaped")
        self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        self.assertEqual((self.state / "args").read_text().strip(), daemon_args)
        os.kill(pid1, signal.SIGTERM)  # what the runtime does: to PID 1 only
        out, err = proc.communicate(timeout=60)
        self.assertEqual((self.state / "signal").read_text().strip(), "TERM", err)
        self.assertEqual(proc.returncode, 7, err)  # the daemon's own exit status
        self.assertIn("passing SIGTERM on to daemon", err)
        self.assertIn("stopping munged", err)
        self.assertIn("Exiting on signal 15", self.munged_log())  # stopped, not killed
        self.assertEqual(error_lines(err), [])


class PidOneTest(EntrypointTestCase):
    def test_controller_passes_sigterm_on_reaps_orphans_and_exits_with_the_daemons_code(self):
        conf = self.conf_dir / "slurm.conf"
        self.assert_supervised([ENTRYPOINT, "controller", "-v"], self.env(),
                               f"-D -f {conf} -v")

    def test_worker_as_pid1_supervises_slurmd_the_same_way(self):
        env = self.env(K8SBRIDGE_NODE_NAME="w-0", K8SBRIDGE_CLUSTER="entry")
        self.assert_supervised([WORKER, "-v"], env, "-D -b -N w-0 -v")

    def test_login_runs_its_command_and_a_signal_death_is_128_plus_the_signal(self):
        r = self.run_as_pid1([ENTRYPOINT, "login", "/bin/sh", "-c", "kill -USR2 $$"],
                             self.env())
        self.assertEqual(r.returncode, 128 + signal.SIGUSR2, r.stderr)
        self.assertIn("sh was killed by SIGUSR2", r.stderr)
        self.assertIn("stopping munged", r.stderr)

    def test_login_with_a_munged_user_runs_munged_as_that_user_owning_its_files(self):
        socket = self.dir / "socket" / "munge.socket"
        script = (f"munge -n -S {socket} | unmunge -S {socket} | grep -c 'STATUS: *Success'; "
                  "for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" != munged ] || "
                  "stat -c %U $p; done | sort -u; "
                  f"stat -c '%U %a' {self.dir}/munged {self.dir}/munged/munge.key "
                  f"{self.dir}/socket")
        r = self.run_as_pid1([ENTRYPOINT, "login", "/bin/sh", "-c", script],
                             self.env(K8SBRIDGE_MUNGED_USER="munge"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n")[:5],
                         ["1", "munge", "munge 700", "munge 400", "munge 755"], r.stderr)
        self.assertIn("as munge", r.stderr)
        self.assertIn("Exiting on signal 15", self.munged_log())  # stopped, not killed


class RealSlurmctldTest(EntrypointTestCase):
    """The rig's own slurmctld (the release k8sbridge was built for) under the
    entrypoint, in a network namespace of its own, from a ConfigMap-style mount."""

    def slurm_conf(self) -> str:
        sock = self.dir / "socket" / "munge.socket"
        (self.dir / "slurmctld-state").mkdir()
        return (f"ClusterName=entry\nSlurmctldHost=ctl(192.0.2.10)\nSlurmUser=root\n"
                f"AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket={sock}\n"
                f"StateSaveLocation={self.dir}/slurmctld-state\nSlurmctldPidFile={self.dir}/ctld.pid\n"
                f"SlurmctldLogFile=/dev/stderr\nProctrackType=proctrack/linuxproc\n"
                f"TaskPlugin=task/none\nSelectType=select/cons_tres\nMpiDefault=none\n"
                f"NodeName=w-[0-1] CPUs=1 State=CLOUD\nPartitionName=main Nodes=w-[0-1]\n")

    def test_slurmctld_starts_from_a_config_map_answers_ping_and_stops_on_sigterm(self):
        shutil.rmtree(self.conf_dir)
        self.conf_dir = self.config_map({"slurm.conf": self.slurm_conf()})
        # A pod's network: loopback and an address on an interface (slurmctld
        # resolves its host with AI_ADDRCONFIG, which loopback alone does not meet).
        net = ("ip link set lo up && ip link add eth0 type veth peer name eth0p && "
               "ip addr add 192.0.2.10/24 dev eth0 && ip link set eth0p up && "
               "ip link set eth0 up && hostname ctl && exec \"$@\"")
        prefix = slurm_prefix()
        env = self.env(K8SBRIDGE_SLURMCTLD=str(prefix / "sbin" / "slurmctld"))
        proc = subprocess.Popen(
            ["unshare", "--net", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", net,
             "sh", str(ENTRYPOINT), "controller"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        pid1 = self.pid1_of(proc)
        scontrol = ["nsenter", "-t", str(pid1), "-n", "-u", str(prefix / "bin" / "scontrol"),
                    "ping"]
        ping_env = {**env, "SLURM_CONF": str(self.conf_dir / "slurm.conf")}
        wait_for(lambda: proc.poll() is not None or "is UP" in subprocess.run(
            scontrol, env=ping_env, capture_output=True, text=True).stdout, 60,
            "slurmctld to answer scontrol ping")
        self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        os.kill(pid1, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err[-3000:])
        self.assertIn("passing SIGTERM on to slurmctld", err)
        self.assertIn("Exiting on signal 15", self.munged_log())


class RealSlurmdTest(EntrypointTestCase):
    def zombies_of(self, pid: int) -> list:
        """The children of `pid` that have ended and wait to be reaped."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == pid:
                found.append(int(stat.parent.name))
        return found

    def test_worker_as_pid1_runs_slurmd_that_registers_runs_a_step_and_stops_cleanly(self):
        with Rig(nodes=1, start_slurmd=False) as rig:
            (rig.workdir / "spool" / "w-0").mkdir(parents=True, exist_ok=True)
            sock_dir = self.dir / "pod-munge"  # the pod's emptyDir for munged's socket
            sock_dir.mkdir()
            secret = self.dir / "secret-munge.key"  # the rig's key sits under the socket's dir
            shutil.copyfile(rig.munge_key, secret)
            inner = (f"mount --bind {sock_dir} {rig.munge_socket.parent} && "
                     f"mount --bind {rig.node_hosts} /etc/hosts && "
                     f"mount --bind {rig.node_resolv} /etc/resolv.conf && hostname w-0 && "
                     f"exec {WORKER} -f {rig.slurm_conf}")
            cred = rig.check_output(["munge", "-S", str(rig.munge_socket), "-s",
                                     "k8sbridge-munge-check cluster=entry"]).strip()
            env = rig.env(self.env(
                K8SBRIDGE_NODE_NAME="w-0", K8SBRIDGE_CLUSTER="entry", K8SBRIDGE_MUNGE_CHECK=cred,
                K8SBRIDGE_MUNGE_SOCKET=str(rig.munge_socket), K8SBRIDGE_MUNGED_KEY=str(secret),
                K8SBRIDGE_SLURMD=str(rig.prefix / "sbin" / "slurmd")))
            proc = subprocess.Popen(
                ["nsenter", f"--net={rig.netns_path('w-0')}", "unshare", "--uts", "--mount",
                 "--propagation", "private", "--pid", "--fork", "--mount-proc", "--", "sh", "-c",
                 inner], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(proc)
            pid1 = self.pid1_of(proc)
            wait_for(lambda: proc.poll() is not None or
                     rig.node("w-0")["State"].startswith("IDLE"), 90, "w-0 to register")
            self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
            self.assertEqual(rig.check_output(["srun", "-w", "w-0", "-N1", "hostname"]).strip(),
                             "w-0")
            # slurmstepd daemonizes away from slurmd: PID 1 is its parent, and reaps it.
            wait_for(lambda: not self.zombies_of(pid1), 30, "PID 1 to reap the step's processes")
            # The pod is stopped as power stops it: once the node is idle, its job's
            # terminate RPC done. A SIGTERM that reached slurmd 17 ms after the step,
            # before that RPC, once left Slurm 24.11's slurmd silent after "Caught
            # SIGTERM" for over 60 s: its shutdown waits on its connections.
            def idle():
                state = rig.node("w-0")["State"].split("+")
                return state[0] == "IDLE" and "COMPLETING" not in state
            wait_for(idle, 60, "w-0 to be idle, its job's end done")
            os.kill(pid1, signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 0, err[-3000:])
            self.assertIn("passing SIGTERM on to slurmd", err)
            self.assertIn("munge key matches", err)
            self.assertIn("Exiting on signal 15", self.munged_log())


class RefusalTest(EntrypointTestCase):
    def assert_refused(self, argv: list, env: dict, *words: str) -> str:
        r = self.run_as_pid1(argv, env)
        self.assertEqual(r.returncode, 1, r.stderr)
        errors = error_lines(r.stderr)
        self.assertEqual(len(errors), 1, r.stderr)
        for word in words:
            self.assertIn(word, errors[0])
        self.assertFalse((self.state / "args").exists(), "the daemon was started")
        return errors[0]

    def test_a_missing_munge_key_is_refused_naming_the_path(self):
        missing = self.dir / "secret" / "munge.key"
        for argv, env in (([ENTRYPOINT, "controller"], self.env(K8SBRIDGE_MUNGED_KEY=str(missing))),
                          ([WORKER], self.env(K8SBRIDGE_MUNGED_KEY=str(missing),
                                              K8SBRIDGE_NODE_NAME="w-0"))):
            with self.subTest(program=Path(argv[0]).name):
                self.assert_refused(argv, env, f"munge key {missing} is missing",
                                    "K8SBRIDGE_MUNGED_KEY")

    def test_a_short_munge_key_is_refused(self):
        short = self.dir / "short.key"
        short.write_bytes(b"x" * 8)
        self.assert_refused([ENTRYPOINT, "login"], self.env(K8SBRIDGE_MUNGED_KEY=str(short)),
                            f"munge key {short} is 8 bytes", "mungekey --create")

    def test_a_slurm_version_mismatch_is_refused_naming_both_versions(self):
        for argv, env in (([ENTRYPOINT, "controller"], self.env(FAKE_VERSION="23.02.7")),
                          ([ENTRYPOINT, "login"], self.env(FAKE_VERSION="23.02.7")),
                          ([WORKER], self.env(FAKE_VERSION="23.02.7", K8SBRIDGE_NODE_NAME="w-0"))):
            with self.subTest(program=Path(argv[0]).name, role=argv[1:]):
                self.assert_refused(argv, env, "Slurm version mismatch", "Slurm 23.02.7",
                                    f"built for Slurm {built_for_slurm()}",
                                    "image built for Slurm 23.02.7")

    def test_a_config_directory_without_slurm_conf_is_refused(self):
        (self.conf_dir / "slurm.conf").unlink()
        self.assert_refused([ENTRYPOINT, "controller"], self.env(),
                            f"no slurm.conf in the Slurm configuration directory {self.conf_dir}",
                            "K8SBRIDGE_SLURM_CONF_DIR")

    def test_a_worker_with_another_key_than_the_controllers_is_refused(self):
        # The controller's munged, with its own key, makes the check credential as
        # k8sbridge-power does at resume; the pod's munged holds another key.
        controller_key = self.make_key("controller.key")
        socket = self.dir / "controller.socket"
        munged = subprocess.Popen([
            "munged", "--foreground", "--force", f"--key-file={controller_key}",
            f"--socket={socket}", f"--pid-file={self.dir}/controller.pid",
            f"--seed-file={self.dir}/controller.seed", f"--log-file={self.dir}/controller.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(munged.wait, 30)
        self.addCleanup(munged.terminate)
        cred = wait_for(lambda: subprocess.run(
            ["munge", "-S", str(socket), "-s", "k8sbridge-munge-check cluster=entry"],
            capture_output=True, text=True).stdout.strip(), 20, "the controller's munged")
        env = self.env(K8SBRIDGE_NODE_NAME="w-0", K8SBRIDGE_CLUSTER="entry",
                       K8SBRIDGE_MUNGE_CHECK=cred)
        self.assert_refused([WORKER], env, "munge key mismatch", "wrong munge.key")
        self.assertIn("Exiting on signal 15", self.munged_log())  # its munged stopped

    def test_an_unknown_munged_user_is_refused_naming_the_variable(self):
        self.assert_refused([ENTRYPOINT, "login"], self.env(K8SBRIDGE_MUNGED_USER="no-such-user"),
                            "K8SBRIDGE_MUNGED_USER=no-such-user", "unset it")
        self.assertEqual(self.munged_log(), "")  # munged never started

    def test_no_role_is_a_usage_error(self):
        r = subprocess.run([str(ENTRYPOINT)], env=self.env(), capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(error_lines(r.stderr)), 1, r.stderr)
        self.assertIn("k8sbridge-entrypoint controller", r.stderr)


if __name__ == "__main__":
    main()
