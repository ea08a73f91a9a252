#include "k8sbridge/health/config.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"

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

template <typename T>
Result<T> ParseNumber(std::string_view file, int line, const ConfPair& p, std::string_view what) {
  T value{};
  const char* begin = p.value.data();
  const char* end = begin + p.value.size();
  int base = 10;
  if constexpr (std::is_integral_v<T>) {
    if (p.value.starts_with("0x") || p.value.starts_with("0X")) {
      begin += 2;
      base = 16;
    }
    auto [ptr, ec] = std::from_chars(begin, end, value, base);
    if (ec != std::errc() || ptr != end || begin == end)
      return Bad(file, line, p, what);
  } else {
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || begin == end || value < 0)
      return Bad(file, line, p, what);
  }
  return value;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view file, int line,
                                                const ConfPair& p) {
  auto d = conf::ParseDuration(p.value);
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

Result<HealthConfig> ParseHealthConfig(std::string_view text, std::string_view file) {
  auto lines = conf::LexConf(text, file);
  if (!lines.ok())
    return lines.status();
  HealthConfig c;
  c.file = file;
  for (const auto& line : *lines) {
    for (const ConfPair& p : line.pairs) {
      const int n = line.line;
      auto flag = [&](bool& out) -> Status {
        auto b = ParseBool(file, n, p);
        if (!b.ok())
          return b.status();
        out = *b;
        return Status::Ok();
      };
      Status s;
      if (KeyEquals(p.key, "CheckGpus"))
        s = flag(c.check_gpus);
      else if (KeyEquals(p.key, "CheckXid"))
        s = flag(c.check_xid);
      else if (KeyEquals(p.key, "CheckEcc"))
        s = flag(c.check_ecc);
      else if (KeyEquals(p.key, "CheckRetiredPages"))
        s = flag(c.check_retired_pages);
      else if (KeyEquals(p.key, "CheckRowRemap"))
        s = flag(c.check_row_remap);
      else if (KeyEquals(p.key, "CheckNvlink"))
        s = flag(c.check_nvlink);
      else if (KeyEquals(p.key, "CheckThrottle"))
        s = flag(c.check_throttle);
      else if (KeyEquals(p.key, "CheckPcie"))
        s = flag(c.check_pcie);
      else if (KeyEquals(p.key, "CheckIb"))
        s = flag(c.check_ib);
      else if (KeyEquals(p.key, "NvmlLibrary"))
        c.nvml_library = p.value;
      else if (KeyEquals(p.key, "KmsgPath"))
        c.kmsg_path = p.value;
      else if (KeyEquals(p.key, "IbSysfsRoot"))
        c.ib_sysfs_root = p.value;
      else if (KeyEquals(p.key, "JailPath"))
        c.jail_path = p.value;
      else if (KeyEquals(p.key, "StateDir"))
        c.state_dir = p.value;
      else if (KeyEquals(p.key, "KubePublish"))
        s = flag(c.kube_publish);
      else if (KeyEquals(p.key, "Kubeconfig"))
        c.kubeconfig = p.value;
      else if (KeyEquals(p.key, "KubeNode"))
        c.kube_node = p.value;
      else if (KeyEquals(p.key, "KubeConditionType")) {
        if (p.value.empty() || p.value.find_first_of(" /=") != std::string::npos)
          return Bad(file, n, p, "expected a condition type such as K8sbridgeHealthProblem");
        c.kube_condition_type = p.value;
      } else if (KeyEquals(p.key, "KubeTimeout")) {
        auto v = ParseDuration(file, n, p);
        if (!v.ok())
          return v.status();
        c.kube_timeout = *v;
      } else if (KeyEquals(p.key, "GpuCount")) {
        auto v = ParseNumber<unsigned>(file, n, p, "expected a number of GPUs");
        if (!v.ok())
          return v.status();
        c.gpu_count = *v;
      } else if (KeyEquals(p.key, "XidDrain")) {
        c.xid_drain.clear();
        for (const std::string& x : SplitList<std::string>(p.value)) {
          ConfPair one{p.key, x, p.column};
          auto v =
              ParseNumber<unsigned>(file, n, one, "expected a comma-separated list of XID numbers");
          if (!v.ok())
            return v.status();
          c.xid_drain.insert(*v);
        }
      } else if (KeyEquals(p.key, "EccUncorrectedMax")) {
        auto v = ParseNumber<unsigned long long>(file, n, p, "expected a count");
        if (!v.ok())
          return v.status();
        c.ecc_uncorrected_max = *v;
      } else if (KeyEquals(p.key, "ThrottleDrainMask")) {
        auto v = ParseNumber<unsigned long long>(
            file, n, p, "expected an NVML clocks-event bitmask such as 0xc8");
        if (!v.ok())
          return v.status();
        c.throttle_drain_mask = *v;
      } else if (KeyEquals(p.key, "PcieMinWidth")) {
        auto v = ParseNumber<unsigned>(file, n, p, "expected a lane count such as 16");
        if (!v.ok())
          return v.status();
        c.pcie_min_width = *v;
      } else if (KeyEquals(p.key, "PcieMinGeneration")) {
        auto v = ParseNumber<unsigned>(file, n, p, "expected a PCIe generation such as 4");
        if (!v.ok())
          return v.status();
        c.pcie_min_generation = *v;
      } else if (KeyEquals(p.key, "XidEventWait")) {
        auto v = ParseDuration(file, n, p);
        if (!v.ok())
          return v.status();
        c.xid_event_wait_ms = static_cast<unsigned>(v->count());
      } else if (KeyEquals(p.key, "CheckTimeout")) {
        auto v = ParseDuration(file, n, p);
        if (!v.ok())
          return v.status();
        c.check_timeout = *v;
      } else if (KeyEquals(p.key, "TotalTimeout")) {
        auto v = ParseDuration(file, n, p);
        if (!v.ok())
          return v.status();
        if (*v > std::chrono::seconds(55))
          return Bad(file, n, p,
                     "must stay under Slurm's 60 s limit for HealthCheckProgram (use 55s or less)");
        c.total_timeout = *v;
      } else if (KeyEquals(p.key, "ResumeAfterCleanRuns")) {
        auto v = ParseNumber<unsigned>(file, n, p, "expected a number of runs (1 or more)");
        if (!v.ok())
          return v.status();
        if (*v == 0)
          return Bad(file, n, p, "expected a number of runs (1 or more)");
        c.resume_after_clean_runs = *v;
      } else if (KeyEquals(p.key, "IbPort")) {
        // IbPort=mlx5_0[:1][@400]  (device, optional port, optional minimum Gb/s)
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
      } else if (KeyEquals(p.key, "MinFreeGiB")) {
        // MinFreeGiB=/path:10
        auto colon = p.value.rfind(':');
        if (colon == std::string::npos || colon == 0)
          return Bad(file, n, p, "expected path:GiB, e.g. /tmp:10");
        ConfPair gib{p.key, p.value.substr(colon + 1), p.column};
        auto g = ParseNumber<double>(file, n, gib, "");
        if (!g.ok())
          return Bad(file, n, p, "expected path:GiB, e.g. /tmp:10");
        c.min_free_gib.emplace_back(p.value.substr(0, colon), *g);
      } else {
        std::string hint = conf::ClosestMatch(p.key, HealthKeys());
        return Status::InvalidArgument(fmt::format(
            "{}:{}:{}: unknown key '{}'{}; docs/health.md lists the keys", file, n, p.column, p.key,
            hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
      }
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
