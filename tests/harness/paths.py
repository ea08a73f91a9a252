"""Where the source and the build are, and the built programs the helpers start
(K8SBRIDGE_BUILD_ROOT, which meson sets, names the build; else ./build)."""

import os
import re
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent.parent
BUILD_ROOT = Path(os.environ.get("K8SBRIDGE_BUILD_ROOT", SOURCE_ROOT / "build"))
POWER = BUILD_ROOT / "programs" / "power" / "k8sbridge-power"
WORKER = BUILD_ROOT / "programs" / "worker" / "k8sbridge-worker"
ENTRYPOINT = BUILD_ROOT / "programs" / "entrypoint" / "k8sbridge-entrypoint"
SYNC = BUILD_ROOT / "programs" / "sync" / "k8sbridge-sync"


def project_version() -> str:
    """k8sbridge's version, as meson.build's project() says it."""
    text = (SOURCE_ROOT / "meson.build").read_text()
    return re.search(r"version:\s*'([^']+)'", text).group(1)
