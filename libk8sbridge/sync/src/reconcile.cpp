#include "k8sbridge/sync/reconcile.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/features/features.h"
#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/slurm/node_reason.h"
#include "k8sbridge/text.h"

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

bool IsStranded(const kube::Object& pod, const std::map<std::string, const kube::Object*>& nodes) {
  return power::Stranded(pod, HostOf(pod, nodes));
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

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos)
      comma = text.size();
    std::string item(text.substr(start, comma - start));
    if (!item.empty())
      out.push_back(item);
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Annotation(const kube::Object& o, std::string_view key) {
  return o.String("/metadata/annotations/" + kube::PointerEscape(key));
}

struct Taint {
  std::string key, value, effect;
};
std::vector<Taint> Taints(const kube::Object& node) {
  std::vector<Taint> out;
  const auto& json = node.json();
  auto spec = json.FindMember("spec");
  if (spec == json.MemberEnd() || !spec->value.IsObject())
    return out;
  auto taints = spec->value.FindMember("taints");
  if (taints == spec->value.MemberEnd() || !taints->value.IsArray())
    return out;
  for (const auto& t : taints->value.GetArray()) {
    if (!t.IsObject())
      continue;
    Taint taint;
    taint.key = kube::StringMember(&t, "key");
    taint.value = kube::StringMember(&t, "value");
    taint.effect = kube::StringMember(&t, "effect");
    out.push_back(std::move(taint));
  }
  return out;
}

// The JSON object of condition `type` under `pointer` (an array), or nullptr.
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

bool HardwareTaint(const Taint& t) {
  return t.key == contract::kHardwareTaintKey;
}

// Why the Kubernetes node under a bound `pod` is lost (its Node object gone, or
// power::NodeLostWhy), as a reason's text; "" if it is not, or the pod is unbound.
std::string LostHostWhy(const kube::Object& pod,
                        const std::map<std::string, const kube::Object*>& nodes) {
  const std::string host = kube::pod::NodeName(pod);
  if (host.empty())
    return "";
  auto it = nodes.find(host);
  if (it == nodes.end())
    return fmt::format("Kubernetes node {} is gone (no Node object)", host);
  const std::string why = power::NodeLostWhy(*it->second);
  return why.empty() ? "" : fmt::format("Kubernetes node {} lost: {}", host, why);
}

}  // namespace

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
  o.breaker_threshold = config.sync.breaker_threshold;
  o.breaker_cooldown = config.sync.breaker_cooldown;
  o.config = &config;
  if (power) {
    for (const auto& [group, tmpl] : power->templates)
      o.template_hashes[group] = tmpl.hash;
  }
  return o;
}

std::string SlurmReason(std::string_view text) {
  std::string out = "k8sbridge: ";
  for (char c : text)
    out += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  if (out.size() > kMaxReason) {
    size_t cut = kMaxReason;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80)
      --cut;  // do not split a UTF-8 sequence
    out.resize(cut);
  }
  return out;
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

std::optional<std::string> NodeTrouble(const kube::Object& node, std::string_view cluster) {
  const std::string name = node.Name();
  // No Ready condition at all says nothing: no drain on a guess.
  if (const rapidjson::Value* ready = Condition(node, "conditions", "Ready")) {
    std::string status = kube::StringMember(ready, "status");
    if (status != "True") {
      std::string why = kube::StringMember(ready, "reason");
      std::string message = kube::StringMember(ready, "message");
      std::string detail = why;
      if (!message.empty())
        detail += (detail.empty() ? "" : ": ") + message;
      // No '=' in reasons: `scontrol -o show node` readers split on KEY=.
      return SlurmReason(fmt::format("Kubernetes node {} NotReady ({}){}{}", name, status,
                                     detail.empty() ? "" : ": ", detail));
    }
  }
  if (kube::node::Unschedulable(node) &&
      Annotation(node, contract::kCordonedByAnnotation) != cluster)
    return SlurmReason(fmt::format("Kubernetes node {} cordoned", name));
  for (const Taint& t : Taints(node)) {
    if (t.effect == "NoExecute" && !HardwareTaint(t)) {
      return SlurmReason(fmt::format("Kubernetes node {} has taint {}:NoExecute", name, t.key));
    }
  }
  return std::nullopt;
}

