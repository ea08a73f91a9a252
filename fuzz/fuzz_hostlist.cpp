// libFuzzer target: hostlist expressions from slurmctld, k8sbridge.conf and the
// resume file. Beyond not crashing, an accepted expression must survive the
// round trip: compressing its names and expanding the result gives the same set.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/hostlist.h"

namespace {

// Small enough that "n[0-99999999]" is rejected by the parser's own limit in
// microseconds, large enough to cover ranges that span several zero paddings.
constexpr size_t kMaxNames = 4096;

std::vector<std::string> SortedUnique(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view expression(reinterpret_cast<const char*>(data), size);
  auto names = k8sbridge::ExpandHostlist(expression, kMaxNames);
  if (!names.ok()) {
    if (names.status().message().empty())
      __builtin_trap();  // errors must say something
    return 0;
  }
  if (names->size() > kMaxNames)
    __builtin_trap();  // the limit holds
  for (const std::string& name : *names) {
    if (name.empty() || name.size() > 255)
      __builtin_trap();  // names are host names, so memory is bounded by the limit
  }
  std::string compressed = k8sbridge::CompressHostlist(*names);
  auto again = k8sbridge::ExpandHostlist(compressed, kMaxNames);
  if (!again.ok() || SortedUnique(*again) != SortedUnique(*names))
    __builtin_trap();  // CompressHostlist wrote what ExpandHostlist reads differently
  return 0;
}
