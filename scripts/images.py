#!/usr/bin/env python3
"""Builds k8sbridge's OCI images offline: no Docker engine, no registry.

Each image is a Debian root made by mmdebstrap from the machine's Debian mirror
(Debian's own Slurm packages plus k8sbridge's .debs), written as one gzip layer
into an OCI image layout by this script, and copied by skopeo to a docker-archive
tarball (what `docker load`, `ctr images import` and `kind load image-archive`
take). With the same inputs (the .debs, the mirror's packages, SOURCE_DATE_EPOCH)
the image digest is the same: mmdebstrap is reproducible with SOURCE_DATE_EPOCH,
and the layer and JSON are written here without timestamps of their own.

The images are defined in container/images.toml, one table each (Debian packages,
k8sbridge packages, entrypoint); this script is how they are built. The
Containerfiles beside that table (for sites that build with docker or buildah on
their own base) are generated from it (--write-containerfiles) and CI checks they
match (--check-containerfiles).

Usage:
  scripts/images.py --packages DIR [--cache DIR] [--image NAME]... [--out DIR]
  scripts/images.py --write-containerfiles | --check-containerfiles
Prints the output directory on its last line: <out>/<image>/{oci/, <image>.tar,
image.json (tag, digest, size, Slurm version)}.
"""

import argparse
import concurrent.futures
import datetime
import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RELEASE = "trixie"  # the Debian release whose Slurm the images carry
ARCH = "amd64"

# The images' definitions: one table per image (Debian packages, k8sbridge packages
# built by scripts/build-packages.sh, and the container's entrypoint), in file order.
CONTAINER = ROOT / "container"
TABLE = CONTAINER / "images.toml"
IMAGES = tomllib.loads(TABLE.read_text())

# What a container needs of dpkg's files: no documentation, manuals or locales
# (copyright files stay, as Debian's licences ask).
DPKG_EXCLUDES = ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*",
                 "/usr/share/info/*"]
DPKG_INCLUDES = ["/usr/share/doc/*/copyright"]
# Removed after the packages are in: apt's downloaded lists, logs, and the keys
# postinsts make, munge's and openssh-server's host keys (every pod gets the
# cluster's from a Secret; a key baked into an image would be shared by everyone
# who pulls it).
CLEANUP = ["/var/lib/apt/lists/*", "/var/cache/apt/*", "/var/log/*", "/etc/munge/munge.key",
           "/etc/ssh/ssh_host_*", "/var/cache/ldconfig/aux-cache"]
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]

LABEL_SLURM = "io.k8sbridge.slurm-version"
LABEL_RELEASE = "io.k8sbridge.debian-release"


def fail(message: str) -> "NoReturn":  # noqa: F821
    print(f"images: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, **kw)


@functools.cache
def debian_mirror() -> str:
    """The machine's own Debian mirror: scripts/debian-mirror.sh, the one place that
    reads apt's sources."""
    r = subprocess.run(["sh", str(ROOT / "scripts" / "debian-mirror.sh")], text=True,
                       capture_output=True)
    if r.returncode != 0:
        fail(r.stderr.strip() or "scripts/debian-mirror.sh failed")
    return r.stdout.strip()


@functools.cache
def project_version() -> str:
    m = re.search(r"version:\s*'([^']+)'", (ROOT / "meson.build").read_text())
    return m.group(1) if m else "0"


@functools.cache
def revision() -> str:
    r = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], text=True,
                       capture_output=True)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH, else the last commit's time: a rebuild of one commit is
    the same image."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    r = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], text=True,
                       capture_output=True)
    return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else 0


def rfc3339(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def find_debs(packages: Path, names) -> list:
    debs = []
    for name in names:
        found = sorted(packages.glob(f"{name}_*.deb"))
        if not found:
            fail(f"no {name}_*.deb in {packages}: build the packages first "
                 f"(scripts/build-packages.sh prints their directory)")
        debs.append(found[-1])
    return debs


# ---- the root filesystem ---------------------------------------------------------


def build_root_tar(name: str, spec: dict, debs: list, epoch: int, tar: Path) -> str:
    """mmdebstrap's tarball of the image's root; returns the Slurm version inside
    ("" for an image without Slurm: its `slurm = false`)."""
    version_file = tar.with_suffix(".slurm-version")
    cmd = ["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet",
           "--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount"]
    cmd += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    cmd += [f"--dpkgopt=path-include={p}" for p in DPKG_INCLUDES]
    cmd += ["--include=" + ",".join(spec["debian"])]
    cmd += [f"--include={d}" for d in debs]
    # The Slurm version the image carries, read before the clean-up (for its label).
    cmd += ["--customize-hook=chroot \"$1\" dpkg-query -W -f='${Version}' slurm-client "
            "slurmd slurmctld 2>/dev/null | head -c 64 > " + str(version_file) + " || true"]
    cmd += ["--customize-hook=rm -rf " + " ".join(f'"$1"{p}' for p in CLEANUP)]
    # mmdebstrap installs a local .deb through a mount point at its own path, and
    # leaves the empty file and its directories in the root: removed (the empty
    # directories up to, not including, a top-level one), the image does not
    # depend on where the packages were built.
    for deb in debs:
        path = deb.resolve()
        cmd += [f'--customize-hook=rm -f "$1{path}"; d="{path.parent}"; '
                'while [ -n "${d%/*}" ] && rmdir "$1$d" 2>/dev/null; do d="${d%/*}"; done']
    cmd += [RELEASE, str(tar), debian_mirror()]
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch))
    log = tar.with_suffix(".log")
    with open(log, "w") as out:
        r = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        fail(f"mmdebstrap for {name} failed (exit {r.returncode}); see {log}")
    if not spec.get("slurm", True):
        return ""
    raw = version_file.read_text().strip() if version_file.exists() else ""
    m = re.match(r"(\d+\.\d+\.\d+)", raw)
    if not m:
        fail(f"{name}: no Slurm package version found in the root ({raw!r})")
    return m.group(1)


