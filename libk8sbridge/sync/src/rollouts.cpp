// Rollouts (docs/sync.md, "Rollouts"): a running pod from an old template asks
// Slurm for a reboot ASAP; once Slurm issues it, the old pod goes and a new one
// comes from the current template.
#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/slurm/node_reason.h"
#include "rules.h"

namespace k8sbridge::sync {

namespace {

// The reboot's key: when Slurm issued it (it sets the reason "reboot issued" then).
std::string RebootKey(const SlurmNode& n) {
  return std::to_string(n.reason_time);
}

}  // namespace

void Reconciler::PlanRollouts(const World& world, std::vector<Action>& out) {
  if (!options_.config || options_.template_hashes.empty())
    return;
  const auto& pods = by_name_.pods;
  for (const SlurmNode& n : world.slurm) {
    if (!PodRulesApply(n))
      continue;
    auto it = pods.find(n.name);
    const kube::Object* pod = it == pods.end() ? nullptr : it->second;
    if (n.reboot_issued) {
      PlanRebootReplacement(n, pod, out);
      continue;
    }
    const conf::NodeGroup* group = options_.config->GroupOf(n.name);
    auto hash = options_.template_hashes.find(group->name);
    if (!pod || pod->IsBeingDeleted() || hash == options_.template_hashes.end())
      continue;
    const std::string pod_hash = Annotation(*pod, contract::kTemplateHashAnnotation);
    // A pod without the annotation (made before rollouts existed): no guess, no reboot.
    if (pod_hash.empty() || pod_hash == hash->second)
      continue;
    // Out of service (an admin's drain, a DOWN) or changing power: it takes the new
    // template at its next resume; a drain is never lifted by a rollout's RESUME.
    if (n.reboot_requested || n.OutOfService() || n.Suspending() || n.powering_up)
      continue;
    out.push_back(Action{
        ActionKind::kReboot, n.name,
        BridgeReason(fmt::format("rollout: pod template of node group {} changed", group->name))});
  }
}

void Reconciler::PlanRebootReplacement(const SlurmNode& n, const kube::Object* pod,
                                       std::vector<Action>& out) {
  const std::string key = RebootKey(n);
  if (pod && pod->IsBeingDeleted())
    return;  // on its way out: the new pod comes once it is gone
  if (pod && Annotation(*pod, contract::kRebootOfAnnotation) == key)
    return;  // this reboot's pod: Slurm returns the node when its slurmd registers
  if (pod) {
    Action a{ActionKind::kDeletePod, n.name,
             fmt::format("Slurm issued a reboot of {}: its pod is replaced", n.name)};
    a.rule = Rule::kReboot;
    a.uid = pod->Uid();
    a.pod_name = pod->Name();
    a.reboot_of = key;
    out.push_back(std::move(a));
    return;
  }
  Action a{ActionKind::kRecreatePod, n.name,
           fmt::format("Slurm issued a reboot of {}: a new pod from the current template", n.name)};
  a.reboot_of = key;
  out.push_back(std::move(a));
}

std::string RebootNotDue(const SlurmNode& live) {
  if (live.reboot_requested || live.reboot_issued)
    return "a reboot is pending already";
  if (live.OutOfService() || live.Suspending() || live.powering_up || live.powered_down)
    return "it is out of service or changing power state (it rolls at its next resume)";
  return "";
}

std::string RebootPodNotDue(const Action& action, const SlurmNode& live) {
  if (!live.reboot_issued || RebootKey(live) != action.reboot_of)
    return "Slurm no longer waits for that reboot";
  return "";
}

}  // namespace k8sbridge::sync
