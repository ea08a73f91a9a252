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

// A PCI address as the driver and NVML print it ("0000:3b:00", "00000000:3B:00.0")
// in one spelling, "0000:3b:00": domain (4 to 8 hex digits), bus and device (2
// each); a function (".0") is dropped, as an XID names the device. nullopt for
// anything else, the empty string included, so that a bus id matches only itself.
std::optional<std::string> CanonicalPciBusId(std::string_view bus_id);

// The header of a /dev/kmsg record, "<priority>,<sequence>,<usec>,<flags>[,...];".
struct KmsgHeader {
  unsigned priority = 0;  // facility << 3 | level; facility 0 is the kernel's own
  uint64_t sequence = 0;  // the record number, to resume after it next run
};
std::optional<KmsgHeader> ParseKmsgHeader(std::string_view record);

// An XID the NVIDIA driver logged in the kernel log:
// "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus."
struct KernelXid {
  uint64_t sequence = 0;   // the record's number
  std::string pci_bus_id;  // canonical: "0000:3b:00"
  unsigned xid = 0;
};
// Parses one /dev/kmsg record ("4,1234,5678,-;NVRM: Xid ..."); nullopt unless the
// kernel logged it (user space writes into /dev/kmsg too) and its message starts
// with the driver's marker and a well-formed bus id: a segfault line names the
// program and its file, both chosen by whoever ran it, and must never drain a node.
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
