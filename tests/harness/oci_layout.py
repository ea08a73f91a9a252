"""Writes tiny OCI image layouts for the real nodes' tests (busybox and the pods'
sandbox image, tests/harness/kubelet_node.py): one layer with
Debian's busybox-static (/bin/busybox, scripts/setup.sh installs it) and its applets,
an /etc/os-release naming the image, and passwd/group files. No tool but Python:
building one takes a fraction of a second, and the same inputs give the same digest.
"""

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "cat", "echo", "ls", "sleep", "hostname", "id", "nc", "readlink", "grep",
           "wget", "httpd", "env", "pwd", "test", "true", "false", "touch", "mkdir", "kill",
           "ps", "stat", "head", "tail", "wc", "nslookup")


def _layer(marker: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def entry(name, kind=tarfile.REGTYPE, mode=0o644, data=b"", link=""):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        for d in ("bin", "etc", "root", "proc", "sys", "dev", "run", "var"):
            entry(d, tarfile.DIRTYPE, 0o755)
        entry("tmp", tarfile.DIRTYPE, 0o1777)
        entry("bin/busybox", mode=0o755, data=BUSYBOX.read_bytes())
        for applet in APPLETS:
            entry(f"bin/{applet}", tarfile.SYMTYPE, 0o777, link="busybox")
        entry("etc/os-release", data=f'NAME="{marker}"\nID=k8sbridge-test\n'.encode())
        entry("etc/passwd", data=b"root:x:0:0:root:/root:/bin/sh\n"
                                 b"worker:x:1000:1000::/tmp:/bin/sh\n")
        entry("etc/group", data=b"root:x:0:\nworker:x:1000:\n")
    return raw.getvalue()


def build_image(layout: Path, tag: str, marker: str, config: dict = None,
                layer: bytes = None) -> str:
    """Writes an OCI layout at `layout` whose index names the image `tag`; `config`
    adds to the image configuration (Entrypoint, Cmd, Env, User, ...). Its one layer
    is the busybox one above, or `layer` (an uncompressed tar) when given. Returns the
    manifest's digest."""
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)

    def blob(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        return f"sha256:{digest}"

    raw = _layer(marker) if layer is None else layer
    layer = gzip.compress(raw, mtime=0)
    image_config = {"Env": ["PATH=/bin", "IMAGE_VAR=from-image"],
                    "Cmd": ["/bin/sh", "-c", "echo from the image's Cmd"], "WorkingDir": "/"}
    image_config.update(config or {})
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": image_config,
                      "rootfs": {"type": "layers",
                                 "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]}},
                     sort_keys=True).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(cfg),
                   "size": len(cfg)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": blob(layer), "size": len(layer)}]}, sort_keys=True).encode()
    digest = blob(manifest)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
         "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": tag}}]}))
    return digest
