#include "k8sbridge/health/nvml.h"

#include <dlfcn.h>

#include <array>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "k8sbridge/kube/object.h"

namespace k8sbridge::health {
namespace {

// The slice of NVML's stable C ABI that the checks use (nvml.h, driver >= 470).
using nvmlReturn_t = int;
using nvmlDevice_t = struct NvmlDeviceOpaque*;
using nvmlEventSet_t = struct NvmlEventSetOpaque*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kTimeout = 10;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr unsigned kMaxNvLinks = 18;
constexpr unsigned long long kEventXidCritical = 0x8;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;

struct nvmlPciInfo_t {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_count)(unsigned*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*get_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*get_retired_pending)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*get_remapped)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*get_nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*get_throttle)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*get_pcie_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_pcie_max_width)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_pcie_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*get_pcie_max_gen)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;

  ~Nvml() {
    if (handle)
      dlclose(handle);
  }
  std::string Error(nvmlReturn_t rc) const {
    const char* s = error_string ? error_string(rc) : nullptr;
    return s ? fmt::format("{} ({})", s, rc) : fmt::format("NVML error {}", rc);
  }
};

template <typename Fn>
bool Bind(void* handle, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

// Tries the versioned name first, as libnvidia-ml exports both.
template <typename Fn>
bool BindEither(void* handle, Fn& fn, const char* versioned, const char* plain) {
  return Bind(handle, fn, versioned) || Bind(handle, fn, plain);
}

Status BindAll(Nvml& n) {
  bool ok = BindEither(n.handle, n.init, "nvmlInit_v2", "nvmlInit") &&
            Bind(n.handle, n.shutdown, "nvmlShutdown") &&
            Bind(n.handle, n.error_string, "nvmlErrorString") &&
            BindEither(n.handle, n.get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount") &&
            BindEither(n.handle, n.get_handle, "nvmlDeviceGetHandleByIndex_v2",
                       "nvmlDeviceGetHandleByIndex");
  if (!ok)
    return Status::InvalidArgument(fmt::format("NVML library lacks basic symbols: {}", dlerror()));
  // Optional: older drivers or other GPUs lack some; a missing one means "not checked".
  Bind(n.handle, n.get_name, "nvmlDeviceGetName");
  Bind(n.handle, n.get_uuid, "nvmlDeviceGetUUID");
  BindEither(n.handle, n.get_pci, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
  Bind(n.handle, n.get_ecc, "nvmlDeviceGetTotalEccErrors");
  Bind(n.handle, n.get_retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  Bind(n.handle, n.get_remapped, "nvmlDeviceGetRemappedRows");
  Bind(n.handle, n.get_nvlink_state, "nvmlDeviceGetNvLinkState");
  BindEither(n.handle, n.get_throttle, "nvmlDeviceGetCurrentClocksEventReasons",
             "nvmlDeviceGetCurrentClocksThrottleReasons");
  Bind(n.handle, n.get_pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  Bind(n.handle, n.get_pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
  Bind(n.handle, n.get_pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  Bind(n.handle, n.get_pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
  Bind(n.handle, n.event_set_create, "nvmlEventSetCreate");
  Bind(n.handle, n.register_events, "nvmlDeviceRegisterEvents");
  BindEither(n.handle, n.event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
  Bind(n.handle, n.event_set_free, "nvmlEventSetFree");
  return Status::Ok();
}

// Marks the GPU lost when a call says so; true if the value is usable.
bool Check(nvmlReturn_t rc, GpuSnapshot& gpu, const char* call) {
  if (rc == kGpuIsLost && !gpu.lost) {
    gpu.lost = true;
    gpu.lost_detail = call;
  }
  return rc == kSuccess;
}

void ReadGpu(const Nvml& n, nvmlDevice_t dev, GpuSnapshot& gpu, const ProgressFn& progress) {
  auto step = [&](const char* call) { progress(fmt::format("{} on GPU {}", call, gpu.index)); };
  char buf[96] = {};
  if (n.get_name) {
    step("nvmlDeviceGetName");
    if (Check(n.get_name(dev, buf, sizeof buf), gpu, "nvmlDeviceGetName"))
      gpu.name = buf;
  }
  if (n.get_uuid) {
    step("nvmlDeviceGetUUID");
    if (Check(n.get_uuid(dev, buf, sizeof buf), gpu, "nvmlDeviceGetUUID"))
      gpu.uuid = buf;
  }
  if (n.get_pci) {
    step("nvmlDeviceGetPciInfo");
    nvmlPciInfo_t pci{};
    if (Check(n.get_pci(dev, &pci), gpu, "nvmlDeviceGetPciInfo"))
      gpu.pci_bus_id = fmt::format("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
  }
  if (gpu.lost)
    return;
  if (n.get_ecc) {
    step("nvmlDeviceGetTotalEccErrors");
    unsigned long long count = 0;
    if (Check(n.get_ecc(dev, kMemoryErrorUncorrected, kVolatileEcc, &count), gpu,
              "nvmlDeviceGetTotalEccErrors"))
      gpu.ecc_uncorrected_volatile = count;
  }
  if (n.get_retired_pending) {
    step("nvmlDeviceGetRetiredPagesPendingStatus");
    int pending = 0;
    if (Check(n.get_retired_pending(dev, &pending), gpu, "nvmlDeviceGetRetiredPagesPendingStatus"))
      gpu.retired_pages_pending = pending != 0;
  }
  if (n.get_remapped) {
    step("nvmlDeviceGetRemappedRows");
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (Check(n.get_remapped(dev, &corr, &unc, &pending, &failure), gpu,
              "nvmlDeviceGetRemappedRows")) {
      gpu.remap_pending = pending != 0;
      gpu.remap_failure = failure != 0;
      gpu.remapped_rows_uncorrectable = unc;
    }
  }
  if (n.get_nvlink_state) {
    for (unsigned link = 0; link < kMaxNvLinks; ++link) {
      step("nvmlDeviceGetNvLinkState");
      int active = 0;
      nvmlReturn_t rc = n.get_nvlink_state(dev, link, &active);
      if (rc == kNotSupported || rc == kInvalidArgument)
        break;  // no such link
      if (!Check(rc, gpu, "nvmlDeviceGetNvLinkState"))
        break;
      gpu.nvlink_active.push_back(active != 0);
    }
  }
  if (n.get_throttle) {
    step("nvmlDeviceGetCurrentClocksEventReasons");
    unsigned long long reasons = 0;
    if (Check(n.get_throttle(dev, &reasons), gpu, "nvmlDeviceGetCurrentClocksEventReasons"))
      gpu.throttle_reasons = reasons;
  }
  if (n.get_pcie_width && n.get_pcie_max_width && n.get_pcie_gen && n.get_pcie_max_gen) {
    step("nvmlDeviceGetCurrPcieLinkWidth");
    PcieLink link;
    bool ok =
        Check(n.get_pcie_width(dev, &link.width), gpu, "nvmlDeviceGetCurrPcieLinkWidth") &&
        Check(n.get_pcie_max_width(dev, &link.max_width), gpu, "nvmlDeviceGetMaxPcieLinkWidth") &&
        Check(n.get_pcie_gen(dev, &link.generation), gpu, "nvmlDeviceGetCurrPcieLinkGeneration") &&
        Check(n.get_pcie_max_gen(dev, &link.max_generation), gpu,
              "nvmlDeviceGetMaxPcieLinkGeneration");
    if (ok)
      gpu.pcie = link;
  }
}

void WaitForXids(const Nvml& n, std::vector<std::pair<nvmlDevice_t, GpuSnapshot*>>& devices,
                 unsigned wait_ms, const ProgressFn& progress) {
  if (!n.event_set_create || !n.register_events || !n.event_set_wait || !n.event_set_free)
    return;
  nvmlEventSet_t set = nullptr;
  if (n.event_set_create(&set) != kSuccess)
    return;
  for (auto& [dev, gpu] : devices) {
    progress(fmt::format("nvmlDeviceRegisterEvents on GPU {}", gpu->index));
    n.register_events(dev, kEventXidCritical, set);
  }
  progress("nvmlEventSetWait");
  for (;;) {
    nvmlEventData_t data{};
    nvmlReturn_t rc = n.event_set_wait(set, &data, wait_ms);
    if (rc != kSuccess)
      break;  // kTimeout: no (more) events
    for (auto& [dev, gpu] : devices) {
      if (dev == data.device)
        gpu->xids.push_back(static_cast<unsigned>(data.event_data));
    }
    wait_ms = 0;  // drain what is queued, then stop
  }
  n.event_set_free(set);
  (void)kTimeout;
}

}  // namespace

Result<GpuInventory> CollectGpus(const std::string& library, unsigned event_wait_ms,
                                 const ProgressFn& progress) {
  GpuInventory inv;
  Nvml n;
  progress(fmt::format("dlopen {}", library));
  n.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n.handle) {
    const char* error = dlerror();
    std::string_view why = error ? error : "unknown error";
    if (why.starts_with(library + ": "))  // dlerror names the file again
      why.remove_prefix(library.size() + 2);
    inv.driver_detail = fmt::format("cannot load {}: {}", library, why);
    return inv;
  }
  if (Status s = BindAll(n); !s.ok()) {
    inv.driver_detail = s.message();
    return inv;
  }
  progress("nvmlInit");
  // A GPU that is lost is the hardware's fault; any other refusal (no driver
  // loaded, no device nodes, no permission) is the node's setup.
  nvmlReturn_t rc = n.init();
  if (rc == kGpuIsLost)
    return Status::Unavailable(fmt::format("nvmlInit failed: {}", n.Error(rc)));
  if (rc != kSuccess) {
    inv.driver_detail = fmt::format("{}: nvmlInit failed: {}", library, n.Error(rc));
    return inv;
  }
  inv.driver_present = true;
  inv.driver_detail = library;
  unsigned count = 0;
  progress("nvmlDeviceGetCount");
  rc = n.get_count(&count);
  if (rc != kSuccess) {
    n.shutdown();
    return Status::Unavailable(fmt::format("nvmlDeviceGetCount failed: {}", n.Error(rc)));
  }
  inv.count = count;
  std::vector<std::pair<nvmlDevice_t, GpuSnapshot*>> devices;
  inv.gpus.resize(count);
  for (unsigned i = 0; i < count; ++i) {
    GpuSnapshot& gpu = inv.gpus[i];
    gpu.index = i;
    nvmlDevice_t dev = nullptr;
    progress(fmt::format("nvmlDeviceGetHandleByIndex on GPU {}", i));
    rc = n.get_handle(i, &dev);
    if (rc != kSuccess) {
      gpu.lost = true;
      gpu.lost_detail = fmt::format("nvmlDeviceGetHandleByIndex: {}", n.Error(rc));
      continue;
    }
    ReadGpu(n, dev, gpu, progress);
    if (!gpu.lost)
      devices.emplace_back(dev, &gpu);
  }
  if (event_wait_ms > 0 && !devices.empty())
    WaitForXids(n, devices, event_wait_ms, progress);
  progress("nvmlShutdown");
  n.shutdown();
  return inv;
}

namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

template <typename T>
void Optional(Writer& w, const char* key, const std::optional<T>& v) {
  if (!v)
    return;
  w.Key(key);
  if constexpr (std::is_same_v<T, bool>)
    w.Bool(*v);
  else
    w.Uint64(*v);
}

}  // namespace

std::string InventoryToJson(const GpuInventory& inv) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("driver_present");
  w.Bool(inv.driver_present);
  w.Key("driver_detail");
  w.String(inv.driver_detail.c_str());
  Optional(w, "count", inv.count);
  w.Key("gpus");
  w.StartArray();
  for (const GpuSnapshot& g : inv.gpus) {
    w.StartObject();
    w.Key("index");
    w.Uint(g.index);
    w.Key("lost");
    w.Bool(g.lost);
    w.Key("lost_detail");
    w.String(g.lost_detail.c_str());
    w.Key("name");
    w.String(g.name.c_str());
    w.Key("uuid");
    w.String(g.uuid.c_str());
    w.Key("pci_bus_id");
    w.String(g.pci_bus_id.c_str());
    Optional(w, "ecc_uncorrected_volatile", g.ecc_uncorrected_volatile);
    Optional(w, "retired_pages_pending", g.retired_pages_pending);
    Optional(w, "remap_pending", g.remap_pending);
    Optional(w, "remap_failure", g.remap_failure);
    Optional(w, "remapped_rows_uncorrectable", g.remapped_rows_uncorrectable);
    w.Key("nvlink_active");
    w.StartArray();
    for (bool a : g.nvlink_active)
      w.Bool(a);
    w.EndArray();
    Optional(w, "throttle_reasons", g.throttle_reasons);
    if (g.pcie) {
      w.Key("pcie");
      w.StartArray();
      for (unsigned v :
           {g.pcie->width, g.pcie->max_width, g.pcie->generation, g.pcie->max_generation})
        w.Uint(v);
      w.EndArray();
    }
    w.Key("xids");
    w.StartArray();
    for (unsigned x : g.xids)
      w.Uint(x);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return sb.GetString();
}

Result<GpuInventory> InventoryFromJson(const std::string& json) {
  rapidjson::Document d;
  d.Parse(json.c_str(), json.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("gpus") || !d["gpus"].IsArray())
    return Status::Internal("the GPU collector sent a malformed inventory");
  auto u64 = [](const rapidjson::Value& o, const char* k) -> std::optional<unsigned long long> {
    if (o.HasMember(k) && o[k].IsUint64())
      return o[k].GetUint64();
    return std::nullopt;
  };
  auto boolean = [](const rapidjson::Value& o, const char* k) -> std::optional<bool> {
    if (o.HasMember(k) && o[k].IsBool())
      return o[k].GetBool();
    return std::nullopt;
  };
  GpuInventory inv;
  inv.driver_present = boolean(d, "driver_present").value_or(false);
  inv.driver_detail = kube::StringMember(&d, "driver_detail");
  if (auto c = u64(d, "count"))
    inv.count = static_cast<unsigned>(*c);
  for (const auto& g : d["gpus"].GetArray()) {
    if (!g.IsObject())
      return Status::Internal("the GPU collector sent a malformed GPU");
    GpuSnapshot s;
    s.index = static_cast<unsigned>(u64(g, "index").value_or(0));
    s.lost = boolean(g, "lost").value_or(false);
    s.lost_detail = kube::StringMember(&g, "lost_detail");
    s.name = kube::StringMember(&g, "name");
    s.uuid = kube::StringMember(&g, "uuid");
    s.pci_bus_id = kube::StringMember(&g, "pci_bus_id");
    s.ecc_uncorrected_volatile = u64(g, "ecc_uncorrected_volatile");
    s.retired_pages_pending = boolean(g, "retired_pages_pending");
    s.remap_pending = boolean(g, "remap_pending");
    s.remap_failure = boolean(g, "remap_failure");
    if (auto v = u64(g, "remapped_rows_uncorrectable"))
      s.remapped_rows_uncorrectable = unsigned(*v);
    if (g.HasMember("nvlink_active") && g["nvlink_active"].IsArray())
      for (const auto& a : g["nvlink_active"].GetArray())
        s.nvlink_active.push_back(a.IsTrue());
    s.throttle_reasons = u64(g, "throttle_reasons");
    if (g.HasMember("pcie") && g["pcie"].IsArray() && g["pcie"].Size() == 4) {
      const auto& p = g["pcie"];
      s.pcie = PcieLink{p[0].GetUint(), p[1].GetUint(), p[2].GetUint(), p[3].GetUint()};
    }
    if (g.HasMember("xids") && g["xids"].IsArray())
      for (const auto& x : g["xids"].GetArray())
        if (x.IsUint())
          s.xids.push_back(x.GetUint());
    inv.gpus.push_back(std::move(s));
  }
  return inv;
}

}  // namespace k8sbridge::health
