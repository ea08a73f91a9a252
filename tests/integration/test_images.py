"""k8sbridge's OCI images (scripts/images.py), run by runc, the real OCI runtime.

- What each image holds: its labels and annotations (version, revision, the Slurm
  inside, created from SOURCE_DATE_EPOCH), the worker under 400 MB with no compiler
  or headers, a docker-archive that names the image, Containerfiles in step with
  the offline build, and the same digest when built again from the same inputs.
- The worker image's entrypoint, in a rig node's network namespace: its slurmd
  (Debian's, in the image) registers with the rig's slurmctld and runs a job step
  inside the image's root. A missing munge key, a wrong one and a Slurm version
  mismatch each end the container non-zero with one line saying so.
- The controller image's entrypoint starts slurmctld from a ConfigMap-style
  directory (files that are symlinks into ..data/), and it answers `scontrol ping`.
- The login image's entrypoint runs its command with the container's munged, and
  spank_jail (for srun's options) is where Debian's Slurm looks for plugins.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

from harness.oci import Container, Image, image_info, images_dir, runc_leftovers, wait_exec
from harness.rig import OCI_PREFIX, RESOURCE_PREFIX, Rig
from harness.testcase import RigTestCase, main

ROOT = Path(__file__).resolve().parents[2]
# The accounting database's image carries no Slurm: it takes the others' tag and label.
IMAGES = ("k8sbridge-worker", "k8sbridge-controller", "k8sbridge-login", "k8sbridge-mariadb")
# What each image's pods run besides its entrypoint (deploy/base: the login pods'
# sshd and the directory mode's sssd sidecar; slurmdbd beside slurmctld; the
# database's first start and probes).
PROGRAMS = {"k8sbridge-login": ["usr/sbin/sshd", "usr/sbin/sssd"],
            "k8sbridge-controller": ["usr/sbin/slurmctld", "usr/sbin/slurmdbd"],
            "k8sbridge-mariadb": ["usr/sbin/mariadbd", "usr/bin/mariadb-install-db",
                                  "usr/bin/mariadb-admin"]}
KEY = "/etc/munge/munge.key"  # where a pod mounts the munge key Secret
CLUSTER = "imagetest"  # k8sbridge.conf's ClusterName, as the pod's environment has it


def need_images(test):
    if images_dir() is None:
        test.skipTest("K8SBRIDGE_IMAGES is not set: scripts/test.sh builds the images "
                      "(scripts/images.py) and sets it")


def layout_manifest(name: str) -> dict:
    oci = images_dir() / name / "oci"
    index = json.loads((oci / "index.json").read_text())
    digest = index["manifests"][0]["digest"].split(":", 1)[1]
    return json.loads((oci / "blobs" / "sha256" / digest).read_text())


def blob(name: str, digest: str) -> Path:
    return images_dir() / name / "oci" / "blobs" / "sha256" / digest.split(":", 1)[1]


class ImageContents(unittest.TestCase):

    def setUp(self):
        need_images(self)

    def test_annotations_name_version_revision_slurm_and_creation_time(self):
        for name in IMAGES:
            with self.subTest(image=name):
                info = image_info(name)
                manifest = layout_manifest(name)
                notes = manifest["annotations"]
                self.assertEqual(notes["org.opencontainers.image.title"], name)
                self.assertRegex(notes["org.opencontainers.image.version"], r"^\d+\.\d+\.\d+")
                self.assertRegex(notes["org.opencontainers.image.revision"], r"^[0-9a-f]{40}$")
                self.assertRegex(notes["io.k8sbridge.slurm-version"], r"^\d+\.\d+\.\d+$")
                self.assertEqual(notes["io.k8sbridge.slurm-version"], info["slurm"])
                self.assertTrue(info["tag"].endswith(f"-slurm{info['slurm']}"), info)
                config = json.loads(blob(name, manifest["config"]["digest"]).read_text())
                self.assertEqual(config["config"]["Labels"], notes)
                self.assertEqual(config["created"], notes["org.opencontainers.image.created"])

    def test_worker_is_under_400_mb_without_compilers_or_headers(self):
        info = image_info("k8sbridge-worker")
        self.assertLess(info["size"], 400e6, info)
        layer = layout_manifest("k8sbridge-worker")["layers"][0]["digest"]
        with tarfile.open(blob("k8sbridge-worker", layer)) as tar:
            names = set(n.lstrip("./") for n in tar.getnames())
        self.assertIn("usr/sbin/slurmd", names)
        self.assertIn("usr/sbin/k8sbridge-worker", names)
        self.assertNotIn("etc/munge/munge.key", names)  # every pod gets the cluster's
        toolchain = [n for n in names if n.startswith("usr/include/") or n in (
            "usr/bin/gcc", "usr/bin/cc", "usr/bin/c++", "usr/bin/g++", "usr/bin/make")]
        self.assertEqual(toolchain, [])

    def test_no_image_holds_a_key_and_each_has_its_programs(self):
        # Every pod gets the cluster's munge key and the login pods' SSH host keys
        # from Secrets: a key baked in would be everyone's who pulls the image.
        for name in IMAGES:
            with self.subTest(image=name):
                layer = layout_manifest(name)["layers"][0]["digest"]
                with tarfile.open(blob(name, layer)) as tar:
                    names = set(n.lstrip("./") for n in tar.getnames())
                self.assertNotIn("etc/munge/munge.key", names)
                self.assertEqual([n for n in names if n.startswith("etc/ssh/ssh_host_")], [])
                for program in PROGRAMS.get(name, []):
                    self.assertIn(program, names)

    def test_docker_archive_names_the_image_and_holds_the_same_layer(self):
        for name in IMAGES:
            with self.subTest(image=name):
                info = image_info(name)
                archive = images_dir() / name / f"{name}.tar"
                with tarfile.open(archive) as tar:
                    manifest = json.load(tar.extractfile("manifest.json"))
                # As docker and kind name it: a pod's `image: {name}:{tag}` finds it.
                self.assertEqual(manifest[0]["RepoTags"],
                                 [f"docker.io/library/{name}:{info['tag']}"])
                r = subprocess.run(["skopeo", "inspect", f"docker-archive:{archive}"],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["Labels"]["io.k8sbridge.slurm-version"],
                                 info["slurm"])

    def test_containerfiles_match_the_offline_build(self):
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "images.py"),
                            "--check-containerfiles"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_same_inputs_give_the_same_digest(self):
        packages = os.environ.get("K8SBRIDGE_PACKAGES_DIR")
        if not packages:
            self.skipTest("K8SBRIDGE_PACKAGES_DIR is not set (scripts/test.sh sets it)")
        with tempfile.TemporaryDirectory(prefix="k8sb-images-") as out:
            # The same .debs from another directory: where they were built is not an
            # input (mmdebstrap's mount points for them are not left in the image).
            copy = Path(out) / "elsewhere" / "debs"
            copy.mkdir(parents=True)
            for deb in Path(packages).glob("*.deb"):
                shutil.copy2(deb, copy)
            r = subprocess.run([sys.executable, str(ROOT / "scripts" / "images.py"),
                                "--packages", str(copy), "--image", "k8sbridge-login",
                                "--out", str(Path(out) / "image")], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            again = json.loads((Path(out) / "image" / "k8sbridge-login" / "image.json")
                               .read_text())
        self.assertEqual(again["digest"], image_info("k8sbridge-login")["digest"])


class OciTestCase(RigTestCase):
    """Each test gets a work directory; the images are unpacked once per class."""
    images = {}

    @classmethod
    def setUpClass(cls):
        cls.images = {}
        cls.classdir = Path(tempfile.mkdtemp(prefix=OCI_PREFIX))

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", str(cls.classdir)])

    def setUp(self):
        super().setUp()
        need_images(self)
        self.work = Path(tempfile.mkdtemp(prefix="test-", dir=self.classdir))

    def tearDown(self):
        self.assertEqual([c for c in runc_leftovers() if c in self.containers()], [])

    def containers(self):
        return getattr(self, "_containers", [])

    def image(self, name: str) -> Image:
        if name not in self.images:
            self.images[name] = Image(name, self.classdir)
        return self.images[name]

    def container(self, name: str, **kw) -> Container:
        c = Container(self.image(name), self.work, **kw)
        self._containers = self.containers() + [c.id]
        return c

    def new_key(self) -> Path:
        key = self.work / f"key-{len(list(self.work.glob('key-*')))}"
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        return key

    def config_map(self) -> Path:
        """slurm.conf as a ConfigMap volume holds it: a symlink to ..data/slurm.conf,
        ..data a symlink to a timestamped directory."""
        d = self.work / "slurm-config"
        data = d / "..2026_12_01_00_00_00.000000001"
        data.mkdir(parents=True)
        (data / "slurm.conf").write_text(
            "ClusterName=imagetest\nSlurmctldHost=ctl\nSlurmUser=root\n"
            "AuthType=auth/munge\nCredType=cred/munge\nStateSaveLocation=/var/spool/slurmctld\n"
            "SlurmctldLogFile=/dev/stderr\nProctrackType=proctrack/linuxproc\n"
            "TaskPlugin=task/none\nSelectType=select/cons_tres\nMpiDefault=none\n"
            "NodeName=w-[0-1] CPUs=1 State=CLOUD\nPartitionName=main Nodes=w-[0-1] Default=YES\n")
        (d / "..data").symlink_to(data.name)
        (d / "slurm.conf").symlink_to("..data/slurm.conf")
        return d

    def assertOneLineError(self, result, *words):
        """A failed container: exit non-zero, and its last line (what `kubectl logs`
        ends with; also the termination message) names the problem."""
        self.assertNotEqual(result.returncode, 0, result.stdout + result.stderr)
        lines = [l for l in (result.stdout + result.stderr).splitlines() if l.strip()]
        self.assertTrue(lines, "no output")
        for w in words:
            self.assertIn(w, lines[-1], "\n".join(lines[-10:]))


class WorkerImage(OciTestCase):

    def worker(self, rig, node, key=None, env=None, mounts=()):
        """The worker container of `node`, as k8sbridge-power's pod template runs it:
        the munge key mounted from a Secret, the pod's own munged at the socket that
        the rig's slurm.conf names, slurmd's arguments after the entrypoint."""
        sock = rig.munge_socket
        munge_dir = self.work / f"munge-{node}"
        munge_dir.mkdir(exist_ok=True)
        m = [(rig.workdir, rig.workdir, False), (munge_dir, sock.parent, False),
             (rig.node_hosts, "/etc/hosts", True), (rig.node_resolv, "/etc/resolv.conf", True)]
        if key:
            m.append((key, KEY, True))
        e = {"K8SBRIDGE_NODE_NAME": node, "K8SBRIDGE_CLUSTER": CLUSTER, "K8SBRIDGE_MUNGED_KEY": KEY,
             "K8SBRIDGE_MUNGE_SOCKET": str(sock)}
        e.update(env or {})
        return self.container("k8sbridge-worker", args=["-f", str(rig.slurm_conf)], env=e,
                              mounts=m + list(mounts), netns=rig.netns_path(node),
                              hostname=node)

    def credential(self, rig) -> str:
        """What k8sbridge-power puts in the pod (K8SBRIDGE_MUNGE_CHECK): a credential
        of the controller's key naming the cluster (libk8sbridge/container/munge_check)."""
        return rig.check_output(["munge", "-S", str(rig.munge_socket), "-s",
                                 f"k8sbridge-munge-check cluster={CLUSTER}"]).strip()

    def test_slurmd_registers_and_runs_a_step_inside_the_image(self):
        with Rig(nodes=1, start_slurmd=False) as rig:
            with self.worker(rig, "w-0", key=rig.munge_key,
                             env={"K8SBRIDGE_MUNGE_CHECK": self.credential(rig)}) as c:
                c.start()
                try:
                    rig.wait_nodes_idle(["w-0"])
                    out = rig.check_output(["srun", "-w", "w-0", "-N1", "sh", "-c",
                                            "grep ^VERSION_CODENAME= /etc/os-release; hostname"])
                except Exception as e:
                    raise AssertionError(f"{e}\ncontainer output:\n{c.output()[-3000:]}") from e
                self.assertEqual(out.split(), ["VERSION_CODENAME=trixie", "w-0"])
                self.assertEqual(c.stop(), 0, c.output()[-3000:])  # SIGTERM: a clean end
        self.assertNoLeftovers()

    def test_missing_munge_key_ends_the_container_with_one_line(self):
        with Rig(nodes=1, start_slurmd=False) as rig:
            with self.worker(rig, "w-0") as c:
                self.assertOneLineError(c.run(), KEY)
        self.assertNoLeftovers()

    def test_wrong_munge_key_ends_the_container_with_one_line(self):
        with Rig(nodes=1, start_slurmd=False) as rig:
            with self.worker(rig, "w-0", key=self.new_key(),
                             env={"K8SBRIDGE_MUNGE_CHECK": self.credential(rig)}) as c:
                self.assertOneLineError(c.run(), "munge key")
        self.assertNoLeftovers()

    def test_slurm_version_mismatch_ends_the_container_with_one_line(self):
        fake = self.work / "slurmd"
        fake.write_text("#!/bin/sh\necho 'slurm-wlm 24.11.4'\n")
        fake.chmod(0o755)
        with Rig(nodes=1, start_slurmd=False) as rig:
            with self.worker(rig, "w-0", key=rig.munge_key,
                             mounts=[(fake, "/usr/sbin/slurmd", True)]) as c:
                self.assertOneLineError(c.run(), "24.11.4", image_info("k8sbridge-worker")["slurm"])
        self.assertNoLeftovers()


