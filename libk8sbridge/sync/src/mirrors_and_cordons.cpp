// Mirrors and cordons (docs/sync.md, "Slurm → Kubernetes", "Kubernetes → Slurm"
// and "Features"): Slurm's drains onto pods, hardware drains to cordons and
// taints, Kubernetes node trouble to drains, and node labels to features and to
// Slurm's topology (docs/topology.md, "Resumed nodes").
#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/features/features.h"
#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/slurm/node_reason.h"
#include "k8sbridge/topology/model.h"
#include "rules.h"

namespace k8sbridge::sync {

namespace {

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

bool HardwareTaint(const Taint& t) {
  return t.key == contract::kHardwareTaintKey;
}

using PodsByNode = std::map<std::string, const kube::Object*>;

// Whether a node's topology units ("tree:s1,blocks:b2") hold `unit` ("tree:s1").
bool HasUnit(std::string_view units, std::string_view unit) {
  for (const std::string& held : SplitList(units)) {
    if (held == unit)
      return true;
  }
  return false;
}

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
      return BridgeReason(fmt::format("Kubernetes node {} NotReady ({}){}{}", name, status,
                                      detail.empty() ? "" : ": ", detail));
    }
  }
  if (kube::node::Unschedulable(node) &&
      Annotation(node, contract::kCordonedByAnnotation) != cluster)
    return BridgeReason(fmt::format("Kubernetes node {} cordoned", name));
  for (const Taint& t : Taints(node)) {
    if (t.effect == "NoExecute" && !HardwareTaint(t)) {
      return BridgeReason(fmt::format("Kubernetes node {} has taint {}:NoExecute", name, t.key));
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

// Slurm -> Kubernetes: drains mirrored onto pods; hardware drains cordon and taint.
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

std::string NodeTroubleDrainNotDue(const SlurmNode& live) {
  if (live.drain)
    return "it is drained already";
  if (live.Down() || live.Suspending())
    return "it is DOWN or being powered down";
  return "";
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

// A node of a group without PlacementDomain has no leaf in the topology file
// (k8sbridge-topology puts it under cpu-only); once its pod runs, its leaf is the
// placement label of the Kubernetes node the pod landed on. A pinned group's file
// place is its pods' leaf already. A unit the node holds is never sent again: under
// topology/block, re-applying it drops the node from the block bitmap.
void Reconciler::PlanTopology(const World& world, std::vector<Action>& out) {
  if (options_.topology.empty())
    return;
  for (const SlurmNode& n : world.slurm) {
    if (!PodRulesApply(n) || n.Down() || n.powering_up || n.Suspending())
      continue;
    const conf::NodeGroup& group = *options_.config->GroupOf(n.name);
    if (!group.placement_domain.empty() || group.placement_label.empty())
      continue;
    auto pod = by_name_.pods.find(n.name);
    if (pod == by_name_.pods.end() || pod->second->IsBeingDeleted() ||
        pod->second->String("/status/phase") != "Running")
      continue;
    const std::string host = pod->second->String("/spec/nodeName");
    auto k8s_node = by_name_.nodes.find(host);
    if (k8s_node == by_name_.nodes.end())
      continue;
    const auto labels = k8s_node->second->Labels();
    auto leaf = labels.find(group.placement_label);
    if (leaf == labels.end() || leaf->second.empty())
      continue;
    std::string unit =
        fmt::format("{}:{}", options_.topology,
                    topology::LabelSwitchName(topology::LabelOptions{}, 1, leaf->second));
    if (HasUnit(n.topology, unit))
      continue;
    Action a(ActionKind::kSetTopology, n.name,
             fmt::format("its pod runs on Kubernetes node {}, {}={}", host, group.placement_label,
                         leaf->second));
    a.topology = std::move(unit);
    a.pod_name = pod->second->Name();
    out.push_back(std::move(a));
  }
}

std::string TopologyNotDue(const Action& action, const SlurmNode& live) {
  if (live.Down() || live.powering_up || live.Suspending())
    return "the node is down, powering up or being suspended (read live)";
  if (HasUnit(live.topology, action.topology))
    return fmt::format("Slurm has it in {} already (read live)", action.topology);
  return "";
}

}  // namespace k8sbridge::sync
