// The StatefulSet controller, after pkg/controller/statefulset (stateful_set_control.go:
// updateStatefulSet, stateful_set_utils.go: newVersionedStatefulSetPod,
// getPersistentVolumeClaimName, completeRollingUpdate).
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "workload_controllers.h"
#include "workloads.h"

namespace kubesim {

struct SetState {
  std::string update_revision;
  std::string current_revision;
  std::map<int64_t, ObjectPtr> pods;  // by ordinal, in range or condemned
};

struct SetRange {
  int64_t start = 0;
  int64_t end = 0;
  bool parallel = false;
  int64_t partition = 0;
};

namespace {

using Alloc = rapidjson::Document::AllocatorType;

// The ordinal of `pod` if it is named <set>-<N>, else -1.
int64_t OrdinalOf(const std::string& set, const rapidjson::Value& pod) {
  std::string name = GetString(pod, "metadata.name");
  if (name.size() <= set.size() + 1 || name.compare(0, set.size() + 1, set + "-") != 0)
    return -1;
  std::string digits = name.substr(set.size() + 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9)
    return -1;
  return std::stoll(digits);
}

void SetLabel(rapidjson::Value& meta, const char* key, const std::string& value, Alloc& a) {
  if (!meta.HasMember("labels") || !meta["labels"].IsObject()) {
    meta.RemoveMember("labels");
    meta.AddMember("labels", rapidjson::Value(rapidjson::kObjectType), a);
  }
  rapidjson::Value& labels = meta["labels"];
  labels.RemoveMember(key);
  labels.AddMember(rapidjson::StringRef(key), rapidjson::Value(value.c_str(), a), a);
}

std::string ClaimName(const rapidjson::Value& claim_template, const std::string& set,
                      int64_t ordinal) {
  return fmt::format("{}-{}-{}", GetString(claim_template, "metadata.name"), set, ordinal);
}

// A plain (not controller) owner reference, as the retention policy sets them
// (stateful_set_utils.go: setOwnerRef).
rapidjson::Value OwnerRef(const rapidjson::Value& owner, const char* api_version, const char* kind,
                          Alloc& a) {
  rapidjson::Value ref = ControllerRef(owner, api_version, kind, a);
  ref.RemoveMember("controller");
  ref.RemoveMember("blockOwnerDeletion");
  return ref;
}

// whenScaled: Delete - a condemned pod's claims get the pod as owner before it goes.
void HandClaimsToPod(Store& store, const rapidjson::Value& set, const rapidjson::Value& pod) {
  if (GetString(set, "spec.persistentVolumeClaimRetentionPolicy.whenScaled") != "Delete")
    return;
  const rapidjson::Value* volumes = Find(pod, "spec.volumes");
  if (volumes == nullptr || !volumes->IsArray())
    return;
  for (const auto& v : volumes->GetArray()) {
    std::string claim = GetString(v, "persistentVolumeClaim.claimName");
    if (claim.empty())
      continue;
    (void)store.Mutate("persistentvolumeclaims", GetString(pod, "metadata.namespace"), claim,
                       [&](rapidjson::Document& doc) {
                         auto& a = doc.GetAllocator();
                         if (Find(doc, "metadata.ownerReferences") == nullptr)
                           SetMember(doc, "metadata.ownerReferences",
                                     rapidjson::Value(rapidjson::kArrayType));
                         // The pod replaces the set as owner (updateClaimOwnerRefForSetAndPod).
                         rapidjson::Value& refs = doc["metadata"]["ownerReferences"];
                         for (auto r = refs.Begin(); r != refs.End();) {
                           if (GetString(*r, "uid") == GetString(pod, "metadata.uid"))
                             return Status::Ok();
                           bool set_ref = GetString(*r, "uid") == GetString(set, "metadata.uid");
                           r = set_ref ? refs.Erase(r) : r + 1;
                         }
                         refs.PushBack(OwnerRef(pod, "v1", "Pod", a), a);
                         return Status::Ok();
                       });
  }
}

// createPersistentVolumeClaims: the claims of `ordinal` that do not exist yet.
Status EnsureClaims(Store& store, const rapidjson::Value& set, int64_t ordinal) {
  const rapidjson::Value* templates = Find(set, "spec.volumeClaimTemplates");
  if (templates == nullptr || !templates->IsArray())
    return Status::Ok();
  const std::string ns = GetString(set, "metadata.namespace");
  const std::string name = GetString(set, "metadata.name");
  for (const auto& t : templates->GetArray()) {
    std::string claim = ClaimName(t, name, ordinal);
    if (store.Get("persistentvolumeclaims", ns, claim).ok())
      continue;
    rapidjson::Document pvc(rapidjson::kObjectType);
    auto& a = pvc.GetAllocator();
    pvc.CopyFrom(t, a);
    pvc.RemoveMember("status");
    pvc.RemoveMember("apiVersion");
    pvc.AddMember("apiVersion", "v1", a);
    pvc.RemoveMember("kind");
    pvc.AddMember("kind", "PersistentVolumeClaim", a);
    SetMember(pvc, "metadata.name", rapidjson::Value(claim.c_str(), a));
    SetMember(pvc, "metadata.namespace", rapidjson::Value(ns.c_str(), a));
    // The claim carries the set's selector labels (updateClaimLabels / getPersistentVolumeClaims).
    if (const rapidjson::Value* match = Find(set, "spec.selector.matchLabels");
        match != nullptr && match->IsObject()) {
      for (const auto& m : match->GetObject())
        SetLabel(pvc["metadata"], m.name.GetString(), m.value.GetString(), a);
    }
    SetMember(pvc, "status.phase", rapidjson::Value("Pending", a));
    // whenDeleted: Delete - the set owns its claims, so they go with it.
    if (GetString(set, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted") == "Delete") {
      rapidjson::Value refs(rapidjson::kArrayType);
      refs.PushBack(OwnerRef(set, "apps/v1", "StatefulSet", a), a);
      pvc["metadata"].AddMember("ownerReferences", refs, a);
    }
    AdmitClaim(store, pvc);
    auto created = store.Create("persistentvolumeclaims", ns, std::move(pvc));
    if (!created.ok() && created.status().code() != Status::Code::kAlreadyExists)
      return created.status();
  }
  return Status::Ok();
}

// newVersionedStatefulSetPod: the pod of `ordinal` from `pod_template` at `revision`.
std::unique_ptr<rapidjson::Document> StatefulPod(const rapidjson::Value& set,
                                                 const rapidjson::Value& pod_template,
                                                 int64_t ordinal, const std::string& revision) {
  const std::string set_name = GetString(set, "metadata.name");
  const std::string name = fmt::format("{}-{}", set_name, ordinal);
  auto pod = PodFromTemplate(pod_template, set, "apps/v1", "StatefulSet", name, "");
  auto& a = pod->GetAllocator();
  rapidjson::Value& meta = (*pod)["metadata"];
  SetLabel(meta, "statefulset.kubernetes.io/pod-name", name, a);
  SetLabel(meta, "apps.kubernetes.io/pod-index", std::to_string(ordinal), a);
  SetLabel(meta, "controller-revision-hash", revision, a);
  SetMember(*pod, "spec.hostname", rapidjson::Value(name.c_str(), a));
  std::string service = GetString(set, "spec.serviceName");
  if (!service.empty())
    SetMember(*pod, "spec.subdomain", rapidjson::Value(service.c_str(), a));
  const rapidjson::Value* templates = Find(set, "spec.volumeClaimTemplates");
  if (templates == nullptr || !templates->IsArray() || templates->Empty())
    return pod;
  if (Find(*pod, "spec.volumes") == nullptr)
    SetMember(*pod, "spec.volumes", rapidjson::Value(rapidjson::kArrayType));
  rapidjson::Value& volumes = (*pod)["spec"]["volumes"];
  for (const auto& t : templates->GetArray()) {
    std::string volume = GetString(t, "metadata.name");
    for (auto it = volumes.Begin(); it != volumes.End();)
      it = GetString(*it, "name") == volume ? volumes.Erase(it) : it + 1;
    rapidjson::Value v(rapidjson::kObjectType);
    v.AddMember("name", rapidjson::Value(volume.c_str(), a), a);
    rapidjson::Value claim(rapidjson::kObjectType);
    claim.AddMember("claimName", rapidjson::Value(ClaimName(t, set_name, ordinal).c_str(), a), a);
    v.AddMember("persistentVolumeClaim", claim, a);
    volumes.PushBack(v, a);
  }
  return pod;
}

std::string RevisionOf(const rapidjson::Value& pod) {
  const rapidjson::Value* labels = Find(pod, "metadata.labels");
  if (labels == nullptr || !labels->IsObject() || !labels->HasMember("controller-revision-hash"))
    return "";
  const rapidjson::Value& v = (*labels)["controller-revision-hash"];
  return v.IsString() ? v.GetString() : "";
}

void DeletePod(Store& store, const rapidjson::Value& pod) {
  DeleteOptions options;
  options.precondition_uid = GetString(pod, "metadata.uid");
  (void)store.Delete("pods", GetString(pod, "metadata.namespace"), GetString(pod, "metadata.name"),
                     options);
}

void WriteSetStatus(Store& store, const rapidjson::Value& set, SetState& state) {
  int64_t replicas = 0, ready = 0, current = 0, updated = 0;
  for (const auto& [ordinal, pod] : state.pods) {
    ++replicas;
    ready += IsPodReady(*pod) ? 1 : 0;
    if (IsPodTerminating(*pod))
      continue;
    current += RevisionOf(*pod) == state.current_revision ? 1 : 0;
    updated += RevisionOf(*pod) == state.update_revision ? 1 : 0;
  }
  // completeRollingUpdate: the update revision becomes current once every pod runs it.
  if (GetString(set, "spec.updateStrategy.type") == "RollingUpdate" && updated == replicas &&
      ready == replicas) {
    state.current_revision = state.update_revision;
    current = updated;
  }
  rapidjson::Document status(rapidjson::kObjectType);
  auto& a = status.GetAllocator();
  status.AddMember("observedGeneration", IntAt(set, "metadata.generation", 1), a);
  status.AddMember("replicas", replicas, a);
  status.AddMember("readyReplicas", ready, a);
  status.AddMember("currentReplicas", current, a);
  status.AddMember("updatedReplicas", updated, a);
  status.AddMember("currentRevision", rapidjson::Value(state.current_revision.c_str(), a), a);
  status.AddMember("updateRevision", rapidjson::Value(state.update_revision.c_str(), a), a);
  status.AddMember("collisionCount", 0, a);
  status.AddMember("availableReplicas", ready, a);
  WriteStatus(store, "statefulsets", set, status);
}

}  // namespace

void WorkloadControllers::StatefulSetPass() {
  for (const ObjectPtr& set : store_.List("statefulsets", "").items) {
    if (!IsPodTerminating(*set))
      SyncStatefulSet(*set);
  }
}

namespace {

// Condemned pods go from the highest ordinal; OrderedReady one at a time, and only
// while every pod in range is Ready.
void ScaleDown(Store& store, const rapidjson::Value& set, const SetState& state,
               const SetRange& range, bool all_ready) {
  for (auto it = state.pods.rbegin(); it != state.pods.rend(); ++it) {
    if (it->first >= range.start && it->first < range.end)
      continue;
    if (IsPodTerminating(*it->second)) {
      if (!range.parallel)
        break;
      continue;
    }
    if (!range.parallel && !all_ready)
      break;
    HandClaimsToPod(store, set, *it->second);
    DeletePod(store, *it->second);
    if (!range.parallel)
      break;
  }
}

// RollingUpdate: from the highest ordinal down to the partition, one pod at a time,
// each after the ones above it are Ready at the update revision.
void RollPods(Store& store, k8sbridge::Logger& log, const SetState& state, const SetRange& range) {
  for (int64_t ordinal = range.end - 1; ordinal >= range.start + range.partition; --ordinal) {
    auto it = state.pods.find(ordinal);
    if (it == state.pods.end())
      break;
    if (RevisionOf(*it->second) != state.update_revision && !IsPodTerminating(*it->second)) {
      log.Info("statefulset: rolling pod {} to {}", GetString(*it->second, "metadata.name"),
               state.update_revision);
      DeletePod(store, *it->second);
      break;
    }
    if (!IsPodReady(*it->second))
      break;
  }
}

}  // namespace

namespace {

// The ControllerRevision of `revision` (Data: the template under spec, with
// "$patch":"replace", as getPatch writes it), made once per template.
Status EnsureRevision(Store& store, const rapidjson::Value& set, const std::string& revision) {
  const std::string ns = GetString(set, "metadata.namespace");
  if (store.Get("controllerrevisions", ns, revision).ok())
    return Status::Ok();
  int64_t number = 0;
  for (const ObjectPtr& r :
       OwnedBy(store, "controllerrevisions", ns, GetString(set, "metadata.uid")))
    number = std::max(number, IntAt(*r, "revision", 0));
  rapidjson::Document cr = NewObject("apps/v1", "ControllerRevision", revision,
                                     Find(set, "spec.template.metadata.labels"));
  auto& a = cr.GetAllocator();
  std::string hash = revision.substr(revision.rfind('-') + 1);
  SetLabel(cr["metadata"], "controller.kubernetes.io/hash", hash, a);
  rapidjson::Value refs(rapidjson::kArrayType);
  refs.PushBack(ControllerRef(set, "apps/v1", "StatefulSet", a), a);
  cr["metadata"].AddMember("ownerReferences", refs, a);
  SetMember(cr, "data.spec.template", rapidjson::Value(*Find(set, "spec.template"), a));
  cr["data"]["spec"]["template"].AddMember("$patch", "replace", a);
  cr.AddMember("revision", number + 1, a);
  auto created = store.Create("controllerrevisions", ns, std::move(cr));
  return created.ok() || created.status().code() == Status::Code::kAlreadyExists ? Status::Ok()
                                                                                 : created.status();
}

// The pod template a revision recorded, as JSON; nullopt when it is gone.
std::optional<std::string> RevisionTemplate(Store& store, const std::string& ns,
                                            const std::string& revision) {
  auto cr = store.Get("controllerrevisions", ns, revision);
  const rapidjson::Value* t = cr.ok() ? Find(**cr, "data.spec.template") : nullptr;
  if (t == nullptr || !t->IsObject())
    return std::nullopt;
  rapidjson::Document copy;
  copy.CopyFrom(*t, copy.GetAllocator());
  copy.RemoveMember("$patch");
  return ToJson(copy);
}

}  // namespace

// The pods in range: missing ones are created (with their claims first), failed ones
// replaced; OrderedReady stops at the first pod that is not Ready. True when all are.
bool WorkloadControllers::ScaleUpStatefulSet(const rapidjson::Value& set, const SetState& state,
                                             const SetRange& range) {
  const std::string ns = GetString(set, "metadata.namespace");
  bool all_ready = true;
  for (int64_t ordinal = range.start; ordinal < range.end; ++ordinal) {
    auto it = state.pods.find(ordinal);
    if (it == state.pods.end()) {
      all_ready = false;
      // Pods below the partition keep the current revision (its ControllerRevision).
      std::string revision = state.update_revision;
      std::string template_json = ToJson(*Find(set, "spec.template"));
      std::optional<std::string> current = RevisionTemplate(store_, ns, state.current_revision);
      if (ordinal - range.start < range.partition && current) {
        revision = state.current_revision;
        template_json = *current;
      }
      auto parsed = ParseJson(template_json);
      Status s = EnsureClaims(store_, set, ordinal);
      if (s.ok() && parsed.ok())
        s = CreateControllerPod(store_, options_.admission,
                                StatefulPod(set, **parsed, ordinal, revision));
      if (!s.ok())
        log_.Warning("statefulset {}/{}: pod {}: {}", ns, GetString(set, "metadata.name"), ordinal,
                     s.ToString());
      if (!range.parallel)
        break;
      continue;
    }
    const rapidjson::Value& pod = *it->second;
    if (IsPodFinished(pod) && !IsPodTerminating(pod))
      DeletePod(store_, pod);  // a failed or finished pod is replaced
    if (!IsPodReady(pod)) {
      all_ready = false;
      if (!range.parallel)
        break;
    }
  }
  return all_ready;
}

void WorkloadControllers::SyncStatefulSet(const rapidjson::Value& set) {
  const std::string ns = GetString(set, "metadata.namespace");
  const std::string name = GetString(set, "metadata.name");
  const rapidjson::Value* pod_template = Find(set, "spec.template");
  if (pod_template == nullptr)
    return;
  SetState state;
  state.update_revision = name + "-" + PodTemplateHash(*pod_template, 0);
  state.current_revision = GetString(set, "status.currentRevision");
  if (state.current_revision.empty())
    state.current_revision = state.update_revision;
  if (Status s = EnsureRevision(store_, set, state.update_revision); !s.ok())
    log_.Warning("statefulset {}/{}: revision: {}", ns, name, s.ToString());
  for (const ObjectPtr& pod : OwnedBy(store_, "pods", ns, GetString(set, "metadata.uid"))) {
    int64_t ordinal = OrdinalOf(name, *pod);
    if (ordinal >= 0)
      state.pods[ordinal] = pod;
  }
  SetRange range;
  range.start = IntAt(set, "spec.ordinals.start", 0);
  range.end = range.start + IntAt(set, "spec.replicas", 1);
  range.parallel = GetString(set, "spec.podManagementPolicy") == "Parallel";
  range.partition = IntAt(set, "spec.updateStrategy.rollingUpdate.partition", 0);
  const bool all_ready = ScaleUpStatefulSet(set, state, range);
  ScaleDown(store_, set, state, range, all_ready);
  if (GetString(set, "spec.updateStrategy.type") == "RollingUpdate" && all_ready)
    RollPods(store_, log_, state, range);
  WriteSetStatus(store_, set, state);
}

}  // namespace kubesim
