"""Where the source and the build are, and the built programs the helpers start
(K8SBRIDGE_BUILD_ROOT, which meson sets, names the build; else ./build)."""

import os
import re
import shutil
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent.parent
BUILD_ROOT = Path(os.environ.get("K8SBRIDGE_BUILD_ROOT", SOURCE_ROOT / "build"))
# k8sbridge's plugins and programs for the Slurm the rig runs: the build itself, or,
# in the version suite, the build against another release (scripts/build-release.sh).
# Test tools (the client's scenarios, fakes) always come from BUILD_ROOT.
SLURM_BUILD = Path(os.environ.get("K8SBRIDGE_SLURM_BUILD", "") or BUILD_ROOT)
POWER = SLURM_BUILD / "programs" / "power" / "k8sbridge-power"
WORKER = SLURM_BUILD / "container" / "worker" / "k8sbridge-worker"
ENTRYPOINT = SLURM_BUILD / "container" / "entrypoint" / "k8sbridge-entrypoint"
SYNC = SLURM_BUILD / "programs" / "sync" / "k8sbridge-sync"


def project_version() -> str:
    """k8sbridge's version, as meson.build's project() says it."""
    text = (SOURCE_ROOT / "meson.build").read_text()
    return re.search(r"version:\s*'([^']+)'", text).group(1)


def debian_program(name: str, who_needs: str, error=RuntimeError) -> str:
    """The path of Debian's program `name`; `error` saying that `who_needs` it
    (e.g. "the accounting tests need Debian's mariadb-server") when it is missing."""
    path = shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not path:
        raise error(f"no {name}: {who_needs} (run scripts/setup.sh)")
    return path
