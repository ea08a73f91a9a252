#include "k8sbridge/sync/executor.h"

#include <algorithm>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/power_actions.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/slurm/node_reason.h"
#include "k8sbridge/text.h"

namespace k8sbridge::sync {

namespace {

std::string JsonString(std::string_view s) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return buf.GetString();
}

// metadata.annotations, created if absent.
rapidjson::Value& Annotations(rapidjson::Document& doc) {
  auto& a = doc.GetAllocator();
  if (!doc.HasMember("metadata") || !doc["metadata"].IsObject())
    doc.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType), a);
  rapidjson::Value& meta = doc["metadata"];
  if (!meta.HasMember("annotations") || !meta["annotations"].IsObject()) {
    meta.RemoveMember("annotations");
    meta.AddMember("annotations", rapidjson::Value(rapidjson::kObjectType), a);
  }
  return meta["annotations"];
}

void SetMember(rapidjson::Value& obj, std::string_view key, std::string_view value,
               rapidjson::Document::AllocatorType& a) {
  std::string k(key);
  obj.RemoveMember(k.c_str());
  obj.AddMember(rapidjson::Value(k.c_str(), a),
                rapidjson::Value(value.data(), static_cast<rapidjson::SizeType>(value.size()), a),
                a);
}

rapidjson::Value& Spec(rapidjson::Document& doc) {
  if (!doc.HasMember("spec") || !doc["spec"].IsObject()) {
    doc.RemoveMember("spec");
    doc.AddMember("spec", rapidjson::Value(rapidjson::kObjectType), doc.GetAllocator());
  }
  return doc["spec"];
}

// The pod an action is about: its own name, or the Slurm node's (the usual pod name).
const std::string& PodName(const Action& action) {
  return action.pod_name.empty() ? action.target : action.pod_name;
}

}  // namespace

// --- Executor -------------------------------------------------------------------

Executor::Executor(kube::Client& client, slurm::Slurm& slurm, kube::EventRecorder* events,
                   Logger& log, ExecutorOptions options)
    : client_(client), slurm_(slurm), events_(events), log_(log), options_(std::move(options)) {}

Executor::Outcome Executor::Attempt(const Action& action, Status& status) {
  status = Status::Ok();
  const auto now = client_.clock().Now();
  const std::string key = action.ToString();
  for (auto it = recent_.begin(); it != recent_.end();) {
    it = now - it->second >= options_.repeat_window ? recent_.erase(it) : std::next(it);
  }
  if (recent_.count(key)) {
    log_.Debug("sync: {} was done {} ms ago; skipped while the caches catch up", key,
               std::chrono::duration_cast<std::chrono::milliseconds>(now - recent_[key]).count());
    return Outcome::kRepeat;
  }
  // Leadership is a belief that can end at any moment: asked before each action,
  // not once per pass.
  if (options_.leading && !options_.leading()) {
    status = Status::Cancelled(fmt::format("not leading: {} not done", key));
    return Outcome::kNotLeading;
  }
  not_due_.clear();
  status = Run(action);
  if (!status.ok()) {
    log_.Warning("sync: {} failed: {}", key, status.ToString());
    return Outcome::kFailed;
  }
  recent_[key] = now;
  if (!not_due_.empty()) {
    log_.Info("sync: {} not done: {}", key, not_due_);
    return Outcome::kNotDue;
  }
  log_.Info("sync: {}", key);
  return Outcome::kDone;
}

Status Executor::Execute(const Action& action) {
  Status s;
  Attempt(action, s);
  return s;
}

bool Destructive(ActionKind kind) {
  return kind == ActionKind::kDeletePod || kind == ActionKind::kFail || kind == ActionKind::kDrain;
}

size_t MaxDestructive(int configured, size_t slurm_nodes) {
  if (configured > 0)
    return static_cast<size_t>(configured);
  return std::max<size_t>(20, (slurm_nodes + 9) / 10);
}

