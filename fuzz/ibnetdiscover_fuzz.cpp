// libFuzzer target: the ibnetdiscover parser and, for inputs it accepts, the tree
// builder and all renderings. Input is untrusted fabric data; any crash, sanitizer
// report or hang is a bug. Build with fuzz/build.sh (clang, separate from meson).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/log.h"
#include "k8sbridge/topology/fabric.h"
#include "k8sbridge/topology/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto graph = k8sbridge::topology::ParseIbnetdiscover(text, "fuzz");
  if (!graph.ok()) {
    return 0;
  }
  k8sbridge::NullLogger logger;
  k8sbridge::topology::BuildOptions options;
  options.remembered = {{"w-0", {1, 2}}};
  auto topo = k8sbridge::topology::BuildTopology(*graph, options, logger);
  if (topo.ok()) {
    (void)k8sbridge::topology::RenderTreeConf(*topo);
    (void)k8sbridge::topology::RenderBlockConf(*topo);
    (void)k8sbridge::topology::RenderTopologyYaml(*topo);
  }
  return 0;
}
