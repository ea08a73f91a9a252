// The Reconciler's frame: the actions' names, the options, the pass that runs the
// rule families (one a file, rules.h) in order, and NotDueOn's dispatch to them.
#include "k8sbridge/sync/reconcile.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/text.h"
#include "rules.h"

namespace k8sbridge::sync {

namespace {

std::map<std::string, const kube::Object*> NodesByName(const World& world) {
  std::map<std::string, const kube::Object*> nodes;
  for (const auto& n : world.nodes)
    nodes.emplace(n.Name(), &n);
  return nodes;
}

// The Kubernetes node a pod is bound to, nullptr when its Node object is gone.
const kube::Object* HostOf(const kube::Object& pod,
                           const std::map<std::string, const kube::Object*>& nodes) {
  auto it = nodes.find(kube::pod::NodeName(pod));
  return it == nodes.end() ? nullptr : it->second;
}

// The cluster's worker pods (all three ownership labels), by the Slurm node of
// their node label. A Slurm node may have more than one (a replacement beside an old
// pod stuck on a lost node): its pod is the one that is not being deleted, else one
// being deleted that is not stranded, the newest first. An old pod that terminates
// beside a live replacement is so never read as the node's failure.
std::map<std::string, const kube::Object*> OwnedPodsByNode(
    const World& world, const std::string& cluster,
    const std::map<std::string, const kube::Object*>& nodes) {
  auto rank = [&](const kube::Object& p) {
    return p.IsBeingDeleted() ? (IsStranded(p, nodes) ? 0 : 1) : 2;
  };
  std::map<std::string, const kube::Object*> pods;
  for (const auto& p : world.pods) {
    const std::string node = power::SlurmNodeOf(p);
    if (node.empty() || !power::IsOwnedWorkerPod(p, cluster, node))
      continue;
    auto [it, inserted] = pods.emplace(node, &p);
    if (inserted)
      continue;
    const kube::Object& have = *it->second;
    const auto newer =
        p.String("/metadata/creationTimestamp") > have.String("/metadata/creationTimestamp");
    if (rank(p) > rank(have) || (rank(p) == rank(have) && newer))
      it->second = &p;
  }
  return pods;
}

std::map<std::string, const SlurmNode*> SlurmByName(const World& world) {
  std::map<std::string, const SlurmNode*> slurm;
  for (const auto& n : world.slurm)
    slurm.emplace(n.name, &n);
  return slurm;
}

}  // namespace

std::string Annotation(const kube::Object& o, std::string_view key) {
  return o.String("/metadata/annotations/" + kube::PointerEscape(key));
}

const rapidjson::Value* Condition(const kube::Object& o, const char* array, std::string_view type) {
  const auto& json = o.json();
  auto status = json.FindMember("status");
  if (status == json.MemberEnd() || !status->value.IsObject())
    return nullptr;
  auto list = status->value.FindMember(array);
  if (list == status->value.MemberEnd() || !list->value.IsArray())
    return nullptr;
  for (const auto& c : list->value.GetArray()) {
    if (!c.IsObject())
      continue;
    auto t = c.FindMember("type");
    if (t != c.MemberEnd() && t->value.IsString() && type == t->value.GetString())
      return &c;
  }
  return nullptr;
}

bool IsStranded(const kube::Object& pod, const std::map<std::string, const kube::Object*>& nodes) {
  return power::Stranded(pod, HostOf(pod, nodes));
}

std::string_view ActionKindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kMirrorDrain:
      return "mirror_drain";
    case ActionKind::kClearDrain:
      return "clear_drain";
    case ActionKind::kCordon:
      return "cordon";
    case ActionKind::kUncordon:
      return "uncordon";
    case ActionKind::kDrain:
      return "drain";
    case ActionKind::kUndrain:
      return "undrain";
    case ActionKind::kFail:
      return "fail";
    case ActionKind::kDeletePod:
      return "delete_pod";
    case ActionKind::kSetFeatures:
      return "set_features";
    case ActionKind::kResume:
      return "resume";
    case ActionKind::kRenewPowerDown:
      return "renew_power_down";
    case ActionKind::kReboot:
      return "reboot";
    case ActionKind::kRecreatePod:
      return "recreate_pod";
    case ActionKind::kSetTopology:
      return "set_topology";
  }
  return "unknown";
}

std::string Action::ToString() const {
  std::string s = fmt::format("{} {}", ActionKindName(kind), target);
  if (!slurm_nodes.empty())
    s += fmt::format(" for {}", text::Join(slurm_nodes, ","));
  if (!reason.empty())
    s += fmt::format(": {}", reason);
  return s;
}

ReconcileOptions ReconcileOptions::From(const conf::BridgeConfig& config,
                                        const power::PowerSetup* power) {
  ReconcileOptions o;
  o.cluster = config.cluster_name;
  o.hardware_reason = config.sync.hardware_reason;
  o.unschedulable_grace = config.sync.unschedulable_grace;
  o.orphan_grace = config.sync.orphan_grace;
  o.registration_grace = config.sync.registration_grace;
  o.outage_hold = config.sync.outage_hold;
  o.breaker_threshold = config.sync.breaker_threshold;
  o.breaker_cooldown = config.sync.breaker_cooldown;
  o.config = &config;
  o.topology = config.sync.topology;
  if (power) {
    for (const auto& [group, tmpl] : power->templates)
      o.template_hashes[group] = tmpl.hash;
  }
  return o;
}

