// libFuzzer target: worker pod templates (YAML, converted to JSON and checked).
// The parser caps nesting and alias expansion itself; nothing here may crash, hang
// or let an exception escape.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/power/pod_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view yaml(reinterpret_cast<const char*>(data), size);
  auto parsed = k8sbridge::power::ParsePodTemplate(yaml, "/fuzz/worker.yaml");
  if (!parsed.ok()) {
    if (parsed.status().message().empty())
      __builtin_trap();  // errors must say something
    return 0;
  }
  if (parsed->pod == nullptr || !parsed->pod->IsObject())
    __builtin_trap();  // an accepted template is a mapping
  return 0;
}
