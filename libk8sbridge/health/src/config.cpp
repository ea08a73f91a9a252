#include "k8sbridge/health/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/text.h"

namespace k8sbridge::health {
namespace {

using conf::At;
using conf::ConfPair;
using conf::Key;
using conf::KeyType;
using conf::Range;
using H = HealthConfig;

// --- Readers and validators of the keys with a syntax of their own. The rows' fix
// words their errors. ---

// IbPort=mlx5_0[:1][@400]  (device, optional port, optional minimum Gb/s)
Status ReadIbPort(std::string_view value, H& c) {
  IbPortExpectation e;
  std::string_view v = value;
  if (auto at = v.find('@'); at != std::string_view::npos) {
    auto rate = text::ParseDouble(v.substr(at + 1), 0);
    if (!rate.ok())
      return rate.status();
    e.min_rate_gbps = *rate;
    v = v.substr(0, at);
  }
  if (auto colon = v.find(':'); colon != std::string_view::npos) {
    auto port = conf::ParseCount<unsigned>(v.substr(colon + 1));
    if (!port.ok())
      return port.status();
    e.port = *port;
    v = v.substr(0, colon);
  }
  if (v.empty())
    return Status::InvalidArgument("no device");
  e.device = v;
  c.ib_ports.push_back(e);
  return Status::Ok();
}

// MinFreeGiB=/path:10
Status ReadMinFreeGiB(std::string_view value, H& c) {
  auto colon = value.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return Status::InvalidArgument("no path:GiB");
  auto gib = text::ParseDouble(value.substr(colon + 1), 0);
  if (!gib.ok())
    return gib.status();
  c.min_free_gib.emplace_back(value.substr(0, colon), *gib);
  return Status::Ok();
}

std::string ConditionTypeError(std::string_view value) {
  return value.empty() || value.find_first_of(" /=") != std::string_view::npos
             ? "not a condition type"
             : "";
}

// One row per key, in the order of docs/health.md.
constexpr Key<H> kHealthKeys[] = {
    // What runs.
    {.name = "CheckGpus",
     .type = KeyType::kBool,
     .field = At<&H::check_gpus>,
     .doc = "run the GPU checks (`gpu.*`) through NVML"},
    {.name = "CheckXid",
     .type = KeyType::kBool,
     .field = At<&H::check_xid>,
     .doc = "`gpu.xid`: read XIDs from the kernel log and drain on those in `XidDrain`"},
    {.name = "CheckEcc",
     .type = KeyType::kBool,
     .field = At<&H::check_ecc>,
     .doc = "`gpu.ecc`: volatile uncorrectable ECC errors"},
    {.name = "CheckRetiredPages",
     .type = KeyType::kBool,
     .field = At<&H::check_retired_pages>,
     .doc = "`gpu.retired_pages`: retired pages pending"},
    {.name = "CheckRowRemap",
     .type = KeyType::kBool,
     .field = At<&H::check_row_remap>,
     .doc = "`gpu.row_remap`: row-remapping failures and pending remaps"},
    {.name = "CheckNvlink",
     .type = KeyType::kBool,
     .field = At<&H::check_nvlink>,
     .doc = "`gpu.nvlink`: NVLinks that are not active"},
    {.name = "CheckThrottle",
     .type = KeyType::kBool,
     .field = At<&H::check_throttle>,
     .doc = "`gpu.throttle`: clocks-event reasons in `ThrottleDrainMask`"},
    {.name = "CheckPcie",
     .type = KeyType::kBool,
     .field = At<&H::check_pcie>,
     .doc = "`gpu.pcie`: PCIe link width and generation"},
    {.name = "CheckIb",
     .type = KeyType::kBool,
     .field = At<&H::check_ib>,
     .doc = "`ib.port`: the InfiniBand ports"},
    // GPUs.
    {.name = "NvmlLibrary",
     .type = KeyType::kString,
     .field = At<&H::nvml_library>,
     .doc = "the NVML library, loaded at run time (no build-time dependency on the driver)"},
    {.name = "GpuCount",
     .type = KeyType::kCount,
     .field = At<&H::gpu_count>,
     .doc = "GPUs NVML must see",
     .fix = "expected a number of GPUs",
     .default_doc = "the node's `Gres=gpu:N`"},
    {.name = "XidDrain",
     .type = KeyType::kCountSet,
     .field = At<&H::xid_drain>,
     .doc = "the XIDs that drain, comma-separated; the last `XidDrain=` holds",
     .fix = "expected a comma-separated list of XID numbers"},
    {.name = "EccUncorrectedMax",
     .type = KeyType::kCount,
     .field = At<&H::ecc_uncorrected_max>,
     .doc = "volatile uncorrectable ECC errors a GPU may have; more drain",
     .fix = "expected a count"},
    {.name = "ThrottleDrainMask",
     .type = KeyType::kBitmask,
     .field = At<&H::throttle_drain_mask>,
     .doc = "NVML clocks-event bits that drain (0x8 HW slowdown, 0x40 HW thermal, 0x80 power "
            "brake)",
     .fix = "expected an NVML clocks-event bitmask such as 0xc8"},
    {.name = "PcieMinWidth",
     .type = KeyType::kCount,
     .field = At<&H::pcie_min_width>,
     .doc = "PCIe lanes a GPU's link must have",
     .fix = "expected a lane count such as 16",
     .default_doc = "the device's maximum"},
    {.name = "PcieMinGeneration",
     .type = KeyType::kCount,
     .field = At<&H::pcie_min_generation>,
     .doc = "PCIe generation a GPU's link must have; unset, not checked (links downshift when "
            "idle)",
     .fix = "expected a PCIe generation such as 4"},
    {.name = "KmsgPath",
     .type = KeyType::kString,
     .field = At<&H::kmsg_path>,
     .doc = "the kernel log the XIDs since the last run are read from"},
    {.name = "XidEventWait",
     .type = KeyType::kDuration,
     .field = At<&H::xid_event_wait>,
     .doc = "also listen this long for NVML XID events; unset, not at all",
     .default_doc = "—"},
    // Fabric and node.
    {.name = "IbSysfsRoot",
     .type = KeyType::kString,
     .field = At<&H::ib_sysfs_root>,
     .doc = "where the InfiniBand devices' ports are read"},
    {.name = "IbPort",
     .type = KeyType::kCustom,
     .field = ReadIbPort,
     .doc = "a port that must be ACTIVE and LinkUp, and at least at that rate; `*` for every "
            "device, no port for every port; repeatable",
     .fix = "expected device[:port][@Gb/s], e.g. mlx5_0:1@400",
     .default_doc = "every port found",
     .syntax = "dev[:port][@Gb/s]"},
    {.name = "JailPath",
     .type = KeyType::kString,
     .field = At<&H::jail_path>,
     .doc = "the jail that must be a mount point and answer a listing in time; unset, not checked"},
    {.name = "MinFreeGiB",
     .type = KeyType::kCustom,
     .field = ReadMinFreeGiB,
     .doc = "a path that must have that much free space; repeatable",
     .fix = "expected path:GiB, e.g. /tmp:10",
     .syntax = "path:GiB"},
    // Deadlines: Slurm kills the program after 60 s.
    {.name = "CheckTimeout",
     .type = KeyType::kDuration,
     .field = At<&H::check_timeout>,
     .doc = "how long one check may take before it is a finding of its own"},
    {.name = "TotalTimeout",
     .type = KeyType::kDuration,
     .field = At<&H::total_timeout>,
     .doc = "how long the whole run may take; at most 55s",
     .range = Range{1, 55'000},
     .fix = "{error}: it must stay under Slurm's 60 s limit for HealthCheckProgram (use 55s or "
            "less)"},
    // Outcome.
    {.name = "ResumeAfterCleanRuns",
     .type = KeyType::kCount,
     .field = At<&H::resume_after_clean_runs>,
     .doc = "consecutive clean runs before k8sbridge-health resumes a node it drained",
     .range = Range{1, std::numeric_limits<unsigned>::max()},
     .fix = "expected a number of runs (1 or more)"},
    {.name = "StateDir",
     .type = KeyType::kString,
     .field = At<&H::state_dir>,
     .doc = "where the clean runs are counted (`<node>.state`)"},
    // Publishing to Kubernetes.
    {.name = "KubePublish",
     .type = KeyType::kBool,
     .field = At<&H::kube_publish>,
     .doc = "set a condition and record an Event on the Kubernetes node"},
    {.name = "Kubeconfig",
     .type = KeyType::kString,
     .field = At<&H::kubeconfig>,
     .doc = "kubeconfig of the connection; unset: the pod's service account, else `$KUBECONFIG`"},
    {.name = "KubeNode",
     .type = KeyType::kString,
     .field = At<&H::kube_node>,
     .doc = "the Kubernetes node; unset: `$K8SBRIDGE_HOST_NODE` (a worker pod's "
            "`spec.nodeName`)"},
    {.name = "KubeConditionType",
     .type = KeyType::kString,
     .field = At<&H::kube_condition_type>,
     .doc = "the node condition's type",
     .fix = "expected a condition type such as K8sbridgeHealthProblem",
     .validate = ConditionTypeError},
    {.name = "KubeTimeout",
     .type = KeyType::kDuration,
     .field = At<&H::kube_timeout>,
     .doc = "how long publishing may take"},
};

Status ApplyHealthKey(H& c, std::string_view file, int line, const ConfPair& p) {
  const Key<H>* key = conf::FindKey(HealthKeyTable(), p.key);
  if (key == nullptr) {
    std::string hint = conf::ClosestMatch(p.key, HealthKeys());
    return Status::InvalidArgument(fmt::format(
        "{}:{}:{}: unknown key '{}'{}; docs/health.md lists the keys", file, line, p.column, p.key,
        hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
  }
  if (Status s = conf::ApplyKey(*key, p.value, c); !s.ok()) {
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: {}={}: {}", file, line, p.column, p.key, p.value, s.message()));
  }
  return Status::Ok();
}

}  // namespace

std::span<const Key<H>> HealthKeyTable() {
  return kHealthKeys;
}

const std::vector<std::string_view>& HealthKeys() {
  static const auto* keys = new std::vector<std::string_view>(conf::KeyNames(HealthKeyTable()));
  return *keys;
}

std::string HealthKeysMarkdown() {
  return conf::KeysMarkdown(HealthKeyTable());
}

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
