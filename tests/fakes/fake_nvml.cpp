// A scripted stand-in for libnvidia-ml.so.1, for tests of k8sbridge-health.
//
// The script is JSON, read at nvmlInit from $FAKE_NVML_SCRIPT, else from
// fake-nvml.json beside this library (slurmd runs HealthCheckProgram with an
// empty environment). Per device it scripts what the driver reports:
//   {"devices": [{"name": "NVIDIA H100", "uuid": "GPU-0", "bus": 59,
//                 "lost": false, "lost_in": "nvmlDeviceGetRemappedRows",
//                 "hang_in": "nvmlDeviceGetRemappedRows",
//                 "ecc_uncorrected": 0, "retired_pending": false,
//                 "remap": {"corr": 0, "unc": 0, "pending": false, "failure": false},
//                 "nvlink": [true, true], "throttle": 0,
//                 "pcie": {"width": 16, "max_width": 16, "gen": 5, "max_gen": 5},
//                 "xid_events": [79]}],
//    "init_error": 0}
// Only the symbols k8sbridge-health resolves exist; their signatures follow NVML's.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace {

struct Device {
  rapidjson::Value* spec = nullptr;
  unsigned index = 0;
  size_t next_event = 0;
};

rapidjson::Document g_script;
std::vector<Device> g_devices;
bool g_events_registered = false;

std::string ScriptPath() {
  if (const char* env = std::getenv("FAKE_NVML_SCRIPT"))
    return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ScriptPath), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    return self.substr(0, self.rfind('/') + 1) + "fake-nvml.json";
  }
  return "fake-nvml.json";
}

Device* Dev(void* handle) {
  return static_cast<Device*>(handle);
}

// Scripted failures of one call: hang forever, or report the GPU lost.
int Enter(const Device* d, const char* call) {
  const rapidjson::Value& s = *d->spec;
  if (s.HasMember("hang_in") && std::strcmp(s["hang_in"].GetString(), call) == 0) {
    for (;;)
      pause();
  }
  if (s.HasMember("lost") && s["lost"].GetBool())
    return 15;
  if (s.HasMember("lost_in") && std::strcmp(s["lost_in"].GetString(), call) == 0)
    return 15;
  return 0;
}

unsigned UintOr(const rapidjson::Value& v, const char* key, unsigned dflt) {
  return v.HasMember(key) && v[key].IsUint() ? v[key].GetUint() : dflt;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  std::ifstream in(ScriptPath());
  if (!in)
    return 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  std::stringstream ss;
  ss << in.rdbuf();
  g_script.Parse(ss.str().c_str());
  if (g_script.HasParseError() || !g_script.IsObject())
    return 999;
  if (g_script.HasMember("init_error") && g_script["init_error"].GetInt() != 0)
    return g_script["init_error"].GetInt();
  g_devices.clear();
  if (g_script.HasMember("devices")) {
    unsigned i = 0;
    for (auto& d : g_script["devices"].GetArray())
      g_devices.push_back({&d, i++, 0});
  }
  return 0;
}

int nvmlShutdown() {
  return 0;
}

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0:
      return "Success";
    case 3:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    case 10:
      return "Timeout";
    case 15:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(g_devices.size());
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** handle) {
  if (index >= g_devices.size())
    return 2;
  const rapidjson::Value& s = *g_devices[index].spec;
  if (s.HasMember("lost") && s["lost"].GetBool())
    return 15;
  *handle = &g_devices[index];
  return 0;
}

int nvmlDeviceGetName(void* h, char* name, unsigned len) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetName"))
    return rc;
  const auto& s = *Dev(h)->spec;
  std::snprintf(name, len, "%s", s.HasMember("name") ? s["name"].GetString() : "Fake GPU");
  return 0;
}

int nvmlDeviceGetUUID(void* h, char* uuid, unsigned len) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetUUID"))
    return rc;
  std::snprintf(uuid, len, "GPU-fake-%u", Dev(h)->index);
  return 0;
}

struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

