#include "lifecycle.h"

#include <algorithm>

#include <fmt/format.h>

#include "disruption.h"
#include "taints.h"

namespace kubesim {

namespace {

using WallTime = k8sbridge::Clock::Wall::time_point;

std::string Annotation(const rapidjson::Value& object, const char* key) {
  const rapidjson::Value* annotations = Find(object, "metadata.annotations");
  if (annotations == nullptr || !annotations->IsObject())
    return "";
  auto it = annotations->FindMember(key);
  return it != annotations->MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

bool IsTerminating(const rapidjson::Value& pod) {
  return Find(pod, "metadata.deletionTimestamp") != nullptr;
}

bool IsFinished(const rapidjson::Value& pod) {
  const std::string phase = GetString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

// The taint key the node lifecycle controller wants for a Ready status, or "".
const char* ConditionTaintKey(const std::string& ready) {
  if (ready == "False")
    return kTaintNotReady;
  if (ready == "Unknown")
    return kTaintUnreachable;
  return "";
}

// True when the node's not-ready/unreachable taints are exactly `want_key`'s two (or
// none for ""), so that a pass need not copy the node to find out.
bool HasConditionTaints(const rapidjson::Value& node, const std::string& want_key) {
  int wanted = 0;
  for (const Taint& t : NodeTaints(node)) {
    if (t.key != kTaintNotReady && t.key != kTaintUnreachable)
      continue;
    if (t.key != want_key)
      return false;
    wanted += t.effect == "NoSchedule" || t.effect == "NoExecute" ? 1 : 0;
  }
  return wanted == (want_key.empty() ? 0 : 2);
}

// Rewrites the node's not-ready/unreachable taints to `want_key` (both effects), or
// removes them when it is empty. Taints that are already right stay untouched (their
// timeAdded too).
void SetConditionTaints(rapidjson::Document& node, const std::string& want_key,
                        const std::string& now) {
  auto& a = node.GetAllocator();
  if (Find(node, "spec.taints") == nullptr) {
    if (want_key.empty())
      return;
    SetMember(node, "spec.taints", rapidjson::Value(rapidjson::kArrayType));
  }
  rapidjson::Value& taints = node["spec"]["taints"];
  if (!taints.IsArray())
    taints.SetArray();
  std::set<std::string> have;
  for (auto it = taints.Begin(); it != taints.End();) {
    const std::string key = GetString(*it, "key");
    const bool ours = key == kTaintNotReady || key == kTaintUnreachable;
    if (ours && key != want_key) {
      it = taints.Erase(it);
      continue;
    }
    if (ours)
      have.insert(GetString(*it, "effect"));
    ++it;
  }
  if (want_key.empty())
    return;
  for (const char* effect : {"NoSchedule", "NoExecute"}) {
    if (have.count(effect) != 0)
      continue;
    rapidjson::Value t(rapidjson::kObjectType);
    t.AddMember("key", rapidjson::Value(want_key.c_str(), a), a);
    t.AddMember("effect", rapidjson::StringRef(effect), a);
    if (std::string(effect) == "NoExecute")  // the taint manager counts from it
      t.AddMember("timeAdded", rapidjson::Value(now.c_str(), a), a);
    taints.PushBack(t, a);
  }
}

// The smallest tolerationSeconds among `tolerations` (getMinTolerationTime): negative
// when every one tolerates forever.
int64_t MinTolerationSeconds(const std::vector<const rapidjson::Value*>& tolerations) {
  int64_t min = -1;
  for (const rapidjson::Value* t : tolerations) {
    const rapidjson::Value* seconds = Find(*t, "tolerationSeconds");
    if (seconds == nullptr || !seconds->IsInt64())
      continue;
    const int64_t s = std::max<int64_t>(0, seconds->GetInt64());
    if (min < 0 || s < min)
      min = s;
  }
  return min;
}

}  // namespace

void SetNodeReadyCondition(rapidjson::Document& node, const std::string& status,
                           const std::string& reason, const std::string& message,
                           const std::string& now) {
  // Unknown is the controller's verdict on a silent kubelet: the last heartbeat stays.
  std::string heartbeat = now;
  const rapidjson::Value* conditions = Find(node, "status.conditions");
  if (status == "Unknown" && conditions != nullptr && conditions->IsArray()) {
    for (const auto& c : conditions->GetArray()) {
      if (GetString(c, "type") == "Ready" && !GetString(c, "lastHeartbeatTime").empty())
        heartbeat = GetString(c, "lastHeartbeatTime");
    }
  }
  SetCondition(node, "Ready", status, reason, message, now);
  auto& a = node.GetAllocator();
  for (auto& c : node["status"]["conditions"].GetArray()) {
    if (GetString(c, "type") != "Ready")
      continue;
    c.RemoveMember("lastProbeTime");
    c.RemoveMember("lastHeartbeatTime");
    c.AddMember("lastHeartbeatTime", rapidjson::Value(heartbeat.c_str(), a), a);
  }
}

Status ReconcileNodeConditionTaints(Store& store, const std::string& node) {
  const std::string now = store.NowTimestamp();
  Result<ObjectPtr> r = store.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    SetConditionTaints(doc, ConditionTaintKey(NodeReadyStatus(doc)), now);
    return Status::Ok();
  });
  return r.ok() ? Status::Ok() : r.status();
}

void MarkPodsNotReady(Store& store, const std::string& node) {
  const std::string now = store.NowTimestamp();
  ListPage on_node;  // from the store's index of pods by node, not a scan of every pod
  on_node.pods_on_node = node;
  for (const ObjectPtr& pod : store.List("pods", "", {}, on_node).items) {
    (void)store.Mutate("pods", GetString(*pod, "metadata.namespace"),
                       GetString(*pod, "metadata.name"), [&](rapidjson::Document& doc) {
                         SetCondition(doc, "Ready", "False", "", "", now);
                         return Status::Ok();
                       });
  }
}

Controllers::Controllers(Store& store, k8sbridge::Logger& log, ControllerOptions options)
    : store_(store), log_(log), options_(options) {}

Controllers::~Controllers() {
  Stop();
}

void Controllers::Start() {
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Controllers::Stop() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

void Controllers::Loop() {
  RunControllerLoop(
      store_, stop_, options_.resync,
      [](const std::string& resource) { return resource != "events" && resource != "leases"; },
      [this] { RunOnce(); });
}

void Controllers::RunOnce() {
  NodeLifecyclePass();
  TaintEvictionPass();
  PodGcPass();
  UpdateDisruptionBudgets(store_);
}

void Controllers::NodeLifecyclePass() {
  for (const ObjectPtr& node : store_.List("nodes", "").items) {
    const std::string name = GetString(*node, "metadata.name");
    ApiSideNodeFault(*node);
    Result<ObjectPtr> current = store_.Get("nodes", "", name);
    if (!current.ok())
      continue;
    const std::string ready = NodeReadyStatus(**current);
    if (!HasConditionTaints(**current, ConditionTaintKey(ready))) {
      if (Status s = ReconcileNodeConditionTaints(store_, name); !s.ok())
        log_.Warning("node lifecycle: {}: {}", name, s.ToString());
    }
    auto [it, first] = ready_.emplace(name, ready);
    if (!first && it->second == "True" && ready != "True") {
      log_.Info("node lifecycle: node {} is not Ready ({}): marking its pods not Ready", name,
                ready.empty() ? "no condition" : ready);
      MarkPodsNotReady(store_, name);
    }
    it->second = ready;
  }
}

// The lost-node fault for nodes no kubesim kubelet runs: Ready=Unknown while the
// annotation says NotReady, Ready=True again when it is removed.
void Controllers::ApiSideNodeFault(const rapidjson::Value& node) {
  const std::string name = GetString(node, "metadata.name");
  if (store_.HasKubelet(name))
    return;  // the kubelet plays it for its own nodes
  const bool want_lost = Annotation(node, kNodeFaultAnnotation) == "NotReady";
  const bool lost = lost_here_.count(name) != 0;
  if (want_lost == lost)
    return;
  const std::string now = store_.NowTimestamp();
  Result<ObjectPtr> r = store_.Mutate("nodes", "", name, [&](rapidjson::Document& doc) {
    if (want_lost) {
      SetNodeReadyCondition(doc, "Unknown", kNodeStatusUnknownReason, kNodeStatusUnknownMessage,
                            now);
    } else {
      SetNodeReadyCondition(doc, "True", "KubeletReady", "kubelet is posting ready status", now);
    }
    return Status::Ok();
  });
  if (!r.ok())
    return;
  if (want_lost) {
    lost_here_.insert(name);
    log_.Info("node lifecycle: node {} is lost (simulated): Ready=Unknown", name);
  } else {
    lost_here_.erase(name);
    log_.Info("node lifecycle: node {} is Ready again", name);
  }
}

void Controllers::TaintEvictionPass() {
  // Only the pods of NoExecute-tainted nodes, read by node as the taint manager
  // handles a node's pods on its taint's change (taint_eviction.go): a pod anywhere
  // else has nothing to wait for, and its first-seen time is dropped below.
  std::set<std::string> seen;
  for (const ObjectPtr& node : store_.List("nodes", "").items) {
    const std::vector<Taint> taints = NodeTaints(*node);
    if (std::none_of(taints.begin(), taints.end(),
                     [](const Taint& t) { return t.effect == "NoExecute"; }))
      continue;
    ListPage on_node;
    on_node.pods_on_node = GetString(*node, "metadata.name");
    for (const ObjectPtr& pod : store_.List("pods", "", {}, on_node).items) {
      if (IsTerminating(*pod))
        continue;
      seen.insert(GetString(*pod, "metadata.uid"));
      EvictForTaint(*pod, *node);
    }
  }
  std::erase_if(noexecute_seen_, [&](const auto& entry) { return seen.count(entry.first) == 0; });
}

void Controllers::EvictForTaint(const rapidjson::Value& pod, const rapidjson::Value& node) {
  const std::string uid = GetString(pod, "metadata.uid");
  std::vector<const rapidjson::Value*> used;
  bool untolerated = false;
  bool tainted = false;
  for (const Taint& taint : NodeTaints(node)) {
    if (taint.effect != "NoExecute")
      continue;
    tainted = true;
    const rapidjson::Value* toleration = MatchingToleration(pod, taint);
    if (toleration == nullptr)
      untolerated = true;
    else
      used.push_back(toleration);
  }
  const int64_t min_seconds = untolerated ? 0 : MinTolerationSeconds(used);
  if (!tainted || min_seconds < 0) {
    noexecute_seen_.erase(uid);  // no NoExecute taint, or tolerated forever
    return;
  }
  const WallTime now = store_.clock().WallNow();
  const WallTime since = noexecute_seen_.emplace(uid, now).first->second;
  if (now < since + std::chrono::seconds(min_seconds))
    return;
  const std::string ns = GetString(pod, "metadata.namespace");
  const std::string name = GetString(pod, "metadata.name");
  const std::string stamp = store_.NowTimestamp();
  Result<ObjectPtr> marked = store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
    if (GetString(doc, "metadata.uid") != uid)
      return Status::Conflict("another pod of that name");
    SetCondition(doc, "DisruptionTarget", "True", "DeletionByTaintManager",
                 "Taint manager: deleting due to NoExecute taint", stamp);
    return Status::Ok();
  });
  if (!marked.ok())
    return;
  DeleteOptions options;
  options.precondition_uid = uid;
  if (store_.Delete("pods", ns, name, options).ok()) {
    log_.Info("taint eviction: deleting {}/{} (NoExecute taint on node {})", ns, name,
              GetString(node, "metadata.name"));
  }
  noexecute_seen_.erase(uid);
}

