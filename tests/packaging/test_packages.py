"""k8sbridge's Debian packages (scripts/build-packages.sh): lintian reports nothing,
they are built for the Slurm that scripts/build-root.sh names for their Debian
release and depend on exactly that release, the plugins are where Debian's Slurm
looks for them, and the controller and the worker package each install into a clean
root of their Debian release (apt resolving Debian's own slurmctld or slurmd from
the mirror) and run.

K8SBRIDGE_PACKAGES_DIR names the packages directory (the last line of
scripts/build-packages.sh; scripts/test.sh sets it). K8SBRIDGE_PACKAGES_RELEASE,
where set (meson sets it: trixie for `packages`, sid for `packages@26.05`), is the
Debian release they must be built for."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness.paths import SOURCE_ROOT, project_version
from harness.testcase import main, require_root

PACKAGES_DIR = os.environ.get("K8SBRIDGE_PACKAGES_DIR", "")
NO_PACKAGES = ("K8SBRIDGE_PACKAGES_DIR is not set: scripts/test.sh sets it; by hand, "
               "K8SBRIDGE_PACKAGES_DIR=$(bash scripts/build-packages.sh | tail -n 1)")
PLUGIN_DIR = "usr/lib/x86_64-linux-gnu/slurm-wlm"
# Each binary package and the Slurm package it must match to the micro release.
SLURM_PEER = {
    "k8sbridge-controller": "slurmctld",
    "k8sbridge-worker": "slurmd",
    "k8sbridge-slurm-plugins": "slurm-wlm-basic-plugins",
}


def release_slurm(release: str) -> str:
    """The Slurm version scripts/build-root.sh names for a Debian release (its one place)."""
    script = SOURCE_ROOT / "scripts" / "build-root.sh"
    found = re.search(rf"^\s*{re.escape(release)}\) slurm_version=(\S+) ;;$", script.read_text(), re.M)
    if found is None:
        raise AssertionError(f"{script} names no Slurm version for Debian release '{release}'")
    return found.group(1)


def next_release(version: str) -> str:
    """The lowest version above every X.Y.Z build: X.Y.(Z+1)~."""
    major, minor, micro = version.split(".")
    return f"{major}.{minor}.{int(micro) + 1}~"


def unmount_below(root: Path) -> list:
    """Unmounts what a killed mmdebstrap left mounted under root, deepest first;
    returns what is still mounted."""
    def mounted():
        with open("/proc/mounts") as f:
            points = [line.split()[1] for line in f]
        return [p for p in points if p == str(root) or p.startswith(f"{root}/")]
    for point in sorted(mounted(), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", point], check=False)
    return mounted()


class DebianPackagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not PACKAGES_DIR:
            raise unittest.SkipTest(NO_PACKAGES)
        cls.dir = Path(PACKAGES_DIR)
        changes = sorted(cls.dir.glob("k8sbridge_*.changes"))
        buildinfo = sorted(cls.dir.glob("k8sbridge_*.buildinfo"))
        if len(changes) != 1 or len(buildinfo) != 1:
            raise AssertionError(f"{cls.dir} should hold one .changes and one .buildinfo "
                                 f"(the output of scripts/build-packages.sh)")
        cls.release = re.search(r"^Distribution: (\S+)$", changes[0].read_text(), re.M).group(1)
        wanted = os.environ.get("K8SBRIDGE_PACKAGES_RELEASE", cls.release)
        if cls.release != wanted:
            raise AssertionError(f"{cls.dir} holds packages for {cls.release}, but this test checks "
                                 f"{wanted}'s: set K8SBRIDGE_PACKAGES_DIR to the last line of "
                                 f"scripts/build-packages.sh --release {wanted}")
        # The Slurm the packages were built against: Debian's libslurm-dev in the root.
        libslurm = re.search(r"\blibslurm-dev \(= (?:\d+:)?([^-)]+)-[^)]*\)",
                             buildinfo[0].read_text())
        if libslurm is None:
            raise AssertionError(f"{buildinfo[0]} names no libslurm-dev among the build's packages")
        cls.slurm_version = libslurm.group(1)

    def deb(self, package: str) -> Path:
        debs = sorted(self.dir.glob(f"{package}_*.deb"))
        self.assertEqual(len(debs), 1, f"one {package} .deb in {self.dir}")
        return debs[0]

    def field(self, package: str, name: str) -> str:
        return subprocess.run(["dpkg-deb", "--field", str(self.deb(package)), name],
                              capture_output=True, text=True, check=True).stdout

    def contents(self, package: str) -> list:
        listing = subprocess.run(["dpkg-deb", "--contents", str(self.deb(package))],
                                 capture_output=True, text=True, check=True).stdout
        # "perms owner size date time ./path[ -> target]"
        return [line.split(None, 5)[5].split(" -> ")[0].removeprefix("./")
                for line in listing.splitlines()]

    def test_lintian_reports_nothing(self):
        # Not even a warning or an info tag (build-packages.sh runs it with --info).
        report = (self.dir / "lintian.txt").read_text()
        self.assertEqual(report.splitlines(), [])

    def test_they_are_built_for_the_slurm_of_their_debian_release(self):
        self.assertEqual(self.slurm_version, release_slurm(self.release))

    def test_depends_name_the_exact_slurm_release(self):
        self.assertRegex(self.slurm_version, r"^\d+\.\d+\.\d+$")
        for package, peer in SLURM_PEER.items():
            with self.subTest(package=package):
                depends = [d.strip() for d in self.field(package, "Depends").split(",")]
                self.assertIn(f"{peer} (>= {self.slurm_version})", depends)
                self.assertIn(f"{peer} (<< {next_release(self.slurm_version)})", depends)
                self.assertIn(f"Built for Slurm {self.slurm_version}:", self.field(package, "Description"))

    def test_the_plugins_are_where_debians_slurm_loads_them(self):
        plugins = [p for p in self.contents("k8sbridge-slurm-plugins") if p.endswith(".so")]
        self.assertEqual(sorted(plugins), [f"{PLUGIN_DIR}/node_features_k8s.so",
                                           f"{PLUGIN_DIR}/spank_jail.so"])
        for package in ("k8sbridge-controller", "k8sbridge-worker"):
            with self.subTest(package=package):
                self.assertIn(f"k8sbridge-slurm-plugins (= {self.field(package, 'Version').strip()})",
                              self.field(package, "Depends"))

    def test_each_package_holds_its_side(self):
        want = {
            "k8sbridge-controller": ["usr/sbin/k8sbridge-power", "usr/sbin/k8sbridge-resume",
                                     "usr/sbin/k8sbridge-suspend", "usr/sbin/k8sbridge-resume-fail",
                                     "usr/sbin/k8sbridge-prolog", "usr/sbin/k8sbridge-sync", "usr/sbin/k8sbridge-topology",
                                     "usr/lib/systemd/system/k8sbridge-sync.service"],
            "k8sbridge-worker": ["usr/sbin/k8sbridge-worker", "usr/sbin/k8sbridge-jail-prepare",
                                 "usr/sbin/k8sbridge-health"],
            "k8sbridge-slurm-plugins": ["usr/sbin/k8sbridge-entrypoint"],
            "k8sbridge-doc": ["usr/share/doc/k8sbridge-doc/sync.md",
                              "usr/share/k8sbridge/conf-templates/k8sbridge.conf",
                              "usr/share/k8sbridge/deploy/base/rbac.yaml"],
        }
        for package, paths in want.items():
            with self.subTest(package=package):
                contents = self.contents(package)
                for path in paths:
                    self.assertIn(path, contents)

    def clean_root_with(self, packages):
        """A clean root of the packages' release from the mirror, with these of our
        packages installed (apt resolving the rest), removed when the test ends; returns
        a function that runs a command inside it."""
        require_root(self)
        tmp = Path(tempfile.mkdtemp(prefix="k8sbridge-packages-"))
        root = tmp / "root"

        def remove_root():
            left = unmount_below(root)
            if left:  # never delete through a mount into the host
                raise AssertionError(f"still mounted under {root}: {left}; unmount, then remove {tmp}")
            shutil.rmtree(tmp, ignore_errors=True)
        self.addCleanup(remove_root)

        mirror = subprocess.run(["sh", str(SOURCE_ROOT / "scripts" / "debian-mirror.sh")],
                                capture_output=True, text=True, check=True).stdout.strip()
        # apt outside the root hands dpkg inside it the .debs' paths: mmdebstrap's hook
        # copies them in under the same paths (and removes them again). sid's Release
        # file on the mirror is often past its Valid-Until date (scripts/build-root.sh).
        r = subprocess.run(["mmdebstrap", "--variant=apt", "--format=directory",
                            "--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount",
                            '--aptopt=Acquire::Check-Valid-Until "false"',
                            *[f"--include={self.deb(p)}" for p in packages],
                            self.release, str(root), f"deb {mirror} {self.release} main"],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])

        def in_root(*command):
            return subprocess.run(["chroot", str(root), *command], capture_output=True, text=True,
                                  timeout=60, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        return in_root

    def assertDebianSlurm(self, in_root, package):
        installed = in_root("dpkg-query", "-W", "-f=${Version}", package)
        self.assertRegex(installed.stdout, rf"^(\d+:)?{re.escape(self.slurm_version)}-")

    def assertAnswersVersion(self, in_root, program):
        version = in_root(f"/usr/sbin/{program}", "--version")
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertEqual(version.stdout, f"{program} (k8sbridge {project_version()}), "
                                         f"built for Slurm {self.slurm_version}\n")

    def test_the_controller_installs_into_a_clean_root_and_runs(self):
        in_root = self.clean_root_with(["k8sbridge-controller", "k8sbridge-slurm-plugins"])
        self.assertDebianSlurm(in_root, "slurmctld")
        usage = in_root("/usr/sbin/k8sbridge-power", "--help")
        self.assertEqual(usage.returncode, 0, usage.stderr)
        self.assertTrue(usage.stdout.startswith("usage: k8sbridge-power"), usage.stdout)
        self.assertIn("resume|suspend|resume-fail HOSTLIST", usage.stdout)
        self.assertAnswersVersion(in_root, "k8sbridge-power")

    def test_the_worker_installs_beside_debians_slurmd_and_its_plugins(self):
        in_root = self.clean_root_with(["k8sbridge-worker", "k8sbridge-slurm-plugins"])
        self.assertDebianSlurm(in_root, "slurmd")
        self.assertAnswersVersion(in_root, "k8sbridge-worker")
        # Our plugins sit among Debian's own, and every library they need is installed
        # (their Slurm symbols come from the daemon that loads them).
        debian_plugins = in_root("dpkg", "-L", "slurm-wlm-basic-plugins").stdout.splitlines()
        self.assertIn(f"/{PLUGIN_DIR}/select_cons_tres.so", debian_plugins)
        for plugin in ("node_features_k8s.so", "spank_jail.so"):
            with self.subTest(plugin=plugin):
                ldd = in_root("ldd", f"/{PLUGIN_DIR}/{plugin}")
                self.assertEqual(ldd.returncode, 0, ldd.stderr)
                self.assertNotIn("not found", ldd.stdout)

if __name__ == "__main__":
    if not PACKAGES_DIR:
        print(f"skipped: {NO_PACKAGES}", file=sys.stderr)
        sys.exit(77)  # meson's "skipped"
    main()
