// libFuzzer target: the kubeconfig parser must turn any input into a value or a
// Status, never crash, hang or throw.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/kube/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto parsed = k8sbridge::kube::ParseKubeconfig(yaml, "/fuzz/kubeconfig");
  if (!parsed.ok() && parsed.status().message().empty())
    __builtin_trap();  // errors must say something
  return 0;
}
