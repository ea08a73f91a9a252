// Kinds, hashes, defaulting and validation of the workload resources (workloads.h).
#include "workloads.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "quantity.h"
#include "selector.h"

namespace kubesim {

namespace {

using Alloc = rapidjson::Document::AllocatorType;

struct WorkloadKind {
  const char* resource;
  const char* kind;
  bool status;      // has a status subresource
  bool generation;  // metadata.generation counts spec changes
};

const WorkloadKind kWorkloadKinds[] = {
    {"statefulsets", "StatefulSet", true, true},
    {"deployments", "Deployment", true, true},
    {"replicasets", "ReplicaSet", true, true},
    {"controllerrevisions", "ControllerRevision", false, false},
    {"jobs", "Job", true, true},
    {"persistentvolumeclaims", "PersistentVolumeClaim", true, false},
    {"persistentvolumes", "PersistentVolume", true, false},
    {"services", "Service", true, false},
    {"endpoints", "Endpoints", false, false},
    {"storageclasses", "StorageClass", false, false},
};

const WorkloadKind* FindKind(const std::string& resource) {
  for (const WorkloadKind& k : kWorkloadKinds) {
    if (resource == k.resource)
      return &k;
  }
  return nullptr;
}

rapidjson::Value* Member(rapidjson::Value& object, const char* key) {
  if (!object.IsObject())
    return nullptr;
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

// The object at `key`, created (or replaced, when not an object) as needed.
rapidjson::Value& ObjectMember(rapidjson::Value& object, const char* key, Alloc& a) {
  rapidjson::Value* v = Member(object, key);
  if (v == nullptr) {
    object.AddMember(rapidjson::Value(key, a), rapidjson::Value(rapidjson::kObjectType), a);
    v = &object[key];
  }
  if (!v->IsObject())
    v->SetObject();
  return *v;
}

void Default(rapidjson::Value& object, const char* key, rapidjson::Value value, Alloc& a) {
  if (Member(object, key) == nullptr)
    object.AddMember(rapidjson::Value(key, a), value, a);
}

void DefaultString(rapidjson::Value& object, const char* key, const char* value, Alloc& a) {
  Default(object, key, rapidjson::Value(value, a), a);
}

void DefaultContainers(rapidjson::Value& spec, const char* list, Alloc& a) {
  rapidjson::Value* containers = Member(spec, list);
  if (containers == nullptr || !containers->IsArray())
    return;
  for (auto& c : containers->GetArray()) {
    if (!c.IsObject())
      continue;
    DefaultString(c, "terminationMessagePath", "/dev/termination-log", a);
    DefaultString(c, "terminationMessagePolicy", "File", a);
    // SetDefaults_Container: Always for an untagged or :latest image, else IfNotPresent.
    std::string image = GetString(c, "image");
    std::string tag = image.substr(
        image.find_last_of("/") == std::string::npos ? 0 : image.find_last_of("/") + 1);
    bool latest = image.find('@') == std::string::npos &&
                  (tag.find(':') == std::string::npos || tag.substr(tag.find(':')) == ":latest");
    DefaultString(c, "imagePullPolicy", latest ? "Always" : "IfNotPresent", a);
  }
}

void DefaultClaimSpec(rapidjson::Value& claim, Alloc& a) {
  rapidjson::Value& spec = ObjectMember(claim, "spec", a);
  DefaultString(spec, "volumeMode", "Filesystem", a);
  rapidjson::Value& status = ObjectMember(claim, "status", a);
  DefaultString(status, "phase", "Pending", a);
}

void DefaultStatefulSet(rapidjson::Value& spec, Alloc& a) {
  Default(spec, "replicas", rapidjson::Value(1), a);
  DefaultString(spec, "podManagementPolicy", "OrderedReady", a);
  Default(spec, "revisionHistoryLimit", rapidjson::Value(10), a);
  rapidjson::Value& strategy = ObjectMember(spec, "updateStrategy", a);
  DefaultString(strategy, "type", "RollingUpdate", a);
  if (GetString(strategy, "type") == "RollingUpdate") {
    rapidjson::Value& rolling = ObjectMember(strategy, "rollingUpdate", a);
    Default(rolling, "partition", rapidjson::Value(0), a);
  }
  rapidjson::Value& retention = ObjectMember(spec, "persistentVolumeClaimRetentionPolicy", a);
  DefaultString(retention, "whenDeleted", "Retain", a);
  DefaultString(retention, "whenScaled", "Retain", a);
  if (rapidjson::Value* claims = Member(spec, "volumeClaimTemplates");
      claims != nullptr && claims->IsArray()) {
    for (auto& claim : claims->GetArray()) {
      if (claim.IsObject())
        DefaultClaimSpec(claim, a);
    }
  }
}

void DefaultDeployment(rapidjson::Value& spec, Alloc& a) {
  Default(spec, "replicas", rapidjson::Value(1), a);
  rapidjson::Value& strategy = ObjectMember(spec, "strategy", a);
  DefaultString(strategy, "type", "RollingUpdate", a);
  if (GetString(strategy, "type") == "RollingUpdate") {
    rapidjson::Value& rolling = ObjectMember(strategy, "rollingUpdate", a);
    DefaultString(rolling, "maxUnavailable", "25%", a);
    DefaultString(rolling, "maxSurge", "25%", a);
  }
  Default(spec, "revisionHistoryLimit", rapidjson::Value(10), a);
  Default(spec, "progressDeadlineSeconds", rapidjson::Value(600), a);
}

void DefaultJob(rapidjson::Document& job, rapidjson::Value& spec, Alloc& a) {
  if (Member(spec, "completions") == nullptr && Member(spec, "parallelism") == nullptr)
    spec.AddMember("completions", 1, a);
  Default(spec, "parallelism", rapidjson::Value(1), a);
  Default(spec, "backoffLimit", rapidjson::Value(6), a);
  DefaultString(spec, "completionMode", "NonIndexed", a);
  Default(spec, "suspend", rapidjson::Value(false), a);
  DefaultString(spec, "podReplacementPolicy",
                Member(spec, "podFailurePolicy") != nullptr ? "Failed" : "TerminatingOrFailed", a);
  Default(spec, "manualSelector", rapidjson::Value(false), a);
  // SetDefaults_Job: a Job without labels takes its template's.
  const rapidjson::Value* template_labels = Find(job, "spec.template.metadata.labels");
  const rapidjson::Value* labels = Find(job, "metadata.labels");
  if ((labels == nullptr || labels->ObjectEmpty()) && template_labels != nullptr &&
      template_labels->IsObject() && !template_labels->ObjectEmpty()) {
    SetMember(job, "metadata.labels", rapidjson::Value(*template_labels, a));
  }
}

void DefaultService(rapidjson::Value& spec, Alloc& a) {
  DefaultString(spec, "type", "ClusterIP", a);
  DefaultString(spec, "sessionAffinity", "None", a);
  DefaultString(spec, "internalTrafficPolicy", "Cluster", a);
  rapidjson::Value* ports = Member(spec, "ports");
  if (ports == nullptr || !ports->IsArray())
    return;
  for (auto& port : ports->GetArray()) {
    if (!port.IsObject())
      continue;
    DefaultString(port, "protocol", "TCP", a);
    if (rapidjson::Value* number = Member(port, "port"); number != nullptr)
      Default(port, "targetPort", rapidjson::Value(*number, a), a);
  }
}

}  // namespace

const char* WorkloadKindOf(const std::string& resource) {
  const WorkloadKind* k = FindKind(resource);
  return k == nullptr ? "" : k->kind;
}

bool HasWorkloadStatus(const std::string& resource) {
  const WorkloadKind* k = FindKind(resource);
  return k != nullptr && k->status;
}

bool TracksWorkloadGeneration(const std::string& resource) {
  const WorkloadKind* k = FindKind(resource);
  return k != nullptr && k->generation;
}

std::string GoStringMap(const rapidjson::Value* labels) {
  std::map<std::string, std::string> sorted;
  if (labels != nullptr && labels->IsObject()) {
    for (const auto& m : labels->GetObject())
      sorted[m.name.GetString()] = m.value.IsString() ? m.value.GetString() : "";
  }
  if (sorted.empty())
    return "map[string]string(nil)";
  std::string out;
  for (const auto& [k, v] : sorted)
    out += (out.empty() ? "" : ", ") + GoQuote(k) + ":" + GoQuote(v);
  return "map[string]string{" + out + "}";
}

std::string SafeEncodeString(const std::string& text) {
  static const char kAlphanums[] = "bcdfghjklmnpqrstvwxz2456789";
  std::string out;
  for (unsigned char c : text)
    out += kAlphanums[c % (sizeof kAlphanums - 1)];
  return out;
}

uint32_t Fnv32a(const std::string& bytes) {
  uint32_t hash = 2166136261u;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 16777619u;
  }
  return hash;
}

std::string PodTemplateHash(const rapidjson::Value& pod_template, int64_t collision_count) {
  std::string bytes = ToJson(pod_template);
  if (collision_count > 0) {
    // ComputeHash adds the collision count as 4 little-endian bytes.
    for (int i = 0; i < 4; ++i)
      bytes += static_cast<char>((collision_count >> (8 * i)) & 0xff);
  }
  return SafeEncodeString(std::to_string(Fnv32a(bytes)));
}

void DefaultPodTemplate(rapidjson::Value& pod_template, Alloc& a) {
  if (!pod_template.IsObject())
    return;
  rapidjson::Value& spec = ObjectMember(pod_template, "spec", a);
  DefaultString(spec, "restartPolicy", "Always", a);
  Default(spec, "terminationGracePeriodSeconds", rapidjson::Value(30), a);
  DefaultString(spec, "dnsPolicy", "ClusterFirst", a);
  DefaultString(spec, "schedulerName", "default-scheduler", a);
  Default(spec, "securityContext", rapidjson::Value(rapidjson::kObjectType), a);
  DefaultContainers(spec, "containers", a);
  DefaultContainers(spec, "initContainers", a);
}

void DefaultWorkload(const std::string& resource, rapidjson::Document& object) {
  if (FindKind(resource) == nullptr || !object.IsObject())
    return;
  Alloc& a = object.GetAllocator();
  if (resource == "persistentvolumeclaims") {
    DefaultClaimSpec(object, a);
    return;
  }
  rapidjson::Value& spec = ObjectMember(object, "spec", a);
  if (rapidjson::Value* t = Member(spec, "template"); t != nullptr)
    DefaultPodTemplate(*t, a);
  if (resource == "statefulsets") {
    DefaultStatefulSet(spec, a);
  } else if (resource == "deployments") {
    DefaultDeployment(spec, a);
  } else if (resource == "replicasets") {
    Default(spec, "replicas", rapidjson::Value(1), a);
  } else if (resource == "jobs") {
    DefaultJob(object, spec, a);
  } else if (resource == "services") {
    DefaultService(spec, a);
  } else if (resource == "persistentvolumes") {
    DefaultString(spec, "persistentVolumeReclaimPolicy", "Retain", a);
    DefaultString(spec, "volumeMode", "Filesystem", a);
    DefaultString(ObjectMember(object, "status", a), "phase", "Pending", a);
  }
  if (resource == "storageclasses" || resource == "endpoints" ||
      resource == "controllerrevisions") {
    if (spec.ObjectEmpty())
      object.RemoveMember("spec");  // these kinds have no spec
    if (resource == "storageclasses") {
      DefaultString(object, "reclaimPolicy", "Delete", a);
      DefaultString(object, "volumeBindingMode", "Immediate", a);
    }
  }
}

void FillFieldsFromSystemMetadata(const std::string& resource, rapidjson::Document& job) {
  if (resource != "jobs")
    return;
  const rapidjson::Value* manual = Find(job, "spec.manualSelector");
  if (manual != nullptr && manual->IsBool() && manual->GetBool())
    return;
  // generateSelector (pkg/registry/batch/job/strategy.go): the uid labels.
  Alloc& a = job.GetAllocator();
  const std::string uid = GetString(job, "metadata.uid");
  const std::string name = GetString(job, "metadata.name");
  rapidjson::Value& spec = ObjectMember(job, "spec", a);
  rapidjson::Value& meta = ObjectMember(ObjectMember(spec, "template", a), "metadata", a);
  rapidjson::Value& labels = ObjectMember(meta, "labels", a);
  for (const auto& [key, value] :
       {std::pair<const char*, std::string>{"batch.kubernetes.io/controller-uid", uid},
        {"batch.kubernetes.io/job-name", name},
        {"controller-uid", uid},
        {"job-name", name}}) {
    if (labels.HasMember(key))
      labels.RemoveMember(key);
    labels.AddMember(rapidjson::Value(key, a), rapidjson::Value(value.c_str(), a), a);
  }
  rapidjson::Value selector(rapidjson::kObjectType);
  rapidjson::Value match(rapidjson::kObjectType);
  match.AddMember("batch.kubernetes.io/controller-uid", rapidjson::Value(uid.c_str(), a), a);
  selector.AddMember("matchLabels", match, a);
  if (spec.HasMember("selector"))
    spec.RemoveMember("selector");
  spec.AddMember("selector", selector, a);
}

bool IsPodTerminating(const rapidjson::Value& pod) {
  return Find(pod, "metadata.deletionTimestamp") != nullptr;
}

bool IsPodFinished(const rapidjson::Value& pod) {
  const std::string phase = GetString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

bool HasTrueCondition(const rapidjson::Value& object, const char* type) {
  const rapidjson::Value* conditions = Find(object, "status.conditions");
  if (conditions == nullptr || !conditions->IsArray())
    return false;
  for (const auto& c : conditions->GetArray()) {
    if (GetString(c, "type") == type && GetString(c, "status") == "True")
      return true;
  }
  return false;
}

bool IsPodReady(const rapidjson::Value& pod) {
  if (GetString(pod, "status.phase") != "Running" || IsPodTerminating(pod))
    return false;
  const rapidjson::Value* conditions = Find(pod, "status.conditions");
  if (conditions == nullptr || !conditions->IsArray())
    return false;
  for (const auto& c : conditions->GetArray()) {
    if (GetString(c, "type") == "Ready")
      return GetString(c, "status") == "True";
  }
  return false;
}

}  // namespace kubesim
