#!/usr/bin/env bash
# Builds Slurm from the upstream tarball that Debian's source archive carries, and
# installs it under a versioned prefix outside the repository. The configured source
# tree is kept beside the prefix, because node_features and topology plugins compile
# against its internal headers.
#
# Usage: scripts/build-slurm.sh [--cache DIR] [--version X.Y.Z] [--tarball-only]
# Prints the install prefix on its last line. A second run reuses the cache.
# --tarball-only fetches (or reuses) the sha256-checked tarball and prints its path:
# scripts/build-root.sh configures the same tarball inside the Debian build root.
set -euo pipefail

version=24.11.5
sha256=e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
tarball_only=false
here=$(cd "$(dirname "$0")" && pwd)
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --tarball-only) tarball_only=true; shift ;;
    *) echo "build-slurm: unknown argument '$1' (use --cache DIR, --version X.Y.Z or --tarball-only)" >&2; exit 2 ;;
  esac
done
if [ "$version" != 24.11.5 ]; then
  echo "build-slurm: only 24.11.5 is pinned (with its sha256); got '$version'" >&2
  exit 2
fi

root="$cache/slurm-$version"
prefix="$root/install"
src="$root/src"
stamp="$root/.complete"
log() { echo "build-slurm: $*" >&2; }

if ! $tarball_only && [ -f "$stamp" ] && [ -x "$prefix/sbin/slurmctld" ] && [ -f "$src/config.h" ]; then
  log "reusing $prefix"
  echo "$prefix"
  exit 0
fi

mkdir -p "$root"
tarball="$root/slurm-wlm_${version}.orig.tar.gz"
if ! echo "$sha256  $tarball" | sha256sum -c --status 2>/dev/null; then
  # Debian 13 (trixie) carries 24.11.5; point a private apt at its source archive,
  # derived from this machine's own Debian mirror, so the system's apt is untouched.
  uri=$(sh "$here/debian-mirror.sh")
  aptdir="$root/apt"
  mkdir -p "$aptdir/lists/partial" "$aptdir/sources.list.d"
  cat >"$aptdir/sources.list" <<SRC
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main
SRC
  aptopts=(-o "Dir::Etc::sourcelist=$aptdir/sources.list" -o "Dir::Etc::sourceparts=$aptdir/sources.list.d"
           -o "Dir::State::Lists=$aptdir/lists" -o "APT::Get::List-Cleanup=0")
  log "updating the trixie source index from $uri"
  apt-get "${aptopts[@]}" update >"$root/apt-update.log" 2>&1 || { log "apt-get update failed, see $root/apt-update.log"; exit 1; }
  (cd "$root" && apt-get "${aptopts[@]}" source --tar-only --download-only "slurm-wlm/trixie") >"$root/apt-source.log" 2>&1 ||
    { log "apt-get source failed, see $root/apt-source.log"; exit 1; }
  echo "$sha256  $tarball" | sha256sum -c --status || { log "sha256 of $tarball does not match the pinned $sha256"; exit 1; }
fi
if $tarball_only; then
  echo "$tarball"
  exit 0
fi

rm -rf "$src" "$prefix"
mkdir -p "$src"
tar -xzf "$tarball" -C "$src" --strip-components=1
cd "$src"
log "configuring (log: $root/configure.log)"
./configure --prefix="$prefix" --sysconfdir=/etc/slurm --with-munge --enable-pam \
  --without-rpath --disable-debug >"$root/configure.log" 2>&1 || { log "configure failed, see $root/configure.log"; exit 1; }
log "building with $(nproc) jobs (log: $root/make.log)"
make -j"$(nproc)" >"$root/make.log" 2>&1 || { log "make failed, see $root/make.log"; exit 1; }
make install >"$root/install.log" 2>&1 || { log "make install failed, see $root/install.log"; exit 1; }
touch "$stamp"
log "installed $prefix"
echo "$prefix"
