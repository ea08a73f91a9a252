// k8sbridge-health's settings: its own key=value file in slurm.conf's style
// (default /etc/slurm/k8sbridge-health.conf). Its keys are the rows of
// HealthKeyTable() (config.cpp, rows as conf/key_table.h describes them): the
// parser, its messages and the key table of docs/health.md come from them.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/conf/key_table.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/status.h"

namespace k8sbridge::health {

struct IbPortExpectation {
  std::string device;            // "mlx5_0"; "*" = every device under the sysfs root
  std::optional<unsigned> port;  // empty = every port
  double min_rate_gbps = 0;      // 0 = do not check the rate
};

struct HealthConfig {
  std::string file;

  // What runs.
  bool check_gpus = true;
  bool check_xid = true, check_ecc = true, check_retired_pages = true, check_row_remap = true;
  bool check_nvlink = true, check_throttle = true, check_pcie = true;
  bool check_ib = true;

  // GPUs.
  std::string nvml_library = "libnvidia-ml.so.1";
  std::optional<unsigned> gpu_count;  // expected; empty = from the node's Gres in Slurm
  std::set<unsigned> xid_drain = {48, 62, 64, 74, 79, 92, 94, 95, 119, 120};
  unsigned long long ecc_uncorrected_max = 0;  // more than this drains
  // HW slowdown, HW thermal, power brake
  unsigned long long throttle_drain_mask = 0x8 | 0x40 | 0x80;
  std::optional<unsigned> pcie_min_width;       // empty = the device's max
  std::optional<unsigned> pcie_min_generation;  // empty = not checked (links downshift at idle)
  std::string kmsg_path = "/dev/kmsg";          // XIDs since the last run
  std::chrono::milliseconds xid_event_wait{0};  // also listen for NVML XID events this long

  // Fabric and node.
  std::string ib_sysfs_root = "/sys/class/infiniband";
  std::vector<IbPortExpectation> ib_ports;  // empty = every port found must be ACTIVE/LinkUp
  std::string jail_path;                    // "" = no jail check
  std::vector<std::pair<std::string, double>> min_free_gib;  // path, GiB

  // Deadlines: Slurm kills the program after 60 s, so everything ends well before.
  std::chrono::milliseconds check_timeout{10'000};
  std::chrono::milliseconds total_timeout{45'000};

  // Outcome.
  unsigned resume_after_clean_runs = 2;
  std::string state_dir = "/var/lib/k8sbridge/health";

  // Publishing the result to Kubernetes: a node condition and, when it changes,
  // an Event on the Kubernetes node. Best effort: it never changes what Slurm gets.
  bool kube_publish = false;
  std::string kubeconfig;  // "" = in-cluster (the pod's service account), else $KUBECONFIG
  std::string kube_node;   // "" = $K8SBRIDGE_HOST_NODE (the worker pod's spec.nodeName)
  std::string kube_condition_type{contract::kHealthConditionType};
  std::chrono::milliseconds kube_timeout{5'000};
};

// Errors name "<file>:<line>:<column>: Key=value" and the fix.
Result<HealthConfig> ParseHealthConfig(std::string_view text, std::string_view file);
Result<HealthConfig> LoadHealthConfig(const std::string& path);

// The keys, in the order docs/health.md lists them.
std::span<const conf::Key<HealthConfig>> HealthKeyTable();
const std::vector<std::string_view>& HealthKeys();

// The key table of docs/health.md ("| key | default | meaning |").
std::string HealthKeysMarkdown();

}  // namespace k8sbridge::health
