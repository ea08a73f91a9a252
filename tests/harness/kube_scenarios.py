"""Runs the Kubernetes client's scenarios (tests/unit/kube/kube_scenarios.cpp, built as
kube_scenarios) and makes the faults they ask for.

A scenario asks with a line "CONTROL <request>" on its stdout and waits for the
answer on its stdin: "OK[ <detail>]" once the fault is in place, "ERR <why>"
otherwise. ScenarioCase runs one scenario and answers through `control(pid,
request)`, which a test class implements: the real Kubernetes's faults
(tests/integration/test_kube_client.py) or a failing load balancer's in front of it
(test_kube_client_lb.py). After each scenario it asks
`clear_faults()`.
"""

import os
import subprocess
import sys
import threading
import traceback
import unittest
from pathlib import Path

from harness.paths import BUILD_ROOT

SCENARIOS = Path(os.environ.get("KUBE_SCENARIOS",
                                BUILD_ROOT / "tests" / "unit" / "kube" / "kube_scenarios"))
TIME_LIMIT = 240  # seconds for one scenario, its faults included


class ScenarioCase(unittest.TestCase):
    """`dir`: the directory the scenarios get (kubeconfig, token); set by the class."""

    dir = None

    def control(self, pid: int, request: str) -> str:
        """Puts the fault `request` in place for the scenario process `pid`; returns
        the answer's detail. Raises to answer ERR."""
        raise NotImplementedError

    def clear_faults(self) -> None:
        raise NotImplementedError

    def run_scenario(self, name, *expected):
        if not SCENARIOS.exists():
            raise RuntimeError(f"{SCENARIOS} does not exist: build it with meson compile")
        proc = subprocess.Popen([str(SCENARIOS), str(self.dir), name], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        timer = threading.Timer(TIME_LIMIT, proc.kill)
        timer.start()
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line)
                if not line.startswith("CONTROL "):
                    continue
                request = line[len("CONTROL "):].strip()
                try:
                    detail = self.control(proc.pid, request)
                    answer = "OK" + (f" {detail}" if detail else "")
                except Exception as e:  # noqa: BLE001 - the scenario reports it
                    traceback.print_exc(file=sys.stderr)
                    answer = f"ERR {type(e).__name__}: {e}".replace("\n", " ")
                lines.append(f"  -> {answer}\n")
                try:
                    proc.stdin.write(answer + "\n")
                    proc.stdin.flush()
                except BrokenPipeError:
                    pass
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdin.close()
            proc.stdout.close()
            self.clear_faults()
        report = "".join(lines)
        print(report, end="")
        self.assertEqual(proc.returncode, 0, report)
        self.assertIn(f"OK {name}", report)
        for text in expected:
            self.assertIn(text, report)
        return report
