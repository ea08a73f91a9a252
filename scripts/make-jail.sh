#!/usr/bin/env bash
# Builds the jail root filesystem that spank_jail enters: a minimal Debian of a
# DIFFERENT release than the host (the host is Debian 12 bookworm; the jail is 13
# trixie by default), so tests can tell from /etc/os-release which root a task saw.
#
# The rootfs is cached outside the repository, keyed by release:
#   $K8SBRIDGE_CACHE/jail-<release>/          (default /var/cache/k8sbridge/jail-trixie)
# A second run finds the stamp file and finishes in well under a second.
#
# The mirror is the one this machine's apt already uses (derived from
# /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list); no host is
# hard-coded.
#
# Usage: scripts/make-jail.sh [--release NAME] [--cache DIR] [--force]
# Prints the jail path on its last line.
set -euo pipefail

release=trixie
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --force) force=1; shift ;;
    *) echo "make-jail: unknown argument '$1' (use --release NAME, --cache DIR, --force)" >&2; exit 2 ;;
  esac
done
log() { echo "make-jail: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "run as root (debootstrap needs it, and the jail must be owned by root)"
  exit 1
fi
host_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ "$release" = "$host_release" ]; then
  log "release '$release' is the host's own; pick another (trixie, bullseye) so tests can tell the roots apart"
  exit 2
fi

# Libraries the host-built Slurm clients (bound in by the pod-level preparation)
# need inside the jail: srun (lz4), scontrol (readline, tinfo), auth/munge (libmunge),
# serializers and hwloc plugins. Changing this list rebuilds the jail.
packages=(libmunge2 liblz4-1 libjson-c5 libyaml-0-2 libhwloc15 procps)
case "$release" in
  trixie|forky|sid) packages+=(libreadline8t64) ;;
  *) packages+=(libreadline8) ;;
esac
recipe="release=$release packages=${packages[*]} variant=minbase"

jail="$cache/jail-$release"
stamp="$jail/.k8sbridge-jail"
if [ "$force" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$recipe" ]; then
  log "reusing $jail"
  echo "$jail"
  exit 0
fi

# The machine's own Debian mirror (scripts/debian-mirror.sh says why and how).
mirror=$(sh "$(dirname "$0")/debian-mirror.sh") || exit 1
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
log "building $release from $mirror into $jail (takes minutes)"

mkdir -p "$cache"
work=$(mktemp -d "$cache/.jail-$release.XXXXXX")
cleanup() { rm -rf --one-file-system "$work"; }
trap cleanup EXIT
chmod 0755 "$work"

debootstrap --variant=minbase --keyring="$keyring" \
  --include="$(IFS=,; echo "${packages[*]}")" "$release" "$work" "$mirror" >&2

# Mount points the pod-level preparation (k8sbridge-jail-prepare) binds onto.
mkdir -p "$work/run/munge" "$work/etc/slurm" "$work/opt/slurm" "$work/home"
chmod 0755 "$work"
chown root:root "$work"
echo "$recipe" >"$work/.k8sbridge-jail"

# Swap in atomically; an older jail moves aside first and is removed after.
if [ -e "$jail" ]; then
  old="$cache/.jail-$release.old.$$"
  mv "$jail" "$old"
  mv "$work" "$jail"
  rm -rf --one-file-system "$old"
else
  mv "$work" "$jail"
fi
trap - EXIT
log "done: $jail ($(. "$jail/etc/os-release" && echo "$PRETTY_NAME"))"
echo "$jail"
