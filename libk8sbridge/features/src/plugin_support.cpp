#include "k8sbridge/features/plugin_support.h"

#include <charconv>
#include <cstdlib>

#include <unistd.h>

#include <fmt/format.h>

#include "k8sbridge/features/features.h"
#include "k8sbridge/hostlist.h"

namespace k8sbridge::features {

std::string PluginConfigPath(const char* env_value, std::string_view slurm_conf_path) {
  if (env_value && *env_value)
    return env_value;
  std::string_view dir = "/etc/slurm";
  if (auto slash = slurm_conf_path.rfind('/'); slash != std::string_view::npos)
    dir = slurm_conf_path.substr(0, slash);
  return std::string(dir) + "/k8sbridge.conf";
}

Result<conf::BridgeConfig> LoadPluginConfig(const std::string& path) {
  BuiltinHostlists hostlists;
  auto config = conf::LoadBridgeConfig(path, hostlists);
  if (!config.ok())
    return config.status();
  if (config->features.empty() && config->node_features.label_prefix.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: NodeFeaturesPlugins=k8s needs Feature=<name> Selector=<label>=<value> lines or "
        "FeatureLabelPrefix=: without them no label would ever become a feature",
        path));
  }
  return config;
}

std::vector<std::pair<std::string, std::string>> PluginSettings(const conf::BridgeConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("K8sbridgeConf", c.file);
  for (const conf::FeatureMapping& m : c.features)
    out.emplace_back("Feature", fmt::format("{} Selector={}", m.feature, SelectorText(m.selector)));
  out.emplace_back("FeatureLabelPrefix",
                   c.node_features.label_prefix.empty() ? "(none)" : c.node_features.label_prefix);
  out.emplace_back("FeatureLabelTimeout",
                   fmt::format("{}ms", c.node_features.label_timeout.count()));
  out.emplace_back("FeatureCacheFile", c.node_features.cache_file.empty()
                                           ? "<SlurmdSpoolDir>/k8sbridge-labels.json"
                                           : c.node_features.cache_file);
  std::string api = c.kube.in_cluster            ? "InCluster"
                    : !c.kube.kubeconfig.empty() ? "Kubeconfig=" + c.kube.kubeconfig
                                                 : "$KUBECONFIG or ~/.kube/config";
  out.emplace_back("Kubernetes", api);
  return out;
}

std::optional<std::string> SlurmdFeatures(const conf::BridgeConfig& config,
                                          std::string_view host_node, kube::Client& client,
                                          LabelCache& cache, Logger& log) {
  LabelRead read =
      ReadNodeLabels(client, host_node, config.node_features.label_timeout, cache, log);
  if (read.source == LabelRead::Source::kNone)
    return std::nullopt;
  NodeFeatures features = FeaturesFromLabels(config, read.labels);
  for (const std::string& skipped : features.skipped)
    log.Debug("label {} gives no feature", skipped);
  std::string joined = JoinFeatures(features.All());
  log.Info("Kubernetes node {} gives features '{}' (from the {})", host_node, joined,
           read.source == LabelRead::Source::kApi ? "API" : "cache");
  return joined;
}

std::optional<std::string> SlurmdFeatures(const conf::BridgeConfig& config,
                                          const SlurmdIdentity& who, Logger& log) {
  if (who.host_node.empty()) {
    log.Info(
        "K8SBRIDGE_HOST_NODE is not set (slurmd is not in a k8sbridge worker pod): reporting no "
        "Kubernetes features; slurm.conf's features stay");
    return std::nullopt;
  }
  FileLabelCache cache(LabelCachePath(config, who.spool_dir, who.slurm_node));
  auto client = MakeLabelClient(config, log);
  if (!client.ok()) {
    LabelRead read = ReadCachedLabels(who.host_node, client.status().message(), cache, log);
    if (read.source == LabelRead::Source::kNone)
      return std::nullopt;
    return JoinFeatures(FeaturesFromLabels(config, read.labels).All());
  }
  return SlurmdFeatures(config, who.host_node, **client, cache, log);
}

std::string SlurmVersionText(uint32_t v) {
  return fmt::format("{}.{:02}.{}", (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
}

std::optional<uint32_t> ParseSlurmVersionLine(std::string_view line) {
  auto space = line.find(' ');
  if (space == std::string_view::npos)
    return std::nullopt;
  line.remove_prefix(space + 1);
  uint32_t parts[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), parts[i]);
    if (ec != std::errc() || parts[i] > 255)
      return std::nullopt;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
    if (i < 2) {
      if (line.empty() || line.front() != '.')
        return std::nullopt;
      line.remove_prefix(1);
    }
  }
  return (parts[0] << 16) | (parts[1] << 8) | parts[2];
}

std::optional<std::string> VersionSkewMessage(uint32_t built_for, uint32_t running) {
  if (built_for == running)
    return std::nullopt;
  return fmt::format(
      "node_features/k8s was built for Slurm {} but this daemon is Slurm {}: Slurm refuses a "
      "plugin of another version; rebuild k8sbridge against Slurm {} (meson -Dslurm_prefix= "
      "-Dslurm_src=)",
      SlurmVersionText(built_for), SlurmVersionText(running), SlurmVersionText(running));
}

}  // namespace k8sbridge::features
