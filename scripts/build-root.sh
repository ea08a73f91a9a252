#!/usr/bin/env bash
# Makes the Debian build root in which scripts/build-packages.sh builds k8sbridge's
# packages: a minimal root of the Debian release (mmdebstrap, from this machine's own
# Debian mirror) with the build dependencies and Debian's libslurm-dev.
#  - trixie (Slurm 24.11.5): also the upstream Slurm tarball of the same version (the
#    one scripts/build-slurm.sh keeps) configured with Debian's layout under
#    /usr/src/slurm-<version>.
#  - sid (Slurm 26.05.5): its orig tarball is not in the archive, so no source tree;
#    k8sbridge builds from the packaged public headers (docs/versions.md). The root also
#    holds Debian's slurmctld, slurmd, Slurm's clients and munge: the 26.05 test suite
#    runs those real daemons inside it (scripts/build-release.sh, tests/harness/rig.py).
#
# Usage: scripts/build-root.sh [--release trixie|sid] [--cache DIR]
# Prints the root's path on its last line. The root is cached under
# $K8SBRIDGE_CACHE/buildroot-<release>-<key>, the key a hash of everything that
# goes into it (release, Slurm version and tarball, package list, configure
# options): a second run with the same inputs reuses it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
release=trixie
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    *) echo "build-root: unknown argument '$1' (use --release NAME or --cache DIR)" >&2; exit 2 ;;
  esac
done
log() { echo "build-root: $*" >&2; }
if [ "$(id -u)" != 0 ]; then
  log "run as root: mmdebstrap, chroot and mounts inside the root need it"
  exit 1
fi
if ! command -v mmdebstrap >/dev/null; then
  log "mmdebstrap is not installed: apt-get install mmdebstrap (scripts/setup.sh does)"
  exit 1
fi

# The one place that says which Slurm a Debian release carries; the packages built
# in the root depend on exactly that version (debian/rules reads it from the headers).
case "$release" in
  trixie) slurm_version=24.11.5 ;;
  sid) slurm_version=26.05.5 ;;
  *) log "no Slurm version is known for Debian release '$release' (known: trixie, sid)"; exit 2 ;;
esac

packages=(
  # the package build (debian/control's Build-Depends) and its checks
  build-essential debhelper fakeroot lintian ccache help2man meson ninja-build pkg-config
  libcurl4-openssl-dev libssl-dev rapidjson-dev libfmt-dev libyaml-cpp-dev libmunge-dev
  libibnetdisc-dev libibmad-dev libibumad-dev prometheus-cpp-dev libslurm-dev
  # Slurm's own configure checks, so config.h matches Debian's build of Slurm
  libjson-c-dev libyaml-dev libhttp-parser-dev libjwt-dev libhwloc-dev liblz4-dev
  libpam0g-dev libreadline-dev
)
# Debian's layout (slurm-wlm's debian/rules), so config.h names Debian's paths.
configure_options=(--prefix=/usr --libdir=/usr/lib/x86_64-linux-gnu --sysconfdir=/etc/slurm
                   --localstatedir=/var --runstatedir=/run --with-munge --enable-pam --disable-debug)

mmdebstrap_options=()
if [ "$release" = sid ]; then
  # The daemons and clients the 26.05 suite runs in the root, and ccache for its build.
  packages+=(slurmctld slurmd slurm-client munge ccache)
  # sid's Release file on the mirror is often past its Valid-Until date.
  mmdebstrap_options+=(--aptopt='Acquire::Check-Valid-Until "false"')
  tarball=""
  tarball_sha=none
  key=$(printf '%s\n' "$release" "$slurm_version" "${packages[*]}" | sha256sum | cut -c1-16)
else
  tarball=$(bash "$here/build-slurm.sh" --cache "$cache" --version "$slurm_version" --tarball-only | tail -n 1)
  tarball_sha=$(sha256sum "$tarball" | cut -d' ' -f1)
  key=$(printf '%s\n' "$release" "$slurm_version" "$tarball_sha" "${packages[*]}" "${configure_options[*]}" |
        sha256sum | cut -c1-16)
fi
root="$cache/buildroot-$release-$key"
src="/usr/src/slurm-$slurm_version"

mkdir -p "$cache"
exec 9>"$root.lock"
flock 9  # one builder per key; a second run waits and then reuses the root
if [ -f "$root/.k8sbridge-complete" ]; then
  log "reusing $root"
  echo "$root"
  exit 0
fi

tmp="$root.tmp"
cleanup() {
  mountpoint -q "$tmp/proc" && umount "$tmp/proc"
  rm -rf "$tmp"
}
trap cleanup EXIT
rm -rf "$tmp"
uri=$(sh "$here/debian-mirror.sh")
start=$(date +%s)
log "making a $release root from $uri (log: $root.mmdebstrap.log)"
mmdebstrap --variant=apt --format=directory "${mmdebstrap_options[@]}" --include="$(IFS=,; echo "${packages[*]}")" \
  "$release" "$tmp" "deb $uri $release main" >"$root.mmdebstrap.log" 2>&1 ||
  { log "mmdebstrap failed, see $root.mmdebstrap.log"; exit 1; }
log "root made in $(( $(date +%s) - start ))s"

# Debian's libslurm-dev and the tarball must be one release: the plugins compile
# against both and Slurm loads a plugin only from its own release.
# shellcheck disable=SC2016  # ${Version} is dpkg-query's, not the shell's
deb_version=$(chroot "$tmp" dpkg-query -W -f='${Version}' libslurm-dev)
deb_upstream=${deb_version#*:}
deb_upstream=${deb_upstream%-*}
if [ "$deb_upstream" != "$slurm_version" ]; then
  log "$release's libslurm-dev is $deb_version, but the Slurm tarball is $slurm_version:"
  log "set the Slurm version for '$release' in scripts/build-root.sh (and pin its tarball in build-slurm.sh)"
  exit 1
fi

if [ -n "$tarball" ]; then
  mkdir -p "$tmp$src"
  tar -xzf "$tarball" -C "$tmp$src" --strip-components=1
  mount -t proc proc "$tmp/proc"
  start=$(date +%s)
  log "configuring Slurm $slurm_version in $src (log: $root.configure.log)"
  chroot "$tmp" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sh -c \
    "cd $src && ./configure ${configure_options[*]}" >"$root.configure.log" 2>&1 ||
    { log "Slurm's configure failed in the root, see $root.configure.log"; exit 1; }
  log "configured in $(( $(date +%s) - start ))s"
  umount "$tmp/proc"
fi

printf 'release=%s\nslurm_version=%s\nlibslurm_dev=%s\ntarball_sha256=%s\n' \
  "$release" "$slurm_version" "$deb_version" "$tarball_sha" >"$tmp/.k8sbridge-complete"
rm -rf "$root"
mv "$tmp" "$root"
log "made $root"
echo "$root"
