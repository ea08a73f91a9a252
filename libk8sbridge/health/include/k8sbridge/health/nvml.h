// NVML, loaded at run time (libnvidia-ml.so.1), so k8sbridge builds and runs
// without the NVIDIA driver and a CPU-only node simply has no GPUs to check.
//
// Collection is separated from judgement: CollectGpus() reads what the driver
// says into plain GpuSnapshot values; EvaluateGpus() (gpu_checks.h) decides.
// Collection may hang inside the driver, so the caller runs it under the watchdog
// (watchdog.h) and reports which call hung from the progress callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::health {

struct PcieLink {
  unsigned width = 0, max_width = 0, generation = 0, max_generation = 0;
};

struct GpuSnapshot {
  unsigned index = 0;
  bool lost = false;                   // fallen off the bus (NVML_ERROR_GPU_IS_LOST)
  std::string lost_detail;             // which call said so
  std::string name, uuid, pci_bus_id;  // pci_bus_id as "0000:3b:00.0"
  std::optional<unsigned long long> ecc_uncorrected_volatile;
  std::optional<bool> retired_pages_pending;
  std::optional<bool> remap_pending;
  std::optional<bool> remap_failure;
  std::optional<unsigned> remapped_rows_uncorrectable;
  std::vector<bool> nvlink_active;  // one entry per link NVML reports; empty = none
  std::optional<unsigned long long> throttle_reasons;  // NVML clocks-event bitmask
  std::optional<PcieLink> pcie;
  std::vector<unsigned> xids;  // XID events seen while collecting
};

struct GpuInventory {
  // false: NVML cannot be used here: the library is missing or is not NVML, or
  // nvmlInit refused (no driver loaded, no device nodes). The node's setup, not
  // its hardware: in a pod, the container runtime did not inject the driver.
  bool driver_present = false;
  std::string driver_detail;  // why not, or the library path
  std::optional<unsigned> count;
  std::vector<GpuSnapshot> gpus;
};

// Reports "about to call <function> on GPU <n>" before every NVML call.
using ProgressFn = std::function<void(const std::string&)>;

// Loads `library` (default "libnvidia-ml.so.1"), initialises NVML and reads every
// GPU. `event_wait_ms` > 0 also listens that long for XID events. NVML that cannot
// be loaded or initialised is not an error: driver_present is false. Other NVML
// failures (a lost GPU at nvmlInit, a failing nvmlDeviceGetCount) are.
Result<GpuInventory> CollectGpus(const std::string& library, unsigned event_wait_ms,
                                 const ProgressFn& progress);

// Clocks-event (throttle) reason bits that mean the hardware is protecting itself.
inline constexpr unsigned long long kThrottleHwSlowdown = 0x8;
inline constexpr unsigned long long kThrottleSwThermal = 0x20;
inline constexpr unsigned long long kThrottleHwThermal = 0x40;
inline constexpr unsigned long long kThrottleHwPowerBrake = 0x80;

// Serialisation for the watchdog's pipe between the collecting child and the parent.
std::string InventoryToJson(const GpuInventory& inventory);
Result<GpuInventory> InventoryFromJson(const std::string& json);

}  // namespace k8sbridge::health
