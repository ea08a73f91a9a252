#include "k8sbridge/slurm/libslurm_hostlists.h"

#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <slurm/slurm.h>

namespace k8sbridge::slurm {

namespace {
struct HostlistDeleter {
  void operator()(hostlist_t* h) const { slurm_hostlist_destroy(h); }
};
using HostlistPtr = std::unique_ptr<hostlist_t, HostlistDeleter>;
}  // namespace

Result<std::vector<std::string>> SlurmHostlists::Expand(std::string_view expression) const {
  std::string copy(expression);
  // libslurm answers NULL for a bad expression (and logs why to stderr itself);
  // the builtin parser usually says more precisely what is wrong.
  HostlistPtr list(slurm_hostlist_create(copy.c_str()));
  if (!list) {
    auto builtin = BuiltinHostlists().Expand(expression);
    std::string why = builtin.ok() ? "" : ": " + builtin.status().message();
    return Status::InvalidArgument(
        fmt::format("'{}' is not a valid Slurm hostlist{}", expression, why));
  }
  std::vector<std::string> names;
  while (char* name = slurm_hostlist_shift(list.get())) {
    names.emplace_back(name);
    std::free(name);  // slurm_hostlist_shift's result is malloc()ed
  }
  return names;
}

std::string SlurmHostlists::Compress(const std::vector<std::string>& names) const {
  HostlistPtr list(slurm_hostlist_create(nullptr));
  for (const std::string& name : names)
    slurm_hostlist_push_host(list.get(), name.c_str());
  slurm_hostlist_uniq(list.get());  // sorts, then drops duplicates
  std::string buffer(1024, '\0');
  for (;;) {
    ssize_t written = slurm_hostlist_ranged_string(list.get(), buffer.size(), buffer.data());
    if (written >= 0 && static_cast<size_t>(written) < buffer.size()) {
      buffer.resize(static_cast<size_t>(written));
      return buffer;
    }
    buffer.resize(buffer.size() * 4);
  }
}

}  // namespace k8sbridge::slurm
