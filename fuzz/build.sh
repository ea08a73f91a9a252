#!/usr/bin/env bash
# Builds every libFuzzer target with clang and ASan, outside meson so that the
# gcc build stays clean:
#   ibnetdiscover_fuzz   the ibnetdiscover parser and topology model (also UBSan)
#   fuzz_kubeconfig      the kubeconfig parser
#   fuzz_watch_stream    the watch-stream decoder
#   fuzz_status          the Status (API error) parser
# RapidJSON 1.1 trips UBSan's pointer-overflow check inside the library on the
# first input, so the JSON-based targets run under ASan alone.
#
#   fuzz/build.sh [OUT_DIR]          (default /tmp/k8sbridge-fuzz)
# then, for 10 minutes each (seed corpora in fuzz/corpus/<name>/):
#   OUT/ibnetdiscover_fuzz -max_total_time=600 -rss_limit_mb=2048 OUT/corpus/ibnetdiscover fuzz/corpus/ibnetdiscover
#   OUT/fuzz_kubeconfig    -max_total_time=600 -rss_limit_mb=2048 OUT/corpus/kubeconfig fuzz/corpus/kubeconfig
#   OUT/fuzz_watch_stream  -max_total_time=600 -rss_limit_mb=2048 OUT/corpus/watch_stream fuzz/corpus/watch_stream
#   OUT/fuzz_status        -max_total_time=600 -rss_limit_mb=2048 OUT/corpus/status fuzz/corpus/status
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${1:-/tmp/k8sbridge-fuzz}
mkdir -p "$out/obj" "$out/corpus"/{ibnetdiscover,kubeconfig,watch_stream,status}
lib=$root/libk8sbridge
common=(-std=c++20 -g -O1 -fno-omit-frame-pointer)
for layer in "$lib"/*/include; do common+=(-I"$layer"); done
libs=(-lfmt -lyaml-cpp -lcurl -lssl -lcrypto -pthread)

clang++ "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "$here/ibnetdiscover_fuzz.cpp" \
  "$lib/topology/src/fabric.cpp" "$lib/topology/src/builder.cpp" "$lib/core/src/hostlist.cpp" \
  "$lib/topology/src/render.cpp" "$lib/core/src/status.cpp" "$lib/core/src/log.cpp" \
  "$lib/core/src/text.cpp" \
  -lfmt -lyaml-cpp -o "$out/ibnetdiscover_fuzz"

# The Kubernetes client's sources, once, instrumented for the fuzzer.
objs=()
for f in "$lib"/core/src/{status,log,clock,text}.cpp "$lib"/kube/src/*.cpp; do
  o="$out/obj/$(basename "$(dirname "$f")")_$(basename "${f%.cpp}").o"
  clang++ "${common[@]}" -fsanitize=fuzzer-no-link,address -c "$f" -o "$o"
  objs+=("$o")
done
for target in fuzz_kubeconfig fuzz_watch_stream fuzz_status; do
  clang++ "${common[@]}" -fsanitize=fuzzer,address "$here/$target.cpp" "${objs[@]}" "${libs[@]}" \
    -o "$out/$target"
done
ls "$out"/ibnetdiscover_fuzz "$out"/fuzz_*
