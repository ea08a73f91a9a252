"""Accounting for a test rig: Debian's MariaDB and Slurm's slurmdbd, as a cluster runs
them (docs/accounting.md).

    accounting = Accounting(users=["daemon"])
    with Rig(nodes=2, config=accounting.rig_config()) as rig:
        rig.wait_nodes_idle()
        ... sacct, sshare ...
        accounting.stop_slurmdbd(signal.SIGKILL); accounting.start_slurmdbd()

The rig starts it (RigConfig.services) once munge and slurm.conf are there, before
slurmctld: a database of its own (mariadb-install-db, a datadir under the rig's
workdir, mariadbd on 127.0.0.1 at one of the rig's slot ports and on a unix
socket), a `slurm` database user with a random password and all privileges on
slurmdbd's own database only, slurmdbd on another port with a slurmdbd.conf of mode
0600 owned by SlurmUser, written by deploy/base/config/accounting/slurmdbd-conf.sh
(the deployment's slurmdbd container runs it too), and then the cluster, the
account and its users, made by
deploy/base/config/accounting/accounting-init.sh (the deployment's accounts sidecar
runs it too) as an admin makes them. The rig's teardown stops both
daemons; their logs are the rig's (mariadbd.log, slurmdbd.log), and the datadir goes
with the workdir. Every process has the rig's id in its environment, so the rig's
sweep and `rigctl cleanup` kill what a killed test left.
"""

from __future__ import annotations

import os
import pwd
import secrets
import signal
import subprocess
from typing import Optional, Sequence

from harness.paths import SOURCE_ROOT, debian_program
from harness.rig import GaveUp, Rig, RigConfig, RigError, wait_for

# The slurm-accounting ConfigMap's scripts: the tests run what the deployment runs.
SCRIPTS = SOURCE_ROOT / "deploy" / "base" / "config" / "accounting"
ACCOUNTS_SCRIPT = SCRIPTS / "accounting-init.sh"
SLURMDBD_CONF_SCRIPT = SCRIPTS / "slurmdbd-conf.sh"
DATABASE = "slurm_acct_db"  # slurmdbd's StorageLoc (its default)
DB_USER = "slurm"
MYSQL_USER = "mysql"  # what Debian's mariadb-server runs as

# slurm.conf's accounting and fair-share lines (after the rig's own, which they
# override). Fair-share dominates the priority, age breaks ties; usage halves every
# week, as Slurm's documentation suggests for a start; priorities are recomputed
# every minute (PriorityCalcPeriod's least). AccountingStorageEnforce: a user with no
# association is refused, as on a cluster whose accounts come from sacctmgr, and the
# associations' limits hold; with `limits`, slurmctld also adds a job's usage when
# the job ends (without it, only the periodic decay adds the usage of jobs still
# running then, and a job shorter than PriorityCalcPeriod may count for nothing).
PRIORITY_CONF = """\
PriorityType=priority/multifactor
PriorityWeightFairshare=10000
PriorityWeightAge=1000
PriorityDecayHalfLife=7-0
PriorityCalcPeriod=1
AccountingStorageEnforce=associations,limits
"""


def mariadb_program(name: str) -> str:
    return debian_program(name, "the accounting tests need Debian's mariadb-server", RigError)


