// Everything the power programs load before touching any pod: k8sbridge.conf and
// the pod template of every node group. A broken file stops them here, with the
// file and the field named, so no pod is created from half a configuration.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/power/pod_template.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

struct PowerSetup {
  conf::BridgeConfig config;
  std::map<std::string, PodTemplate, std::less<>> templates;  // by node group name

  // The group and template of `node`, or an error telling the admin to add the
  // node to a NodeGroup.
  Result<std::pair<const conf::NodeGroup*, const PodTemplate*>> For(std::string_view node) const;
};

// Loads the templates of an already parsed configuration. Refuses one without
// node groups: the power programs would have nothing to do.
Result<PowerSetup> LoadPowerSetup(conf::BridgeConfig config);

}  // namespace k8sbridge::power
