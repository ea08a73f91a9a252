// libFuzzer target: SLURM_RESUME_FILE, the JSON slurmctld hands ResumeProgram.
// Its hostlists go through the builtin expander with a smaller limit on names, so
// that one input stays fast; the parser's own bound on the whole file still holds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/power/resume_file.h"

namespace {

class FuzzHostlists final : public k8sbridge::Hostlists {
 public:
  k8sbridge::Result<std::vector<std::string>> Expand(std::string_view expression) const override {
    return k8sbridge::ExpandHostlist(expression, 4096);
  }
  std::string Compress(const std::vector<std::string>& names) const override {
    return k8sbridge::CompressHostlist(names);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto request = k8sbridge::power::ParseResumeFile(json, "/fuzz/resume", FuzzHostlists());
  if (!request.ok()) {
    if (request.status().message().empty())
      __builtin_trap();  // errors must say something
    return 0;
  }
  for (const auto& node : request->all_nodes_resume)
    (void)request->JobsOf(node);
  return 0;
}
