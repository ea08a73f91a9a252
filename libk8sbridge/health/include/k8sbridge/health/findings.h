// What the health checks found, and how a finding becomes a Slurm drain reason.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k8sbridge::health {

// How a finding drains the node. Hardware findings get Slurm's "[hardware]" reason
// tag, which the sync daemon turns into a cordon and taint of the Kubernetes node
// (docs/sync.md), so only what the machine needs repaired for may carry it.
enum class Severity {
  kHardware,  // GPUs, NVLink, PCIe, InfiniBand; NVML hanging or failing on a loaded driver
  kNode,      // the node's setup: the jail, free space, NVML that cannot be loaded or started
};

struct Finding {
  std::string check;    // "gpu.xid", "ib.port", "jail", ...
  std::string subject;  // "GPU 3", "mlx5_0 port 1", "/jail"
  std::string message;  // "XID 79 (GPU has fallen off the bus)"
  Severity severity = Severity::kHardware;
};

// One line of the diagnostic report: every check, with its value and verdict.
struct Observation {
  std::string check;
  std::string subject;
  std::string value;
  bool ok = true;
};

struct Report {
  std::vector<Observation> observations;
  std::vector<Finding> findings;

  void Pass(std::string check, std::string subject, std::string value);
  void Fail(std::string check, std::string subject, std::string value, std::string message,
            Severity severity = Severity::kHardware);
  void Merge(Report other);
};

// "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)"; with
// several findings the first (hardware before node) leads and the rest are counted.
std::string DrainReason(const std::vector<Finding>& findings);

// True for reasons DrainReason() made: only those may k8sbridge-health clear.
bool IsOwnReason(std::string_view reason);

}  // namespace k8sbridge::health
