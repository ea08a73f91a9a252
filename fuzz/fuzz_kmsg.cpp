// libFuzzer target: /dev/kmsg records, which carry text any driver or module (and,
// through /dev/kmsg writes, any root process; through a segfault line, any program's
// name) put in the kernel log. Each line is one record; an XID found must name a
// canonical bus id (never an empty one, which would match every GPU), and the XIDs
// are then judged against one GPU, as a health run does.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "k8sbridge/health/checks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view records(reinterpret_cast<const char*>(data), size);
  std::vector<k8sbridge::health::KernelXid> xids;
  while (!records.empty()) {
    size_t end = records.find('\n');
    if (auto xid = k8sbridge::health::ParseKmsgXid(records.substr(0, end))) {
      if (k8sbridge::health::CanonicalPciBusId(xid->pci_bus_id) != xid->pci_bus_id)
        __builtin_trap();
      xids.push_back(*xid);
    }
    records.remove_prefix(end == std::string_view::npos ? records.size() : end + 1);
  }
  k8sbridge::health::GpuInventory inventory;
  inventory.driver_present = true;
  inventory.count = 1;
  inventory.gpus.push_back({.index = 0, .pci_bus_id = "0000:3b:00.0"});
  k8sbridge::health::HealthConfig config;
  (void)k8sbridge::health::EvaluateGpus(inventory, 1, xids, config);
  return 0;
}
