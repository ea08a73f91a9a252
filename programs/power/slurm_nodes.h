// The Slurm side of k8sbridge-power through libslurm: the node's Gres from
// slurm_load_node_single, DOWN then POWER_DOWN through slurm_update_node (keeping a
// reason k8sbridge did not write, node_reason.h). The only file of the program that
// calls into libslurm beyond hostlists.
#pragma once

#include <mutex>

#include "k8sbridge/power/power_actions.h"

namespace k8sbridge::power {

class LibslurmNodes final : public SlurmNodes {
 public:
  Result<std::string> Gres(std::string_view node) override;
  Status FailNode(std::string_view node, std::string_view reason) override;
  // The munged socket slurmctld uses (AuthInfo=socket=...), "" when it names none
  // (libmunge's default): the resume step's munge check must use that munged.
  Result<std::string> ControllerMungeSocket();

 private:
  void Init();
  std::once_flag init_;
  std::mutex mu_;  // libslurm's RPC calls are serialised: cheap next to pod creation
};

}  // namespace k8sbridge::power
