// The Slurm side of k8sbridge-sync through libslurm: slurm_load_node with change
// detection, slurm_load_node_single for live re-reads, and DRAIN / UNDRAIN /
// DOWN+POWER_DOWN / RESUME through slurm_update_node. The
// only file of the daemon that calls into libslurm beyond hostlists.
#pragma once

#include <ctime>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <slurm/slurm.h>

#include "k8sbridge/sync/executor.h"

namespace k8sbridge::sync {

class LibslurmControl final : public SlurmControl {
 public:
  LibslurmControl();
  Result<std::vector<SlurmNode>> LoadNodes() override;
  Result<SlurmNode> LoadNode(std::string_view node) override;
  Status Drain(std::string_view node, std::string_view reason) override;
  Status Undrain(std::string_view node) override;
  Status DownAndPowerDown(std::string_view node, std::string_view reason) override;
  Status Resume(std::string_view node) override;
  Status UpdateFeatures(std::string_view node, std::string_view available,
                        std::string_view active) override;

 private:
  Status Update(std::string_view node, uint32_t state, std::string_view reason,
                std::string_view what);
  std::string UserName(uint32_t uid);
  SlurmNode FromInfo(const node_info_t& info);
  // Loads and updates may run at once on different threads (each RPC has its own
  // connection): a slow node dump must not hold up a drain.
  std::mutex load_mu_, update_mu_;
  time_t last_update_ = 0;  // slurmctld's time of the copy we hold; 0 = none yet
  std::vector<SlurmNode> nodes_;
  std::map<uint32_t, std::string> users_;
};

}  // namespace k8sbridge::sync
