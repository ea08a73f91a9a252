// The checks themselves: pure functions over what was collected (GPU snapshots,
// kernel-log lines, a sysfs tree), each adding observations and findings to a Report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/health/config.h"
#include "k8sbridge/health/findings.h"
#include "k8sbridge/health/nvml.h"

namespace k8sbridge::health {

// What an XID number means, from NVIDIA's XID catalogue; "" if unknown.
std::string_view XidMeaning(unsigned xid);

// An XID from the kernel log:
// "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus."
struct KernelXid {
  uint64_t sequence = 0;   // /dev/kmsg record number, to resume after it next run
  std::string pci_bus_id;  // "0000:3b:00"
  unsigned xid = 0;
};
// Parses one /dev/kmsg record ("6,1234,5678,-;NVRM: Xid ..."); nullopt if it is not an XID.
std::optional<KernelXid> ParseKmsgXid(std::string_view record);

// GPU checks. `expected_count` comes from config or the node's Gres; `kernel_xids`
// are those logged since the last run.
Report EvaluateGpus(const GpuInventory& inventory, std::optional<unsigned> expected_count,
                    const std::vector<KernelXid>& kernel_xids, const HealthConfig& config);

// InfiniBand ports under config.ib_sysfs_root (<dev>/ports/<n>/{state,phys_state,rate}).
Report CheckIbPorts(const HealthConfig& config);

// Parses a sysfs rate such as "400 Gb/sec (4X NDR)" into Gb/s.
std::optional<double> ParseIbRate(std::string_view rate);

// The number of GPUs a Gres string asks for: "gpu:8", "gpu:h100:8,nic:1" -> 8.
std::optional<unsigned> GpusFromGres(std::string_view gres);

}  // namespace k8sbridge::health