PassResult Executor::ExecutePass(const std::vector<Action>& actions, size_t max_destructive,
                                 const std::function<void(const Action&, std::string_view)>& done) {
  PassResult r;
  const size_t destructive = std::count_if(actions.begin(), actions.end(),
                                           [](const Action& a) { return Destructive(a.kind); });
  const bool capped = destructive > max_destructive;
  if (capped) {
    const auto first = std::find_if(actions.begin(), actions.end(),
                                    [](const Action& a) { return Destructive(a.kind); });
    r.skipped = "mass_action";
    r.why = fmt::format(
        "{} destructive actions planned in one pass (pod deletes, fails, drains; the first: {}), "
        "more than the cap of {} (SyncMaxActionsPerPass): none of them done. Check what Slurm "
        "and Kubernetes report; raise the cap if this many is right",
        destructive, first->ToString(), max_destructive);
  }
  for (const Action& a : actions) {
    if (capped && Destructive(a.kind))
      continue;
    Status s;
    const Outcome o = Attempt(a, s);
    if (o == Outcome::kNotLeading) {
      r.skipped = "not_leader";
      r.why =
          fmt::format("no longer leading: the rest of the pass not done, from {}", a.ToString());
      break;
    }
    if (o == Outcome::kRepeat)
      continue;
    (o == Outcome::kFailed ? r.failed : r.done)++;
    if (done)
      done(a, o == Outcome::kFailed ? "error" : o == Outcome::kNotDue ? "not_due" : "ok");
  }
  return r;
}

Status Executor::Run(const Action& action) {
  switch (action.kind) {
    case ActionKind::kMirrorDrain:
      return PatchPodAnnotations(action, true);
    case ActionKind::kClearDrain:
      return PatchPodAnnotations(action, false);
    case ActionKind::kCordon:
      return Cordon(action);
    case ActionKind::kUncordon:
      return Uncordon(action);
    case ActionKind::kDrain:
      return DrainNode(action);
    case ActionKind::kUndrain:
      return slurm_.Undrain(action.target);
    case ActionKind::kFail:
      return Fail(action);
    case ActionKind::kDeletePod:
      return DeletePod(action);
    case ActionKind::kSetFeatures:
      return SetFeatures(action);
    case ActionKind::kResume:
      return ResumeNode(action);
    case ActionKind::kRenewPowerDown:
      return RenewPowerDown(action);
    case ActionKind::kReboot:
      return RebootNode(action);
    case ActionKind::kRecreatePod:
      return RecreatePod(action);
    case ActionKind::kSetTopology:
      return SetTopology(action);
  }
  return Status::Internal("unknown action");
}

Result<SlurmNode> Executor::LiveIfDue(const Action& action) {
  auto node = slurm_.LoadNode(action.target);
  if (!node.ok()) {
    return node.status().WithContext(
        fmt::format("Slurm node {} cannot be read live, so nothing is done to it", action.target));
  }
  not_due_ = NotDueOn(action, *node, client_.clock().WallNow());
  return node;
}

// The node's pods are listed by its node label (a replacement has another name); one
// stranded on a lost node (being deleted there: it may stay for ever) counts as none.
Status Executor::CheckNoPodOfOurs(const std::string& name, std::string_view if_one) {
  kube::ListOptions o;
  o.label_selector = power::NodePodsSelector(options_.cluster, name);
  auto pods = client_.List(kube::kPods, options_.namespace_, o);
  if (!pods.ok()) {
    return pods.status().WithContext(
        fmt::format("the pods of {} cannot be read live, so nothing is done to it", name));
  }
  for (const kube::Object& pod : pods->items) {
    if (!power::IsOwnedWorkerPod(pod, options_.cluster, name))
      continue;
    if (pod.IsBeingDeleted() && !kube::pod::NodeName(pod).empty()) {
      auto host = LiveNode(kube::pod::NodeName(pod));
      if (!host.ok())
        return host.status();
      if (power::Stranded(pod, host->get())) {
        log_.Debug("sync: pod {} of {} is stranded on a lost Kubernetes node: counted as none",
                   pod.Name(), name);
        continue;
      }
    }
    not_due_ = if_one;
  }
  return Status::Ok();
}