ReconcileOptions ReconcileOptions::For(const conf::BridgeConfig& config,
                                       const power::PowerSetup* power, const slurm::Slurm& slurm,
                                       Logger& log) {
  ReconcileOptions options = From(config, power);
  if (!options.topology.empty() && !slurm.SupportsTopologyUpdate()) {
    log.Debug("SyncTopology={} ignored: this Slurm cannot update a node's topology (25.05+)",
              options.topology);
    options.topology.clear();
  }
  return options;
}

std::string FormatTime(Clock::Wall::time_point t) {
  time_t secs = Clock::Wall::to_time_t(t);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<Clock::Wall::time_point> ParseTime(std::string_view text) {
  if (text.size() < 20)
    return std::nullopt;
  std::string s(text.substr(0, 20));
  struct tm tm {};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (!end || *end != '\0')
    return std::nullopt;
  return Clock::Wall::from_time_t(timegm(&tm));
}

Reconciler::Reconciler(ReconcileOptions options)
    : options_(std::move(options)),
      hardware_(options_.hardware_reason, std::regex::ECMAScript | std::regex::icase) {}

void Reconciler::ResetTimers() {
  since_.clear();
  powering_up_since_.clear();
  outage_ = true;
}

bool Reconciler::InOutageHold() const {
  return back_at_ && now_ - *back_at_ < options_.outage_hold;
}

bool Reconciler::Waiting() const {
  if (!since_.empty() || breaker_reasons_ || held_lost_)
    return true;
  return std::any_of(open_until_.begin(), open_until_.end(),
                     [&](const auto& group) { return group.second > wall_; });
}

bool Reconciler::Held(const std::string& key, Clock::Steady::duration grace) {
  held_this_round_.insert(key);
  auto [it, inserted] = since_.emplace(key, now_);
  return now_ - it->second >= grace;
}

bool Reconciler::PodRulesApply(const SlurmNode& n) const {
  return options_.config && n.cloud && options_.config->GroupOf(n.name);
}

std::map<std::string, Clock::Wall::time_point> Reconciler::OpenBreakers(
    Clock::Wall::time_point wall) const {
  std::map<std::string, Clock::Wall::time_point> out;
  for (const auto& [group, until] : open_until_) {
    if (until > wall)
      out.emplace(group, until);
  }
  return out;
}

std::vector<Clock::Steady::duration> Reconciler::TakeResumeLatencies() {
  std::vector<Clock::Steady::duration> out;
  out.swap(resume_latencies_);
  return out;
}

std::vector<Action> Reconciler::Plan(const World& world, Clock::Steady::time_point now,
                                     Clock::Wall::time_point wall) {
  now_ = now;
  wall_ = wall;
  if (outage_) {
    outage_ = false;
    back_at_ = now;
  }
  held_this_round_.clear();
  held_lost_ = false;
  // Each rule looks nodes and pods up by name: the maps are made once per pass (at
  // 10,000 nodes, making them for each rule cost more than the rules).
  by_name_.nodes = NodesByName(world);
  by_name_.pods = OwnedPodsByNode(world, options_.cluster, by_name_.nodes);
  by_name_.slurm = SlurmByName(world);
  std::vector<Action> out;
  PlanSlurmToKube(world, out);
  PlanKubeToSlurm(world, out);
  PlanPods(world, out);
  PlanBreakers(world, out);
  PlanFeatures(world, out);
  PlanTopology(world, out);
  PlanReturns(world, out);
  PlanFreshPowerDowns(world, out);
  PlanRollouts(world, out);
  // A condition that did not hold this round starts its grace afresh next time.
  for (auto it = since_.begin(); it != since_.end();) {
    if (held_this_round_.count(it->first))
      ++it;
    else
      it = since_.erase(it);
  }
  // Resume-to-registration: a node leaving POWERING_UP while up.
  std::set<std::string> up;
  for (const SlurmNode& n : world.slurm) {
    if (n.powering_up) {
      powering_up_since_.emplace(n.name, now);
      up.insert(n.name);
    } else if (auto it = powering_up_since_.find(n.name); it != powering_up_since_.end()) {
      if (!n.Down() && !n.powered_down && !n.power_down && !n.powering_down)
        resume_latencies_.push_back(now - it->second);
    }
  }
  for (auto it = powering_up_since_.begin(); it != powering_up_since_.end();) {
    it = up.count(it->first) ? std::next(it) : powering_up_since_.erase(it);
  }
  by_name_ = {};  // they point into `world`
  return out;
}

std::string NotDueOn(const Action& action, const SlurmNode& live, Clock::Wall::time_point wall) {
  switch (action.kind) {
    case ActionKind::kFail:
      return FailNotDue(action, live);
    case ActionKind::kDrain:
      if (action.rule == Rule::kNodeTrouble)
        return NodeTroubleDrainNotDue(live);
      if (action.rule == Rule::kBreaker)
        return BreakerDrainNotDue(live);
      return "";  // ReasonPolicy alone decides
    case ActionKind::kResume:
      return ResumeNotDue(live, wall);
    case ActionKind::kRenewPowerDown:
      return RenewPowerDownNotDue(live);
    case ActionKind::kReboot:
      return RebootNotDue(live);
    case ActionKind::kRecreatePod:
    case ActionKind::kDeletePod:
      return RebootPodNotDue(action, live);
    case ActionKind::kSetTopology:
      return TopologyNotDue(action, live);
    default:
      return "";
  }
}

}  // namespace k8sbridge::sync
