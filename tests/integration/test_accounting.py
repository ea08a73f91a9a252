"""Accounting on a real database (tests/harness/accounting.py, docs/accounting.md):
slurmdbd on Debian's MariaDB records every job a user runs, with its state, nodes and
exit code (`sacct -u`), and the user's fair-share usage grows (`sshare`). No record is
lost when slurmdbd is killed, when the database restarts, or when the database stops
answering for a minute: jobs keep starting and ending meanwhile (slurmctld queues
their records), and once the database is back `sacct` lists every one."""

import os
import signal
import time
import unittest

from harness.accounting import ACCOUNTS_SCRIPT, Accounting
from harness.rig import Rig, wait_for
from harness.testcase import RigTestCase, main, wait_for_no_leftovers

USER = "daemon"      # uid 1: a user every Debian host has, not root
ACCOUNT = "research"
# How long the database stops answering: the minute, whole.
UNREACHABLE_S = 60
# Until slurmctld has sent the records it queued and slurmdbd has stored them.
RECORDED_TIMEOUT = 240


class AccountingTest(RigTestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        cls.accounting = Accounting(users=[USER], account=ACCOUNT)
        cls.rig = Rig(nodes=2, config=cls.accounting.rig_config())
        cls.rig.__enter__()
        try:
            cls.rig.wait_nodes_idle()
        except BaseException:
            cls.rig.__exit__(None, None, None)
            raise

    @classmethod
    def tearDownClass(cls):
        ids = [cls.rig.id]
        cls.rig.__exit__(None, None, None)
        left = wait_for_no_leftovers(ids)
        if any(left.values()):
            raise AssertionError(f"the accounting rig left {left}")

    # ---- jobs, as the user ----------------------------------------------------------

    def as_user(self, *cmd: str, timeout: float = 60) -> str:
        """A Slurm client run as USER (runuser keeps SLURM_CONF; the path is absolute
        because it resets PATH)."""
        program = str(self.rig.prefix / "bin" / cmd[0])
        return self.rig.check_output(["runuser", "-u", USER, "--", program, *cmd[1:]],
                                     timeout=timeout)

    def run_job(self, command: str = "sleep 1", nodes: int = 1) -> dict:
        """Submits a job as USER and waits until it has ended; returns what slurmctld
        says of it: what sacct must show once the record is stored."""
        out = self.as_user("sbatch", "--parsable", f"-N{nodes}", "-o", "/dev/null",
                           "--chdir=/tmp", f"--wrap={command}")
        job_id = int(out.strip().split(";")[0])
        job = self.rig.wait_job(job_id, states=("COMPLETED", "FAILED"))
        return {"id": job_id, "state": job["JobState"], "nodes": job["NodeList"],
                "exit": job["ExitCode"]}

    def run_jobs(self, count: int) -> list[dict]:
        # Every third job fails: a failure must be recorded as one.
        return [self.run_job(job_command(i)) for i in range(count)]

    def sacct(self) -> dict:
        """USER's jobs as sacct lists them, by id. -S: all of them, not only today's."""
        out = self.as_user("sacct", "-u", USER, "-X", "-n", "-P", "-S", "2000-01-01",
                           "--format=JobID,State,NodeList,ExitCode,User,Account")
        jobs = {}
        for line in out.splitlines():
            job_id, state, nodes, exit_code, user, account = line.split("|")
            jobs[int(job_id)] = {"id": int(job_id), "state": state, "nodes": nodes,
                                 "exit": exit_code, "user": user, "account": account}
        return jobs

    def assertAllRecorded(self, jobs: list[dict]) -> None:
        """Waits until sacct lists every job of `jobs` as ended, then checks each
        record against slurmctld's."""
        ids = {j["id"] for j in jobs}

        def recorded():
            listed = self.sacct()
            ended = {i for i in ids if listed.get(i, {}).get("state") in ("COMPLETED", "FAILED")}
            return listed if ended == ids else None
        listed = wait_for(recorded, RECORDED_TIMEOUT, lambda: (
            f"sacct to list jobs {sorted(ids)} as ended; it lists "
            f"{sorted(self.sacct())}\n{self.rig._tail('slurmdbd.log')}"
            f"{self.rig._tail('slurmctld.log')}"), interval=1)
        for job in jobs:
            self.assertEqual(listed[job["id"]], {**job, "user": USER, "account": ACCOUNT})

    # ---- records --------------------------------------------------------------------

    def test_sacct_lists_each_job_with_state_nodes_and_exit_code(self):
        jobs = [self.run_job("sleep 1", nodes=2), self.run_job("sleep 1"),
                self.run_job("exit 3")]
        self.assertEqual([(j["state"], j["exit"]) for j in jobs],
                         [("COMPLETED", "0:0"), ("COMPLETED", "0:0"), ("FAILED", "3:0")])
        self.assertEqual(jobs[0]["nodes"], "w-[0-1]")
        self.assertAllRecorded(jobs)

    def test_sshare_shows_the_users_fair_share_growing_with_its_jobs(self):
        def share() -> dict:
            out = self.as_user("sshare", "-u", USER, "-n", "-P",
                               "--format=Account,User,RawShares,RawUsage,FairShare")
            rows = [line.split("|") for line in out.splitlines()]
            mine = [r for r in rows if r[1] == USER]
            self.assertEqual(len(mine), 1, out)
            account, user, shares, usage, fair_share = mine[0]
            return {"account": account.strip(), "shares": int(shares), "usage": int(usage),
                    "fair_share": float(fair_share)}
        before = share()
        self.assertEqual((before["account"], before["shares"]), (ACCOUNT, 1))
        self.run_job("sleep 2", nodes=2)
        # A job's usage is added when it ends: cpu-seconds, at least 2 here.
        after = wait_for(lambda: (lambda s: s if s["usage"] >= before["usage"] + 2 else None)(
            share()), 60, f"{USER}'s RawUsage to grow past {before['usage']}")
        self.assertGreater(after["usage"], 0)
        self.assertGreater(after["fair_share"], 0.0)
        self.assertLessEqual(after["fair_share"], 1.0)

    def test_accounting_init_keeps_what_exists_and_refuses_an_unknown_user(self):
        script = ["bash", str(ACCOUNTS_SCRIPT), f"rig{self.rig.id}", ACCOUNT]
        again = self.rig.run(script + [USER], timeout=120)
        self.assertEqual((again.returncode, again.stderr), (0, ""))
        unknown = self.rig.run(script + ["no-such-user-k8sb"], timeout=120)
        self.assertEqual(unknown.returncode, 1, unknown.stderr)
        self.assertIn("user 'no-such-user-k8sb' does not exist on this host: create it (or "
                      "fix the name) first", unknown.stderr)
        users = self.rig.check_output(["sacctmgr", "-n", "-P", "show", "association",
                                       f"cluster=rig{self.rig.id}", "format=account,user"])
        self.assertEqual(sorted(users.split()), ["research|", f"research|{USER}", "root|",
                                                 "root|root"])

    # ---- faults: jobs run on, and no record is lost -------------------------------

    def jobs_across(self, fault, recovery, during=None) -> list[dict]:
        """Jobs run before `fault`, while it lasts (`during`, by default three one
        after the other), and after `recovery`: each starts and ends in its turn."""
        self.addCleanup(self.recover)
        jobs = self.run_jobs(1)
        fault()
        jobs += during() if during else self.run_jobs(3)
        recovery()
        return jobs + self.run_jobs(1)

    def test_slurmdbd_killed_loses_no_record(self):
        # slurmctld cannot connect, and queues the records.
        self.assertAllRecorded(self.jobs_across(
            lambda: self.accounting.stop_slurmdbd(signal.SIGKILL),
            self.accounting.start_slurmdbd))

    def test_database_restarted_loses_no_record(self):
        # slurmdbd answers errors while the database is down; slurmctld keeps the
        # records and sends them again.
        self.assertAllRecorded(self.jobs_across(self.accounting.stop_database,
                                                self.accounting.start_database))

    def test_database_unreachable_for_a_minute_loses_no_record(self):
        # The database host hangs: SIGSTOP freezes mariadbd, so its connections stay
        # open and its port accepts, but nothing answers, as when its node or VM
        # stalls or a partition drops its packets. slurmdbd's queries wait on it, and
        # slurmctld's messages to slurmdbd go unanswered. (Blocking the port with a
        # firewall rule would change the machine's own network, which tests leave
        # alone.) The jobs run for the whole minute, one after the other.
        def for_a_minute() -> list[dict]:
            end = time.monotonic() + UNREACHABLE_S
            during = []
            while time.monotonic() < end:
                during.append(self.run_job(job_command(len(during))))
            self.assertGreaterEqual(len(during), 2)
            return during
        self.assertAllRecorded(self.jobs_across(self.accounting.freeze_database,
                                                self.accounting.thaw_database, for_a_minute))

    def recover(self) -> None:
        """Brings back what a failed fault test left down, for the tests after it."""
        self.accounting.thaw_database()
        if self.accounting.mariadbd is None:
            self.accounting.start_database()
        if self.accounting.slurmdbd is None:
            self.accounting.start_slurmdbd()

def job_command(i: int) -> str:
    return "exit 3" if i % 3 == 2 else "sleep 1"


if __name__ == "__main__":
    main()
