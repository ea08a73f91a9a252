// What node_features/k8s does in slurmctld and slurmd, apart from the Slurm ABI
// (plugins/node_features_k8s/node_features_k8s.cpp only converts strings and calls
// these). docs/features.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/features/label_reader.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::features {

// $K8SBRIDGE_CONF when set (`env_value`), else k8sbridge.conf beside slurm.conf.
std::string PluginConfigPath(const char* env_value, std::string_view slurm_conf_path);

// Loads k8sbridge.conf with the built-in hostlist parser (a plugin must not link
// libslurm again). Errors name the file, line and key (e.g. a Feature= name Slurm
// could not parse), so the daemon's fatal message says what to fix.
Result<conf::BridgeConfig> LoadPluginConfig(const std::string& path);

// The key/value pairs `scontrol show config` lists under node_features/k8s.
std::vector<std::pair<std::string, std::string>> PluginSettings(const conf::BridgeConfig& config);

// Who this slurmd is, from the worker pod's environment.
struct SlurmdIdentity {
  std::string host_node;   // K8SBRIDGE_HOST_NODE: the Kubernetes node (spec.nodeName)
  std::string slurm_node;  // K8SBRIDGE_NODE_NAME, else the host name
  std::string spool_dir;   // SlurmdSpoolDir, may hold %n
};

// The features slurmd registers with (available = active): those the labels of its
// Kubernetes node give, read within FeatureLabelTimeout or from the cache.
// nullopt: report nothing, so slurmctld keeps slurm.conf's features (not in a
// worker pod, or neither the API nor the cache could say).
std::optional<std::string> SlurmdFeatures(const conf::BridgeConfig& config,
                                          std::string_view host_node, kube::Client& client,
                                          LabelCache& cache, Logger& log);
// As above, with the real client and cache file.
std::optional<std::string> SlurmdFeatures(const conf::BridgeConfig& config,
                                          const SlurmdIdentity& who, Logger& log);

// "24.11.5" from Slurm's packed version number (0x180b05).
std::string SlurmVersionText(uint32_t version);
// The running daemon's version from print_slurm_version()'s output ("slurm 24.11.5").
std::optional<uint32_t> ParseSlurmVersionLine(std::string_view line);
// nullopt when `built_for` equals `running`; else the message naming both versions.
std::optional<std::string> VersionSkewMessage(uint32_t built_for, uint32_t running);

}  // namespace k8sbridge::features
