#!/usr/bin/env bash
# Builds every libFuzzer target with clang and ASan, outside meson so that the
# gcc build stays clean. One target per parser of untrusted input:
#   ibnetdiscover_fuzz   the ibnetdiscover parser and topology model (also UBSan)
#   fuzz_kubeconfig      the kubeconfig parser
#   fuzz_watch_stream    the watch-stream decoder
#   fuzz_status          the Status (API error) parser
#   fuzz_hostlist        hostlist expressions; checks that compress/expand round-trips
#   fuzz_resume_file     SLURM_RESUME_FILE (ResumeProgram's JSON)
#   fuzz_kmsg            /dev/kmsg records (GPU XIDs) and their judgement
#   fuzz_bridge_conf     k8sbridge.conf
#   fuzz_pod_template    worker pod templates (YAML)
# RapidJSON 1.1 trips UBSan's pointer-overflow check inside the library on the
# first input, so the targets built from the library objects run under ASan alone.
#
#   fuzz/build.sh [OUT_DIR]          (default /tmp/k8sbridge-fuzz)
# prints the targets' paths. fuzz/run.sh builds and runs them all briefly (CI);
# for a longer run, e.g. 10 minutes, of one target (seed corpus in fuzz/corpus/<name>/):
#   OUT/fuzz_hostlist -max_total_time=600 -rss_limit_mb=2048 OUT/corpus/hostlist fuzz/corpus/hostlist
# Sources compile $FUZZ_JOBS (default 2) at a time, at $FUZZ_OPT (default -O1, for
# fast fuzzing; fuzz/run.sh's short runs use -O0, which compiles three times faster).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-/tmp/k8sbridge-fuzz}
jobs=${FUZZ_JOBS:-2}
opt=${FUZZ_OPT:--O1}
mkdir -p "$out/obj"
for corpus in "$here"/corpus/*/; do mkdir -p "$out/corpus/$(basename "$corpus")"; done
lib=$root/libk8sbridge
common=(-std=c++20 -g "$opt" -fno-omit-frame-pointer)
for layer in "$lib"/*/include; do common+=(-I"$layer"); done
libs=(-lfmt -lyaml-cpp -lcurl -lssl -lcrypto -pthread)
# Compiles go through ccache where it is installed (scripts/test.sh points it at the
# CI cache); links are not cached, so every target is compiled and linked apart.
cxx=(clang++)
command -v ccache >/dev/null && cxx=(ccache clang++)

# Runs a command in the background once fewer than $jobs run; a failed one fails
# the build (set -e) at the next wait.
spawn() {
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  "$@" &
}
wait_all() {
  for pid in $(jobs -p); do wait "$pid"; done
}

# ibnetdiscover_fuzz is built with UBSan as well, from its own objects.
ib_sources=("$here/ibnetdiscover_fuzz.cpp" "$lib"/topology/src/{fabric,builder,render}.cpp
  "$lib"/core/src/{hostlist,status,log,text}.cpp)
ib_objs=()
mkdir -p "$out/obj/ib"
for f in "${ib_sources[@]}"; do
  o="$out/obj/ib/$(basename "${f%.cpp}").o"
  spawn "${cxx[@]}" "${common[@]}" -fsanitize=fuzzer-no-link,address,undefined \
    -fno-sanitize-recover=undefined -c "$f" -o "$o"
  ib_objs+=("$o")
done
wait_all
spawn clang++ -fsanitize=fuzzer,address,undefined "${ib_objs[@]}" -lfmt -lyaml-cpp \
  -o "$out/ibnetdiscover_fuzz"

# The library sources the other targets reach, once, instrumented for the fuzzer,
# in an archive so that each target links only the objects it needs.
sources=("$lib"/core/src/{status,log,clock,text,hostlist}.cpp "$lib"/kube/src/*.cpp
  "$lib"/conf/src/*.cpp "$lib"/power/src/{pod_template,pod_spec_checks,resume_file}.cpp "$lib"/slurm/src/node_reason.cpp
  "$lib"/health/src/{checks,findings}.cpp)
objs=()
for f in "${sources[@]}"; do
  o="$out/obj/$(basename "$(dirname "$(dirname "$f")")")_$(basename "${f%.cpp}").o"
  spawn "${cxx[@]}" "${common[@]}" -fsanitize=fuzzer-no-link,address -c "$f" -o "$o"
  objs+=("$o")
done
wait_all
rm -f "$out/obj/libk8sbridge-fuzz.a"
ar rcs "$out/obj/libk8sbridge-fuzz.a" "${objs[@]}"

targets=(fuzz_kubeconfig fuzz_watch_stream fuzz_status fuzz_hostlist fuzz_resume_file fuzz_kmsg
  fuzz_bridge_conf fuzz_pod_template)
for target in "${targets[@]}"; do
  spawn "${cxx[@]}" "${common[@]}" -fsanitize=fuzzer-no-link,address -c "$here/$target.cpp" \
    -o "$out/obj/$target.o"
done
wait_all
for target in "${targets[@]}"; do
  spawn clang++ -fsanitize=fuzzer,address "$out/obj/$target.o" "$out/obj/libk8sbridge-fuzz.a" \
    "${libs[@]}" -o "$out/$target"
done
wait_all
ls "$out"/ibnetdiscover_fuzz "${targets[@]/#/$out/}"
