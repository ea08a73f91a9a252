"""scripts/build-packages.sh, build-root.sh and build-release.sh refuse bad inputs before they
build anything, with one message that names the input and the fix: a debian/changelog
whose version is not meson.build's, a Debian release whose Slurm is not known, a
caller who is not root; slurm-version.sh spells a version as Slurm does."""

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness.paths import SOURCE_ROOT, project_version
from harness.testcase import main, require_root

SCRIPTS = ["build-packages.sh", "build-root.sh", "build-slurm.sh", "debian-mirror.sh"]


class BuildScriptsRefuseBadInputs(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="k8sbridge-build-scripts-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        # An empty cache: a script that went past its checks would start building here.
        self.cache = self.tmp / "cache"
        self.cache.mkdir()

    def run_script(self, script: Path, *args, user=None) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "K8SBRIDGE_CACHE": str(self.cache)}
        return subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                              timeout=60, env=env, user=user)

    def test_a_changelog_of_another_version_is_refused_naming_both(self):
        tree = self.tmp / "tree"
        (tree / "scripts").mkdir(parents=True)
        (tree / "debian").mkdir()
        for script in SCRIPTS:
            shutil.copy(SOURCE_ROOT / "scripts" / script, tree / "scripts" / script)
        shutil.copy(SOURCE_ROOT / "meson.build", tree / "meson.build")
        changelog = (SOURCE_ROOT / "debian" / "changelog").read_text()
        version = project_version()
        (tree / "debian" / "changelog").write_text(
            changelog.replace(f"k8sbridge ({version}-", "k8sbridge (9.9.9-", 1))
        r = self.run_script(tree / "scripts" / "build-packages.sh")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"meson.build's version is '{version}' but debian/changelog's is '9.9.9'",
                      r.stderr)
        self.assertIn(f"dch -v {version}-1", r.stderr)
        self.assertEqual(list(self.cache.iterdir()), [])

    def test_an_unknown_release_is_refused_naming_the_known_ones(self):
        require_root(self)
        r = self.run_script(SOURCE_ROOT / "scripts" / "build-root.sh", "--release", "bookwurm")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, "build-root: no Slurm version is known for Debian release "
                                   "'bookwurm' (known: trixie, sid)\n")
        self.assertEqual(list(self.cache.iterdir()), [])

    def test_build_release_refuses_a_build_outside_the_checkout_and_unknown_options(self):
        script = SOURCE_ROOT / "scripts" / "build-release.sh"
        outside = self.tmp / "build-sid"
        r = self.run_script(script, "--build", str(outside))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, f"build-release: --build {outside} is outside the checkout "
                                   f"{SOURCE_ROOT}: the root sees only the checkout\n")
        r = self.run_script(script, "--jobs", "2")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr, "build-release: unknown argument '--jobs' (see --help)\n")
        self.assertFalse(outside.exists())
        self.assertEqual(list(self.cache.iterdir()), [])

    def test_a_caller_who_is_not_root_is_told_to_be(self):
        require_root(self)  # to become another user
        os.chmod(self.tmp, 0o755)
        r = self.run_script(SOURCE_ROOT / "scripts" / "build-root.sh", user="nobody")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("build-root: run as root", r.stderr)
        self.assertEqual(list(self.cache.iterdir()), [])


class SlurmVersionIsWrittenAsSlurmWritesIt(unittest.TestCase):
    """scripts/slurm-version.sh: the packages' Depends, `--version` and the
    containers' check against `slurmd -V` all compare with Slurm's own spelling."""

    def version_of(self, number: str) -> str:
        with tempfile.TemporaryDirectory(prefix="k8sbridge-slurm-version-") as tmp:
            header = Path(tmp) / "slurm_version.h"
            header.write_text(f"#define SLURM_VERSION_NUMBER {number}\n")
            r = subprocess.run(["sh", str(SOURCE_ROOT / "scripts" / "slurm-version.sh"), str(header)],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_the_minor_release_has_two_digits(self):
        self.assertEqual(self.version_of("0x1a0505"), "26.05.5\n")
        self.assertEqual(self.version_of("0x180b05"), "24.11.5\n")
        self.assertEqual(self.version_of("0x190b0c"), "25.11.12\n")


if __name__ == "__main__":
    main()
