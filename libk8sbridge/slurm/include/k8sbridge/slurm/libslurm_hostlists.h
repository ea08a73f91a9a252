// Hostlists through libslurm (slurm_hostlist_create/shift/ranged_string): the
// parser Slurm itself uses for the argv[1] it hands ResumeProgram/SuspendProgram.
// Only for programs: link libk8sbridge_slurm_dep (never into a plugin).
#pragma once

#include "k8sbridge/hostlist.h"

namespace k8sbridge::slurm {

class SlurmHostlists final : public Hostlists {
 public:
  Result<std::vector<std::string>> Expand(std::string_view expression) const override;
  std::string Compress(const std::vector<std::string>& names) const override;
};

}  // namespace k8sbridge::slurm
