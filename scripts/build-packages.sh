#!/usr/bin/env bash
# Builds k8sbridge's Debian packages (debian/) in the build root of
# scripts/build-root.sh (trixie's, the default, or sid's: the packages depend on
# exactly the Slurm of that release, which build-root.sh names), checks them with
# lintian (any error fails; warnings are printed) and leaves the .debs, the .changes,
# the build log and lintian's output in $K8SBRIDGE_CACHE/packages-<release>-<key>/,
# the key a hash of the source tree's content and modes and the build root's key: a
# second run with the same inputs rebuilds nothing.
#
# The source is the checkout's files as git lists them (tracked and untracked, not
# ignored), with their content in the work tree: a clean clone (CI) builds its
# commit, a developer's edits are built without committing them first. tests/,
# bench/ and fuzz/ stay out (the package build, -Dtests=false, reads none of them).
#
# Usage: scripts/build-packages.sh [--release trixie|sid] [--cache DIR]
# (the options of scripts/build-root.sh, passed on to it).
# Prints the packages directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
log() { echo "build-packages: $*" >&2; }

# The Debian version's upstream part is the project's version: one number for both.
project_version=$(sed -n "s/^  version: '\([^']*\)',$/\1/p" "$repo/meson.build")
changelog_version=$(sed -n '1s/^k8sbridge (\([^-)]*\)-[^)]*).*/\1/p' "$repo/debian/changelog")
if [ "$project_version" != "$changelog_version" ]; then
  log "meson.build's version is '$project_version' but debian/changelog's is '$changelog_version':"
  log "add a debian/changelog entry for $project_version-1 (dch -v $project_version-1)"
  exit 1
fi

root=$(bash "$here/build-root.sh" "$@" | tail -n 1)
root_key=${root##*-}
cache=$(dirname "$root")
release=$(sed -n 's/^release=//p' "$root/.k8sbridge-complete")

# The tree's files (existing ones: a deleted tracked file is not in the tree), less
# what a build with -Dtests=false never reads: editing a test rebuilds no package.
files=()
while IFS= read -r -d '' f; do
  if [ -e "$repo/$f" ] || [ -L "$repo/$f" ]; then files+=("$f"); fi
done < <(git -C "$repo" ls-files -z --cached --others --exclude-standard -- \
           ':!tests/' ':!bench/' ':!fuzz/' | sort -zu)
# Content and mode: dh_install keeps a file's mode, so a script made executable is
# another package (lintian's script-not-executable).
tree_key=$( (cd "$repo" && printf '%s\0' "${files[@]}" | xargs -0 sha256sum &&
  printf '%s\0' "${files[@]}" | xargs -0 stat -c '%a %n') | sha256sum | cut -c1-16)
out="$cache/packages-$release-$tree_key-$root_key"
# One build at a time in a root (they share its /proc mount); a second run of the
# same inputs waits and then reuses the first one's packages.
exec 8>"$root.build.lock"
flock 8
if [ -f "$out/.complete" ]; then
  touch "$out"  # in use: kept by the clean-up below
  log "reusing $out"
  echo "$out"
  exit 0
fi

# Inside the root, one path for every tree (builds in a root take turns, below):
# dpkg-buildflags puts it into -ffile-prefix-map, and so into ccache's hash.
work=/build/k8sbridge  # dpkg-buildpackage writes the .debs into it, beside src/
ccache_dir="$cache/ccache-$release"
tmp="$out.tmp"
cleanup() {
  for m in "$root/ccache" "$root/proc"; do
    if mountpoint -q "$m"; then umount "$m"; fi
  done
  rm -rf "$root$work"
}
trap cleanup EXIT
rm -rf "$tmp" "$root$work"
mkdir -p "$tmp" "$root$work/src" "$root/ccache" "$ccache_dir"
(cd "$repo" && printf '%s\0' "${files[@]}" | tar -cf - --null -T -) | tar -xf - -C "$root$work/src"
# debian/changelog's entry names trixie; a build in another release's root names
# that one, so the .changes' Distribution says which archive the packages install
# from (tests/packaging/test_packages.py installs them from it).
sed -i "1s/^\(k8sbridge ([^)]*)\) [^;]*;/\1 $release;/" "$root$work/src/debian/changelog"
mount -t proc proc "$root/proc"
# The compiler cache survives the build root (its key changes with its inputs).
mount --bind "$ccache_dir" "$root/ccache"

in_root() {
  chroot "$root" env -i PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
    CCACHE_DIR=/ccache CCACHE_BASEDIR="$work/src" CCACHE_MAXSIZE=2G \
    DEB_BUILD_OPTIONS="parallel=$(nproc)" \
    sh -c "$1"
}
start=$(date +%s)
log "building in $root$work (log: $tmp/build.log)"
in_root "cd $work/src && dpkg-buildpackage -b -us -uc" >"$tmp/build.log" 2>&1 ||
  { tail -n 30 "$tmp/build.log" >&2; log "dpkg-buildpackage failed, see $tmp/build.log"; exit 1; }
log "built in $(( $(date +%s) - start ))s"

# lintian's exit status counts errors only (--fail-on error); its warnings are shown.
# It runs as nobody, as lintian asks: it unpacks and reads what the build made.
lintian_ok=true
chroot --userspec=65534:65534 "$root" env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp LC_ALL=C.UTF-8 \
  sh -c "lintian --fail-on error --info $work/*.changes" >"$tmp/lintian.txt" 2>&1 || lintian_ok=false
cat "$tmp/lintian.txt" >&2
if ! $lintian_ok; then
  log "lintian reports errors (E: lines above, also in $tmp/lintian.txt)"
  exit 1
fi
log "lintian: $(grep -c '^E: ' "$tmp/lintian.txt" || true) errors, $(grep -c '^W: ' "$tmp/lintian.txt" || true) warnings"

cp "$root$work"/*.deb "$root$work"/*.changes "$root$work"/*.buildinfo "$tmp/"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
# Each tree leaves about 40 MB (most of it the -dbgsym packages): drop those of
# trees nobody has built or reused for two days, and failed builds' .tmp logs as old.
find "$cache" -maxdepth 1 -name "packages-$release-*" -mtime +1 -exec rm -rf {} + 2>/dev/null || true
log "packages in $out"
echo "$out"
