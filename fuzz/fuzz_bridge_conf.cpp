// libFuzzer target: k8sbridge.conf, lexer and key table together. An admin's file
// is not hostile, but a typo must give an error that names where it is, never a
// crash, a hang or an exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  k8sbridge::BuiltinHostlists hostlists;
  auto config = k8sbridge::conf::ParseBridgeConfig(text, "/fuzz/k8sbridge.conf", hostlists);
  if (!config.ok()) {
    if (config.status().message().empty())
      __builtin_trap();  // errors must say something
    return 0;
  }
  for (const auto& group : config->node_groups) {
    for (const auto& node : group.nodes)
      (void)config->GroupOf(node);
  }
  return 0;
}