std::string TroubleNodeOf(std::string_view reason) {
  if (!reason.starts_with(kNodeTroublePrefix))
    return "";
  std::string_view rest = reason.substr(kNodeTroublePrefix.size());
  size_t space = rest.find(' ');
  return std::string(rest.substr(0, space));
}

std::string UnschedulableMessage(const kube::Object& pod) {
  if (kube::pod::Phase(pod) != "Pending" && !kube::pod::Phase(pod).empty())
    return "";
  const rapidjson::Value* c = Condition(pod, "conditions", "PodScheduled");
  if (!c || kube::StringMember(c, "status") != "False" ||
      kube::StringMember(c, "reason") != "Unschedulable")
    return "";
  std::string message = kube::StringMember(c, "message");
  return message.empty() ? "pod unschedulable" : message;
}

std::string PodFailure(const kube::Object& pod) {
  const std::string phase = kube::pod::Phase(pod);
  const std::string name = pod.Name();
  // The first container's last words: terminated reason, exit code, message.
  auto container_detail = [&](const char* state) -> std::string {
    const auto& json = pod.json();
    auto status = json.FindMember("status");
    if (status == json.MemberEnd() || !status->value.IsObject())
      return "";
    auto list = status->value.FindMember("containerStatuses");
    if (list == status->value.MemberEnd() || !list->value.IsArray())
      return "";
    for (const auto& cs : list->value.GetArray()) {
      if (!cs.IsObject())
        continue;
      auto st = cs.FindMember("state");
      if (st == cs.MemberEnd() || !st->value.IsObject())
        continue;
      auto which = st->value.FindMember(state);
      if (which == st->value.MemberEnd() || !which->value.IsObject())
        continue;
      const rapidjson::Value& v = which->value;
      std::string out = kube::StringMember(&v, "reason");
      auto code = v.FindMember("exitCode");
      if (code != v.MemberEnd() && code->value.IsInt())
        out += fmt::format("{}exit code {}", out.empty() ? "" : ", ", code->value.GetInt());
      std::string message = kube::StringMember(&v, "message");
      if (!message.empty())
        out += (out.empty() ? "" : ": ") + message;
      return out;
    }
    return "";
  };
  if (phase == "Failed" || phase == "Succeeded") {
    std::string detail = container_detail("terminated");
    if (detail.empty()) {
      detail = pod.String("/status/reason");
      std::string message = pod.String("/status/message");
      if (!message.empty())
        detail += (detail.empty() ? "" : ": ") + message;
    }
    return fmt::format("pod {} {}{}{}", name, phase == "Failed" ? "failed" : "exited",
                       detail.empty() ? "" : ": ", detail);
  }
  if (pod.IsBeingDeleted()) {
    const rapidjson::Value* dt = Condition(pod, "conditions", "DisruptionTarget");
    if (dt && kube::StringMember(dt, "status") == "True") {
      std::string message = kube::StringMember(dt, "message");
      return fmt::format("pod {} evicted ({}){}{}", name, kube::StringMember(dt, "reason"),
                         message.empty() ? "" : ": ", message);
    }
    return fmt::format("pod {} deleted", name);
  }
  if (phase == "Pending" || phase.empty()) {
    std::string waiting = container_detail("waiting");
    for (std::string_view bad :
         {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
          "CreateContainerError", "RunContainerError", "ErrImageNeverPull"}) {
      if (waiting.starts_with(bad))
        return fmt::format("pod {} cannot start: {}", name, waiting);
    }
  }
  return "";
}

Reconciler::Reconciler(ReconcileOptions options)
    : options_(std::move(options)),
      hardware_(options_.hardware_reason, std::regex::ECMAScript | std::regex::icase) {}

void Reconciler::ResetTimers() {
  since_.clear();
  powering_up_since_.clear();
}

bool Reconciler::Waiting() const {
  if (!since_.empty() || breaker_reasons_)
    return true;
  return std::any_of(open_until_.begin(), open_until_.end(),
                     [&](const auto& group) { return group.second > wall_; });
}

