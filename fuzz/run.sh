#!/usr/bin/env bash
# The short fuzzing run of CI (scripts/test.sh): builds every target (fuzz/build.sh,
# at -O0: for runs this short the compile costs more than slower inputs) and runs
# each for SECONDS on a copy of its seed corpus (fuzz/corpus/<name>/), $FUZZ_JOBS
# (default 2) at a time. Fails, naming the target and its crash file, when any
# target crashes, leaks, runs out of memory or times out.
#   fuzz/run.sh [OUT_DIR] [SECONDS]      (defaults /tmp/k8sbridge-fuzz, 15)
# Reproduce a failure with: OUT_DIR/<target> OUT_DIR/artifacts/<target>/<crash file>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/tmp/k8sbridge-fuzz}
seconds=${2:-15}
jobs=${FUZZ_JOBS:-2}
start=$(date +%s)
mkdir -p "$out"

# The build is kept while its inputs are unchanged (the library and fuzz sources,
# build.sh, the optimisation level and clang's version): a cached CI run fuzzes
# without compiling.
opt=${FUZZ_OPT:--O0}
key=$( (cd "$here/.." && find libk8sbridge fuzz -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.sh' \) \
        -print0 | sort -z | xargs -0 sha256sum; echo "$opt"; clang++ --version) | sha256sum | cut -d' ' -f1)
if [ -s "$out/targets.txt" ] && [ "$(cat "$out/build.key" 2>/dev/null)" = "$key" ]; then
  mapfile -t targets <"$out/targets.txt"
  echo "fuzz: ${#targets[@]} targets already built from these sources"
else
  rm -f "$out/build.key" "$out/targets.txt"
  mapfile -t targets < <(FUZZ_OPT=$opt bash "$here/build.sh" "$out" 2>"$out.build.log")
  if [ ${#targets[@]} -eq 0 ]; then
    tail -n 40 "$out.build.log"
    echo "fuzz: the build failed (log: $out.build.log)"
    exit 1
  fi
  printf '%s\n' "${targets[@]}" >"$out/targets.txt"
  echo "$key" >"$out/build.key"
  echo "fuzz: built ${#targets[@]} targets in $(($(date +%s) - start))s"
fi

# One target on a fresh copy of its seeds (the run adds what it finds to the copy,
# never to fuzz/corpus). The timeout per input is generous: CI runs this at low
# priority beside other work.
fuzz_one() {  # target path
  local target=$1 name
  name=$(basename "$target")
  local corpus=${name#fuzz_}
  corpus=${corpus%_fuzz}
  rm -rf "$out/run/$name" "$out/artifacts/$name"
  mkdir -p "$out/run/$name" "$out/artifacts/$name"
  cp "$here/corpus/$corpus"/* "$out/run/$name/"
  "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$name/" "$out/run/$name" >"$out/run/$name.log" 2>&1
  echo $? >"$out/run/$name.rc"
}

for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$target" &
done
wait
failed=0
for target in "${targets[@]}"; do
  name=$(basename "$target")
  if [ "$(cat "$out/run/$name.rc")" = 0 ]; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/run/$name.log" | grep -o '[0-9]*$')
    echo "fuzz: $name: ok, ${runs:-?} inputs in ${seconds}s"
  else
    failed=1
    tail -n 30 "$out/run/$name.log"
    crash=$(ls "$out/artifacts/$name"/* 2>/dev/null | head -n 1)
    echo "fuzz: FAILED: $name: ${crash:-no crash file} (log: $out/run/$name.log)"
  fi
done
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, took $(($(date +%s) - start))s"
exit $failed
