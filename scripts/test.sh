#!/usr/bin/env bash
# Runs every k8sbridge test, as root: set-up (idempotent), the build with
# warnings as errors, the Debian packages for trixie and sid
# (scripts/build-packages.sh), unit, integration and packaging suites, the version
# suite on Slurm 26.05.5 (k8sbridge built against Debian sid's libslurm-dev by
# scripts/build-release.sh, run under sid's real daemons; sid's packages), the unit suite again under ASan/UBSan, the style checks (scripts/check-style.sh), a short run of every
# fuzz target (fuzz/run.sh), and a final check that no rig left anything behind.
# Ends with the line "N passed, N failed, N skipped".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export K8SBRIDGE_CACHE=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
build=${K8SBRIDGE_BUILD:-$root/build}
asan_build=${K8SBRIDGE_ASAN_BUILD:-$root/build-asan}
python=/usr/bin/python3
# Every compile goes through ccache (meson finds it; fuzz/build.sh uses it too), its
# cache under $K8SBRIDGE_CACHE keyed by the preprocessed source and the flags, and
# paths relative to the checkout: a clean clone with warm caches recompiles only
# what changed since the cache was filled.
export CCACHE_DIR=${CCACHE_DIR:-$K8SBRIDGE_CACHE/ccache}
export CCACHE_BASEDIR=$root
# Not the working directory either (ccache hashes it into every -g compile): a clone
# at another path hits the same entries.
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-6G}

start=$(date +%s)
bash scripts/setup.sh || { echo "test: set-up failed"; echo "0 passed, 1 failed"; exit 1; }
echo "test: set-up took $(( $(date +%s) - start ))s"
# The Kubernetes programs set-up built (cached: this only finds them), for every
# test's cluster (tests/harness/kube.py).
K8SBRIDGE_KUBERNETES_BIN=$(bash scripts/build-kubernetes.sh 2>/dev/null | tail -n 1)
export K8SBRIDGE_KUBERNETES_BIN
echo "test: Kubernetes: $("$K8SBRIDGE_KUBERNETES_BIN/kube-apiserver" --version)"

slurm_prefix="$K8SBRIDGE_CACHE/slurm-24.11.5/install"
slurm_src="$K8SBRIDGE_CACHE/slurm-24.11.5/src"
slurm_opts=(-Dslurm_prefix="$slurm_prefix" -Dslurm_src="$slurm_src" -Dwerror=true)

# A test process killed outright cannot tear its rig down: clear what it left.
$python tests/rig/rigctl.py cleanup >/dev/null

