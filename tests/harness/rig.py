"""The k8sbridge test rig: real munge, slurmctld and slurmd on one machine.

Each slurmd "host" runs in its own network and UTS namespace with its own
address on a bridge the rig creates, as a worker pod would. Node addresses come
from slurmd's registration (the nodes are CLOUD nodes), never from slurm.conf.

    with Rig(nodes=2) as rig:
        rig.wait_nodes_idle()
        out = rig.check_output(["srun", "-N2", "hostname"])

Teardown (also on failure, and on SIGTERM) stops every daemon and every process
a job left, removes the namespaces, the bridge and any mount under the rig's
directory, and keeps the daemons' logs under `log_root` for the test report.
`cleanup_all()` removes what a killed test process could not.

Resources are named after the rig's id (its slot's number and random digits),
and addresses and ports come from the slot, which the rig holds while it lives
(`claim_slot`), so rigs running at the same time, or one after the other, never
share a bridge, a namespace, a subnet, a port, a socket or a state directory. `leftovers(ids)` looks at the given rigs
only; `leftovers()` at every rig on the machine.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence, Union

DEFAULT_SLURM_PREFIX = "/var/cache/k8sbridge/slurm-24.11.5/install"
RESOURCE_PREFIX = "k8sb"            # bridges k8sb<id>, namespaces k8sb-<id>-<node>
WORKDIR_PREFIX = "k8sbridge-rig-"   # /tmp/k8sbridge-rig-<id>/
# Where a rig keeps its daemon logs when it stops (K8SBRIDGE_RIG_LOGDIR overrides).
# Its name starts like a workdir's, so cleanup() must pass it by: those logs are
# what explains a failure (or a chaos run) after the rig is gone.
DEFAULT_LOG_ROOT = Path("/tmp/k8sbridge-rig-logs")
RIG_ENV = "K8SBRIDGE_RIG_ID"        # set on every process the rig starts
SUBNET_BASE = ipaddress.ip_network("10.231.0.0/16")  # a rig's /24: 10.231.<slot>.0
POD_NETWORK_BASE = ipaddress.ip_network("10.232.0.0/16")  # its pods': 10.232.<slot>.0
SLOT_DIR = Path("/run/k8sbridge-rig-slots")  # <slot>.lock; kept (a lock file must stay)
SLOTS = range(1, 255)
# A slot's TCP ports: below the kernel's ephemeral range (32768 and up), so no
# client connection or port-0 listener anywhere on the machine takes one.
PORT_BASE = 20000
PORTS_PER_SLOT = 40


class RigError(RuntimeError):
    pass


class GaveUp(RigError):
    """Raised by a wait_for predicate when waiting longer cannot help (the daemon it
    waits for has exited): wait_for passes it on at once instead of retrying."""


def slurm_prefix() -> Path:
    """Where Slurm is installed, as its daemons see it (inside slurm_root())."""
    return Path(os.environ.get("K8SBRIDGE_SLURM_PREFIX", DEFAULT_SLURM_PREFIX))


def slurm_root() -> Optional[Path]:
    """The root filesystem Slurm runs in, for a release built for another Debian
    (K8SBRIDGE_SLURM_ROOT: the 26.05 suite's sid build root, scripts/build-root.sh);
    None: the host's."""
    root = os.environ.get("K8SBRIDGE_SLURM_ROOT", "")
    return Path(root) if root else None


def slurm_plugindir() -> Path:
    """Slurm's own plugins (for a PluginDir that adds k8sbridge's): a Slurm built from
    source keeps them in <prefix>/lib/slurm, Debian's in /usr/lib/<triplet>/slurm-wlm."""
    debian = slurm_prefix() / "lib" / "x86_64-linux-gnu" / "slurm-wlm"
    return debian if host_path(debian).is_dir() else slurm_prefix() / "lib" / "slurm"


def host_path(path: Path) -> Path:
    """`path` as Slurm sees it, from this process (outside slurm_root())."""
    root = slurm_root()
    return root / Path(path).relative_to("/") if root else Path(path)


def slurm_version() -> tuple:
    """(major, minor, micro) of the Slurm the rig runs, from its slurm_version.h."""
    header = host_path(slurm_prefix() / "include" / "slurm" / "slurm_version.h").read_text()
    number = int(re.search(r"#define SLURM_VERSION_NUMBER (0x[0-9a-fA-F]+)", header).group(1), 16)
    return (number >> 16, (number >> 8) & 0xFF, number & 0xFF)


# What a Slurm in slurm_root() sees of the host, at the same paths: the kernel's
# file systems, the rig's and the tests' directories under /tmp, and the checkout
# (k8sbridge's builds, the rig's log directory).
CHROOT_BINDS = ("/proc", "/sys", "/dev", "/tmp", str(Path(__file__).resolve().parents[2]))


def chroot_script(root: Path) -> str:
    """sh commands that make `root` show CHROOT_BINDS (in the caller's own mount
    namespace: nothing outlives it), ending in `exec chroot`; the command follows.
    The working directory is kept, as a process started on the host would have it."""
    q = shlex.quote
    binds = " && ".join(f"mkdir -p {q(str(root) + d)} && mount --rbind {q(d)} {q(str(root) + d)}"
                        for d in CHROOT_BINDS)
    return (f"{binds} && exec chroot {q(str(root))} /bin/sh -c "
            "'cd \"$0\" 2>/dev/null; exec \"$@\"' \"$PWD\"")


def in_slurm_root(cmd: Sequence[str]) -> list[str]:
    """`cmd` (a program built against the rig's Slurm) run where that Slurm's libraries
    are: inside slurm_root() when there is one, else as it is."""
    root = slurm_root()
    if not root:
        return list(cmd)
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            chroot_script(root) + ' "$@"', "sh", *cmd]


