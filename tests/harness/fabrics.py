"""Fabrics for the topology tests: generated ibsim net files, a running ibsim per
fabric (each on its own abstract socket name, so tests never share one), and the
real `ibnetdiscover` / `k8sbridge-topology --live` run against it through
umad2sim's LD_PRELOAD (what Debian's `ibsim-run` does)."""

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.paths import SLURM_BUILD
from harness.rig import in_slurm_root

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
PROGRAM = Path(os.environ.get("K8SBRIDGE_TOPOLOGY",
                              SLURM_BUILD / "programs" / "topology" / "k8sbridge-topology"))


@dataclass
class Fabric:
    """Nodes by name (the name is the node description ibsim reports) with cables."""
    switches: list = field(default_factory=list)
    hcas: list = field(default_factory=list)
    cables: list = field(default_factory=list)  # (a, b)
    # What the test expects: Slurm node -> the physical leaf switches it hangs off.
    host_leaves: dict = field(default_factory=dict)

    def netlist(self) -> str:
        ports = {n: [] for n in self.switches + self.hcas}
        for a, b in self.cables:
            pa, pb = len(ports[a]) + 1, len(ports[b]) + 1
            ports[a].append((pa, b, pb))
            ports[b].append((pb, a, pa))
        out = []
        # An HCA first: ibsim attaches the discovering client to the first node.
        for name in self.hcas[:1] + self.switches + self.hcas[1:]:
            kind = "Switch" if name in self.switches else "Hca"
            count = max(len(ports[name]), 1)
            if kind == "Switch":
                count = max(count, 8)
            out.append(f'{kind}\t{count} "{name}"')
            for local, remote, rport in ports[name]:
                out.append(f'[{local}]\t"{remote}"[{rport}]')
            out.append("")
        return "\n".join(out) + "\n"


def fat_tree(hosts=8, hosts_per_leaf=4, rails=1, spines=2, groups_per_pod=0, cores=1,
             prefix="w-", tag="") -> Fabric:
    """Two tiers (leaves -> spines) or, with groups_per_pod, three (leaves -> pod
    aggregation -> core planes). With rails > 1, host HCA r sits on rail r's leaf."""
    f = Fabric()
    groups = (hosts + hosts_per_leaf - 1) // hosts_per_leaf
    pods = (groups + groups_per_pod - 1) // groups_per_pod if groups_per_pod else 1
    leaf = {}
    for g in range(groups):
        for r in range(rails):
            leaf[g, r] = f"{tag}leaf-{g}-rail{r}"
            f.switches.append(leaf[g, r])
    upper = {}
    for p in range(pods):
        for k in range(spines):
            upper[p, k] = f"{tag}{'agg' if groups_per_pod else 'spine'}-{p}-{k}"
            f.switches.append(upper[p, k])
    for g in range(groups):
        p = g // groups_per_pod if groups_per_pod else 0
        for r in range(rails):
            for k in range(spines):
                f.cables.append((leaf[g, r], upper[p, k]))
    if groups_per_pod:
        for k in range(spines):
            for c in range(cores):
                core = f"{tag}core-{k}-{c}"
                f.switches.append(core)
                for p in range(pods):
                    f.cables.append((upper[p, k], core))
    for h in range(hosts):
        g = h // hosts_per_leaf
        name = f"{prefix}{h}"
        f.host_leaves[name] = {leaf[g, r] for r in range(rails)}
        for r in range(rails):
            hca = f"{name} mlx5_{r}"
            f.hcas.append(hca)
            f.cables.append((hca, leaf[g, r]))
    return f


def add_cpu_hosts(f: Fabric, names, leaf: str) -> None:
    """CPU-only hosts that still have an HCA on the fabric (e.g. for storage)."""
    for name in names:
        hca = f"{name} mlx5_0"
        f.hcas.append(hca)
        f.cables.append((hca, leaf))


class IbSim:
    """A running ibsim for one fabric; stops it (and only it) on exit."""

    def __init__(self, fabric: Fabric, workdir: Path):
        self.fabric = fabric
        self.workdir = workdir
        self.sockname = f"k8sbridge-topo-{secrets.token_hex(4)}"
        self.proc = None

    def env_overrides(self) -> dict:
        """What makes a libibumad program talk to this simulator (ibsim-run's job)."""
        return {"IBSIM_SOCKNAME": self.sockname, "LD_PRELOAD": UMAD2SIM}

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(self.env_overrides())
        env.pop("SIM_HOST", None)
        return env

    def __enter__(self) -> "IbSim":
        net = self.workdir / f"{self.sockname}.net"
        net.write_text(self.fabric.netlist())
        self.log = self.workdir / f"{self.sockname}.log"
        env = dict(os.environ, IBSIM_SOCKNAME=self.sockname)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(["ibsim", "-s", "-n", str(net)], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + 30
        while b"Network simulator ready" not in self.log.read_bytes():
            if self.proc.poll() is not None:
                raise RuntimeError(f"ibsim exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError("ibsim did not become ready in 30 s")
            time.sleep(0.1)
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return False

    def ibnetdiscover(self) -> str:
        out = subprocess.run(["ibnetdiscover"], env=self.env(), capture_output=True, text=True,
                             timeout=120, check=True)
        return out.stdout

    def run_live(self, args, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([str(PROGRAM), "--live", *args], env=self.env(),
                              capture_output=True, text=True, timeout=120, **kw)


def run_program(args, env=None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(in_slurm_root([str(PROGRAM), *args]), capture_output=True, text=True,
                          timeout=120, env=env, **kw)


def parse_tree_conf(text: str) -> dict:
    """SwitchName -> {"Nodes": [...], "Switches": [...]} with hostlists expanded."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(item.split("=", 1) for item in line.split())
        name = fields.pop("SwitchName")
        out[name] = {k: expand_hostlist(v) for k, v in fields.items()}
    return out


def expand_hostlist(expr: str) -> list:
    names = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?", expr):
        prefix, ranges = m.group(1), m.group(2)
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            hi = hi or lo
            width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
            for n in range(int(lo), int(hi) + 1):
                names.append(f"{prefix}{n:0{width}d}")
    return names


def tempdir(test) -> Path:
    d = Path(tempfile.mkdtemp(prefix="k8sbridge-topo-"))
    test.addCleanup(shutil.rmtree, d, ignore_errors=True)
    return d