class ControllerImage(OciTestCase):

    def netns(self) -> str:
        name = f"{RESOURCE_PREFIX}-oci{os.getpid() % 65536:04x}-ctl"
        subprocess.run(["ip", "netns", "add", name], check=True)
        self.addCleanup(subprocess.run, ["ip", "netns", "del", name])
        # A pod's network: loopback and an interface with an address, for
        # getaddrinfo's AI_ADDRCONFIG (slurmctld listens through it and finds nothing
        # on loopback alone). A veth pair with both ends inside, as this kernel has no
        # dummy links; the address lives only in this namespace.
        for cmd in (["link", "set", "lo", "up"],
                    ["link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer"],
                    ["addr", "add", "192.0.2.10/24", "dev", "eth0"],
                    ["link", "set", "eth0-peer", "up"], ["link", "set", "eth0", "up"]):
            subprocess.run(["ip", "-n", name, *cmd], check=True)
        return f"/run/netns/{name}"

    def controller(self, key=None):
        hosts = self.work / "hosts"
        hosts.write_text("127.0.0.1 localhost\n192.0.2.10 ctl\n")
        m = [(self.config_map(), "/etc/slurm", True), (hosts, "/etc/hosts", True)]
        if key:
            m.append((key, KEY, True))
        return self.container("k8sbridge-controller", mounts=m, netns=self.netns(),
                              hostname="ctl")

    def test_slurmctld_starts_from_a_config_map_and_answers_ping(self):
        with self.controller(key=self.new_key()) as c:
            c.start()
            wait_exec(c, ["scontrol", "ping"], "is UP", 90, "slurmctld to answer scontrol ping")
            self.assertEqual(c.stop(), 0, c.output()[-3000:])

    def test_missing_munge_key_ends_the_container_with_one_line(self):
        with self.controller() as c:
            self.assertOneLineError(c.run(), KEY)


class LoginImage(OciTestCase):

    def test_runs_its_command_with_munge_and_the_jail_plugin(self):
        plugin = "/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_jail.so"
        # Slurm's clients read slurm.conf even for --version: a login pod mounts it.
        mounts = [(self.new_key(), KEY, True), (self.config_map(), "/etc/slurm", True)]
        with self.container("k8sbridge-login", mounts=mounts,
                            args=["sh", "-c", f"test -f {plugin} && munge -n | unmunge "
                                  "| grep -c STATUS:.*Success && srun --version"]) as c:
            r = c.run()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.split()[-3:], ["1", "slurm-wlm", image_info("k8sbridge-login")["slurm"]])


if __name__ == "__main__":
    main()
