// SlurmNodes over libslurm: read one node, drain it, undrain it.
#pragma once

#include "k8sbridge/health/outcome.h"

namespace k8sbridge::health {

class LibslurmNodes final : public SlurmNodes {
 public:
  LibslurmNodes();  // slurm_init(NULL): SLURM_CONF or the built-in path
  ~LibslurmNodes() override;
  Result<SlurmNode> Get(const std::string& name) override;
  Status Drain(const std::string& name, const std::string& reason) override;
  // Clears only the DRAIN flag (NODE_STATE_UNDRAIN), so a DOWN set by someone
  // else stays.
  Status Resume(const std::string& name) override;
};

}  // namespace k8sbridge::health
