// Breakers and returns (docs/sync.md, "Circuit breaker" and "Kubernetes → Slurm"):
// unschedulable pods open a node group's breaker, which drains its powered-down
// nodes until the expiry in the reason; nodes k8sbridge failed go back to service
// once powered down; an idle, powered-down node left NOT_RESPONDING is powered down
// afresh.
#include <chrono>

#include <fmt/format.h>

#include "rules.h"

namespace k8sbridge::sync {

// The circuit breaker counts unschedulable failures per node group; enough
// within the cooldown open it for the group.
void Reconciler::CountUnschedulable(const std::string& group) {
  if (options_.breaker_threshold <= 0)
    return;
  auto& times = failures_[group];
  times.push_back(wall_);
  while (!times.empty() && wall_ - times.front() > options_.breaker_cooldown)
    times.pop_front();
  if (static_cast<int>(times.size()) >= options_.breaker_threshold && open_until_[group] <= wall_) {
    open_until_[group] =
        wall_ + std::chrono::duration_cast<Clock::Wall::duration>(options_.breaker_cooldown);
    times.clear();
  }
}

// An open breaker drains its group's powered-down nodes so that Slurm does not
// resume them; the reason carries the expiry, so the undrain survives a restart.
void Reconciler::PlanBreakers(const World& world, std::vector<Action>& out) {
  breaker_reasons_ = false;
  for (const SlurmNode& n : world.slurm) {
    if (std::string_view(n.reason).starts_with(kBreakerPrefix))
      breaker_reasons_ = true;  // undone at the expiry in the reason: a matter of time
    if (n.drain && std::string_view(n.reason).starts_with(kBreakerPrefix)) {
      auto when = BreakerUntil(n.reason);
      if (!when || *when <= wall_) {
        out.push_back(Action{ActionKind::kUndrain, n.name, "circuit breaker cool-down over"});
      }
      continue;
    }
    if (!options_.config || n.drain || !n.powered_down || n.powering_up)
      continue;
    const conf::NodeGroup* group = options_.config->GroupOf(n.name);
    if (!group)
      continue;
    auto open = open_until_.find(group->name);
    if (open == open_until_.end() || open->second <= wall_)
      continue;
    Action a{
        ActionKind::kDrain, n.name,
        fmt::format(
            "{}{} until {}: {} unschedulable pods within {}s", kBreakerPrefix, group->name,
            FormatTime(open->second), options_.breaker_threshold,
            std::chrono::duration_cast<std::chrono::seconds>(options_.breaker_cooldown).count())};
    a.rule = Rule::kBreaker;
    out.push_back(std::move(a));
  }
}

std::optional<Clock::Wall::time_point> BreakerUntil(std::string_view reason) {
  if (!reason.starts_with(kBreakerPrefix))
    return std::nullopt;
  std::string_view rest = reason.substr(kBreakerPrefix.size());
  size_t until = rest.find(" until ");
  if (until == std::string_view::npos)
    return std::nullopt;
  return ParseTime(rest.substr(until + 7));
}

std::string BreakerDrainNotDue(const SlurmNode& live) {
  if (live.drain)
    return "it is drained already";
  return live.powered_down && !live.powering_up ? "" : "it is no longer POWERED_DOWN";
}

// Slurm 24.11 keeps a node that went DOWN before its power-down DOWN for good
// (down~): a node we failed is returned to service once Slurm has powered it down
// and no pod of ours is left, so the next job that needs it gets a fresh pod. The
// executor confirms both on live reads first.
void Reconciler::PlanReturns(const World& world, std::vector<Action>& out) {
  if (!options_.config)
    return;
  const auto& pods = by_name_.pods;
  const auto& nodes = by_name_.nodes;
  for (const SlurmNode& n : world.slurm) {
    const conf::NodeGroup* group = options_.config->GroupOf(n.name);
    if (!group || !n.cloud || !Returnable(n, wall_))
      continue;
    // A pod stuck on a lost node counts as none: Kubernetes may keep it for ever.
    if (auto it = pods.find(n.name); it != pods.end() && !IsStranded(*it->second, nodes))
      continue;
    // An open breaker keeps its group out of service, even before its drain lands.
    auto open = open_until_.find(group->name);
    if (open != open_until_.end() && open->second > wall_)
      continue;
    out.push_back(
        Action{ActionKind::kResume, n.name,
               fmt::format("back to service: {} ({}), powered down, no pod left",
                           n.OwnedReason() ? "failed by k8sbridge" : "a pod's late registration",
                           n.reason)});
  }
}

bool Returnable(const SlurmNode& n, Clock::Wall::time_point wall) {
  if (!n.Down() || !n.powered_down || n.power_down || n.powering_down || n.powering_up)
    return false;
  // Slurm's "unexpectedly rebooted" is a pod that registered late (a loaded
  // slurmctld answered its first registration after slurmd's timeout): ours too.
  if (!n.OwnedReason() && n.reason != kSlurmRebootReason)
    return false;  // an admin's, Slurm's own, health's or the jail's: theirs to lift
  if (std::string_view(n.reason).starts_with(kBreakerPrefix)) {
    auto until = BreakerUntil(n.reason);
    return until && *until <= wall;  // unreadable: left drained (the undrain rule says why)
  }
  return true;
}

std::string ResumeNotDue(const SlurmNode& live, Clock::Wall::time_point wall) {
  return Returnable(live, wall) ? ""
                                : "it is no longer DOWN and POWERED_DOWN with a reason of "
                                  "k8sbridge's (or Slurm's unexpected reboot)";
}

void Reconciler::PlanFreshPowerDowns(const World& world, std::vector<Action>& out) {
  if (!options_.config)
    return;
  for (const SlurmNode& n : world.slurm) {
    if (!n.cloud || !NeedsFreshPowerDown(n) || !options_.config->GroupOf(n.name))
      continue;
    out.push_back(Action{ActionKind::kRenewPowerDown, n.name,
                         "idle and powered down but NOT_RESPONDING: a restarted slurmctld "
                         "would never schedule it; a power-down cycle clears that"});
  }
}

bool NeedsFreshPowerDown(const SlurmNode& n) {
  return n.base == SlurmNode::Base::kIdle && n.powered_down && n.not_responding && !n.powering_up &&
         !n.power_up && !n.power_down && !n.powering_down && !n.drain && !n.fail &&
         !n.reboot_requested && !n.reboot_issued;
}

std::string RenewPowerDownNotDue(const SlurmNode& live) {
  return NeedsFreshPowerDown(live) ? "" : "it is no longer IDLE, POWERED_DOWN and NOT_RESPONDING";
}

}  // namespace k8sbridge::sync