def wait_for(predicate: Callable[[], object], timeout: float,
             what: Union[str, Callable[[], str]], interval: float = 0.2):
    """Polls predicate until it returns something truthy; raises RigError naming
    `what` after `timeout` seconds. Returns the predicate's value. `what` may be
    a function, called only on timeout: a message that quotes a daemon's log
    then shows the log as it was when the wait gave up."""
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except GaveUp:
            raise
        except (subprocess.SubprocessError, OSError, RigError) as e:
            last_error = e
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            if callable(what):
                what = what()
            raise RigError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def _run(cmd: Sequence[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(cmd), check=check, text=True, capture_output=True, **kw)


def _used_subnets() -> set:
    out = _run(["ip", "-4", "-o", "addr", "show"]).stdout
    nets = set()
    for m in re.finditer(r"inet (\S+)", out):
        nets.add(ipaddress.ip_interface(m.group(1)).network)
    return nets


class Slot:
    """A number between 1 and 254 that no other live process holds (an flock on
    SLOT_DIR/<n>.lock, dropped by release() or when the process ends, however it
    ends). It gives its holder a rig subnet, a pod network and a block of TCP
    ports of its own."""

    def __init__(self, number: int, fd: int):
        self.number = number
        self._fd = fd
        self._next_port = 0

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return _slot_network(SUBNET_BASE, self.number)

    @property
    def pod_network(self) -> ipaddress.IPv4Network:
        return _slot_network(POD_NETWORK_BASE, self.number)

    def free_port(self) -> int:
        """The next port of the slot's block that nothing is bound to (a port in
        TIME_WAIT from the slot's last holder is skipped too)."""
        first = PORT_BASE + self.number * PORTS_PER_SLOT
        while self._next_port < PORTS_PER_SLOT:
            port = first + self._next_port
            self._next_port += 1
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("0.0.0.0", port))
                except OSError:
                    continue
            return port
        raise RigError(f"slot {self.number}: all {PORTS_PER_SLOT} ports used")

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            _released_slots.add(self.number)


_released_slots: set = set()


def _slot_network(base: ipaddress.IPv4Network, number: int) -> ipaddress.IPv4Network:
    return ipaddress.ip_network((int(base.network_address) + (number << 8), 24))


