// node_features/k8s (NodeFeaturesPlugins=k8s): Kubernetes node labels as Slurm node
// features, and k8sbridge.conf's Feature= mappings as changeable features so a pool
// of CLOUD nodes can be resumed into whichever GPU type a job asks for. The
// node_features_p_* symbols of src/interfaces/node_features.c: 17 in 24.11, 13 in
// 26.05 (see the SLURM_VERSION_NUMBER branches); the logic is in
// libk8sbridge/features/. docs/features.md, docs/versions.md.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <unistd.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/features/features.h"
#include "k8sbridge/features/plugin_support.h"
#include "k8sbridge/log.h"

#include "slurm_internals.h"

extern "C" {
#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
}

// A test build sets a different version to check the refusal (skewed/meson.build).
#ifndef K8SBRIDGE_PLUGIN_VERSION
#define K8SBRIDGE_PLUGIN_VERSION SLURM_VERSION_NUMBER
#endif

extern "C" {
extern const char plugin_name[] = "node_features k8s plugin";
extern const char plugin_type[] = "node_features/k8s";
extern const uint32_t plugin_version = K8SBRIDGE_PLUGIN_VERSION;
}

namespace {

namespace kf = k8sbridge::features;
using namespace k8sbridge::slurm_abi;  // Slurm's internals: slurm_internals.h

class SlurmLogger final : public k8sbridge::Logger {
 public:
  void Log(k8sbridge::LogLevel level, std::string_view message) override {
    const std::string text(message);
    switch (level) {
      case k8sbridge::LogLevel::kDebug:
        LogVar(kLogLevelDebug, "%s: %s", plugin_type, text.c_str());
        break;
      case k8sbridge::LogLevel::kInfo:
        LogVar(kLogLevelInfo, "%s: %s", plugin_type, text.c_str());
        break;
      case k8sbridge::LogLevel::kWarning:
        warning("%s: %s", plugin_type, text.c_str());
        break;
      case k8sbridge::LogLevel::kError:
        error("%s: %s", plugin_type, text.c_str());
        break;
    }
  }
};

SlurmLogger g_log;
std::mutex g_mu;
std::unique_ptr<k8sbridge::conf::BridgeConfig> g_config;  // set by init()

char* XstrdupOrNull(const std::string& s) {
  return s.empty() ? nullptr : xstrdup(s.c_str());
}

// Runs when the daemon dlopen()s the plugin, before Slurm's own version check, so a
// refused plugin says which version it was built for and which one it met (Slurm's
// loader names only the plugin's). print_slurm_version() is the daemon's own
// libslurmfull; stdout is swapped for a memory stream around it.
__attribute__((constructor)) void ReportVersionSkew() {
  char* text = nullptr;
  size_t size = 0;
  FILE* memory = open_memstream(&text, &size);
  if (!memory)
    return;
  FILE* saved = stdout;
  stdout = memory;
  print_slurm_version();
  fflush(memory);
  stdout = saved;
  fclose(memory);
  std::string line = text ? std::string(text, size) : "";
  free(text);
  auto running = kf::ParseSlurmVersionLine(line);
  if (!running)
    return;
  if (auto message = kf::VersionSkewMessage(plugin_version, *running))
    error("%s", message->c_str());
}

}  // namespace

