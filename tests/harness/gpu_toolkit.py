"""A stand-in for the NVIDIA container toolkit on the test cluster's GPU nodes.

On a GPU node the toolkit is an OCI runtime that wraps runc: a RuntimeClass names
it, and before runc creates a container it adds the GPUs' device nodes and binds
the driver's user-space libraries into the container's root. The test nodes have
no GPUs, so this one does the same with stand-ins:

- device nodes /dev/nvidia0 ... /dev/nvidia<N-1> of a character major no driver
  holds (opening one allowed fails with ENXIO: no device behind it; one that the
  job's device cgroup denies, with EPERM);
- libnvidia-ml.so.1: tests/fakes/fake_nvml.cpp, the scripted NVML, and beside it
  (where the library reads it) the script of the pod's GPUs, one file per pod
  (`script(pod)`), which a test rewrites to break a GPU.

The wrapper is a script that containerd's runc shim runs as its runtime binary
(RealNode's `runtimes`): on `create` it edits the bundle's config.json of a pod's
container (not of its sandbox), then execs runc with the same arguments.
"""

import json
import os
import unittest
from pathlib import Path

from harness.paths import BUILD_ROOT

RUNTIME_CLASS = "nvidia"  # the name sites give the toolkit's RuntimeClass
DRIVER_DIR = "/usr/lib/x86_64-linux-gnu"  # where the toolkit binds the libraries
FAKE_NVML = BUILD_ROOT / "tests" / "fakes" / "libnvidia-ml.so.1"


def free_char_major() -> int:
    """A character major for local use (240-254) that no driver holds now."""
    used = set()
    block = False
    for line in Path("/proc/devices").read_text().splitlines():
        if line.startswith("Block devices"):
            block = True
        fields = line.split()
        if not block and fields and fields[0].isdigit():
            used.add(int(fields[0]))
    for major in range(240, 255):
        if major not in used:
            return major
    raise unittest.SkipTest("every local-use character major (240-254) is held by a driver")


def healthy_gpu(bus: int) -> dict:
    """fake_nvml.cpp's script of a healthy H100 on PCI bus `bus`."""
    return {"name": "NVIDIA H100", "bus": bus, "nvlink": [True, True],
            "pcie": {"width": 16, "max_width": 16, "gen": 5, "max_gen": 5}}


def pod_gpus(count: int) -> list:
    """The healthy GPUs the toolkit gives a pod, each with its own UUID and bus."""
    return [dict(healthy_gpu(0x18 + i), uuid=f"GPU-{i}") for i in range(count)]


WRAPPER = '''#!/usr/bin/python3
# The test cluster's stand-in for the NVIDIA container toolkit's runtime
# (tests/harness/gpu_toolkit.py): adds the GPUs to a pod's container, runs runc.
import json, os, shutil, sys
RUNC, MAJOR, GPUS, LIB, SCRIPTS, DRIVER_DIR = {settings}
argv = sys.argv[1:]
if "create" in argv:
    rest = argv[argv.index("create") + 1:]
    flag = next(f for f in ("--bundle", "-b") if f in rest)
    bundle = rest[rest.index(flag) + 1]
    path = os.path.join(bundle, "config.json")
    with open(path) as f:
        spec = json.load(f)
    notes = spec.get("annotations", {{}})
    if notes.get("io.kubernetes.cri.container-type") == "container":
        pod = notes["io.kubernetes.cri.sandbox-name"]
        script = os.path.join(SCRIPTS, pod + ".json")
        if not os.path.exists(script):
            shutil.copyfile(os.path.join(SCRIPTS, "default.json"), script)
        spec.setdefault("linux", {{}}).setdefault("devices", []).extend(
            {{"path": f"/dev/nvidia{{i}}", "type": "c", "major": MAJOR, "minor": i,
              "fileMode": 0o666, "uid": 0, "gid": 0}} for i in range(GPUS))
        for source, name in ((LIB, "libnvidia-ml.so.1"), (script, "fake-nvml.json")):
            spec["mounts"].append({{"destination": f"{{DRIVER_DIR}}/{{name}}", "type": "bind",
                                   "source": source, "options": ["rbind", "ro", "nosuid",
                                                                 "nodev"]}})
        with open(path + ".tmp", "w") as f:
            json.dump(spec, f)
        os.replace(path + ".tmp", path)
os.execv(RUNC, [RUNC] + argv)
'''


class FakeGpuToolkit:
    """The wrapper and its files in `directory`: `gpus` GPUs a pod."""

    def __init__(self, directory: Path, runc: str, gpus: int = 8):
        if not FAKE_NVML.exists():
            raise unittest.SkipTest(f"{FAKE_NVML} is not built (meson compile)")
        self.dir = Path(directory)
        self.gpus = gpus
        self.major = free_char_major()
        self.scripts = self.dir / "nvml"
        self.scripts.mkdir(parents=True)
        (self.scripts / "default.json").write_text(json.dumps(
            {"devices": pod_gpus(gpus)}))
        self.runtime = self.dir / "nvidia-container-runtime"
        settings = repr((runc, self.major, gpus, str(FAKE_NVML), str(self.scripts),
                         DRIVER_DIR))
        self.runtime.write_text(WRAPPER.format(settings=settings))
        self.runtime.chmod(0o755)

    def script(self, pod: str) -> Path:
        """The NVML script the pod's container has (written at its creation)."""
        return self.scripts / f"{pod}.json"

    def set_gpus(self, pod: str, devices: list):
        """Rewrites the pod's script in place: the container binds this file (its
        inode), so a new file would not reach it."""
        with open(self.script(pod), "r+") as f:
            f.truncate(0)
            f.write(json.dumps({"devices": devices}))

    @staticmethod
    def runtime_class() -> dict:
        return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS}, "handler": RUNTIME_CLASS}
