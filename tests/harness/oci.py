"""Runs k8sbridge's OCI images under runc, the real OCI runtime (crun refuses this
kernel's hybrid cgroup layout: ../shared/reference/containers.md).

An image's layout is unpacked once per test process with umoci; every container
then gets an overlay of its own over that root, so containers never see each
other's writes and nothing is unpacked twice. A container is a context manager:
it is killed and deleted, and its overlay unmounted, also when a test fails.
"""

import json
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from harness.rig import OCI_PREFIX, OCI_RUNC_ROOT, GaveUp, RigError, oci_containers, wait_for


# A pod's container under a privileged-enough security context: slurmd drops
# and changes ids, munged and the jail need the rest. (Not CAP_SYS_RESOURCE: this
# machine's own bounding set lacks it, as many a node's runtime does.)
CAPABILITIES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
                "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
                "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT", "CAP_SYS_ADMIN",
                "CAP_SYS_PTRACE", "CAP_AUDIT_WRITE", "CAP_MKNOD",
                "CAP_IPC_LOCK"]


def images_dir() -> Optional[Path]:
    """Where scripts/images.py left the images (scripts/test.sh sets it)."""
    value = os.environ.get("K8SBRIDGE_IMAGES")
    return Path(value) if value else None


def image_info(name: str) -> dict:
    return json.loads((images_dir() / name / "image.json").read_text())


def _run(cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), text=True, capture_output=True, **kw)


class Image:
    """An image's root, unpacked once into `workdir`."""

    def __init__(self, name: str, workdir: Path):
        self.name = name
        info = image_info(name)
        self.tag = info["tag"]
        self.bundle = workdir / f"unpacked-{name}"
        r = _run(["umoci", "unpack", "--image", f"{images_dir() / name / 'oci'}:{self.tag}",
                  str(self.bundle)])
        if r.returncode != 0:
            raise RigError(f"umoci unpack {name}: {r.stderr.strip()}")
        self.config = json.loads((self.bundle / "config.json").read_text())

    @property
    def rootfs(self) -> Path:
        return self.bundle / "rootfs"


class Container:
    """One runc container of `image`. `mounts`: (host path, container path, ro);
    `netns`: a network namespace path to join (else a new, empty one)."""

    def __init__(self, image: Image, workdir: Path, *, args: Optional[list] = None,
                 command: Optional[list] = None,
                 env: Optional[dict] = None, mounts: Sequence[tuple] = (),
                 netns: Optional[str] = None, hostname: str = "pod"):
        self.image = image
        self.id = f"{OCI_PREFIX}{secrets.token_hex(4)}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.id}-", dir=workdir))
        self.log = self.dir / "output"
        self.proc: Optional[subprocess.Popen] = None
        self._mounted = False
        self._spec = self._make_spec(args, env or {}, mounts, netns, hostname)
        if command is not None:  # instead of the image's entrypoint
            self._spec["process"]["args"] = list(command)

    # ---- the bundle -------------------------------------------------------------

    def _make_spec(self, args, env, mounts, netns, hostname) -> dict:
        spec = json.loads(json.dumps(self.image.config))
        process = spec["process"]
        process["terminal"] = False
        process["noNewPrivileges"] = False
        if args is not None:
            process["args"] = list(process["args"]) + list(args)
        process["env"] = [e for e in process["env"] if e.split("=", 1)[0] not in env]
        process["env"] += [f"{k}={v}" for k, v in env.items()]
        process["capabilities"] = {k: list(CAPABILITIES) for k in
                                   ("bounding", "effective", "permitted")}
        process.pop("rlimits", None)  # the host's own limits, as a kubelet leaves them
        spec["hostname"] = hostname
        spec["root"] = {"path": str(self.dir / "root"), "readonly": False}
        for ns in spec["linux"]["namespaces"]:
            if ns["type"] == "network" and netns:
                ns["path"] = netns
        for host, inside, ro in mounts:
            spec["mounts"].append({"destination": str(inside), "type": "bind",
                                   "source": str(host),
                                   "options": ["rbind", "ro" if ro else "rw"]})
        spec["linux"].pop("resources", None)
        return spec

    def _mount_root(self) -> None:
        for d in ("upper", "work", "root"):
            (self.dir / d).mkdir()
        opts = (f"lowerdir={self.image.rootfs},upperdir={self.dir / 'upper'},"
                f"workdir={self.dir / 'work'}")
        r = _run(["mount", "-t", "overlay", "overlay", "-o", opts, str(self.dir / "root")])
        if r.returncode != 0:
            raise RigError(f"overlay for {self.id}: {r.stderr.strip()}")
        self._mounted = True
        (self.dir / "config.json").write_text(json.dumps(self._spec, indent=1))

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        """Puts a file into the container's root before it starts."""
        target = self.dir / "upper" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)

    # ---- running ----------------------------------------------------------------

    def __enter__(self) -> "Container":
        try:
            self._mount_root()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def _runc(self, *args: str) -> list:
        return ["runc", "--root", OCI_RUNC_ROOT, *args]

    def run(self, timeout: float = 120) -> subprocess.CompletedProcess:
        """Runs the container to its end: (returncode, its stdout and stderr)."""
        return _run(self._runc("run", "--bundle", str(self.dir), self.id), timeout=timeout)

    def start(self) -> None:
        """Starts the container in the background; its output goes to self.log."""
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self._runc("run", "--bundle", str(self.dir), self.id),
                                         stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exec(self, cmd: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
        return _run(self._runc("exec", self.id, *cmd), timeout=timeout)

    def stop(self, timeout: float = 30) -> Optional[int]:
        """SIGTERM to the container's PID 1, as a kubelet sends; returns its exit code."""
        if not self.running():
            return self.proc.returncode if self.proc else None
        _run(self._runc("kill", self.id, "TERM"))
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _run(self._runc("kill", self.id, "KILL"))
            return self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.running():
            _run(self._runc("kill", self.id, "KILL"))
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        _run(self._runc("delete", "--force", self.id))
        if self._mounted:
            _run(["umount", "-l", str(self.dir / "root")])
            self._mounted = False
        shutil.rmtree(self.dir, ignore_errors=True)


def runc_leftovers() -> list:
    """Containers of ours that runc still knows."""
    return oci_containers()


def wait_exec(container: Container, cmd: Sequence[str], want: str, timeout: float, what: str):
    """Polls `cmd` inside the container until its output holds `want`."""
    def ok():
        if not container.running():
            raise GaveUp(f"{container.image.name} exited ({container.proc.returncode}); "
                           f"output:\n{container.output()[-3000:]}")
        r = container.exec(cmd, timeout=30)
        return want in r.stdout
    return wait_for(ok, timeout, lambda: f"{what}; output:\n{container.output()[-3000:]}")