Result<std::unique_ptr<kube::Object>> Executor::LiveNode(const std::string& name) {
  auto node = client_.Get(kube::kNodes, "", name);
  if (node.ok())
    return std::make_unique<kube::Object>(std::move(*node));
  if (node.status().code() == Status::Code::kNotFound)
    return std::unique_ptr<kube::Object>();
  return node.status().WithContext(
      fmt::format("Kubernetes node {} cannot be read live, so nothing is done", name));
}

Status Executor::Fail(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  if (action.rule == Rule::kNodeLost && !action.k8s_node.empty()) {
    auto host = LiveNode(action.k8s_node);
    if (!host.ok())
      return host.status();
    if (*host && power::NodeLostWhy(**host).empty()) {
      not_due_ = fmt::format("Kubernetes node {} is back (read live)", action.k8s_node);
      return Status::Ok();
    }
  }
  // The informer may be behind: "no pod" must be the API server's answer.
  if (action.rule == Rule::kPodLost || action.rule == Rule::kNoPodStarting) {
    Status s = CheckNoPodOfOurs(action.target, "its pod exists (read live; the cache is behind)");
    if (!s.ok() || !not_due_.empty())
      return s;
  }
  // An admin's (or Slurm's) reason on a node out of service stays, and so does its
  // author: DOWN without a reason of ours (jobs still requeue at once).
  const bool keep = ReasonPolicy(live->OutOfService(), live->reason) == ReasonWrite::kKeep;
  Status s = slurm_.Fail(action.target, keep ? "" : action.reason);
  if (s.ok() && keep) {
    log_.Info("sync: {} keeps its reason \"{}\" (not k8sbridge's): set DOWN without ours",
              action.target, live->reason);
  }
  if (s.ok() && !action.uid.empty())
    PodEvent(action, "Warning", contract::kSlurmNodeDownEvent, action.reason);
  return s;
}

Status Executor::DrainNode(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  if (ReasonPolicy(live->OutOfService(), live->reason) == ReasonWrite::kKeep) {
    not_due_ = fmt::format("it is out of service with a reason k8sbridge does not own (\"{}\")",
                           live->reason);
    return Status::Ok();
  }
  return slurm_.Drain(action.target, action.reason);
}

Status Executor::ResumeNode(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  Status s = CheckNoPodOfOurs(action.target, "a pod of ours still exists (read live)");
  if (!s.ok() || !not_due_.empty())
    return s;
  return slurm_.ReturnToService(action.target);
}

// Read live first: a unit the node holds already must not be sent again (a stale
// snapshot would repeat the last pass's update).
Status Executor::SetTopology(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  if (Status s = slurm_.SetTopology(action.target, action.topology); !s.ok())
    return s;
  log_.Info("node {}: topology {}: {}", action.target, action.topology, action.reason);
  return Status::Ok();
}

Status Executor::RenewPowerDown(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  return slurm_.PowerDown(action.target);
}

Status Executor::RebootNode(const Action& action) {
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  return slurm_.Reboot(action.target, action.reason);
}

Status Executor::RecreatePod(const Action& action) {
  if (!options_.power)
    return Status::Internal("no pod templates loaded: cannot make the pod of a reboot");
  auto live = LiveIfDue(action);
  if (!live.ok() || !not_due_.empty())
    return live.status();
  Status s = CheckNoPodOfOurs(action.target, "a pod of ours still exists (read live)");
  if (!s.ok() || !not_due_.empty())
    return s;
  power::ResumeRequest request;
  request.pod_annotations[std::string(contract::kRebootOfAnnotation)] = action.reboot_of;
  power::PowerContext ctx{*options_.power, client_, slurm_, log_, events_};
  power::PowerReport report = power::Resume(ctx, {action.target}, request);
  if (report.Failed() > 0)
    return report.nodes.front().status;
  return Status::Ok();
}

void Executor::PodEvent(const Action& action, std::string_view type, std::string_view reason,
                        std::string_view note) {
  if (!events_)
    return;
  kube::ObjectReference ref;
  ref.api_version = "v1";
  ref.kind = "Pod";
  ref.namespace_ = options_.namespace_;
  ref.name = PodName(action);
  ref.uid = action.uid;
  events_->Record(ref, type, reason, "Sync", note);
}