def _try_claim_slot(held: list, overlapping: set) -> Optional[Slot]:
    """One sweep over the slots in random order; records why each one was passed."""
    used = _used_subnets()
    numbers = list(SLOTS)
    secrets.SystemRandom().shuffle(numbers)
    # Slots this process held before come last: rigs one after the other get
    # other addresses and ports, so nothing of the first can reach the second.
    numbers.sort(key=lambda n: n in _released_slots)
    for n in numbers:
        fd = os.open(SLOT_DIR / f"{n}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            held.append(n)
            continue
        slot = Slot(n, fd)
        clash = [u for net in (slot.subnet, slot.pod_network) for u in used if net.overlaps(u)]
        if clash:
            slot.release()
            overlapping.update(str(u) for u in clash)
            continue
        return slot
    return None


def claim_slot(timeout: float = 60) -> Slot:
    """A free slot, chosen at random: held by no live process, and neither of its
    networks on an interface (a killed rig's bridge keeps its address). Slots are
    freed as other rigs stop, so a full sweep is retried until `timeout`."""
    SLOT_DIR.mkdir(mode=0o755, exist_ok=True)
    deadline = time.monotonic() + timeout
    while True:
        held: list = []
        overlapping: set = set()
        slot = _try_claim_slot(held, overlapping)
        if slot is not None:
            return slot
        if time.monotonic() >= deadline:
            raise RigError(
                f"no free slot in {SLOT_DIR} after {timeout:.0f} s: {len(held)} held by live "
                f"processes, the others' networks overlap {sorted(overlapping)} on this "
                "host's interfaces; run `rigctl cleanup`")
        time.sleep(0.5)


_process_slot: Optional[Slot] = None


def free_tcp_port() -> int:
    """A TCP port for a daemon a test starts beside a rig (a metrics endpoint):
    from a slot this process holds until it ends."""
    global _process_slot
    if _process_slot is None:
        _process_slot = claim_slot()
    return _process_slot.free_port()


def parse_scontrol_oneliner(line: str) -> dict:
    """Parses one `scontrol -o show ...` record into a dict. Values may contain
    spaces (Reason=...), so split only where the next token is KEY=."""
    fields = {}
    for m in re.finditer(r"(\S+?)=(.*?)(?=\s+\S+?=|$)", line.strip()):
        fields[m.group(1)] = m.group(2)
    return fields


@dataclass
class NodeSpec:
    name: str
    cpus: int = 1
    real_memory: int = 1000
    features: Sequence[str] = ()
    gres: str = ""

    def conf_line(self) -> str:
        parts = [f"NodeName={self.name}", f"CPUs={self.cpus}", f"RealMemory={self.real_memory}",
                 "State=CLOUD"]
        if self.features:
            parts.append("Feature=" + ",".join(self.features))
        if self.gres:
            parts.append(f"Gres={self.gres}")
        return " ".join(parts)


@dataclass
class Worker:
    spec: NodeSpec
    netns: str
    address: str
    veth_host: str
    proc: Optional[subprocess.Popen] = None


@dataclass
class RigConfig:
    nodes: Sequence[NodeSpec] = ()
    slurm_conf_extra: str = ""         # appended to slurm.conf (before node lines)
    partition_extra: str = ""          # appended to the default partition line
    plugstack_lines: Sequence[str] = ()
    cgroup_conf: str = "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"
    extra_files: dict = field(default_factory=dict)  # name -> text, written to etc/
    start_slurmd: bool = True          # False: the test (or a ResumeProgram) starts them
    # False: the nodes get no namespaces, addresses or munged from the rig; they
    # run as pods on real Kubernetes nodes (tests/harness/cluster.py).
    node_namespaces: bool = True
    debug: str = "debug"
    # Daemons beside slurmctld that it needs from its start (the accounting database
    # and slurmdbd, tests/harness/accounting.py): each has start(rig), called once
    # munge and the configuration are there, before slurmctld starts, and stop(rig),
    # called once the Slurm daemons have stopped.
    services: Sequence = ()


class Rig:
    def __init__(self, nodes: int | Sequence[NodeSpec] = 2, *, node_prefix: str = "w-",
                 config: Optional[RigConfig] = None, log_root: Optional[Path] = None,
                 keep_workdir: bool = False, **config_kw):
        if config is None:
            config = RigConfig(**config_kw)
        if isinstance(nodes, int):
            nodes = [NodeSpec(f"{node_prefix}{i}") for i in range(nodes)]
        if not config.nodes:
            config.nodes = list(nodes)
        self.config = config
        # Held until stop(): the rig's subnet, its pods' network, its ports. The id
        # starts with the slot's number, so no two live rigs ever have the same.
        self.slot = claim_slot()
        self.id = f"{self.slot.number:02x}{secrets.token_hex(2)}"
        _made_rig_ids.append(self.id)
        self.prefix = slurm_prefix()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{self.id}-"))
        os.chmod(self.workdir, 0o755)  # munged refuses sockets in world-writable dirs
        self.etc = self.workdir / "etc"
        self.logdir = self.workdir / "log"
        self.log_root = Path(log_root or os.environ.get("K8SBRIDGE_RIG_LOGDIR",
                                                        str(DEFAULT_LOG_ROOT)))
        self.keep_workdir = keep_workdir
        self.bridge = f"{RESOURCE_PREFIX}{self.id}"
        self.subnet = self.slot.subnet
        self.bridge_address = str(next(self.subnet.hosts()))
        self.ctld_port = self.slot.free_port()
        self.munge_socket = self.workdir / "munge" / "munge.socket"
        self.munged: Optional[subprocess.Popen] = None
        self.node_munged: dict[str, subprocess.Popen] = {}
        self.slurmctld: Optional[subprocess.Popen] = None
        self.workers: dict[str, Worker] = {}
        self._started_services: list = []
        self._started = False
        self._stopped = False
        self._old_sigterm = None

    # ---- lifecycle -------------------------------------------------------------

    def __enter__(self) -> "Rig":
        try:
            self.start()
        except BaseException:
            self.stop(failed=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop(failed=exc_type is not None)
        return False

    def start(self) -> "Rig":
        if os.geteuid() != 0:
            raise RigError("the rig needs root (network namespaces, bridges, munge, slurmd)")
        if not os.path.lexists(host_path(self.prefix / "sbin" / "slurmctld")):
            raise RigError(f"no Slurm at {self.prefix}: run scripts/setup.sh, or set "
                           "K8SBRIDGE_SLURM_PREFIX to a Slurm 24.11.5 install")
        self._started = True
        self._install_sigterm_handler()
        for d in ("etc", "log", "state", "spool", "run", "munge"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        self._start_network()
        self._start_munge()
        self._write_config()
        for service in self.config.services:
            self._started_services.append(service)
            service.start(self)
        self._start_slurmctld()
        if self.config.start_slurmd:
            for name in self.workers:
                self.start_slurmd(name)
        return self

    def stop(self, failed: bool = False) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            if self.workers or self.slurmctld:
                self._stop_daemons()
            self._stop_services()
            self._sweep_processes()
            self._unmount_all()
            self._stop_network()
            self._stop_munge()
        finally:
            self._collect_logs(failed)
            if not self.keep_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.slot.release()
            self._restore_sigterm_handler()

    def _install_sigterm_handler(self) -> None:
        # meson sends SIGTERM on a timeout: turn it into an exception so the
        # `with` block tears the rig down.
        def on_term(signum, frame):
            raise SystemExit(f"rig {self.id}: SIGTERM")
        try:
            self._old_sigterm = signal.signal(signal.SIGTERM, on_term)
        except ValueError:  # not the main thread
            self._old_sigterm = None

    def _restore_sigterm_handler(self) -> None:
        if self._old_sigterm is not None:
            try:
                signal.signal(signal.SIGTERM, self._old_sigterm)
            except ValueError:
                pass

    @property
    def stopped(self) -> bool:
        """True once stop() ran: what runs beside the rig (a test's kubelet) ends."""
        return self._stopped

    # ---- environment for Slurm clients -----------------------------------------

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    def env(self, extra: Optional[dict] = None) -> dict:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.slurm_conf)
        env["PATH"] = f"{self.prefix}/bin:{self.prefix}/sbin:{env.get('PATH', '/usr/bin:/bin')}"
        env[RIG_ENV] = self.id
        for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[k]  # a rig inside a Slurm job must not inherit that job
        if extra:
            env.update(extra)
        return env

    def host_command(self, cmd: Sequence[str]) -> list[str]:
        """`cmd` as the rig runs it on the host (slurmctld, Slurm clients, daemons
        beside slurmctld): in a mount namespace of its own whose /etc/hosts and
        resolv.conf are the rig's. Slurm resolves peer addresses and node names;
        with the host's resolver those lookups would leave the machine (and stall
        for 5 s when unanswered). Here they end in the files or on loopback."""
        etc = host_path(Path("/etc"))
        script = (f'mount --bind "$1" {etc}/hosts && mount --bind "$2" {etc}/resolv.conf && '
                  'shift 2 && ' + self._exec())
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script,
                "sh", str(self.node_hosts), str(self.node_resolv), *cmd]

    def _exec(self) -> str:
        """The end of a wrapper script: exec "$@", inside slurm_root() if there is one."""
        root = slurm_root()
        return chroot_script(root) + ' "$@"' if root else 'exec "$@"'


    def run(self, cmd: Sequence[str], check: bool = False, timeout: float = 120,
            **kw) -> subprocess.CompletedProcess:
        """Runs a Slurm client command (srun, sbatch, scontrol...) against this rig."""
        return subprocess.run(self.host_command(cmd), env=self.env(kw.pop("env", None)),
                              text=True, capture_output=True, timeout=timeout, check=check, **kw)

    def check_output(self, cmd: Sequence[str], timeout: float = 120, **kw) -> str:
        r = self.run(cmd, timeout=timeout, **kw)
        if r.returncode != 0:
            raise RigError(f"{shlex.join(cmd)} exited {r.returncode}\nstdout: {r.stdout}\n"
                           f"stderr: {r.stderr}")
        return r.stdout

    # ---- network ----------------------------------------------------------------

    def _start_network(self) -> None:
        hosts = list(self.subnet.hosts())
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.bridge_address}/{self.subnet.prefixlen}",
              "dev", self.bridge])
        _run(["ip", "link", "set", self.bridge, "up"])
        for i, spec in enumerate(self.config.nodes):
            if not self.config.node_namespaces:
                self.workers[spec.name] = Worker(spec, "", "", "")
                continue
            netns = f"{RESOURCE_PREFIX}-{self.id}-{spec.name}"
            veth_host = f"kv{self.id}{i}"
            address = str(hosts[10 + i])
            _run(["ip", "netns", "add", netns])
            self.workers[spec.name] = Worker(spec, netns, address, veth_host)
            _run(["ip", "link", "add", veth_host, "type", "veth", "peer", "name", "eth0",
                  "netns", netns])
            _run(["ip", "link", "set", veth_host, "master", self.bridge, "up"])
            nsrun = ["ip", "-n", netns]
            _run(nsrun + ["link", "set", "lo", "up"])
            _run(nsrun + ["addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0"])
            _run(nsrun + ["link", "set", "eth0", "up"])
        # No default route: a node reaches only the rig's own subnet, so nothing
        # (DNS included) can leave for an address the rig does not own.
        self._write_node_files()

    def _write_node_files(self) -> None:
        """/etc/hosts and /etc/resolv.conf as a node sees them (bind-mounted in its
        mount namespace, as a kubelet does for a pod): every rig node resolves
        from the file, and DNS is a dead end on the node's own loopback instead of
        a 5 s time-out per lookup."""
        hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                 f"{self.bridge_address} rig-controller"]
        hosts += [f"{w.address} {name}" for name, w in self.workers.items() if w.address]
        self.node_hosts = self.workdir / "node-hosts"
        self.node_hosts.write_text("\n".join(hosts) + "\n")
        self.node_resolv = self.workdir / "node-resolv.conf"
        self.node_resolv.write_text("# k8sbridge rig: no DNS inside nodes\n"
                                    "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def _stop_network(self) -> None:
        for w in self.workers.values():
            if w.netns:
                _run(["ip", "netns", "del", w.netns], check=False)
        _run(["ip", "link", "del", self.bridge], check=False)

    def netns_path(self, node: str) -> str:
        return f"/run/netns/{self.workers[node].netns}"

    def node_address(self, node: str) -> str:
        return self.workers[node].address

    # ---- munge ------------------------------------------------------------------

    def _start_munge(self) -> None:
        """One munged for the host's clients, and one per node: munge credentials
        are single-use, and srun sends one packed launch message (with one
        credential) to every node, so nodes sharing a munged reject all but the
        first as a replay. Each node's slurmd sees its own munged at the common
        socket path, through a bind mount in its mount namespace, as in a pod."""
        mdir = self.workdir / "munge"
        self.munge_key = mdir / "munge.key"
        _run(["mungekey", "--create", f"--keyfile={self.munge_key}"])
        os.chmod(self.munge_key, 0o600)
        self.munged = self._start_munged("munged", mdir)
        for name in self.workers if self.config.node_namespaces else ():
            d = self.workdir / f"munge-{name}"
            d.mkdir(mode=0o755, exist_ok=True)
            self.node_munged[name] = self._start_munged(f"munged-{name}", d)

    def _start_munged(self, name: str, mdir: Path) -> subprocess.Popen:
        sock = mdir / "munge.socket"
        proc = self._spawn(name, [
            "munged", "--foreground", "--force", f"--key-file={self.munge_key}",
            f"--socket={sock}", f"--pid-file={mdir}/munged.pid",
            f"--seed-file={mdir}/munged.seed", f"--log-file={self.logdir}/{name}.log"])
        wait_for(lambda: _run(["munge", "-n", "-S", str(sock)], check=False).returncode == 0,
                 20, f"{name} to encode a credential")
        return proc

    def _stop_munge(self) -> None:
        for name, proc in self.node_munged.items():
            self._terminate(proc, f"munged-{name}")
        self._terminate(self.munged, "munged")

    # ---- Slurm ------------------------------------------------------------------

    def _write_config(self) -> None:
        c = self.config
        w = self.workdir
        node_lines = "\n".join(n.conf_line() for n in c.nodes)
        names = ",".join(n.name for n in c.nodes)
        slurm_conf = f"""\
# Generated by the k8sbridge test rig {self.id}
ClusterName=rig{self.id}
SlurmctldHost=localhost({self.bridge_address})
SlurmctldPort={self.ctld_port}
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool/%n
SlurmctldPidFile={w}/run/slurmctld.pid
SlurmdPidFile={w}/run/slurmd-%n.pid
SlurmctldLogFile={self.logdir}/slurmctld.log
SlurmdLogFile={self.logdir}/slurmd-%n.log
SlurmctldDebug={c.debug}
SlurmdDebug={c.debug}
PlugStackConfig={self.etc}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SlurmdParameters=config_overrides
TreeWidth=65533
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
MinJobAge=600
# Power saving looks for nodes idle longer than SuspendTime every second, not every
# 10 s: a test waiting for a power-down waits SuspendTime, not up to 10 s more.
SlurmctldParameters=power_save_interval=1
{c.slurm_conf_extra}
{node_lines}
PartitionName=main Nodes={names} Default=YES MaxTime=INFINITE State=UP {c.partition_extra}
"""
        (self.etc / "slurm.conf").write_text(slurm_conf)
        (self.etc / "cgroup.conf").write_text(c.cgroup_conf)
        (self.etc / "plugstack.conf").write_text(
            "".join(line.rstrip("\n") + "\n" for line in c.plugstack_lines))
        for name, text in c.extra_files.items():
            (self.etc / name).write_text(text)

    def reconfigure(self) -> None:
        """Rewrites the configuration from self.config (on the same port: the daemons
        already talk on it) and runs `scontrol reconfigure`."""
        self._write_config()
        self.check_output(["scontrol", "reconfigure"])

    def _spawn(self, name: str, cmd: Sequence[str], env: Optional[dict] = None) -> subprocess.Popen:
        out = open(self.logdir / f"{name}.out", "ab")
        try:
            return subprocess.Popen(list(cmd), env=env or self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.workdir)
        finally:
            out.close()

    def _start_slurmctld(self) -> None:
        self.slurmctld = self._spawn("slurmctld", self.host_command([
            str(self.prefix / "sbin" / "slurmctld"), "-D", "-i", "-f", str(self.slurm_conf)]))

        def ready():
            if self.slurmctld.poll() is not None:
                raise GaveUp(f"slurmctld exited with {self.slurmctld.returncode}; "
                             f"log:\n{self._tail('slurmctld.log')}{self._tail('slurmctld.out')}")
            return self.run(["scontrol", "ping"], timeout=10).stdout.find("UP") >= 0
        try:
            wait_for(ready, 60, "slurmctld to answer `scontrol ping`")
        except RigError as e:
            raise RigError(f"{e}\n{self._tail('slurmctld.log')}") from None

    def restart_slurmctld(self, sig: int = signal.SIGTERM) -> None:
        """Stops slurmctld (SIGTERM: it saves its state; SIGKILL: it does not) and
        starts it again from its StateSaveLocation, as a controller pod's restart."""
        self._terminate(self.slurmctld, "slurmctld", sig)
        self._start_slurmctld()

    def slurmd_command(self, node: str) -> list[str]:
        """The command that starts `node`'s slurmd inside its namespaces: the
        node's network namespace (entered, not `ip netns exec`, which would
        remount /sys and hide /sys/fs/cgroup), and new UTS and mount namespaces
        for the hostname and the node's own munge socket. `-b` reports a fresh
        boot, as a new pod does."""
        slurmd = self.prefix / "sbin" / "slurmd"
        q = shlex.quote
        etc = host_path(Path("/etc"))
        inner = (f"mount --bind {q(str(self.workdir / f'munge-{node}'))} "
                 f"{q(str(self.munge_socket.parent))} && "
                 f"mount --bind {q(str(self.node_hosts))} {etc}/hosts && "
                 f"mount --bind {q(str(self.node_resolv))} {etc}/resolv.conf && "
                 f"hostname {q(node)} && " + self._exec())
        return ["nsenter", f"--net={self.netns_path(node)}", "unshare", "--uts", "--mount",
                "--propagation", "private", "--", "sh", "-c", inner, "sh",
                str(slurmd), "-D", "-b", "-N", node, "-f", str(self.slurm_conf)]

    def start_slurmd(self, node: str, env: Optional[dict] = None) -> None:
        """Starts `node`'s slurmd; `env` adds to its environment (what a worker pod's
        downward API would set, e.g. K8SBRIDGE_HOST_NODE)."""
        w = self.workers[node]
        if w.proc and w.proc.poll() is None:
            return
        (self.workdir / "spool" / node).mkdir(parents=True, exist_ok=True)
        w.proc = self._spawn(f"slurmd-{node}.stdout", self.slurmd_command(node),
                             env=self.env(env) if env else None)

    def stop_slurmd(self, node: str, sig: int = signal.SIGTERM) -> None:
        w = self.workers[node]
        self._terminate(w.proc, f"slurmd {node}", sig)
        w.proc = None

    def _terminate(self, proc: Optional[subprocess.Popen], what: str,
                   sig: int = signal.SIGTERM, grace: float = 15) -> None:
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            print(f"rig {self.id}: {what} ignored SIGTERM for {grace}s; killing it",
                  file=sys.stderr)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)

    def _stop_daemons(self) -> None:
        for name in list(self.workers):
            self.stop_slurmd(name)
        self._terminate(self.slurmctld, "slurmctld")

    def _stop_services(self) -> None:
        """Stops the started services, last first; one that fails to stop is reported
        and the sweep that follows kills what it left (its processes have the rig's
        id in their environment)."""
        while self._started_services:
            service = self._started_services.pop()
            try:
                service.stop(self)
            except Exception as e:  # the rest of the teardown must still run
                print(f"rig {self.id}: stopping {service!r} failed: {e}", file=sys.stderr)

    def _sweep_processes(self) -> None:
        """Kills what the daemons left: slurmstepd and job tasks reparent to init
        and leave the daemons' process groups, but keep the rig's id in their
        environment, or live in the rig's network namespaces."""
        pids = pids_with_env(RIG_ENV, self.id)
        for w in (w for w in self.workers.values() if w.netns):
            r = _run(["ip", "netns", "pids", w.netns], check=False)
            pids += [int(p) for p in r.stdout.split()]
        kill_and_wait(pids)

    def _unmount_all(self) -> None:
        _unmount_under(str(self.workdir))

    def _tail(self, name: str, lines: int = 40) -> str:
        p = self.logdir / name
        if not p.exists():
            return ""
        text = p.read_text(errors="replace").splitlines()[-lines:]
        return f"--- {p} (last {len(text)} lines)\n" + "\n".join(text) + "\n"

    def _collect_logs(self, failed: bool) -> None:
        if not self.logdir.exists():
            return
        dest = self.log_root / f"rig-{self.id}"
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(self.logdir, dest, dirs_exist_ok=True)
            shutil.copy2(self.slurm_conf, dest / "slurm.conf") if self.slurm_conf.exists() else None
        except OSError as e:
            print(f"rig {self.id}: could not keep logs in {dest}: {e}", file=sys.stderr)
        print(f"rig {self.id}: daemon logs kept in {dest}", file=sys.stderr)
        if failed:
            for p in sorted(self.logdir.iterdir()):
                sys.stderr.write(self._tail(p.name, 60))

    # ---- Slurm state helpers --------------------------------------------------------

    def nodes(self) -> dict:
        out = self.check_output(["scontrol", "-o", "show", "node"], timeout=30)
        nodes = {}
        for line in out.splitlines():
            if line.strip():
                f = parse_scontrol_oneliner(line)
                nodes[f.get("NodeName")] = f
        return nodes

    def node(self, name: str) -> dict:
        out = self.check_output(["scontrol", "-o", "show", "node", name], timeout=30)
        return parse_scontrol_oneliner(out.splitlines()[0])

    def wait_reason(self, name: str, prefix: str, timeout: float,
                    what: Union[str, Callable[[], str], None] = None) -> dict:
        """Waits until node `name`'s Reason starts with `prefix`; returns the node."""
        def reasoned():
            node = self.node(name)
            return node if node.get("Reason", "").startswith(prefix) else None
        return wait_for(reasoned, timeout, what or f"{name}'s reason to start with {prefix!r}")

    def wait_nodes_idle(self, names: Optional[Iterable[str]] = None, timeout: float = 90) -> dict:
        names = list(names or self.workers)

        def all_idle():
            nodes = self.nodes()
            return nodes if all(nodes.get(n, {}).get("State", "").startswith("IDLE") and
                                "POWER" not in nodes[n]["State"] and
                                "NOT_RESPONDING" not in nodes[n]["State"]
                                for n in names) else None
        try:
            return wait_for(all_idle, timeout, f"nodes {','.join(names)} to register idle")
        except RigError as e:
            states = {n: v.get("State") for n, v in self._safe_nodes().items()}
            raise RigError(f"{e}; states now: {states}\n{self._tail('slurmctld.log')}") from None

    def _safe_nodes(self) -> dict:
        try:
            return self.nodes()
        except RigError:
            return {}

    def sbatch(self, script: str, args: Sequence[str] = ()) -> int:
        path = self.workdir / f"job-{secrets.token_hex(3)}.sh"
        path.write_text(script)
        out = self.check_output(["sbatch", "--parsable", *args, str(path)], cwd=self.workdir)
        return int(out.strip().split(";")[0])

    def job(self, job_id: int) -> dict:
        out = self.check_output(["scontrol", "-o", "show", "job", str(job_id)], timeout=30)
        return parse_scontrol_oneliner(out.splitlines()[0])

    def wait_job(self, job_id: int, states: Iterable[str] = ("COMPLETED",),
                 timeout: float = 120) -> dict:
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                 "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
        wanted = set(states)

        def done():
            j = self.job(job_id)
            state = j.get("JobState", "")
            if state in wanted:
                return j
            if state in final:
                raise _JobEnded(j)
            return None
        try:
            return wait_for(done, timeout, f"job {job_id} to reach {sorted(wanted)}")
        except _JobEnded as e:
            raise RigError(f"job {job_id} ended {e.job.get('JobState')} "
                           f"(reason {e.job.get('Reason')}), not {sorted(wanted)}") from None


