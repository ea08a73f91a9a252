#!/usr/bin/env bash
# Builds k8sbridge's plugins and programs against another Slurm release: Debian's own
# libslurm-dev in that release's build root (scripts/build-root.sh), with warnings as
# errors. The 26.05 test suite (tests/meson.build, suite slurm-26.05) runs them under
# that root's real slurmctld and slurmd.
#
# Usage: scripts/build-release.sh [--release sid] [--build DIR] [--cache DIR]
#   --build DIR   the build directory, inside the checkout (default: build-<release>)
# Prints two lines: the build root, then the build directory.
#
# The build runs in the root (its compiler, its libraries), in a mount namespace of its
# own in which the checkout is bind-mounted at its own path inside the root, and
# ccache's directory ($K8SBRIDGE_CACHE/ccache-<release>) at /var/cache/ccache: nothing
# stays mounted when it ends, whatever way it ends.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
release=sid
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --release) release=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    --help)
      sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-release: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "build-release: $*" >&2; }
build=${build:-$repo/build-$release}
case "$build" in
  "$repo"/*) ;;
  *) log "--build $build is outside the checkout $repo: the root sees only the checkout"; exit 2 ;;
esac

root=$(bash "$here/build-root.sh" --release "$release" --cache "$cache" | tail -n 1)
ccache_dir="$cache/ccache-$release"
mkdir -p "$ccache_dir" "$build"
mkdir -p "$root$repo" "$root/var/cache/ccache"

# Debian's Slurm: headers and libslurm under /usr, plugins in /usr/lib/<triplet>/slurm-wlm.
# buildtype plain (no optimization, no debug info): a test build, compiled in a third
# of debugoptimized's time beside the rest of CI.
setup_options="-Dslurm_prefix=/usr -Dslurm_plugindir=/usr/lib/x86_64-linux-gnu/slurm-wlm \
-Dtests=false -Dwerror=true -Dbuildtype=plain"
inner='set -e
mount --bind "$REPO" "$ROOT$REPO"
mount --bind "$CCACHE" "$ROOT/var/cache/ccache"
mount -t proc proc "$ROOT/proc"
exec chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
  CCACHE_DIR=/var/cache/ccache CCACHE_BASEDIR="$REPO" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G sh -c "
    set -e
    cd \"$REPO\"
    if [ -f \"$BUILD/build.ninja\" ]; then
      meson setup --reconfigure \"$BUILD\" $OPTIONS >/dev/null
    else
      meson setup \"$BUILD\" $OPTIONS >/dev/null
    fi
    ninja -C \"$BUILD\""'
start=$(date +%s)
log "building $repo against $release's Slurm in $build (root $root)"
REPO=$repo ROOT=$root CCACHE=$ccache_dir BUILD=$build OPTIONS=$setup_options \
  unshare --mount --propagation private -- sh -c "$inner" >&2
log "built in $(( $(date +%s) - start ))s"
echo "$root"
echo "$build"
