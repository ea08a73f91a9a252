// Pod faults (docs/sync.md, "Kubernetes → Slurm" and "Lost Kubernetes nodes"):
// a pod that failed, was lost or deleted, cannot start or stays unschedulable, or
// whose Kubernetes node is lost, fails its Slurm node (DOWN then POWER_DOWN: the
// jobs requeue, the next resume makes a fresh pod).
#include <fmt/format.h>

#include "k8sbridge/log.h"
#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/slurm/node_reason.h"
#include "rules.h"

namespace k8sbridge::sync {

namespace {

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
      // A message of many lines is the tail of the container's log
      // (FallbackToLogsOnError): the reason quotes the error that ended it.
      const std::string full_message = kube::StringMember(&v, "message");
      const std::string_view message = LastErrorLine(full_message);
      if (!message.empty())
        out += fmt::format("{}{}", out.empty() ? "" : ": ", message);
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

void Reconciler::PlanNodePod(const SlurmNode& n, const conf::NodeGroup& group,
                             const kube::Object* pod, const std::string& host_lost,
                             std::vector<Action>& out) {
  auto fail = [&](std::string text, Rule rule) {
    Action a{ActionKind::kFail, n.name, BridgeReason(text)};
    a.rule = rule;
    if (pod) {
      a.uid = pod->Uid();
      a.pod_name = pod->Name();
      a.k8s_node = kube::pod::NodeName(*pod);
    }
    out.push_back(std::move(a));
  };
  // Its status is stale and its pod may never be confirmed gone: DOWN at once (the
  // jobs requeue), whatever the pod last said; but not in the wake of an outage,
  // which may be what kept its kubelet from posting.
  if (pod && !host_lost.empty()) {
    if (InOutageHold())
      held_lost_ = true;
    else
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

std::string FailNotDue(const Action& action, const SlurmNode& live) {
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
}

}  // namespace k8sbridge::sync