void Controllers::PodGcPass() {
  std::map<std::string, ObjectPtr> nodes;
  for (const ObjectPtr& node : store_.List("nodes", "").items)
    nodes[GetString(*node, "metadata.name")] = node;
  const WallTime now = store_.clock().WallNow();
  std::set<std::string> missing;
  for (const ObjectPtr& pod : store_.List("pods", "").items) {
    const std::string node_name = GetString(*pod, "spec.nodeName");
    if (node_name.empty())
      continue;
    auto node = nodes.find(node_name);
    if (node == nodes.end()) {
      missing.insert(node_name);
      const WallTime since = node_missing_.emplace(node_name, now).first->second;
      if (now >= since + options_.pod_gc_quarantine)
        ForceDelete(*pod, "DeletionByPodGC", "PodGC: node no longer exists");
      continue;
    }
    if (!IsTerminating(*pod) || NodeReadyStatus(*node->second) == "True")
      continue;
    const std::vector<Taint> taints = NodeTaints(*node->second);
    if (std::any_of(taints.begin(), taints.end(),
                    [](const Taint& t) { return t.key == kTaintOutOfService; }))
      ForceDelete(*pod, "", "");
  }
  std::erase_if(node_missing_, [&](const auto& entry) { return missing.count(entry.first) == 0; });
}

// markFailedAndDeletePodWithCondition: phase Failed (with the condition, if any) unless
// the pod finished, then a delete with grace 0.
void Controllers::ForceDelete(const rapidjson::Value& pod, const char* reason,
                              const char* message) {
  const std::string ns = GetString(pod, "metadata.namespace");
  const std::string name = GetString(pod, "metadata.name");
  const std::string uid = GetString(pod, "metadata.uid");
  const std::string now = store_.NowTimestamp();
  if (!IsFinished(pod)) {
    Result<ObjectPtr> marked = store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
      if (GetString(doc, "metadata.uid") != uid)
        return Status::Conflict("another pod of that name");
      SetMember(doc, "status.phase", rapidjson::Value("Failed"));
      if (reason[0] != '\0')
        SetCondition(doc, "DisruptionTarget", "True", reason, message, now);
      return Status::Ok();
    });
    if (!marked.ok())
      return;
  }
  DeleteOptions options;
  options.grace_period_seconds = 0;
  options.precondition_uid = uid;
  if (store_.Delete("pods", ns, name, options).ok()) {
    log_.Info("pod GC: force-deleted {}/{} on node {}", ns, name, GetString(pod, "spec.nodeName"));
  }
}

}  // namespace kubesim
