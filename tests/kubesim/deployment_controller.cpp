// The Deployment and ReplicaSet controllers, after pkg/controller/deployment
// (sync.go: getNewReplicaSet, rolling.go: reconcileNewReplicaSet/reconcileOldReplicaSets,
// recreate.go, util/deployment_util.go: ResolveFenceposts, progress.go) and
// pkg/controller/replicaset (replica_set.go: manageReplicas, getPodsToDelete).
#include <algorithm>

#include <fmt/format.h>

#include "workload_controllers.h"
#include "workloads.h"

namespace kubesim {

namespace {

using Alloc = rapidjson::Document::AllocatorType;

bool Active(const rapidjson::Value& pod) {
  return !IsPodTerminating(pod) && !IsPodFinished(pod);
}

void DeleteByUid(Store& store, const rapidjson::Value& object, const char* resource) {
  DeleteOptions options;
  options.precondition_uid = GetString(object, "metadata.uid");
  (void)store.Delete(resource, GetString(object, "metadata.namespace"),
                     GetString(object, "metadata.name"), options);
}

// getPodsToDelete's order: unscheduled, pending, not ready before ready; newer first.
bool DeleteFirst(const ObjectPtr& a, const ObjectPtr& b) {
  auto rank = [](const rapidjson::Value& p) {
    if (GetString(p, "spec.nodeName").empty())
      return 0;
    if (GetString(p, "status.phase") == "Pending")
      return 1;
    return IsPodReady(p) ? 3 : 2;
  };
  if (rank(*a) != rank(*b))
    return rank(*a) < rank(*b);
  return GetString(*a, "metadata.creationTimestamp") > GetString(*b, "metadata.creationTimestamp");
}

void SetReplicas(Store& store, const rapidjson::Value& rs, int64_t replicas) {
  if (IntAt(rs, "spec.replicas", 1) == replicas)
    return;
  (void)store.Mutate("replicasets", GetString(rs, "metadata.namespace"),
                     GetString(rs, "metadata.name"), [&](rapidjson::Document& doc) {
                       SetMember(doc, "spec.replicas", rapidjson::Value(replicas));
                       SetMember(doc, "metadata.generation",
                                 rapidjson::Value(IntAt(doc, "metadata.generation", 1) + 1));
                       return Status::Ok();
                     });
}

void AddLabel(rapidjson::Value& object, const char* path_to_labels, const std::string& value,
              Alloc& a) {
  rapidjson::Value* labels = const_cast<rapidjson::Value*>(Find(object, path_to_labels));
  if (labels == nullptr || !labels->IsObject())
    return;
  labels->RemoveMember("pod-template-hash");
  labels->AddMember("pod-template-hash", rapidjson::Value(value.c_str(), a), a);
}

// The new ReplicaSet of `deploy` for template hash `hash` (getNewReplicaSet).
Result<ObjectPtr> CreateReplicaSet(Store& store, const rapidjson::Value& deploy,
                                   const std::string& hash, int64_t revision) {
  rapidjson::Document rs(rapidjson::kObjectType);
  auto& a = rs.GetAllocator();
  rs.AddMember("apiVersion", "apps/v1", a);
  rs.AddMember("kind", "ReplicaSet", a);
  const std::string name = GetString(deploy, "metadata.name") + "-" + hash;
  rapidjson::Document spec;
  spec.CopyFrom(*Find(deploy, "spec"), spec.GetAllocator());
  rapidjson::Value meta(rapidjson::kObjectType);
  meta.AddMember("name", rapidjson::Value(name.c_str(), a), a);
  const rapidjson::Value* labels = Find(deploy, "spec.template.metadata.labels");
  meta.AddMember(
      "labels",
      labels != nullptr ? rapidjson::Value(*labels, a) : rapidjson::Value(rapidjson::kObjectType),
      a);
  rapidjson::Value annotations(rapidjson::kObjectType);
  std::string replicas = std::to_string(IntAt(deploy, "spec.replicas", 1));
  annotations.AddMember("deployment.kubernetes.io/desired-replicas",
                        rapidjson::Value(replicas.c_str(), a), a);
  annotations.AddMember("deployment.kubernetes.io/revision",
                        rapidjson::Value(std::to_string(revision).c_str(), a), a);
  meta.AddMember("annotations", annotations, a);
  rapidjson::Value refs(rapidjson::kArrayType);
  refs.PushBack(ControllerRef(deploy, "apps/v1", "Deployment", a), a);
  meta.AddMember("ownerReferences", refs, a);
  rs.AddMember("metadata", meta, a);
  rapidjson::Value rs_spec(rapidjson::kObjectType);
  rs_spec.AddMember("replicas", 0, a);
  rs_spec.AddMember("minReadySeconds", IntAt(deploy, "spec.minReadySeconds", 0), a);
  rs_spec.AddMember("selector", rapidjson::Value(*Find(deploy, "spec.selector"), a), a);
  rs_spec.AddMember("template", rapidjson::Value(*Find(deploy, "spec.template"), a), a);
  rs.AddMember("spec", rs_spec, a);
  AddLabel(rs, "metadata.labels", hash, a);
  if (Find(rs, "spec.selector.matchLabels") == nullptr)
    SetMember(rs, "spec.selector.matchLabels", rapidjson::Value(rapidjson::kObjectType));
  AddLabel(rs, "spec.selector.matchLabels", hash, a);
  if (Find(rs, "spec.template.metadata.labels") == nullptr)
    SetMember(rs, "spec.template.metadata.labels", rapidjson::Value(rapidjson::kObjectType));
  AddLabel(rs, "spec.template.metadata.labels", hash, a);
  return store.Create("replicasets", GetString(deploy, "metadata.namespace"), std::move(rs));
}

// intstr.GetScaledValueFromIntOrPercent.
int64_t Scaled(const rapidjson::Value* v, int64_t total, bool round_up) {
  if (v == nullptr)
    return 0;
  if (v->IsInt64())
    return v->GetInt64();
  if (!v->IsString())
    return 0;
  std::string s = v->GetString();
  int64_t pct = std::strtoll(s.c_str(), nullptr, 10);
  return round_up ? (pct * total + 99) / 100 : pct * total / 100;
}

// The deployment.kubernetes.io/revision annotation of a ReplicaSet (0 if none).
int64_t RevisionOf(const rapidjson::Value& rs) {
  const rapidjson::Value* annotations = Find(rs, "metadata.annotations");
  if (annotations == nullptr || !annotations->IsObject())
    return 0;
  auto it = annotations->FindMember("deployment.kubernetes.io/revision");
  if (it == annotations->MemberEnd() || !it->value.IsString())
    return 0;
  return std::strtoll(it->value.GetString(), nullptr, 10);
}

struct Rollout {
  ObjectPtr new_rs;
  std::vector<ObjectPtr> old_rs;
  int64_t replicas = 1;
  int64_t max_surge = 0;
  int64_t max_unavailable = 0;
  bool created = false;
};

// reconcileNewReplicaSet and reconcileOldReplicaSets of a rolling update.
void RollingUpdate(Store& store, const Rollout& r) {
  int64_t total = IntAt(*r.new_rs, "spec.replicas", 0);
  for (const ObjectPtr& rs : r.old_rs)
    total += IntAt(*rs, "spec.replicas", 0);
  int64_t new_replicas = IntAt(*r.new_rs, "spec.replicas", 0);
  if (new_replicas > r.replicas) {
    SetReplicas(store, *r.new_rs, r.replicas);
    return;
  }
  int64_t allowed = r.replicas + r.max_surge - total;
  if (new_replicas < r.replicas && allowed > 0) {
    int64_t next = std::min(r.replicas, new_replicas + allowed);
    total += next - new_replicas;
    new_replicas = next;
    SetReplicas(store, *r.new_rs, new_replicas);
  }
  int64_t min_available = r.replicas - r.max_unavailable;
  int64_t new_unavailable = new_replicas - IntAt(*r.new_rs, "status.availableReplicas", 0);
  int64_t scale_down = total - min_available - new_unavailable;
  for (const ObjectPtr& rs : r.old_rs) {
    int64_t have = IntAt(*rs, "spec.replicas", 0);
    // Unhealthy old pods go first (cleanupUnhealthyReplicas), then the budget.
    int64_t unhealthy = have - IntAt(*rs, "status.availableReplicas", 0);
    int64_t drop = std::min(have, std::max<int64_t>(unhealthy, std::max<int64_t>(scale_down, 0)));
    if (drop <= 0)
      continue;
    SetReplicas(store, *rs, have - drop);
    scale_down -= drop;
  }
}

void Recreate(Store& store, const Rollout& r) {
  bool old_pods = false;
  for (const ObjectPtr& rs : r.old_rs) {
    SetReplicas(store, *rs, 0);
    for (const ObjectPtr& pod : OwnedBy(store, "pods", GetString(*rs, "metadata.namespace"),
                                        GetString(*rs, "metadata.uid")))
      old_pods = old_pods || !IsPodFinished(*pod);
  }
  if (!old_pods)
    SetReplicas(store, *r.new_rs, r.replicas);
}

// A condition of a Deployment, keeping its times while nothing changes.
void PutCondition(rapidjson::Value& conditions, const rapidjson::Value* old, const char* type,
                  const char* status, const char* reason, const std::string& message,
                  const std::string& now, Alloc& a) {
  rapidjson::Value c(rapidjson::kObjectType);
  std::string transition = now, update = now;
  if (old != nullptr && old->IsArray()) {
    for (const auto& o : old->GetArray()) {
      if (GetString(o, "type") != type)
        continue;
      if (GetString(o, "status") == status)
        transition = GetString(o, "lastTransitionTime");
      if (GetString(o, "status") == status && GetString(o, "reason") == reason &&
          GetString(o, "message") == message)
        update = GetString(o, "lastUpdateTime");
    }
  }
  c.AddMember("type", rapidjson::StringRef(type), a);
  c.AddMember("status", rapidjson::StringRef(status), a);
  c.AddMember("lastUpdateTime", rapidjson::Value(update.c_str(), a), a);
  c.AddMember("lastTransitionTime", rapidjson::Value(transition.c_str(), a), a);
  c.AddMember("reason", rapidjson::StringRef(reason), a);
  c.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  conditions.PushBack(c, a);
}

void WriteDeploymentStatus(Store& store, const rapidjson::Value& deploy, const Rollout& r) {
  int64_t actual = 0, ready = 0, available = 0, total = 0;
  std::vector<ObjectPtr> all = r.old_rs;
  all.push_back(r.new_rs);
  for (const ObjectPtr& rs : all) {
    actual += IntAt(*rs, "status.replicas", 0);
    ready += IntAt(*rs, "status.readyReplicas", 0);
    available += IntAt(*rs, "status.availableReplicas", 0);
    total += IntAt(*rs, "spec.replicas", 0);
  }
  const int64_t updated = IntAt(*r.new_rs, "status.replicas", 0);
  rapidjson::Document status(rapidjson::kObjectType);
  auto& a = status.GetAllocator();
  status.AddMember("observedGeneration", IntAt(deploy, "metadata.generation", 1), a);
  status.AddMember("replicas", actual, a);
  status.AddMember("updatedReplicas", updated, a);
  status.AddMember("readyReplicas", ready, a);
  status.AddMember("availableReplicas", available, a);
  if (total - available > 0)
    status.AddMember("unavailableReplicas", total - available, a);
  const std::string now = store.NowTimestamp();
  const std::string rs_name = GetString(*r.new_rs, "metadata.name");
  const rapidjson::Value* old = Find(deploy, "status.conditions");
  rapidjson::Value conditions(rapidjson::kArrayType);
  if (available >= r.replicas - r.max_unavailable) {
    PutCondition(conditions, old, "Available", "True", "MinimumReplicasAvailable",
                 "Deployment has minimum availability.", now, a);
  } else {
    PutCondition(conditions, old, "Available", "False", "MinimumReplicasUnavailable",
                 "Deployment does not have minimum availability.", now, a);
  }
  if (updated == r.replicas && actual == r.replicas && available == r.replicas) {
    PutCondition(conditions, old, "Progressing", "True", "NewReplicaSetAvailable",
                 fmt::format("ReplicaSet \"{}\" has successfully progressed.", rs_name), now, a);
  } else if (r.created) {
    PutCondition(conditions, old, "Progressing", "True", "NewReplicaSetCreated",
                 fmt::format("Created new replica set \"{}\"", rs_name), now, a);
  } else {
    PutCondition(conditions, old, "Progressing", "True", "ReplicaSetUpdated",
                 fmt::format("ReplicaSet \"{}\" is progressing.", rs_name), now, a);
  }
  status.AddMember("conditions", conditions, a);
  WriteStatus(store, "deployments", deploy, status);
}

}  // namespace

void WorkloadControllers::DeploymentPass() {
  for (const ObjectPtr& deploy : store_.List("deployments", "").items) {
    if (!IsPodTerminating(*deploy))
      SyncDeployment(*deploy);
  }
}

void WorkloadControllers::SyncDeployment(const rapidjson::Value& deploy) {
  const std::string ns = GetString(deploy, "metadata.namespace");
  const rapidjson::Value* pod_template = Find(deploy, "spec.template");
  if (pod_template == nullptr || Find(deploy, "spec.selector") == nullptr)
    return;
  const std::string hash =
      PodTemplateHash(*pod_template, IntAt(deploy, "status.collisionCount", 0));
  Rollout r;
  r.replicas = IntAt(deploy, "spec.replicas", 1);
  int64_t revision = 0;
  for (const ObjectPtr& rs :
       OwnedBy(store_, "replicasets", ns, GetString(deploy, "metadata.uid"))) {
    const rapidjson::Value* labels = Find(*rs, "metadata.labels");
    std::string rs_hash = labels != nullptr && labels->HasMember("pod-template-hash")
                              ? GetString(*labels, "pod-template-hash")
                              : "";
    revision = std::max<int64_t>(revision, RevisionOf(*rs));
    if (rs_hash == hash)
      r.new_rs = rs;
    else
      r.old_rs.push_back(rs);
  }
  if (r.new_rs == nullptr) {
    auto created = CreateReplicaSet(store_, deploy, hash, revision + 1);
    if (!created.ok()) {
      log_.Warning("deployment {}/{}: {}", ns, GetString(deploy, "metadata.name"),
                   created.status().ToString());
      return;
    }
    r.new_rs = *created;
    r.created = true;
  }
  const bool recreate = GetString(deploy, "spec.strategy.type") == "Recreate";
  r.max_surge =
      recreate ? 0 : Scaled(Find(deploy, "spec.strategy.rollingUpdate.maxSurge"), r.replicas, true);
  r.max_unavailable = recreate ? 0
                               : Scaled(Find(deploy, "spec.strategy.rollingUpdate.maxUnavailable"),
                                        r.replicas, false);
  if (!recreate && r.max_surge == 0 && r.max_unavailable == 0)
    r.max_unavailable = 1;  // ResolveFenceposts
  if (recreate)
    Recreate(store_, r);
  else
    RollingUpdate(store_, r);
  WriteDeploymentStatus(store_, deploy, r);
}

void WorkloadControllers::ReplicaSetPass() {
  for (const ObjectPtr& rs : store_.List("replicasets", "").items) {
    if (!IsPodTerminating(*rs))
      SyncReplicaSet(*rs);
  }
}

void WorkloadControllers::SyncReplicaSet(const rapidjson::Value& rs) {
  const std::string ns = GetString(rs, "metadata.namespace");
  const std::string name = GetString(rs, "metadata.name");
  const rapidjson::Value* pod_template = Find(rs, "spec.template");
  if (pod_template == nullptr)
    return;
  std::vector<ObjectPtr> active;
  for (const ObjectPtr& pod : OwnedBy(store_, "pods", ns, GetString(rs, "metadata.uid"))) {
    if (Active(*pod))
      active.push_back(pod);
  }
  const int64_t want = IntAt(rs, "spec.replicas", 1);
  const int64_t have = static_cast<int64_t>(active.size());
  for (int64_t i = have; i < want; ++i) {
    Status s = CreateControllerPod(
        store_, options_.admission,
        PodFromTemplate(*pod_template, rs, "apps/v1", "ReplicaSet", "", name + "-"));
    if (!s.ok()) {
      log_.Warning("replicaset {}/{}: {}", ns, name, s.ToString());
      break;
    }
  }
  if (have > want) {
    std::sort(active.begin(), active.end(), DeleteFirst);
    for (int64_t i = 0; i < have - want; ++i)
      DeleteByUid(store_, *active[i], "pods");
  }
  int64_t ready = 0;
  for (const ObjectPtr& pod : active)
    ready += IsPodReady(*pod) ? 1 : 0;
  rapidjson::Document status(rapidjson::kObjectType);
  auto& a = status.GetAllocator();
  status.AddMember("replicas", have, a);
  status.AddMember("fullyLabeledReplicas", have, a);
  status.AddMember("readyReplicas", ready, a);
  status.AddMember("availableReplicas", ready, a);
  status.AddMember("observedGeneration", IntAt(rs, "metadata.generation", 1), a);
  WriteStatus(store_, "replicasets", rs, status);
}

}  // namespace kubesim