Status Executor::SetFeatures(const Action& action) {
  if (action.update_slurm) {
    if (Status s = slurm_.SetFeatures(action.target, action.features, action.features_act);
        !s.ok()) {
      return s;
    }
    log_.Info("node {}: features {} (active {}): {}", action.target, action.features,
              action.features_act, action.reason);
  }
  // The marker goes last: if the Slurm update failed, the next round tries again.
  const std::string body = fmt::format(R"({{"metadata":{{"annotations":{{{}:{}}}}}}})",
                                       JsonString(contract::kLabelFeaturesAnnotation),
                                       JsonString(action.label_features));
  auto r = client_.Patch(kube::kPods, options_.namespace_, action.pod_name, kube::PatchType::kMerge,
                         body);
  if (!r.ok() && r.status().code() != Status::Code::kNotFound)
    return r.status();
  return Status::Ok();
}

Status Executor::PatchPodAnnotations(const Action& action, bool set) {
  std::string body;
  if (set) {
    body =
        fmt::format(R"({{"metadata":{{"annotations":{{{}:{},{}:{},{}:{}}}}}}})",
                    JsonString(contract::kDrainReasonAnnotation), JsonString(action.drain_reason),
                    JsonString(contract::kDrainUserAnnotation), JsonString(action.drain_user),
                    JsonString(contract::kDrainTimeAnnotation), JsonString(action.drain_time));
  } else {
    body = fmt::format(R"({{"metadata":{{"annotations":{{{}:null,{}:null,{}:null}}}}}})",
                       JsonString(contract::kDrainReasonAnnotation),
                       JsonString(contract::kDrainUserAnnotation),
                       JsonString(contract::kDrainTimeAnnotation));
  }
  auto r = client_.Patch(kube::kPods, options_.namespace_, PodName(action), kube::PatchType::kMerge,
                         body);
  if (!r.ok()) {
    if (r.status().code() == Status::Code::kNotFound)
      return Status::Ok();  // the pod went meanwhile: nothing left to annotate
    return r.status();
  }
  if (set) {
    PodEvent(action, "Warning", contract::kSlurmNodeDrainedEvent,
             fmt::format("Slurm drained node {}: {} (by {}{}{})", action.target,
                         action.drain_reason, action.drain_user.empty() ? "?" : action.drain_user,
                         action.drain_time.empty() ? "" : " at ", action.drain_time));
  } else {
    PodEvent(action, "Normal", contract::kSlurmNodeResumedEvent,
             fmt::format("Slurm no longer drains node {}", action.target));
  }
  return Status::Ok();
}

Status Executor::Cordon(const Action& action) {
  const std::string cluster = options_.cluster;
  bool cordoned = false;
  auto r = client_.Update(kube::kNodes, "", action.target, [&](kube::Object& node) {
    rapidjson::Document& doc = node.mutable_json();
    auto& a = doc.GetAllocator();
    rapidjson::Value& spec = Spec(doc);
    if (!spec.HasMember("taints") || !spec["taints"].IsArray()) {
      spec.RemoveMember("taints");
      spec.AddMember("taints", rapidjson::Value(rapidjson::kArrayType), a);
    }
    rapidjson::Value& taints = spec["taints"];
    bool have = false;
    for (auto& t : taints.GetArray()) {
      if (kube::StringMember(&t, "key") == contract::kHardwareTaintKey)
        have = true;
    }
    if (!have) {
      rapidjson::Value t(rapidjson::kObjectType);
      t.AddMember("key", rapidjson::Value(std::string(contract::kHardwareTaintKey).c_str(), a), a);
      t.AddMember("value", rapidjson::Value(cluster.c_str(), a), a);
      t.AddMember("effect", "NoSchedule", a);
      taints.PushBack(t, a);
    }
    rapidjson::Value& ann = Annotations(doc);
    const bool unschedulable = spec.HasMember("unschedulable") && spec["unschedulable"].IsBool() &&
                               spec["unschedulable"].GetBool();
    if (!unschedulable && !ann.HasMember(std::string(contract::kCordonedByAnnotation).c_str())) {
      spec.RemoveMember("unschedulable");
      spec.AddMember("unschedulable", true, a);
      SetMember(ann, contract::kCordonedByAnnotation, cluster, a);
      cordoned = true;
    }
    SetMember(ann, contract::kHardwareDrainsAnnotation, text::Join(action.slurm_nodes, ","), a);
    SetMember(ann, contract::kHardwareReasonAnnotation, action.reason, a);
    return Status::Ok();
  });
  if (!r.ok())
    return r.status();
  if (events_) {
    events_->Record(kube::ObjectReference::Of(*r), "Warning", contract::kHardwareDrainEvent,
                    "Cordon",
                    fmt::format("Slurm drained {} for hardware ({}); {}tainted {}",
                                text::Join(action.slurm_nodes, ","), action.reason,
                                cordoned ? "cordoned and " : "", contract::kHardwareTaintKey));
  }
  return Status::Ok();
}