bool Reconciler::Held(const std::string& key, Clock::Steady::duration grace) {
  held_this_round_.insert(key);
  auto [it, inserted] = since_.emplace(key, now_);
  return now_ - it->second >= grace;
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

// Live relabels (node_features_k8s): a running node's label-derived features follow
// its Kubernetes node's labels. What the labels gave last time is read back from
// the pod, so a restart neither repeats nor forgets a change.
void Reconciler::PlanFeatures(const World& world, std::vector<Action>& out) {
  const conf::BridgeConfig* config = options_.config;
  if (config == nullptr || (config->features.empty() && config->node_features.label_prefix.empty()))
    return;
  const auto& k8s_nodes = by_name_.nodes;
  const auto& pods = by_name_.pods;
  for (const SlurmNode& n : world.slurm) {
    if (n.Down() || n.powered_down || n.powering_up || n.powering_down || n.power_down)
      continue;
    auto pod = pods.find(n.name);
    if (pod == pods.end() || pod->second->IsBeingDeleted() ||
        pod->second->String("/status/phase") != "Running")
      continue;
    auto host = k8s_nodes.find(pod->second->String("/spec/nodeName"));
    if (host == k8s_nodes.end())
      continue;
    features::Labels labels;
    for (auto& [k, v] : host->second->Labels())
      labels.emplace(k, v);
    const std::vector<std::string> now = features::FeaturesFromLabels(*config, labels).All();
    const std::string now_text = features::JoinFeatures(now);
    const auto annotations = pod->second->Annotations();
    const auto marked = annotations.find(std::string(contract::kLabelFeaturesAnnotation));
    if (marked != annotations.end() && marked->second == now_text)
      continue;
    const std::vector<std::string> before = marked == annotations.end()
                                                ? std::vector<std::string>{}
                                                : features::SplitFeatures(marked->second);
    features::FeatureUpdate u =
        features::ReplaceLabelFeatures(before, now, n.features, n.features_act);
    Action a(ActionKind::kSetFeatures, n.name,
             fmt::format("labels of Kubernetes node {} give [{}]", host->first, now_text));
    a.pod_name = pod->second->Name();
    a.uid = pod->second->Uid();
    a.label_features = now_text;
    a.update_slurm = u.changed;
    a.features = u.available;
    a.features_act = u.active;
    out.push_back(std::move(a));
  }
}

std::vector<Action> Reconciler::Plan(const World& world, Clock::Steady::time_point now,
                                     Clock::Wall::time_point wall) {
  now_ = now;
  wall_ = wall;
  held_this_round_.clear();
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

// Slurm -> Kubernetes: drains mirrored onto pods; hardware drains cordon and taint.
namespace {

using PodsByNode = std::map<std::string, const kube::Object*>;

// Slurm -> pods: each drain (reason, user, time) mirrored onto the node's pod
// as annotations, and cleared when Slurm stops draining the node.
void PlanDrainMirrors(const World& world, const PodsByNode& pods, std::vector<Action>& out) {
  for (const SlurmNode& n : world.slurm) {
    auto it = pods.find(n.name);
    if (it == pods.end() || it->second->IsBeingDeleted())
      continue;
    const kube::Object& pod = *it->second;
    const std::string have_reason = Annotation(pod, contract::kDrainReasonAnnotation);
    const bool have =
        pod.Has("/metadata/annotations/" + kube::PointerEscape(contract::kDrainReasonAnnotation));
    if (n.drain) {
      std::string when =
          n.reason_time > 0 ? FormatTime(Clock::Wall::from_time_t(n.reason_time)) : "";
      if (!have || have_reason != n.reason ||
          Annotation(pod, contract::kDrainUserAnnotation) != n.reason_user ||
          Annotation(pod, contract::kDrainTimeAnnotation) != when) {
        Action a{ActionKind::kMirrorDrain, n.name, n.reason};
        a.drain_reason = n.reason;
        a.drain_user = n.reason_user;
        a.drain_time = when;
        a.uid = pod.Uid();
        a.pod_name = pod.Name();
        out.push_back(std::move(a));
      }
    } else if (have) {
      Action a{ActionKind::kClearDrain, n.name, "Slurm no longer drains the node"};
      a.uid = pod.Uid();
      a.pod_name = pod.Name();
      out.push_back(std::move(a));
    }
  }
}

// Kubernetes node -> the Slurm nodes on it drained for hardware, and the first
// such drain's "node: reason" (the cordon's reason).
struct HardwareDrains {
  std::map<std::string, std::set<std::string>> want;
  std::map<std::string, std::string> first_reason;
};

// Which Kubernetes nodes hardware drains want cordoned, from the pods'
// placement now and from the lists we wrote (the pod may be gone by now).
HardwareDrains HardwareDrainsByHost(const World& world, const PodsByNode& pods,
                                    const std::map<std::string, const SlurmNode*>& slurm,
                                    const std::regex& hardware) {
  auto hardware_drained = [&](const SlurmNode& n) {
    return n.drain && !n.OwnedReason() && std::regex_search(n.reason, hardware);
  };
  HardwareDrains drains;
  for (const SlurmNode& n : world.slurm) {
    if (!hardware_drained(n))
      continue;
    auto it = pods.find(n.name);
    if (it == pods.end())
      continue;
    std::string host = kube::pod::NodeName(*it->second);
    if (host.empty())
      continue;
    drains.want[host].insert(n.name);
    drains.first_reason.emplace(host, n.name + ": " + n.reason);
  }
  for (const kube::Object& node : world.nodes) {
    const std::string name = node.Name();
    for (const std::string& s : SplitList(Annotation(node, contract::kHardwareDrainsAnnotation))) {
      auto it = slurm.find(s);
      if (it != slurm.end() && hardware_drained(*it->second)) {
        drains.want[name].insert(s);
        drains.first_reason.emplace(name, s + ": " + it->second->reason);
      }
    }
  }
  return drains;
}

// Cordons the Kubernetes nodes hardware drains want, and uncordons those we
// marked that no drain wants any more.
void PlanCordons(const World& world, HardwareDrains& drains, const std::string& cluster,
                 std::vector<Action>& out) {
  for (const kube::Object& node : world.nodes) {
    const std::string name = node.Name();
    const auto listed = SplitList(Annotation(node, contract::kHardwareDrainsAnnotation));
    bool our_taint = false;
    for (const Taint& t : Taints(node))
      our_taint |= HardwareTaint(t);
    const bool cordoned_by_us = Annotation(node, contract::kCordonedByAnnotation) == cluster;
    auto w = drains.want.find(name);
    if (w != drains.want.end()) {
      std::vector<std::string> nodes(w->second.begin(), w->second.end());
      // Cordon only a node nobody cordoned; an admin who uncordons a node we
      // cordoned (the annotation stays) is not fought.
      const bool needs_cordon = !kube::node::Unschedulable(node) &&
                                Annotation(node, contract::kCordonedByAnnotation).empty();
      if (nodes != listed || !our_taint || needs_cordon) {
        Action a{ActionKind::kCordon, name, drains.first_reason[name]};
        a.slurm_nodes = std::move(nodes);
        out.push_back(std::move(a));
      }
    } else if (!listed.empty() || our_taint || cordoned_by_us) {
      out.push_back(
          Action{ActionKind::kUncordon, name, "no Slurm node on it is drained for hardware"});
    }
  }
}

}  // namespace

void Reconciler::PlanSlurmToKube(const World& world, std::vector<Action>& out) {
  const auto& pods = by_name_.pods;
  PlanDrainMirrors(world, pods, out);
  HardwareDrains drains = HardwareDrainsByHost(world, pods, by_name_.slurm, hardware_);
  PlanCordons(world, drains, options_.cluster, out);
}

// Kubernetes -> Slurm: node trouble drains the Slurm nodes of its pods; our drains
// are undone when their cause is gone.
void Reconciler::PlanKubeToSlurm(const World& world, std::vector<Action>& out) {
  const std::string& cluster = options_.cluster;
  const auto& nodes = by_name_.nodes;
  const auto& pods = by_name_.pods;
  for (const SlurmNode& n : world.slurm) {
    if (n.drain) {
      std::string host = TroubleNodeOf(n.reason);
      if (host.empty())
        continue;  // not a drain of ours for node trouble: never undone here
      auto it = nodes.find(host);
      if (it == nodes.end() || !NodeTrouble(*it->second, cluster)) {
        out.push_back(Action{
            ActionKind::kUndrain, n.name,
            it == nodes.end() ? fmt::format("Kubernetes node {} is gone", host)
                              : fmt::format("Kubernetes node {} is Ready and schedulable", host)});
      }
      continue;
    }
    if (n.Down() || n.powered_down || n.powering_down || n.power_down)
      continue;
    auto p = pods.find(n.name);
    if (p == pods.end() || p->second->IsBeingDeleted())
      continue;
    auto host = nodes.find(kube::pod::NodeName(*p->second));
    if (host == nodes.end())
      continue;
    // A lost node fails the Slurm nodes of the pool (PlanPods); a drain is for the rest.
    if (PodRulesApply(n) && !power::NodeLostWhy(*host->second).empty())
      continue;
    if (auto trouble = NodeTrouble(*host->second, cluster)) {
      Action a{ActionKind::kDrain, n.name, *trouble};
      a.rule = Rule::kNodeTrouble;
      out.push_back(std::move(a));
    }
  }
}

// Orphans: a pod whose Slurm node is POWERED_DOWN or unknown to Slurm. A Slurm
// that reports no node at all (a controller started with another slurm.conf, a
// broken answer) says nothing about any pod: every pod would look orphaned, and
// a small cluster stays under the mass-action cap, so none is deleted then.
void Reconciler::PlanOrphans(const World& world,
                             const std::map<std::string, const SlurmNode*>& slurm,
                             std::vector<Action>& out) {
  const auto& current = by_name_.pods;
  for (const kube::Object& p : world.pods) {
    const kube::Object* pod = &p;
    const std::string name = power::SlurmNodeOf(p);
    if (name.empty() || !power::IsOwnedWorkerPod(p, options_.cluster, name))
      continue;
    if (pod->IsBeingDeleted() || world.slurm.empty())
      continue;
    auto it = slurm.find(name);
    std::string why;
    if (it == slurm.end())
      why = fmt::format("Slurm has no node {}", name);
    else if (it->second->powered_down && !it->second->powering_up)
      why = fmt::format("Slurm node {} is POWERED_DOWN", name);
    else if (auto c = current.find(name); c != current.end() && c->second != pod)
      why =
          fmt::format("a second pod of Slurm node {} (pod {} serves it)", name, c->second->Name());
    if (why.empty())
      continue;
    if (Held("orphan:" + pod->Name(), options_.orphan_grace)) {
      Action a{ActionKind::kDeletePod, name, why};
      a.uid = pod->Uid();
      a.pod_name = pod->Name();
      out.push_back(std::move(a));
    }
  }
}

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

void Reconciler::PlanNodePod(const SlurmNode& n, const conf::NodeGroup& group,
                             const kube::Object* pod, const std::string& host_lost,
                             std::vector<Action>& out) {
  auto fail = [&](std::string text, Rule rule) {
    Action a{ActionKind::kFail, n.name, SlurmReason(text)};
    a.rule = rule;
    if (pod) {
      a.uid = pod->Uid();
      a.pod_name = pod->Name();
      a.k8s_node = kube::pod::NodeName(*pod);
    }
    out.push_back(std::move(a));
  };
  // Its status is stale and its pod may never be confirmed gone: DOWN at once (the
  // jobs requeue), whatever the pod last said.
  if (pod && !host_lost.empty()) {
    fail(host_lost, Rule::kNodeLost);
    return;
  }
  if (!pod) {
    if (n.powering_up) {
      if (Held("start:" + n.name, options_.orphan_grace)) {
        fail(fmt::format(
                 "no pod for {} after {}s POWERING_UP", n.name,
                 std::chrono::duration_cast<std::chrono::seconds>(options_.orphan_grace).count()),
             Rule::kNoPodStarting);
      }
    } else if (Held("lost:" + n.name, options_.pod_lost_grace)) {
      fail(fmt::format("pod {} was deleted out from under Slurm", n.name), Rule::kPodLost);
    }
    return;
  }
  std::string failure = PodFailure(*pod);
  if (!failure.empty()) {
    // Image errors may clear by themselves; a finished or deleted pod never does.
    const bool final = pod->IsBeingDeleted() || kube::pod::Phase(*pod) == "Failed" ||
                       kube::pod::Phase(*pod) == "Succeeded";
    if (final || Held("image:" + n.name, options_.unschedulable_grace))
      fail(failure, Rule::kPodFailed);
    return;
  }
  std::string unschedulable = UnschedulableMessage(*pod);
  if (!unschedulable.empty() && Held("unschedulable:" + n.name, options_.unschedulable_grace)) {
    fail(unschedulable, Rule::kUnschedulable);
    CountUnschedulable(group.name);
  }
  // slurmd registers within seconds of its pod's start and slurmctld never asks a
  // POWERING_UP node to register (ping_nodes.c skips it): a registration that a
  // slurmctld crash lost would otherwise wait for ResumeTimeout, then stay down~.
  if (n.powering_up && !n.reboot_issued && kube::pod::Phase(*pod) == "Running" &&
      kube::pod::ConditionStatus(*pod, "Ready") == "True" &&
      Held("unregistered:" + n.name, options_.registration_grace)) {
    fail(fmt::format(
             "pod {} Ready for {}s but {} never registered (slurmctld restarted?)", pod->Name(),
             std::chrono::duration_cast<std::chrono::seconds>(options_.registration_grace).count(),
             n.name),
         Rule::kRegistrationLost);
  }
}

bool Reconciler::PodRulesApply(const SlurmNode& n) const {
  return options_.config && n.cloud && options_.config->GroupOf(n.name);
}

// Pods against their Slurm nodes: lost Kubernetes nodes, failures, losses,
// unschedulable pods, orphans.
void Reconciler::PlanPods(const World& world, std::vector<Action>& out) {
  const auto& pods = by_name_.pods;
  const auto& nodes = by_name_.nodes;
  PlanOrphans(world, by_name_.slurm, out);
  for (const SlurmNode& n : world.slurm) {
    if (!PodRulesApply(n))
      continue;
    // Slurm is already taking the node down (or did): nothing to add.
    if (n.Down() || n.powered_down || n.powering_down || n.power_down)
      continue;
    auto it = pods.find(n.name);
    const kube::Object* pod = it == pods.end() ? nullptr : it->second;
    PlanNodePod(n, *options_.config->GroupOf(n.name), pod, pod ? LostHostWhy(*pod, nodes) : "",
                out);
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
        SlurmReason(fmt::format("rollout: pod template of node group {} changed", group->name))});
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

std::optional<Clock::Wall::time_point> BreakerUntil(std::string_view reason) {
  if (!reason.starts_with(kBreakerPrefix))
    return std::nullopt;
  std::string_view rest = reason.substr(kBreakerPrefix.size());
  size_t until = rest.find(" until ");
  if (until == std::string_view::npos)
    return std::nullopt;
  return ParseTime(rest.substr(until + 7));
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

bool NeedsFreshPowerDown(const SlurmNode& n) {
  return n.base == SlurmNode::Base::kIdle && n.powered_down && n.not_responding && !n.powering_up &&
         !n.power_up && !n.power_down && !n.powering_down && !n.drain && !n.fail &&
         !n.reboot_requested && !n.reboot_issued;
}

std::string NotDueOn(const Action& action, const SlurmNode& live, Clock::Wall::time_point wall) {
  switch (action.kind) {
    case ActionKind::kRenewPowerDown:
      return NeedsFreshPowerDown(live) ? ""
                                       : "it is no longer IDLE, POWERED_DOWN and NOT_RESPONDING";
    case ActionKind::kResume:
      return Returnable(live, wall) ? ""
                                    : "it is no longer DOWN and POWERED_DOWN with a reason of "
                                      "k8sbridge's (or Slurm's unexpected reboot)";
    case ActionKind::kFail:
      if (live.Down())
        return "it is DOWN already";
      if (live.Suspending())
        return "Slurm is powering it down (a suspend, not a failure)";
      if ((action.rule == Rule::kNoPodStarting || action.rule == Rule::kRegistrationLost) &&
          !live.powering_up)
        return "it is no longer POWERING_UP";
      if (action.rule == Rule::kPodLost && live.powering_up)
        return "it is POWERING_UP now (its pod is being made)";
      return "";
    case ActionKind::kReboot:
      if (live.reboot_requested || live.reboot_issued)
        return "a reboot is pending already";
      if (live.OutOfService() || live.Suspending() || live.powering_up || live.powered_down)
        return "it is out of service or changing power state (it rolls at its next resume)";
      return "";
    case ActionKind::kRecreatePod:
    case ActionKind::kDeletePod:
      if (!live.reboot_issued || RebootKey(live) != action.reboot_of)
        return "Slurm no longer waits for that reboot";
      return "";
    case ActionKind::kDrain:
      if (action.rule != Rule::kNodeTrouble && action.rule != Rule::kBreaker)
        return "";  // ReasonPolicy alone decides
      if (live.drain)
        return "it is drained already";
      if (action.rule == Rule::kBreaker)
        return live.powered_down && !live.powering_up ? "" : "it is no longer POWERED_DOWN";
      if (live.Down() || live.Suspending())
        return "it is DOWN or being powered down";
      return "";
    default:
      return "";
  }
}

}  // namespace k8sbridge::sync
