#!/usr/bin/env bash
# Builds Slurm from the upstream tarball that Debian's source archive carries, and
# installs it under a versioned prefix outside the repository. The configured source
# tree is kept beside the prefix, because node_features and topology plugins compile
# against its internal headers.
#
# Usage: scripts/build-slurm.sh [--cache DIR] [--version X.Y.Z] [--tarball-only | --build-deps]
# Prints the install prefix on its last line. A second run reuses the cache when its
# key (the configure options and the build dependencies below) is the one the cache
# was built with, and every plugin the tests need is there; otherwise it rebuilds.
# --tarball-only fetches (or reuses) the sha256-checked tarball and prints its path:
# scripts/build-root.sh configures the same tarball inside the Debian build root.
# --build-deps prints the Debian packages Slurm's configure needs (scripts/setup.sh
# installs them).
#
# A rebuild never disturbs the tests that use the cache meanwhile: it configures and
# builds in a sibling directory, installs with DESTDIR under the same baked-in prefix,
# and swaps the finished source tree and prefix in at the end.
set -euo pipefail

version=24.11.5
sha256=e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
mode=build
here=$(cd "$(dirname "$0")" && pwd)
# Slurm's configure leaves out, without failing, every plugin whose library is
# missing: accounting_storage/mysql (slurmdbd's database) needs libmariadb-dev's
# mariadb_config, or the mysql_config of libmariadb-dev-compat, which configure looks
# for first.
build_deps=(libmunge-dev libpam0g-dev libjson-c-dev libyaml-dev libhttp-parser-dev libjwt-dev
            libhwloc-dev liblz4-dev libreadline-dev libmariadb-dev libmariadb-dev-compat)
# Plugins the tests load: a cache without one of them is rebuilt.
required_plugins=(accounting_storage_mysql.so accounting_storage_slurmdbd.so priority_multifactor.so)
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --tarball-only) mode=tarball; shift ;;
    --build-deps) mode=deps; shift ;;
    *) echo "build-slurm: unknown argument '$1' (use --cache DIR, --version X.Y.Z, --tarball-only or --build-deps)" >&2; exit 2 ;;
  esac
done
if [ "$mode" = deps ]; then
  printf '%s\n' "${build_deps[@]}"
  exit 0
fi
if [ "$version" != 24.11.5 ]; then
  echo "build-slurm: only 24.11.5 is pinned (with its sha256); got '$version'" >&2
  exit 2
fi

root="$cache/slurm-$version"
prefix="$root/install"
src="$root/src"
stamp="$root/.complete"
log() { echo "build-slurm: $*" >&2; }
staging="$root/.staging"
# The build happens in $staging (below); -ffile-prefix-map writes the source tree's
# final path into the debug information, so a debugger finds the sources there.
configure_args=(--prefix="$prefix" --sysconfdir=/etc/slurm --with-munge --enable-pam
                --without-rpath --disable-debug CFLAGS="-g -O2 -ffile-prefix-map=$staging/src=$src")
key=$(printf '%s\n' "$sha256" "${configure_args[@]}" "${build_deps[@]}" | sha256sum | cut -c1-16)

cache_is_current() {
  [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && [ -x "$prefix/sbin/slurmctld" ] &&
    [ -x "$prefix/sbin/slurmdbd" ] && [ -f "$src/config.h" ] || return 1
  local plugin
  for plugin in "${required_plugins[@]}"; do
    [ -f "$prefix/lib/slurm/$plugin" ] || return 1
  done
}

if [ "$mode" = build ] && cache_is_current; then
  log "reusing $prefix (key $key)"
  echo "$prefix"
  exit 0
fi

mkdir -p "$root"
# One build at a time per cache; a second caller waits, then finds the cache current.
exec 9>"$root/.lock"
flock 9
if [ "$mode" = build ] && cache_is_current; then
  log "reusing $prefix (key $key), built meanwhile by another run"
  echo "$prefix"
  exit 0
fi

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
if [ "$mode" = tarball ]; then
  echo "$tarball"
  exit 0
fi

missing=()
for dep in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$dep" 2>/dev/null | grep -q "install ok installed" || missing+=("$dep")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "missing build dependencies: ${missing[*]} (run scripts/setup.sh as root, or apt-get install them)"
  exit 1
fi

# Exchanges two paths in one step (renameat2's RENAME_EXCHANGE), so a reader sees the
# old tree or the new one, never none; where the filesystem cannot, two renames.
exchange() {
  python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, os.fsencode(sys.argv[1]), -100, os.fsencode(sys.argv[2]), 2) != 0:
    sys.exit(1)' "$1" "$2" 2>/dev/null && return 0
  mv -T "$2" "$1.old" && mv -T "$1" "$2" && mv -T "$2.old" "$1"
}

# Building in place would pull the trees from under the tests that use them, so the
# build happens beside them: config.h and the installed prefix do not name the source
# tree's path, and --prefix bakes in the final prefix, whatever DESTDIR is.
rm -rf "$staging"
mkdir -p "$staging/src" "$staging/destdir"
tar -xzf "$tarball" -C "$staging/src" --strip-components=1
cd "$staging/src"
log "configuring (key $key; log: $root/configure.log)"
./configure "${configure_args[@]}" >"$root/configure.log" 2>&1 || { log "configure failed, see $root/configure.log"; exit 1; }
log "building with $(nproc) jobs (log: $root/make.log)"
make -j"$(nproc)" >"$root/make.log" 2>&1 || { log "make failed, see $root/make.log"; exit 1; }
make install DESTDIR="$staging/destdir" >"$root/install.log" 2>&1 || { log "make install failed, see $root/install.log"; exit 1; }
for plugin in "${required_plugins[@]}"; do
  [ -f "$staging/destdir$prefix/lib/slurm/$plugin" ] ||
    { log "the build has no $plugin: its library was missing at configure time, see $root/configure.log"; exit 1; }
done
cd "$root"
rm -f "$stamp"
for tree in src install; do
  new="$staging/$tree"
  [ "$tree" = install ] && new="$staging/destdir$prefix"
  if [ -e "$root/$tree" ]; then
    exchange "$new" "$root/$tree"
  else
    mv -T "$new" "$root/$tree"
  fi
done
echo "$key" >"$stamp"
rm -rf "$staging"
log "installed $prefix (key $key)"
echo "$prefix"