Status Executor::Uncordon(const Action& action) {
  const std::string cluster = options_.cluster;
  bool uncordoned = false;
  auto r = client_.Update(kube::kNodes, "", action.target, [&](kube::Object& node) {
    rapidjson::Document& doc = node.mutable_json();
    rapidjson::Value& spec = Spec(doc);
    if (spec.HasMember("taints") && spec["taints"].IsArray()) {
      rapidjson::Value& taints = spec["taints"];
      for (auto it = taints.Begin(); it != taints.End();) {
        if (kube::StringMember(it, "key") == contract::kHardwareTaintKey)
          it = taints.Erase(it);
        else
          ++it;
      }
    }
    rapidjson::Value& ann = Annotations(doc);
    const std::string by_key(contract::kCordonedByAnnotation);
    if (kube::StringMember(&ann, by_key) == cluster) {
      // Our cordon: lift it. Anyone else's stays.
      if (spec.HasMember("unschedulable")) {
        spec.RemoveMember("unschedulable");
        uncordoned = true;
      }
      ann.RemoveMember(by_key.c_str());
    }
    ann.RemoveMember(std::string(contract::kHardwareDrainsAnnotation).c_str());
    ann.RemoveMember(std::string(contract::kHardwareReasonAnnotation).c_str());
    return Status::Ok();
  });
  if (!r.ok()) {
    if (r.status().code() == Status::Code::kNotFound)
      return Status::Ok();
    return r.status();
  }
  if (events_) {
    events_->Record(kube::ObjectReference::Of(*r), "Normal", contract::kHardwareDrainClearedEvent,
                    "Uncordon",
                    fmt::format("{}: {}removed taint {}", action.reason,
                                uncordoned ? "uncordoned, " : "", contract::kHardwareTaintKey));
  }
  return Status::Ok();
}

Status Executor::DeletePod(const Action& action) {
  // Ownership is checked again on the live object: a pod created under the same
  // name by someone else must never be deleted.
  const std::string name = PodName(action);
  if (action.rule == Rule::kReboot) {
    auto live = LiveIfDue(action);
    if (!live.ok() || !not_due_.empty())
      return live.status();
  }
  auto pod = client_.Get(kube::kPods, options_.namespace_, name);
  if (!pod.ok())
    return pod.status().code() == Status::Code::kNotFound ? Status::Ok() : pod.status();
  if (!power::IsOwnedWorkerPod(*pod, options_.cluster, action.target)) {
    return Status::PermissionDenied(fmt::format(
        "pod {} lacks k8sbridge's ownership labels for node {} of cluster {}: not deleted", name,
        action.target, options_.cluster));
  }
  if (!action.uid.empty() && pod->Uid() != action.uid)
    return Status::Conflict(fmt::format("pod {} was replaced meanwhile: not deleted", name));
  kube::DeleteOptions o;
  o.precondition_uid = pod->Uid();
  auto r = client_.Delete(kube::kPods, options_.namespace_, name, o);
  if (!r.ok() && r.status().code() != Status::Code::kNotFound)
    return r.status();
  PodEvent(
      action, "Normal",
      action.rule == Rule::kReboot ? contract::kRebootReplacedEvent : contract::kOrphanDeletedEvent,
      action.reason);
  return Status::Ok();
}

}  // namespace k8sbridge::sync