# ---- the OCI image layout ---------------------------------------------------------


def write_blob(layout: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_layer(layout: Path, tar: Path) -> tuple:
    """The root tarball as one gzip layer, without a name or time in the gzip
    header. Returns (descriptor, diff_id, uncompressed size)."""
    raw = hashlib.sha256()
    tmp = layout / "layer.tmp"
    size = 0
    with open(tar, "rb") as src, open(tmp, "wb") as dst:
        with gzip.GzipFile(filename="", mode="wb", fileobj=dst, mtime=0, compresslevel=6) as gz:
            while chunk := src.read(1 << 20):
                raw.update(chunk)
                size += len(chunk)
                gz.write(chunk)
    data = tmp.read_bytes()
    tmp.unlink()
    desc = write_blob(layout, data)
    desc["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    return desc, f"sha256:{raw.hexdigest()}", size


def annotations(name: str, spec: dict, slurm: str, epoch: int) -> dict:
    return {
        "org.opencontainers.image.title": name,
        "org.opencontainers.image.description": spec["description"],
        "org.opencontainers.image.version": project_version(),
        "org.opencontainers.image.revision": revision(),
        "org.opencontainers.image.created": rfc3339(epoch),
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.base.name": f"debian:{RELEASE}",
        LABEL_SLURM: slurm,
        LABEL_RELEASE: RELEASE,
    }


def write_layout(layout: Path, name: str, spec: dict, tar: Path, slurm: str,
                 epoch: int) -> tuple:
    """Writes the OCI layout; returns (manifest digest, uncompressed size)."""
    if layout.exists():
        shutil.rmtree(layout)
    layout.mkdir(parents=True)
    layer, diff_id, size = write_layer(layout, tar)
    notes = annotations(name, spec, slurm, epoch)
    config = {
        "created": rfc3339(epoch),
        "architecture": ARCH,
        "os": "linux",
        "config": {"Env": ENV, "Entrypoint": spec["entrypoint"], "Labels": notes,
                   "WorkingDir": "/", "StopSignal": "SIGTERM"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": rfc3339(epoch),
                     "created_by": f"k8sbridge scripts/images.py {name} (mmdebstrap {RELEASE})"}],
    }
    config_desc = write_blob(layout, canonical(config))
    config_desc["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer], "annotations": notes}
    manifest_desc = write_blob(layout, canonical(manifest))
    manifest_desc["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": tag(slurm)}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [manifest_desc]}
    (layout / "index.json").write_bytes(canonical(index))
    (layout / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))
    return manifest_desc["digest"], size


def tag(slurm: str) -> str:
    """<k8sbridge version>-slurm<Slurm version>: one image per Slurm release."""
    return f"{project_version()}-slurm{slurm}"


def docker_archive(layout: Path, name: str, slurm: str, out: Path) -> None:
    if out.exists():
        out.unlink()
    run(["skopeo", "copy", "--quiet", f"oci:{layout}:{tag(slurm)}",
         f"docker-archive:{out}:{name}:{tag(slurm)}"])


def build_image(name: str, packages: Path, out: Path, epoch: int,
                slurm_of_set: Callable[[], str] = str) -> dict:
    """Builds image `name`; one without Slurm takes the tag and label of the set's
    Slurm, which `slurm_of_set()` gives once its root is built (the images are
    released together)."""
    spec = IMAGES[name]
    debs = find_debs(packages, spec["k8sbridge"])
    dest = out / name
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=f".{name}-") as tmp:
        tar = Path(tmp) / "root.tar"
        slurm = build_root_tar(name, spec, debs, epoch, tar) or slurm_of_set()
        digest, size = write_layout(dest / "oci", name, spec, tar, slurm, epoch)
    docker_archive(dest / "oci", name, slurm, dest / f"{name}.tar")
    info = {"image": name, "tag": tag(slurm), "digest": digest, "size": size, "slurm": slurm}
    (dest / "image.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"images: {name}:{info['tag']} {digest} ({size / 1e6:.0f} MB uncompressed)",
          file=sys.stderr)
    return info


