#include "k8sbridge/health/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/text.h"

namespace k8sbridge::health {
namespace {

constexpr std::string_view kIbPortForm = "expected device[:port][@Gb/s], e.g. mlx5_0:1@400";
using conf::ConfPair;
using conf::KeyEquals;

Status Bad(std::string_view file, int line, const ConfPair& p, std::string_view what) {
  return Status::InvalidArgument(
      fmt::format("{}:{}:{}: {}={}: {}", file, line, p.column, p.key, p.value, what));
}

Result<bool> ParseBool(std::string_view file, int line, const ConfPair& p) {
  auto b = conf::ParseBool(p.value);
  if (!b.ok())
    return Bad(file, line, p, b.status().message());
  return *b;
}

// Integers in decimal or 0x hex; fractions not below 0.
template <typename T>
Result<T> ReadNumber(std::string_view value) {
  if constexpr (std::is_integral_v<T>) {
    if (value.starts_with("0x") || value.starts_with("0X")) {
      return text::ParseInt<T>(value.substr(2), std::numeric_limits<T>::min(),
                               std::numeric_limits<T>::max(), 16);
    }
    return text::ParseInt<T>(value);
  } else {
    return text::ParseDouble(value, 0);
  }
}

template <typename T>
Result<T> ParseNumber(std::string_view file, int line, const ConfPair& p, std::string_view what) {
  auto value = ReadNumber<T>(p.value);
  if (!value.ok())
    return Bad(file, line, p, what);
  return value;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view file, int line,
                                                const ConfPair& p) {
  auto d = text::ParseDuration(p.value);
  if (!d.ok())
    return Bad(file, line, p, d.status().message());
  return *d;
}

template <typename T>
std::vector<T> SplitList(std::string_view v) {
  std::vector<T> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t comma = v.find(',', start);
    if (comma == std::string_view::npos)
      comma = v.size();
    if (comma > start)
      out.emplace_back(v.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

const std::vector<std::string_view>& HealthKeys() {
  static const std::vector<std::string_view> keys = {"CheckGpus",
                                                     "CheckXid",
                                                     "CheckEcc",
                                                     "CheckRetiredPages",
                                                     "CheckRowRemap",
                                                     "CheckNvlink",
                                                     "CheckThrottle",
                                                     "CheckPcie",
                                                     "CheckIb",
                                                     "NvmlLibrary",
                                                     "GpuCount",
                                                     "XidDrain",
                                                     "EccUncorrectedMax",
                                                     "ThrottleDrainMask",
                                                     "PcieMinWidth",
                                                     "PcieMinGeneration",
                                                     "KmsgPath",
                                                     "XidEventWait",
                                                     "IbSysfsRoot",
                                                     "IbPort",
                                                     "JailPath",
                                                     "MinFreeGiB",
                                                     "CheckTimeout",
                                                     "TotalTimeout",
                                                     "ResumeAfterCleanRuns",
                                                     "StateDir",
                                                     "KubePublish",
                                                     "Kubeconfig",
                                                     "KubeNode",
                                                     "KubeConditionType",
                                                     "KubeTimeout"};
  return keys;
}

namespace {

// The on/off keys' fields; nullptr for any other key.
bool* FlagField(HealthConfig& c, std::string_view key) {
  if (KeyEquals(key, "CheckGpus"))
    return &c.check_gpus;
  if (KeyEquals(key, "CheckXid"))
    return &c.check_xid;
  if (KeyEquals(key, "CheckEcc"))
    return &c.check_ecc;
  if (KeyEquals(key, "CheckRetiredPages"))
    return &c.check_retired_pages;
  if (KeyEquals(key, "CheckRowRemap"))
    return &c.check_row_remap;
  if (KeyEquals(key, "CheckNvlink"))
    return &c.check_nvlink;
  if (KeyEquals(key, "CheckThrottle"))
    return &c.check_throttle;
  if (KeyEquals(key, "CheckPcie"))
    return &c.check_pcie;
  if (KeyEquals(key, "CheckIb"))
    return &c.check_ib;
  if (KeyEquals(key, "KubePublish"))
    return &c.kube_publish;
  return nullptr;
}

// The keys whose value is taken as written; nullptr for any other key.
std::string* TextField(HealthConfig& c, std::string_view key) {
  if (KeyEquals(key, "NvmlLibrary"))
    return &c.nvml_library;
  if (KeyEquals(key, "KmsgPath"))
    return &c.kmsg_path;
  if (KeyEquals(key, "IbSysfsRoot"))
    return &c.ib_sysfs_root;
  if (KeyEquals(key, "JailPath"))
    return &c.jail_path;
  if (KeyEquals(key, "StateDir"))
    return &c.state_dir;
  if (KeyEquals(key, "Kubeconfig"))
    return &c.kubeconfig;
  if (KeyEquals(key, "KubeNode"))
    return &c.kube_node;
  return nullptr;
}

// Field is T or std::optional<T>.
template <typename T, typename Field>
Status SetNumber(Field& out, std::string_view file, int line, const ConfPair& p,
                 std::string_view what) {
  auto v = ParseNumber<T>(file, line, p, what);
  if (!v.ok())
    return v.status();
  out = *v;
  return Status::Ok();
}

// The count and bitmask keys; nullopt for any other key.
std::optional<Status> ApplyNumberKey(HealthConfig& c, std::string_view file, int n,
                                     const ConfPair& p) {
  if (KeyEquals(p.key, "GpuCount"))
    return SetNumber<unsigned>(c.gpu_count, file, n, p, "expected a number of GPUs");
  if (KeyEquals(p.key, "EccUncorrectedMax"))
    return SetNumber<unsigned long long>(c.ecc_uncorrected_max, file, n, p, "expected a count");
  if (KeyEquals(p.key, "ThrottleDrainMask"))
    return SetNumber<unsigned long long>(c.throttle_drain_mask, file, n, p,
                                         "expected an NVML clocks-event bitmask such as 0xc8");
  if (KeyEquals(p.key, "PcieMinWidth"))
    return SetNumber<unsigned>(c.pcie_min_width, file, n, p, "expected a lane count such as 16");
  if (KeyEquals(p.key, "PcieMinGeneration"))
    return SetNumber<unsigned>(c.pcie_min_generation, file, n, p,
                               "expected a PCIe generation such as 4");
  if (KeyEquals(p.key, "ResumeAfterCleanRuns")) {
    auto v = ParseNumber<unsigned>(file, n, p, "expected a number of runs (1 or more)");
    if (!v.ok())
      return v.status();
    if (*v == 0)
      return Bad(file, n, p, "expected a number of runs (1 or more)");
    c.resume_after_clean_runs = *v;
    return Status::Ok();
  }
  return std::nullopt;
}

// The duration keys; nullopt for any other key.
std::optional<Status> ApplyDurationKey(HealthConfig& c, std::string_view file, int n,
                                       const ConfPair& p) {
  const bool known = KeyEquals(p.key, "KubeTimeout") || KeyEquals(p.key, "XidEventWait") ||
                     KeyEquals(p.key, "CheckTimeout") || KeyEquals(p.key, "TotalTimeout");
  if (!known)
    return std::nullopt;
  auto v = ParseDuration(file, n, p);
  if (!v.ok())
    return v.status();
  if (KeyEquals(p.key, "KubeTimeout")) {
    c.kube_timeout = *v;
  } else if (KeyEquals(p.key, "XidEventWait")) {
    c.xid_event_wait_ms = static_cast<unsigned>(v->count());
  } else if (KeyEquals(p.key, "CheckTimeout")) {
    c.check_timeout = *v;
  } else {
    if (*v > std::chrono::seconds(55))
      return Bad(file, n, p,
                 "must stay under Slurm's 60 s limit for HealthCheckProgram (use 55s or less)");
    c.total_timeout = *v;
  }
  return Status::Ok();
}

Status ParseXidDrain(HealthConfig& c, std::string_view file, int n, const ConfPair& p) {
  c.xid_drain.clear();
  for (const std::string& x : SplitList<std::string>(p.value)) {
    ConfPair one{p.key, x, p.column};
    auto v = ParseNumber<unsigned>(file, n, one, "expected a comma-separated list of XID numbers");
    if (!v.ok())
      return v.status();
    c.xid_drain.insert(*v);
  }
  return Status::Ok();
}

// IbPort=mlx5_0[:1][@400]  (device, optional port, optional minimum Gb/s)
Status ParseIbPort(HealthConfig& c, std::string_view file, int n, const ConfPair& p) {
  IbPortExpectation e;
  std::string_view v = p.value;
  if (auto at = v.find('@'); at != std::string_view::npos) {
    ConfPair rate{p.key, std::string(v.substr(at + 1)), p.column};
    auto r = ParseNumber<double>(file, n, rate, "");
    if (!r.ok())
      return Bad(file, n, p, kIbPortForm);
    e.min_rate_gbps = *r;
    v = v.substr(0, at);
  }
  if (auto colon = v.find(':'); colon != std::string_view::npos) {
    ConfPair port{p.key, std::string(v.substr(colon + 1)), p.column};
    auto pn = ParseNumber<unsigned>(file, n, port, "");
    if (!pn.ok())
      return Bad(file, n, p, kIbPortForm);
    e.port = *pn;
    v = v.substr(0, colon);
  }
  if (v.empty())
    return Bad(file, n, p, kIbPortForm);
  e.device = v;
  c.ib_ports.push_back(e);
  return Status::Ok();
}

// MinFreeGiB=/path:10
Status ParseMinFreeGiB(HealthConfig& c, std::string_view file, int n, const ConfPair& p) {
  auto colon = p.value.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return Bad(file, n, p, "expected path:GiB, e.g. /tmp:10");
  ConfPair gib{p.key, p.value.substr(colon + 1), p.column};
  auto g = ParseNumber<double>(file, n, gib, "");
  if (!g.ok())
    return Bad(file, n, p, "expected path:GiB, e.g. /tmp:10");
  c.min_free_gib.emplace_back(p.value.substr(0, colon), *g);
  return Status::Ok();
}

Status ApplyHealthKey(HealthConfig& c, std::string_view file, int n, const ConfPair& p) {
  if (bool* flag = FlagField(c, p.key)) {
    auto b = ParseBool(file, n, p);
    if (!b.ok())
      return b.status();
    *flag = *b;
    return Status::Ok();
  }
  if (std::string* text = TextField(c, p.key)) {
    *text = p.value;
    return Status::Ok();
  }
  if (auto number = ApplyNumberKey(c, file, n, p))
    return *number;
  if (auto duration = ApplyDurationKey(c, file, n, p))
    return *duration;
  if (KeyEquals(p.key, "KubeConditionType")) {
    if (p.value.empty() || p.value.find_first_of(" /=") != std::string::npos)
      return Bad(file, n, p, "expected a condition type such as K8sbridgeHealthProblem");
    c.kube_condition_type = p.value;
    return Status::Ok();
  }
  if (KeyEquals(p.key, "XidDrain"))
    return ParseXidDrain(c, file, n, p);
  if (KeyEquals(p.key, "IbPort"))
    return ParseIbPort(c, file, n, p);
  if (KeyEquals(p.key, "MinFreeGiB"))
    return ParseMinFreeGiB(c, file, n, p);
  std::string hint = conf::ClosestMatch(p.key, HealthKeys());
  return Status::InvalidArgument(
      fmt::format("{}:{}:{}: unknown key '{}'{}; docs/health.md lists the keys", file, n, p.column,
                  p.key, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
}

}  // namespace

Result<HealthConfig> ParseHealthConfig(std::string_view text, std::string_view file) {
  auto lines = conf::LexConf(text, file);
  if (!lines.ok())
    return lines.status();
  HealthConfig c;
  c.file = file;
  for (const auto& line : *lines) {
    for (const ConfPair& p : line.pairs) {
      Status s = ApplyHealthKey(c, file, line.line, p);
      if (!s.ok())
        return s;
    }
  }
  return c;
}

Result<HealthConfig> LoadHealthConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(fmt::format(
        "cannot read {}: {}; create it (see conf-templates/k8sbridge-health.conf) or pass --config",
        path, std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseHealthConfig(ss.str(), path);
}

}  // namespace k8sbridge::health
