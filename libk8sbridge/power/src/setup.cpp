#include "k8sbridge/power/setup.h"

#include <fmt/format.h>

namespace k8sbridge::power {

Result<std::pair<const conf::NodeGroup*, const PodTemplate*>> PowerSetup::For(
    std::string_view node) const {
  const conf::NodeGroup* group = config.GroupOf(node);
  if (!group) {
    return Status::NotFound(
        fmt::format("node {} is in no NodeGroup of {}: add it to the Nodes= of a NodeGroup line",
                    node, config.file));
  }
  auto it = templates.find(group->name);
  if (it == templates.end()) {
    return Status::Internal(fmt::format("no pod template loaded for node group {}", group->name));
  }
  return std::make_pair(group, &it->second);
}

Result<PowerSetup> LoadPowerSetup(conf::BridgeConfig config) {
  if (config.node_groups.empty()) {
    return Status::InvalidArgument(fmt::format(
        "{}: no NodeGroup lines: add NodeGroup=<name> Nodes=<hostlist> PodTemplate=<file> for "
        "the CLOUD nodes k8sbridge should run as pods",
        config.file));
  }
  PowerSetup setup;
  // Groups often share one template: read each file once.
  std::map<std::string, PodTemplate> by_path;
  for (const conf::NodeGroup& group : config.node_groups) {
    auto it = by_path.find(group.pod_template);
    if (it == by_path.end()) {
      auto loaded = LoadPodTemplate(group.pod_template);
      if (!loaded.ok()) {
        return loaded.status().WithContext(
            fmt::format("{}:{}: NodeGroup={}", config.file, group.line, group.name));
      }
      it = by_path.emplace(group.pod_template, std::move(*loaded)).first;
    }
    setup.templates.emplace(group.name, it->second);
  }
  setup.config = std::move(config);
  return setup;
}

}  // namespace k8sbridge::power