failed_steps=()
configure() {  # dir, options...
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

# The sanitizer build compiles only what the unit suite runs.
unit_targets() {
  meson introspect --tests "$1" | $python -c '
import json, os, sys
for t in json.load(sys.stdin):
    if "unit" in t["suite"]:
        print(os.path.relpath(t["cmd"][0], sys.argv[1]))' "$1"
}

# The Debian packages (built in a Debian build root with that release's Slurm)
# and the images made from them: keyed by their inputs under $K8SBRIDGE_CACHE, so
# a second run of one commit rebuilds nothing. They too build beside the waiting
# host build and the integration tests (nothing of theirs needs the host build); the
# tests of the suite "artifacts" run once they are there.
artifacts_dir="$root/build-artifacts"  # logs and the directories made
mkdir -p "$artifacts_dir"
artifacts_log="$artifacts_dir/artifacts.log"
artifacts_env="$artifacts_dir/artifacts.env"
rm -f "$artifacts_env" "$build/meson-logs/artifacts-testlog.json"
( set -e
  packages=$(nice -n 10 bash scripts/build-packages.sh | tail -n 1)
  images=$(nice -n 10 $python scripts/images.py --packages "$packages" | tail -n 1)
  printf 'K8SBRIDGE_PACKAGES_DIR=%s\nK8SBRIDGE_IMAGES=%s\n' "$packages" "$images" >"$artifacts_env"
) >"$artifacts_log" 2>&1 &
artifacts_pid=$!

# Slurm 26.05.5: sid's build root (Debian's packages, cached by its inputs) and
# k8sbridge built in it against Debian's libslurm-dev (ccache under $K8SBRIDGE_CACHE).
# Beside the host build and the integration tests too; the suite "slurm-26.05" runs
# once it is there, with the root, prefix and build it needs.
release_log="$artifacts_dir/slurm-26.05.log"
release_env="$artifacts_dir/slurm-26.05.env"
rm -f "$release_env" "$build/meson-logs/slurm-26.05-testlog.json"
( set -e
  out=$(nice -n 10 bash scripts/build-release.sh --release sid)
  printf 'K8SBRIDGE_SLURM_ROOT=%s\nK8SBRIDGE_SLURM_PREFIX=/usr\nK8SBRIDGE_SLURM_BUILD=%s\n' \
    "$(sed -n 1p <<<"$out")" "$(sed -n 2p <<<"$out")" >"$release_env"
) >"$release_log" 2>&1 &
release_pid=$!
# sid's Debian packages (Slurm 26.05.5), built in that root too (build-root.sh lets one
# job make it and the other wait for it), keyed and cached like trixie's: the suite
# "slurm-26.05" checks them (meson test packages@26.05) with K8SBRIDGE_PACKAGES_DIR.
sid_packages_log="$artifacts_dir/packages-sid.log"
sid_packages_env="$artifacts_dir/packages-sid.env"
rm -f "$sid_packages_env"
( set -e
  packages=$(nice -n 10 bash scripts/build-packages.sh --release sid | tail -n 1)
  printf 'K8SBRIDGE_PACKAGES_DIR=%s\n' "$packages" >"$sid_packages_env"
) >"$sid_packages_log" 2>&1 &
sid_packages_pid=$!

if configure "$build" "${slurm_opts[@]}" && meson compile -C "$build"; then
  # The sanitizer build (-O0, buildtype debug: it compiles much faster, and the
  # sanitizers lose nothing) runs beside the integration tests, which mostly wait
  # on daemons; the cached run stays well inside CI's time limit that way.
  asan_log="$build/meson-logs/asan-build.log"
  ( configure "$asan_build" "${slurm_opts[@]}" -Dbuildtype=debug \
      -Db_sanitize=address,undefined -Db_lundef=false &&
    nice -n 10 ninja -C "$asan_build" $(unit_targets "$asan_build") ) >"$asan_log" 2>&1 &
  asan_pid=$!
  # The style checks (clang-format, clang-tidy's function size) need the build's
  # compile commands and generated headers; they too run beside the waiting
  # integration tests, at low priority.
  style_log="$build/meson-logs/check-style.log"
  nice -n 15 bash scripts/check-style.sh "$build" >"$style_log" 2>&1 &
  style_pid=$!
  # Every fuzz target, 15 s each on its seed corpus (fuzz/run.sh); clang, outside
  # meson, so it needs nothing from the build and also runs beside the waiting
  # integration tests.
  fuzz_log="$build/meson-logs/fuzz.log"
  nice -n 15 bash fuzz/run.sh "$build/fuzz" 15 >"$fuzz_log" 2>&1 &
  fuzz_pid=$!
  # The integration tests run in parallel: each rig has its own names, addresses,
  # ports and leftover check (docs/architecture.md, "The test rig"), and their
  # daemons mostly sleep, so four at a time fit two cores.
  meson test -C "$build" --print-errorlogs --num-processes 4 --no-suite artifacts \
    --no-suite slurm-26.05 || true
  # The artifacts suite runs beside the Slurm 26.05 suite: its end-to-end test
  # mostly waits on its cluster's pods and Slurm's power saving.
  artifacts_test_pid=""
  artifacts_test_log="$artifacts_dir/artifacts-test.log"
  if wait "$artifacts_pid" && [ -f "$artifacts_env" ]; then
    tail -n 20 "$artifacts_log"
    ( set -a; . "$artifacts_env"; set +a
      meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 2 --suite artifacts \
        --logbase artifacts-testlog ) >"$artifacts_test_log" 2>&1 &
    artifacts_test_pid=$!
  else
    tail -n 40 "$artifacts_log"
    failed_steps+=("packages and images")
  fi
  if wait "$sid_packages_pid" && [ -f "$sid_packages_env" ]; then
    tail -n 3 "$sid_packages_log"
  else
    tail -n 40 "$sid_packages_log"
    failed_steps+=("Slurm 26.05 packages")
  fi
  if wait "$release_pid" && [ -f "$release_env" ]; then
    tail -n 3 "$release_log"
    ( set -a; . "$release_env"; [ -f "$sid_packages_env" ] && . "$sid_packages_env"; set +a
      meson test -C "$build" --no-rebuild --print-errorlogs --num-processes 3 \
        --suite slurm-26.05 --logbase slurm-26.05-testlog ) || true
  else
    tail -n 40 "$release_log"
    failed_steps+=("Slurm 26.05 build")
  fi
  if [ -n "$artifacts_test_pid" ]; then
    wait "$artifacts_test_pid" || true
    cat "$artifacts_test_log"
  fi
else
  failed_steps+=("build")
  wait "$artifacts_pid"
  wait "$release_pid"
  wait "$sid_packages_pid"
  asan_pid=""
  style_pid=""
  fuzz_pid=""
fi

# A step run in the background: shows its log; it failed when it did not start
# (pid "") or exited non-zero.
finish_step() {  # pid log name
  if [ -n "$1" ] && wait "$1"; then
    cat "$2"
  else
    [ -n "$1" ] && cat "$2"
    failed_steps+=("$3")
  fi
}
finish_step "$style_pid" "${style_log:-}" "style checks"
finish_step "$fuzz_pid" "${fuzz_log:-}" "fuzzing"

if [ -n "$asan_pid" ] && wait "$asan_pid"; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C "$asan_build" --no-rebuild --suite unit --print-errorlogs --num-processes 2 || true
else
  [ -n "$asan_pid" ] && tail -n 40 "$asan_log"
  failed_steps+=("sanitizer build")
fi

left=$($python tests/rig/rigctl.py leftovers)
if $python -c 'import json,sys; d=json.loads(sys.stdin.read()); sys.exit(1 if any(d.values()) else 0)' <<<"$left"; then
  echo "test: no namespaces, bridges, daemons or mounts left behind"
else
  echo "test: tests left things behind:"; echo "$left"
  failed_steps+=("leftovers")
  $python tests/rig/rigctl.py cleanup >/dev/null
fi

# One summary over both builds' results (meson's JSON test logs).
$python - "$build" "$asan_build" "${#failed_steps[@]}" "${failed_steps[*]:-}" <<'PY'
import json, sys
from pathlib import Path
passed = failed = skipped = 0
logs = [(Path(sys.argv[1]) / "meson-logs" / "testlog.json", ""),
        (Path(sys.argv[1]) / "meson-logs" / "artifacts-testlog.json", ""),
        (Path(sys.argv[1]) / "meson-logs" / "slurm-26.05-testlog.json", ""),
        (Path(sys.argv[2]) / "meson-logs" / "testlog.json", " (ASan/UBSan)")]
for log, label in logs:
    if not log.exists():
        continue
    for line in log.read_text().splitlines():
        r = json.loads(line)
        result = r["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
            print(f"FAILED: {r['name']}{label}: {result}")
steps = int(sys.argv[3])
if steps:
    print(f"FAILED steps: {sys.argv[4]}")
failed += steps
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