extern "C" {

int init(void) {
  const std::string path = kf::PluginConfigPath(std::getenv(k8sbridge::contract::kEnvConf.data()),
                                                slurm_conf.slurm_conf ? slurm_conf.slurm_conf : "");
  auto config = kf::LoadPluginConfig(path);
  if (!config.ok()) {
    error("%s: %s", plugin_type, config.status().message().c_str());
    return SLURM_ERROR;
  }
  std::lock_guard lock(g_mu);
  g_config = std::make_unique<k8sbridge::conf::BridgeConfig>(std::move(*config));
  LogVar(kLogLevelVerbose, "%s: loaded %s: %zu Feature= mappings", plugin_type, path.c_str(),
         g_config->features.size());
  return SLURM_SUCCESS;
}

// Slurm 25.11 made the node_features interface's fini() void.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
void fini(void) {
  std::lock_guard lock(g_mu);
  g_config.reset();
}
#else
int fini(void) {
  std::lock_guard lock(g_mu);
  g_config.reset();
  return SLURM_SUCCESS;
}
#endif

// Reservations ask how long a node takes to "reboot" into features: a new pod.
uint32_t node_features_p_boot_time(void) {
  return slurm_conf.resume_timeout ? slurm_conf.resume_timeout : 300;
}

bool node_features_p_changeable_feature(char* feature) {
  std::lock_guard lock(g_mu);
  return g_config && feature && kf::IsChangeable(*g_config, feature);
}

// Slurm 25.11 removed get_node, node_power, node_update, node_update_valid and
// step_config from the interface; 24.11's loader requires them.
#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(25, 11, 0)
// slurmctld: the features come with each registration; nothing to fetch.
int node_features_p_get_node(char* /*node_list*/) {
  return SLURM_SUCCESS;
}

// Not required: the plugin also serves clusters without power saving, where the
// features simply follow the labels.
bool node_features_p_node_power(void) {
  return false;
}

int node_features_p_node_update(char* /*active_features*/, bitstr_t* /*node_bitmap*/) {
  return SLURM_SUCCESS;
}

// scontrol update and the sync daemon may set features on any node.
bool node_features_p_node_update_valid(void* /*node_ptr*/, update_node_msg_t* /*update*/) {
  return true;
}

void node_features_p_step_config(bool /*mem_sort*/, bitstr_t* /*numa_bitmap*/) {}
#endif

// Slurm 26.05: slurmctld asks whether booting nodes for these features is a reboot
// (REBOOT_ISSUED). A Feature= mapping is a new pod, so it is; plain labels are not.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
bool node_features_p_job_features_need_reboot(char* features) {
  std::lock_guard lock(g_mu);
  return g_config && features && kf::AnyChangeable(*g_config, features);
}
#endif

int node_features_p_job_valid(char* job_features, list_t* /*feature_list*/) {
  std::lock_guard lock(g_mu);
  if (!g_config || !job_features)
    return SLURM_SUCCESS;
  k8sbridge::Status s = kf::ValidateJobFeatures(*g_config, job_features);
  if (s.ok())
    return SLURM_SUCCESS;
  error("%s: %s", plugin_type, s.message().c_str());
  return ESLURM_INVALID_FEATURE;
}

char* node_features_p_job_xlate(char* job_features, list_t* /*feature_list*/,
                                bitstr_t* /*job_node_bitmap*/) {
  std::lock_guard lock(g_mu);
  if (!g_config || !job_features)
    return nullptr;
  return XstrdupOrNull(kf::BootFeatures(*g_config, job_features));
}

// Every node may take any Feature=: power_k8s places its pod accordingly.
bitstr_t* node_features_p_get_node_bitmap(void) {
  return node_conf_get_active_bitmap();
}

int node_features_p_overlap(bitstr_t* active_bitmap) {
  return bit_set_count(active_bitmap);
}

// slurmd, on a reboot request with features (RebootProgram clusters): the hardware
// changes only with a new pod, so it always needs the "reboot".
int node_features_p_node_set(char* /*active_features*/, bool* need_reboot) {
  if (need_reboot)
    *need_reboot = true;
  return SLURM_SUCCESS;
}

// slurmd, at start and reconfigure, before registering: bounded by
// FeatureLabelTimeout (API), then the cache.
void node_features_p_node_state(char** avail_modes, char** current_mode) {
  if (!avail_modes || !current_mode)
    return;
  std::lock_guard lock(g_mu);
  if (!g_config)
    return;
  kf::SlurmdIdentity who;
  if (const char* host = std::getenv(k8sbridge::contract::kEnvHostNode.data()))
    who.host_node = host;
  if (const char* name = std::getenv(k8sbridge::contract::kEnvNodeName.data())) {
    who.slurm_node = name;
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0)
      who.slurm_node = host;
  }
  if (slurm_conf.slurmd_spooldir)
    who.spool_dir = slurm_conf.slurmd_spooldir;
  auto features = kf::SlurmdFeatures(*g_config, who, g_log);
  if (!features)
    return;
  slurm_xfree(reinterpret_cast<void**>(avail_modes));
  slurm_xfree(reinterpret_cast<void**>(current_mode));
  *avail_modes = xstrdup(features->c_str());
  *current_mode = xstrdup(features->c_str());
}

char* node_features_p_node_xlate(char* new_features, char* orig_features, char* /*avail_features*/,
                                 int /*node_inx*/) {
  std::lock_guard lock(g_mu);
  auto changeable = [](std::string_view f) { return g_config && kf::IsChangeable(*g_config, f); };
  const std::string merged = kf::MergeNodeFeatures(new_features ? new_features : "",
                                                   orig_features ? orig_features : "", changeable);
  // A list that names no feature (k8sbridge-power's ",") leaves none active: "",
  // because slurmctld takes a node's available features as active when it registers
  // with NULL.
  if (merged.empty() && new_features && *new_features)
    return xstrdup("");
  return XstrdupOrNull(merged);
}

char* node_features_p_node_xlate2(char* new_features) {
  return xstrdup(new_features);
}

bool node_features_p_user_update(uid_t /*uid*/) {
  return true;
}

// Slurm's type is config_plugin_params_t (src/common/read_config.h).
void node_features_p_get_config(ConfigPluginParams* p) {
  _xstrcat(&p->name, plugin_type);
  std::lock_guard lock(g_mu);
  if (!g_config)
    return;
  for (const auto& [key, value] : kf::PluginSettings(*g_config))
    add_key_pair(p->key_pairs, key.c_str(), "%s", value.c_str());
}

}  // extern "C"
