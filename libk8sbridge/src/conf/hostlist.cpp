#include "k8sbridge/conf/hostlist.h"

#include "k8sbridge/topology/hostlist.h"

namespace k8sbridge::conf {

// A node list in k8sbridge.conf or from Slurm is at most a few hundred thousand
// names; anything larger is a typo such as "w-[0-9999999]".
constexpr size_t kMaxNames = 1'000'000;

Result<std::vector<std::string>> BuiltinHostlists::Expand(std::string_view expression) const {
  return topology::ExpandHostlist(expression, kMaxNames);
}

std::string BuiltinHostlists::Compress(const std::vector<std::string>& names) const {
  return topology::CompressHostlist(names);
}

}  // namespace k8sbridge::conf
