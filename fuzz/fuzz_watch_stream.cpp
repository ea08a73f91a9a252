// libFuzzer target: the watch-stream decoder. The first byte chooses where the
// input is cut into network reads, so line reassembly across reads is fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/kube/client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  const size_t step = 1 + data[0] % 64;
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  k8sbridge::kube::WatchDecoder decoder;
  size_t events = 0;
  auto on_event = [&](k8sbridge::kube::WatchEvent&& e) {
    ++events;
    (void)e.object.ResourceVersion();
    (void)e.object.Key();
    return true;
  };
  for (size_t pos = 0; pos < stream.size(); pos += step) {
    if (!decoder.Feed(stream.substr(pos, step), on_event).ok())
      return 0;
  }
  (void)decoder.Finish(on_event);
  return 0;
}
