"""The build refuses a Slurm source tree whose version differs from the
installed Slurm, and names both versions."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness.paths import SOURCE_ROOT

SLURM_PREFIX = Path(os.environ.get("K8SBRIDGE_SLURM_PREFIX",
                                   "/var/cache/k8sbridge/slurm-24.11.5/install"))


class VersionGuardTest(unittest.TestCase):
    def setUp(self):
        if not (SLURM_PREFIX / "include/slurm/slurm_version.h").exists():
            self.skipTest(f"no Slurm at {SLURM_PREFIX}")
        self.tmp = Path(tempfile.mkdtemp(prefix="k8sbridge-version-guard-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def fake_tree(self, version_number: str) -> Path:
        """A configured-looking Slurm tree of another version (24.11.4)."""
        tree = self.tmp / "slurm-src"
        (tree / "slurm").mkdir(parents=True)
        (tree / "config.h").write_text('#define SLURM_VERSION_STRING "24.11.4"\n')
        (tree / "slurm" / "slurm_version.h").write_text(
            f"#define SLURM_VERSION_NUMBER {version_number}\n")
        return tree

    def setup_build(self, tree: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["meson", "setup", str(self.tmp / "build"), str(SOURCE_ROOT),
             f"-Dslurm_prefix={SLURM_PREFIX}", f"-Dslurm_src={tree}"],
            capture_output=True, text=True, timeout=300)

    def test_other_version_is_refused_naming_both(self):
        r = self.setup_build(self.fake_tree("0x180b04"))
        self.assertNotEqual(r.returncode, 0)
        out = r.stdout + r.stderr
        self.assertIn("is version 24.11.4", out)
        self.assertIn("is version 24.11.5", out)

    def test_unconfigured_tree_is_refused(self):
        tree = self.fake_tree("0x180b05")
        (tree / "config.h").unlink()
        r = self.setup_build(tree)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("has no config.h", r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