# ---- cache ------------------------------------------------------------------------


def cache_key(names, packages: Path, epoch: int) -> str:
    h = hashlib.sha256()
    h.update(Path(__file__).read_bytes())
    h.update(TABLE.read_bytes())
    h.update(f"{RELEASE} {debian_mirror()} {epoch} {revision()} {sorted(names)}".encode())
    for name in sorted(names):
        for deb in find_debs(packages, IMAGES[name]["k8sbridge"]):
            h.update(hashlib.sha256(deb.read_bytes()).digest())
    return h.hexdigest()[:16]


# ---- Containerfiles ----------------------------------------------------------------


def containerfile(name: str) -> str:
    """The same image for a docker or buildah build on a site's own Debian base."""
    spec = IMAGES[name]
    debs = " ".join(f"/tmp/k8sbridge/{d}_*.deb" for d in spec["k8sbridge"])
    excludes = "".join(f"path-exclude={p}\\n" for p in DPKG_EXCLUDES)
    includes = "".join(f"path-include={p}\\n" for p in DPKG_INCLUDES)
    cleanup = " ".join(CLEANUP)
    lines = [
        f"# {name}: generated by scripts/images.py from container/images.toml; do not edit.",
        "# Build from a directory holding the k8sbridge .debs (scripts/build-packages.sh):",
        f"#   buildah build -f {name}.Containerfile -v $PWD/debs:/tmp/k8sbridge:ro .",
        f"# (or docker build with the .debs COPYed to /tmp/k8sbridge). The offline build",
        "# (scripts/images.py) makes the same root with mmdebstrap.",
        f"FROM docker.io/library/debian:{RELEASE}",
        f"RUN printf '{excludes}{includes}' > /etc/dpkg/dpkg.cfg.d/k8sbridge-excludes && \\",
        "    apt-get update && \\",
        "    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\",
        f"      {' '.join(spec['debian'])} {debs} && \\",
        f"    rm -rf {cleanup}",
        f"ENV {ENV[0]}",
        f"LABEL {LABEL_RELEASE}={RELEASE} org.opencontainers.image.title={name}",
        "STOPSIGNAL SIGTERM",
        "ENTRYPOINT " + json.dumps(spec["entrypoint"]),
        "",
    ]
    return "\n".join(lines)


def containerfiles(write: bool) -> int:
    stale = []
    for name in IMAGES:
        path = CONTAINER / f"{name}.Containerfile"
        want = containerfile(name)
        if write:
            path.parent.mkdir(exist_ok=True)
            path.write_text(want)
        elif not path.exists() or path.read_text() != want:
            stale.append(str(path.relative_to(ROOT)))
    if stale:
        print(f"images: {', '.join(stale)} differ from {TABLE.relative_to(ROOT)}: "
              "run scripts/images.py --write-containerfiles", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--packages", type=Path, help="directory of k8sbridge .debs")
    p.add_argument("--cache", type=Path,
                   default=Path(os.environ.get("K8SBRIDGE_CACHE", "/var/cache/k8sbridge")))
    p.add_argument("--out", type=Path, help="output directory (default: a cached one)")
    p.add_argument("--image", action="append", choices=sorted(IMAGES),
                   help="build only this image (repeatable)")
    p.add_argument("--write-containerfiles", action="store_true")
    p.add_argument("--check-containerfiles", action="store_true")
    p.add_argument("--version", action="version", version=f"images.py {project_version()}")
    args = p.parse_args()
    if args.write_containerfiles or args.check_containerfiles:
        return containerfiles(write=args.write_containerfiles)
    if not args.packages or not args.packages.is_dir():
        fail("--packages DIR is required: the directory scripts/build-packages.sh printed")
    names = args.image or list(IMAGES)
    epoch = source_date_epoch()
    out = args.out or args.cache / f"images-{cache_key(names, args.packages, epoch)}"
    stamp = out / ".complete"
    if args.out is None and stamp.exists():
        print(f"images: reusing {out}", file=sys.stderr)
        print(out)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    with_slurm = [n for n in names if IMAGES[n].get("slurm", True)]
    without = [n for n in names if n not in with_slurm]
    if without and not with_slurm:
        fail(f"{', '.join(without)} take the tag of the images with Slurm: build them "
             "together (--image for one of those too)")
    # mmdebstrap waits on apt and dpkg as much as it computes: the images build
    # side by side (about half the time of one after another on two cores). An
    # image without Slurm builds beside them too, and waits for the first of them
    # only to be tagged with its Slurm's version.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
        builds = [pool.submit(build_image, n, args.packages, out, epoch) for n in with_slurm]
        first = builds[0]
        builds += [pool.submit(build_image, n, args.packages, out, epoch,
                               lambda: first.result()["slurm"]) for n in without]
        for done in builds:
            done.result()
    stamp.touch()
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
