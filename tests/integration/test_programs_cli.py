"""Every k8sbridge program answers --help and --version the way Unix programs do:
the usage or the version on stdout, nothing on stderr, exit status 0, and nothing
else done (no configuration read, no Slurm or Kubernetes contacted)."""

import re
import subprocess
import unittest

from harness.paths import BUILD_ROOT, project_version
from harness.testcase import main

PROGRAMS = {
    "k8sbridge-power": "programs/power/k8sbridge-power",
    "k8sbridge-sync": "programs/sync/k8sbridge-sync",
    "k8sbridge-health": "programs/health/k8sbridge-health",
    "k8sbridge-worker": "container/worker/k8sbridge-worker",
    "k8sbridge-jail-prepare": "programs/jail-prepare/k8sbridge-jail-prepare",
    "k8sbridge-topology": "programs/topology/k8sbridge-topology",
    "k8sbridge-entrypoint": "container/entrypoint/k8sbridge-entrypoint",
}


def slurm_version() -> str:
    header = BUILD_ROOT / "libk8sbridge" / "k8sbridge_version.h"
    return re.search(r'K8SBRIDGE_SLURM_VERSION "([^"]+)"', header.read_text()).group(1)


class ProgramsAnswerHelpAndVersion(unittest.TestCase):
    def run_program(self, name, *args):
        path = BUILD_ROOT / PROGRAMS[name]
        if not path.exists():
            self.fail(f"{path} is not built")
        # An empty environment: an answer that needed a setting would fail here.
        return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=30,
                              env={"PATH": "/usr/bin:/bin"})

    def test_help_prints_the_usage_on_stdout_and_exits_0(self):
        for name in PROGRAMS:
            for flag in ("--help", "-h"):
                with self.subTest(program=name, flag=flag):
                    r = self.run_program(name, flag)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(r.stderr, "")
                    self.assertTrue(r.stdout.startswith(f"usage: {name}"), r.stdout)
                    self.assertIn("--version", r.stdout)

    def test_version_names_k8sbridge_and_the_slurm_release(self):
        want = (f"{{}} (k8sbridge {project_version()}), built for Slurm {slurm_version()}\n")
        self.assertRegex(slurm_version(), r"^\d+\.\d+\.\d+$")
        for name in PROGRAMS:
            with self.subTest(program=name):
                r = self.run_program(name, "--version")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stderr, "")
                self.assertEqual(r.stdout, want.format(name))

    def test_an_unknown_option_is_still_an_error(self):
        for name in ("k8sbridge-power", "k8sbridge-health", "k8sbridge-topology",
                     "k8sbridge-jail-prepare"):
            with self.subTest(program=name):
                r = self.run_program(name, "--no-such-option")
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("--no-such-option", r.stderr)


if __name__ == "__main__":
    main()