class _JobEnded(Exception):
    def __init__(self, job):
        super().__init__(job.get("JobState"))
        self.job = job


# ---- process and mount helpers shared with cleanup_all() ---------------------------

def pids_with_env(key: str, value: Optional[str] = None) -> list[int]:
    needle = f"{key}={value}".encode() if value else f"{key}=".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(needle) for e in env):
            pids.append(int(entry))
    return pids


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def live_processes(*comms: str, rig_ids: Optional[Iterable[str]] = None) -> list[int]:
    """Pids of the live (not zombie) processes whose command name is one of `comms`;
    with `rig_ids`, only those of these rigs (see _RigMarks)."""
    pids = [int(e) for e in os.listdir("/proc")
            if e.isdigit() and _comm(int(e)) in comms and alive(int(e))]
    if rig_ids is None:
        return pids
    marks = _RigMarks(rig_ids)
    return [p for p in pids if marks.own(p)]


class _RigMarks:
    """Tells the processes of some rigs from those of rigs running beside them. A
    rig's process has the rig's id in its environment (what the rig starts, and
    the tasks below it), or the rig's directory in its environment, command line,
    working directory or open files (a pod's slurmd and munged, which a real node's
    kubelet starts; slurmstepd, whose title overwrites its environment, has the
    node's log open), or lives in one of the rig's network namespaces (the
    spank_jail namespace holders, which close every file)."""

    def __init__(self, rig_ids: Iterable[str]):
        ids = list(rig_ids)
        self.env = {f"{RIG_ENV}={rid}".encode() for rid in ids}
        self.dirs = [f"{WORKDIR_PREFIX}{rid}-" for rid in ids]
        self.netns = set()
        for rid in ids:
            for ns in Path("/run/netns").glob(f"{RESOURCE_PREFIX}-{rid}-*"):
                try:
                    st = ns.stat()
                except OSError:
                    continue
                self.netns.add((st.st_dev, st.st_ino))

    def own(self, pid: int) -> bool:
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        if self.env & set(environ.split(b"\0")):
            return True
        text = (environ + cmdline).decode(errors="replace")
        if any(d in text for d in self.dirs):
            return True
        if any(any(d in path for d in self.dirs) for path in _open_paths(pid)):
            return True
        try:
            st = os.stat(f"/proc/{pid}/ns/net")
        except OSError:
            return False
        return (st.st_dev, st.st_ino) in self.netns