class Accounting:
    """A rig's slurmdbd and its database: pass rig_config(), or add it to a
    RigConfig's services. It adds its lines to the rig's slurm.conf when it starts."""

    def __init__(self, users: Sequence[str] = ("daemon",), account: str = "research"):
        self.users = list(users)
        self.account = account
        self.db_port = self.dbd_port = 0  # from the rig's slot, when it starts
        # Letters and digits, as db-password.sh takes (and the Secret's must be).
        self.password = secrets.token_hex(18)
        self.rig: Optional[Rig] = None
        self.mariadbd: Optional[subprocess.Popen] = None
        self.slurmdbd: Optional[subprocess.Popen] = None

    def __repr__(self) -> str:
        return f"Accounting(db port {self.db_port}, slurmdbd port {self.dbd_port})"

    def slurm_conf(self, rig: Rig) -> str:
        # The accounting_storage/slurmdbd plugin (slurmctld's, and the clients') signs
        # with the munge socket that AccountingStoragePass names, not AuthInfo's.
        return (f"AccountingStorageType=accounting_storage/slurmdbd\n"
                f"AccountingStorageHost=localhost\nAccountingStoragePort={self.dbd_port}\n"
                f"AccountingStoragePass={rig.munge_socket}\n" + PRIORITY_CONF)

    def rig_config(self, **kw) -> RigConfig:
        kw["services"] = [*kw.get("services", ()), self]
        return RigConfig(**kw)

    # ---- the rig's service ----------------------------------------------------------

    def start(self, rig: Rig) -> None:
        self.rig = rig
        self.db_port = rig.slot.free_port()
        self.dbd_port = rig.slot.free_port()
        rig.config.slurm_conf_extra += "\n" + self.slurm_conf(rig)
        rig._write_config()
        self.dir = rig.workdir / "db"
        self.datadir = self.dir / "data"
        self.socket = self.dir / "mysqld.sock"
        self._install_database()
        self.start_database()
        self._create_db_user()
        self._write_slurmdbd_conf()
        self.start_slurmdbd()
        rig.check_output(["bash", str(ACCOUNTS_SCRIPT), f"rig{rig.id}", self.account,
                          *self.users], timeout=120)

    def stop(self, rig: Rig) -> None:
        self.stop_slurmdbd()
        self.stop_database()

    # ---- the database ---------------------------------------------------------------

    def _install_database(self) -> None:
        self.dir.mkdir(mode=0o755)
        self.datadir.mkdir(mode=0o700)
        mysql = pwd.getpwnam(MYSQL_USER)
        os.chown(self.dir, mysql.pw_uid, mysql.pw_gid)
        os.chown(self.datadir, mysql.pw_uid, mysql.pw_gid)
        # mariadbd writes its log as MYSQL_USER, beside the rig's (which root owns).
        error_log = self.rig.logdir / "mariadbd.log"
        error_log.touch()
        os.chown(error_log, mysql.pw_uid, mysql.pw_gid)
        log = self.rig.logdir / "mariadb-install-db.log"
        with open(log, "wb") as out:
            r = subprocess.run([mariadb_program("mariadb-install-db"), "--no-defaults",
                                f"--user={MYSQL_USER}", f"--datadir={self.datadir}",
                                "--auth-root-authentication-method=socket", "--skip-test-db"],
                               stdout=out, stderr=subprocess.STDOUT, timeout=300,
                               env=self.rig.env(), cwd=self.dir)
        if r.returncode != 0:
            raise RigError(f"mariadb-install-db exited {r.returncode}\n{self.rig._tail(log.name)}")

    def start_database(self) -> None:
        """Starts mariadbd on the datadir (again, after stop_database)."""
        self.mariadbd = self.rig._spawn("mariadbd", [
            mariadb_program("mariadbd"), "--no-defaults", f"--user={MYSQL_USER}",
            f"--datadir={self.datadir}", f"--socket={self.socket}",
            f"--pid-file={self.dir}/mariadbd.pid", f"--log-error={self.rig.logdir}/mariadbd.log",
            "--bind-address=127.0.0.1", f"--port={self.db_port}", "--skip-name-resolve",
            # What slurmdbd checks at its start (Slurm's accounting.html): a lock wait
            # of 900 s; a small buffer pool for a test.
            "--innodb-lock-wait-timeout=900", "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=64M", "--max-allowed-packet=16M"])

        def answers():
            if self.mariadbd.poll() is not None:
                raise GaveUp(f"mariadbd exited with {self.mariadbd.returncode}\n"
                             f"{self.rig._tail('mariadbd.log')}")
            return self.sql("SELECT 1", check=False).returncode == 0
        wait_for(answers, 120, lambda: f"mariadbd to answer\n{self.rig._tail('mariadbd.log')}")

    def freeze_database(self) -> None:
        """Stops mariadbd with SIGSTOP: the database host hangs, its port accepts and
        nothing answers (docs/accounting.md, "What the tests show")."""
        os.kill(self.mariadbd.pid, signal.SIGSTOP)

    def thaw_database(self) -> None:
        if self.mariadbd and self.mariadbd.poll() is None:
            os.kill(self.mariadbd.pid, signal.SIGCONT)

    def stop_database(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: a clean shutdown, as a database pod's restart."""
        self.thaw_database()  # a frozen one would not see the SIGTERM
        if self.mariadbd and self.mariadbd.poll() is None:
            self.rig._terminate(self.mariadbd, "mariadbd", sig, grace=60)
        self.mariadbd = None

    def sql(self, statement: str, check: bool = True) -> subprocess.CompletedProcess:
        """Runs `statement` as the database's root, over the unix socket."""
        r = subprocess.run([mariadb_program("mariadb"), "--no-defaults", "-u", "root",
                            f"--socket={self.socket}", "-N", "-B", "-e", statement],
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise RigError(f"mariadb -e {statement!r} exited {r.returncode}: {r.stderr}")
        return r

    def _create_db_user(self) -> None:
        # slurmdbd connects over TCP from 127.0.0.1 (skip-name-resolve: no 'localhost'),
        # creates its database on first start, and needs no other database.
        self.sql(f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{self.password}'; "
                 f"GRANT ALL PRIVILEGES ON `{DATABASE}`.* TO '{DB_USER}'@'127.0.0.1'")

    # ---- slurmdbd ---------------------------------------------------------------

    def _write_slurmdbd_conf(self) -> None:
        """slurmdbd.conf beside slurm.conf, written by the deployment's own
        slurmdbd-conf.sh (mode 0600: slurmdbd refuses one others can read), from a
        password file as the Secret's; owned by root, the rig's SlurmUser, which
        slurmdbd demands too."""
        rig = self.rig
        password_file = rig.etc / "slurmdbd-password"
        fd = os.open(password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        r = subprocess.run(
            ["sh", str(SLURMDBD_CONF_SCRIPT), str(rig.etc / "slurmdbd.conf"), str(password_file),
             "127.0.0.1", str(self.db_port), DB_USER, f"AuthInfo=socket={rig.munge_socket}",
             "DbdAddr=127.0.0.1", f"DbdPort={self.dbd_port}", "SlurmUser=root",
             "DebugLevel=verbose", f"LogFile={rig.logdir}/slurmdbd.log",
             f"PidFile={rig.workdir}/run/slurmdbd.pid"],
            capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RigError(f"{SLURMDBD_CONF_SCRIPT.name} exited {r.returncode}: {r.stderr}")

    def start_slurmdbd(self) -> None:
        """Starts slurmdbd (again, after stop_slurmdbd) and waits until it answers."""
        rig = self.rig
        self.slurmdbd = rig._spawn("slurmdbd", rig.host_command(
            [str(rig.prefix / "sbin" / "slurmdbd"), "-D"]))

        last = subprocess.CompletedProcess([], 0, "", "")

        def answers():
            nonlocal last
            if self.slurmdbd.poll() is not None:
                raise GaveUp(f"slurmdbd exited with {self.slurmdbd.returncode}\n"
                             f"{rig._tail('slurmdbd.log')}{rig._tail('slurmdbd.out')}")
            last = rig.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
                           timeout=30)
            return last.returncode == 0
        wait_for(answers, 120, lambda: (f"slurmdbd to answer `sacctmgr show cluster` (last: "
                                        f"{last.stderr.strip()})\n{rig._tail('slurmdbd.log')}"))

    def stop_slurmdbd(self, sig: int = signal.SIGTERM) -> None:
        """SIGTERM: slurmdbd's clean stop; SIGKILL: a crash."""
        if self.slurmdbd and self.slurmdbd.poll() is None:
            self.rig._terminate(self.slurmdbd, "slurmdbd", sig, grace=60)
        self.slurmdbd = None
