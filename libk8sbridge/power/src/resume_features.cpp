#include "k8sbridge/power/resume_features.h"

#include <algorithm>

#include "k8sbridge/slurm/constraint.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {

namespace {

using text::Contains;

// The changeable features in every alternative of `constraint`.
std::vector<std::string> InEveryAlternative(const conf::BridgeConfig& config,
                                            std::string_view constraint) {
  auto parsed = slurm::ParseConstraint(constraint);
  if (!parsed.ok() || parsed->alternatives.empty())
    return {};
  std::vector<std::string> common;
  for (const std::string& name : parsed->alternatives.front()) {
    if (!config.MappingOf(name) || Contains(common, name))
      continue;
    bool everywhere =
        std::all_of(parsed->alternatives.begin(), parsed->alternatives.end(),
                    [&](const auto& alternative) { return Contains(alternative, name); });
    if (everywhere)
      common.push_back(name);
  }
  return common;
}

}  // namespace

std::vector<std::string> PlacedFeatures(const conf::BridgeConfig& config,
                                        const std::vector<const ResumeJob*>& jobs) {
  std::vector<std::string> placed;
  for (const ResumeJob* job : jobs) {
    for (std::string& name : InEveryAlternative(config, job->features)) {
      if (!Contains(placed, name))
        placed.push_back(std::move(name));
    }
  }
  return placed;
}

std::optional<ActiveFeaturesChange> ActiveFeaturesAtResume(const conf::BridgeConfig& config,
                                                           std::string_view available,
                                                           std::string_view active,
                                                           const std::vector<std::string>& placed) {
  ActiveFeaturesChange change;
  std::vector<std::string> kept;
  for (std::string_view name : text::Split(active.empty() ? available : active, ',')) {
    if (name.empty() || Contains(kept, name) || Contains(change.dropped, name))
      continue;
    if (config.MappingOf(name) && !Contains(placed, name))
      change.dropped.emplace_back(name);
    else
      kept.emplace_back(name);
  }
  if (change.dropped.empty())
    return std::nullopt;
  change.active = kept.empty() ? std::string(kNoActiveFeatures) : text::Join(kept, ",");
  return change;
}

}  // namespace k8sbridge::power