def _open_paths(pid: int) -> list[str]:
    """Where process pid has its working directory and its open files."""
    paths = []
    for link in [f"/proc/{pid}/cwd"] + [f"/proc/{pid}/fd/{fd}" for fd in _fds(pid)]:
        try:
            paths.append(os.readlink(link))
        except OSError:
            pass
    return paths


def _fds(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []


def made_rig_ids() -> list[str]:
    """The ids of the rigs this process made (a test's own rigs)."""
    return list(_made_rig_ids)


_made_rig_ids: list[str] = []


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie (a zombie holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_and_wait(pids: Iterable[int], timeout: float = 20) -> None:
    """Kills `pids` as the end of a container's PID namespace does: at once. All are
    stopped before any is killed, so none sees another die (a slurmstepd that saw
    its job's script killed first would report the job failed before its node goes
    DOWN, and the job would not be requeued)."""
    pids = [p for p in set(pids) if p != os.getpid()]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    wait_for(lambda: not any(alive(p) for p in pids), timeout,
             f"killed processes {sorted(pids)} to exit")


def _unmount_under(root: str) -> None:
    with open("/proc/self/mounts") as f:
        targets = [line.split()[1] for line in f]
    targets = [t.encode().decode("unicode_escape") for t in targets]
    for t in sorted((t for t in targets if t == root or t.startswith(root.rstrip("/") + "/")),
                    key=len, reverse=True):
        subprocess.run(["umount", "-l", t], capture_output=True)


CGROUP_FS = Path("/sys/fs/cgroup")


def rig_cgroups(rig_ids: Optional[Iterable[str]] = None) -> list[Path]:
    """The cgroups rigs made at the top of the machine's hierarchies (a real
    Kubernetes node's cgroupRoot, /k8sb-<id>-<node>: tests/harness/kubelet_node.py),
    in every hierarchy; with `rig_ids`, only those of these rigs."""
    prefixes = (f"{RESOURCE_PREFIX}-",) if rig_ids is None else \
        tuple(f"{RESOURCE_PREFIX}-{rid}-" for rid in rig_ids)
    found = []
    for hierarchy in sorted(CGROUP_FS.iterdir()) if CGROUP_FS.is_dir() else []:
        if (hierarchy / "cgroup.procs").exists():
            found += [d for d in sorted(hierarchy.iterdir())
                      if d.is_dir() and d.name.startswith(prefixes)]
    return found


def cgroup_pids(tops: Iterable[Path]) -> list[int]:
    """The processes in the cgroups `tops` and below them (a node's containers,
    which no process of the rig is the parent of)."""
    pids = set()
    for top in tops:
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except OSError:
                pass
    return sorted(p for p in pids if p != os.getpid() and alive(p))


def remove_cgroup_tree(top: Path) -> None:
    """rmdir of `top` and the cgroups below it, deepest first; one whose last process
    is still exiting stays (callers retry)."""
    if not top.exists():
        return
    dirs = [top] + [p for p in top.rglob("*") if p.is_dir()]
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass


# Daemons that also run outside rigs: leftovers() counts only those naming a rig's
# workdir on their command line or in their environment.
WORKDIR_DAEMONS = ("munged", "mariadbd", "slurmdbd")


def leftovers(rig_ids: Optional[Iterable[str]] = None) -> dict:
    """What rigs have left on this machine: used by tests to prove teardown. With
    `rig_ids`, what these rigs left (a test's own: other rigs may be running at the
    same time); without, what any rig left (scripts/test.sh, after every test)."""
    ids = None if rig_ids is None else list(rig_ids)
    ns_prefixes = (f"{RESOURCE_PREFIX}-",) if ids is None else \
        tuple(f"{RESOURCE_PREFIX}-{rid}-" for rid in ids)
    netns = [n.split()[0] for n in _run(["ip", "netns", "list"], check=False).stdout.splitlines()
             if n.startswith(ns_prefixes)]
    links = _run(["ip", "-o", "link", "show"], check=False).stdout
    # Rig bridges, and those of real Kubernetes nodes (tests/harness/kubelet_node.py).
    bridges = sorted(set(re.findall(rf"^\d+: ({RESOURCE_PREFIX}[0-9a-f]+)[:@]", links, re.M)))
    if ids is not None:
        bridges = [b for b in bridges if b in {RESOURCE_PREFIX + rid for rid in ids}]
    daemons = live_processes("slurmctld", "slurmd", "slurmstepd", "spank_jail_ns", rig_ids=ids)
    for pid in live_processes(*WORKDIR_DAEMONS, rig_ids=ids):
        # These keep their files under a rig's workdir (a rig node's or a pod's
        # munged, a rig's database and slurmdbd); one outliving the rig is a leak.
        # The machine's own, outside every rig, are not.
        try:
            named = Path(f"/proc/{pid}/cmdline").read_bytes() + \
                Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if WORKDIR_PREFIX.encode() in named:
            daemons.append(pid)
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f]
    mounts = [m for m in points if WORKDIR_PREFIX in m and
              (ids is None or any(f"{WORKDIR_PREFIX}{rid}-" in m for rid in ids))]
    if ids is None:
        rig_processes = [p for p in pids_with_env(RIG_ENV) if alive(p)]
    else:
        rig_processes = [p for rid in ids for p in pids_with_env(RIG_ENV, rid) if alive(p)]
    cgroups = rig_cgroups(ids)
    rig_processes += [p for p in cgroup_pids(cgroups) if p not in rig_processes]
    return {"netns": netns, "bridges": bridges, "daemons": daemons,
            "rig_processes": rig_processes, "mounts": mounts,
            "cgroups": sorted({c.name for c in cgroups})}


# runc's state directory and the names of the containers tests/harness/oci.py runs.
OCI_RUNC_ROOT = "/run/k8sbridge-runc"
OCI_PREFIX = f"{RESOURCE_PREFIX}-oci-"


def oci_containers() -> list:
    """The runc containers of tests/harness/oci.py that runc still knows."""
    if not shutil.which("runc"):
        return []
    r = _run(["runc", "--root", OCI_RUNC_ROOT, "list", "-q"], check=False)
    return [c for c in r.stdout.split() if c.startswith(OCI_PREFIX)] if r.returncode == 0 else []


def _delete_oci_containers() -> None:
    """The test containers runc still knows, and the overlays their roots are, under
    /tmp/k8sb-oci-*."""
    for cid in oci_containers():
        _run(["runc", "--root", OCI_RUNC_ROOT, "delete", "--force", cid], check=False)
    for root in Path(tempfile.gettempdir()).glob(f"{OCI_PREFIX}*"):
        _unmount_under(str(root))
        shutil.rmtree(root, ignore_errors=True)


def cleanup_all() -> dict:
    """Removes everything any rig left behind (e.g. after a test was SIGKILLed)."""
    before = leftovers()
    pids = list(before["rig_processes"])
    # Leaked munged of rig nodes or pods, databases and slurmdbd of rigs (leftovers()
    # lists only those with a rig path) and spank_jail's job namespace holders;
    # slurm daemons outside rigs are never killed here.
    pids += [p for p in before["daemons"] if _comm(p) in (*WORKDIR_DAEMONS, "spank_jail_ns")]
    for ns in before["netns"]:
        pids += [int(p) for p in _run(["ip", "netns", "pids", ns], check=False).stdout.split()]
    kill_and_wait(pids)
    for top in rig_cgroups():
        wait_for(lambda: (remove_cgroup_tree(top), not top.exists())[1], 20,
                 f"cgroup {top} to be removed")
    _delete_oci_containers()
    for root in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        if root == DEFAULT_LOG_ROOT:
            continue  # kept logs, not a workdir
        _unmount_under(str(root))
        shutil.rmtree(root, ignore_errors=True)
    for ns in before["netns"]:
        _run(["ip", "netns", "del", ns], check=False)
    for br in before["bridges"]:
        _run(["ip", "link", "del", br], check=False)
    return before
