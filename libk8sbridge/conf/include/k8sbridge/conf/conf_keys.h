// The key table of k8sbridge.conf (rows as key_table.h describes them): the parser
// (bridge_conf.cpp), its messages, GlobalKeys()/NodeGroupKeys()/FeatureKeys() and
// the reference tables in docs/power.md and docs/sync.md all come from it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/conf/key_table.h"

namespace k8sbridge::conf {

// The rows, in the order the docs list them.
std::span<const Key<BridgeConfig>> GlobalKeyTable();
std::span<const Key<NodeGroup>> NodeGroupKeyTable();
std::span<const Key<FeatureMapping>> FeatureKeyTable();

// The global keys of `sections` as the markdown table of the docs
// ("| key | default | meaning |"), one row per key, defaults taken from the
// section structs.
std::string GlobalKeysMarkdown(const std::vector<Section>& sections);

}  // namespace k8sbridge::conf