int nvmlDeviceGetPciInfo_v3(void* h, PciInfo* pci) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetPciInfo"))
    return rc;
  std::memset(pci, 0, sizeof *pci);
  pci->bus = UintOr(*Dev(h)->spec, "bus", 0x10 + Dev(h)->index);
  std::snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02X:00.0", pci->bus);
  return 0;
}

int nvmlDeviceGetTotalEccErrors(void* h, int, int, unsigned long long* count) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetTotalEccErrors"))
    return rc;
  *count = UintOr(*Dev(h)->spec, "ecc_uncorrected", 0);
  return 0;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void* h, int* pending) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetRetiredPagesPendingStatus"))
    return rc;
  const auto& s = *Dev(h)->spec;
  *pending = s.HasMember("retired_pending") && s["retired_pending"].GetBool();
  return 0;
}

int nvmlDeviceGetRemappedRows(void* h, unsigned* corr, unsigned* unc, unsigned* pending,
                              unsigned* failure) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetRemappedRows"))
    return rc;
  *corr = *unc = *pending = *failure = 0;
  const auto& s = *Dev(h)->spec;
  if (s.HasMember("remap")) {
    const auto& r = s["remap"];
    *corr = UintOr(r, "corr", 0);
    *unc = UintOr(r, "unc", 0);
    *pending = r.HasMember("pending") && r["pending"].GetBool();
    *failure = r.HasMember("failure") && r["failure"].GetBool();
  }
  return 0;
}

int nvmlDeviceGetNvLinkState(void* h, unsigned link, int* active) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetNvLinkState"))
    return rc;
  const auto& s = *Dev(h)->spec;
  if (!s.HasMember("nvlink") || link >= s["nvlink"].Size())
    return 2;  // no such link
  *active = s["nvlink"][link].GetBool();
  return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void* h, unsigned long long* reasons) {
  if (int rc = Enter(Dev(h), "nvmlDeviceGetCurrentClocksEventReasons"))
    return rc;
  *reasons = UintOr(*Dev(h)->spec, "throttle", 0);
  return 0;
}

namespace {
int Pcie(void* h, const char* call, const char* key, unsigned* out) {
  if (int rc = Enter(Dev(h), call))
    return rc;
  const auto& s = *Dev(h)->spec;
  if (!s.HasMember("pcie"))
    return 3;
  *out = UintOr(s["pcie"], key, 0);
  return 0;
}
}  // namespace

int nvmlDeviceGetCurrPcieLinkWidth(void* h, unsigned* v) {
  return Pcie(h, "nvmlDeviceGetCurrPcieLinkWidth", "width", v);
}
int nvmlDeviceGetMaxPcieLinkWidth(void* h, unsigned* v) {
  return Pcie(h, "nvmlDeviceGetMaxPcieLinkWidth", "max_width", v);
}
int nvmlDeviceGetCurrPcieLinkGeneration(void* h, unsigned* v) {
  return Pcie(h, "nvmlDeviceGetCurrPcieLinkGeneration", "gen", v);
}
int nvmlDeviceGetMaxPcieLinkGeneration(void* h, unsigned* v) {
  return Pcie(h, "nvmlDeviceGetMaxPcieLinkGeneration", "max_gen", v);
}

struct EventData {
  void* device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned gpu_instance_id, compute_instance_id;
};

int nvmlEventSetCreate(void** set) {
  static int token;
  *set = &token;
  return 0;
}

int nvmlDeviceRegisterEvents(void*, unsigned long long, void*) {
  g_events_registered = true;
  return 0;
}

int nvmlEventSetWait_v2(void*, EventData* data, unsigned) {
  if (!g_events_registered)
    return 10;
  for (Device& d : g_devices) {
    const auto& s = *d.spec;
    if (!s.HasMember("xid_events"))
      continue;
    const auto& events = s["xid_events"];
    if (d.next_event < events.Size()) {
      data->device = &d;
      data->event_type = 0x8;
      data->event_data = events[static_cast<rapidjson::SizeType>(d.next_event++)].GetUint();
      return 0;
    }
  }
  return 10;  // NVML_ERROR_TIMEOUT: nothing more
}

int nvmlEventSetFree(void*) {
  return 0;
}

}  // extern "C"
