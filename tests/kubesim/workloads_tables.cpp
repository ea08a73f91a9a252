// The kubectl get columns of the workload kinds (workloads.h), after kubernetes
// pkg/printers/internalversion/printers.go (printStatefulSet, printDeployment,
// printReplicaSet, printJob, printPersistentVolumeClaim, printPersistentVolume,
// printService, printEndpoints, printStorageClass).
#include <map>

#include <fmt/format.h>

#include "workloads.h"

namespace kubesim {

namespace {

std::string Int(const rapidjson::Value& o, const char* path) {
  const rapidjson::Value* v = Find(o, path);
  return std::to_string(v != nullptr && v->IsInt64() ? v->GetInt64() : 0);
}

std::string OrNone(const std::string& s) {
  return s.empty() ? "<none>" : s;
}

std::string AccessModes(const rapidjson::Value* modes) {
  static const std::map<std::string, std::string> kShort = {{"ReadWriteOnce", "RWO"},
                                                            {"ReadOnlyMany", "ROX"},
                                                            {"ReadWriteMany", "RWX"},
                                                            {"ReadWriteOncePod", "RWOP"}};
  std::string out;
  if (modes != nullptr && modes->IsArray()) {
    for (const auto& m : modes->GetArray()) {
      auto it = kShort.find(m.IsString() ? m.GetString() : "");
      if (it != kShort.end())
        out += (out.empty() ? "" : ",") + it->second;
    }
  }
  return out;
}

std::string JobStatus(const rapidjson::Value& job) {
  if (Find(job, "metadata.deletionTimestamp") != nullptr)
    return "Terminating";
  for (const char* type :
       {"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"}) {
    if (HasTrueCondition(job, type))
      return type;
  }
  return "Running";
}

std::string ServicePorts(const rapidjson::Value& svc) {
  std::string out;
  const rapidjson::Value* ports = Find(svc, "spec.ports");
  if (ports != nullptr && ports->IsArray()) {
    for (const auto& p : ports->GetArray())
      out += (out.empty() ? "" : ",") + Int(p, "port") + "/" + GetString(p, "protocol");
  }
  return OrNone(out);
}

std::string EndpointList(const rapidjson::Value& ep) {
  std::string out;
  const rapidjson::Value* subsets = Find(ep, "subsets");
  if (subsets == nullptr || !subsets->IsArray())
    return "<none>";
  for (const auto& s : subsets->GetArray()) {
    const rapidjson::Value* addresses = Find(s, "addresses");
    const rapidjson::Value* ports = Find(s, "ports");
    if (addresses == nullptr || !addresses->IsArray())
      continue;
    for (const auto& a : addresses->GetArray()) {
      std::string port = ports != nullptr && ports->IsArray() && !ports->Empty()
                             ? ":" + Int((*ports)[0], "port")
                             : "";
      out += (out.empty() ? "" : ",") + GetString(a, "ip") + port;
    }
  }
  return OrNone(out);
}

}  // namespace

const std::vector<TableColumn>* WorkloadTableColumns(const std::string& resource) {
  static const std::map<std::string, std::vector<TableColumn>> kColumns = {
      {"statefulsets", {{"Name", 0}, {"Ready", 0}, {"Age", 0}}},
      {"deployments", {{"Name", 0}, {"Ready", 0}, {"Up-to-date", 0}, {"Available", 0}, {"Age", 0}}},
      {"replicasets", {{"Name", 0}, {"Desired", 0}, {"Current", 0}, {"Ready", 0}, {"Age", 0}}},
      {"jobs", {{"Name", 0}, {"Status", 0}, {"Completions", 0}, {"Age", 0}}},
      {"persistentvolumeclaims",
       {{"Name", 0},
        {"Status", 0},
        {"Volume", 0},
        {"Capacity", 0},
        {"Access Modes", 0},
        {"StorageClass", 0},
        {"Age", 0}}},
      {"persistentvolumes",
       {{"Name", 0},
        {"Capacity", 0},
        {"Access Modes", 0},
        {"Reclaim Policy", 0},
        {"Status", 0},
        {"Claim", 0},
        {"StorageClass", 0},
        {"Reason", 0},
        {"Age", 0}}},
      {"services",
       {{"Name", 0},
        {"Type", 0},
        {"Cluster-IP", 0},
        {"External-IP", 0},
        {"Port(s)", 0},
        {"Age", 0},
        {"Selector", 1}}},
      {"endpoints", {{"Name", 0}, {"Endpoints", 0}, {"Age", 0}}},
      {"storageclasses",
       {{"Name", 0},
        {"Provisioner", 0},
        {"ReclaimPolicy", 0},
        {"VolumeBindingMode", 0},
        {"AllowVolumeExpansion", 0},
        {"Age", 0}}},
  };
  auto it = kColumns.find(resource);
  return it == kColumns.end() ? nullptr : &it->second;
}

std::vector<std::string> WorkloadTableCells(const std::string& resource, const rapidjson::Value& o,
                                            const std::string& age) {
  const std::string name = GetString(o, "metadata.name");
  if (resource == "statefulsets")
    return {name, Int(o, "status.readyReplicas") + "/" + Int(o, "spec.replicas"), age};
  if (resource == "deployments") {
    return {name, Int(o, "status.readyReplicas") + "/" + Int(o, "spec.replicas"),
            Int(o, "status.updatedReplicas"), Int(o, "status.availableReplicas"), age};
  }
  if (resource == "replicasets") {
    return {name, Int(o, "spec.replicas"), Int(o, "status.replicas"),
            Int(o, "status.readyReplicas"), age};
  }
  if (resource == "jobs") {
    const rapidjson::Value* completions = Find(o, "spec.completions");
    std::string want =
        completions != nullptr && completions->IsInt64() ? Int(o, "spec.completions") : "1";
    return {name, JobStatus(o), Int(o, "status.succeeded") + "/" + want, age};
  }
  if (resource == "persistentvolumeclaims") {
    return {name,
            GetString(o, "status.phase"),
            GetString(o, "spec.volumeName"),
            GetString(o, "status.capacity.storage"),
            AccessModes(Find(o, "status.accessModes")),
            OrNone(GetString(o, "spec.storageClassName")),
            age};
  }
  if (resource == "persistentvolumes") {
    std::string claim = GetString(o, "spec.claimRef.name");
    if (!claim.empty())
      claim = GetString(o, "spec.claimRef.namespace") + "/" + claim;
    return {name,
            GetString(o, "spec.capacity.storage"),
            AccessModes(Find(o, "spec.accessModes")),
            GetString(o, "spec.persistentVolumeReclaimPolicy"),
            GetString(o, "status.phase"),
            claim,
            GetString(o, "spec.storageClassName"),
            GetString(o, "status.reason"),
            age};
  }
  if (resource == "services") {
    std::string selector;
    if (const rapidjson::Value* s = Find(o, "spec.selector"); s != nullptr && s->IsObject()) {
      for (const auto& m : s->GetObject())
        selector += (selector.empty() ? "" : ",") + std::string(m.name.GetString()) + "=" +
                    (m.value.IsString() ? m.value.GetString() : "");
    }
    return {
        name, GetString(o, "spec.type"), GetString(o, "spec.clusterIP"), "<none>", ServicePorts(o),
        age,  OrNone(selector)};
  }
  if (resource == "endpoints")
    return {name, EndpointList(o), age};
  if (resource == "storageclasses") {
    const rapidjson::Value* expand = Find(o, "allowVolumeExpansion");
    std::string default_mark;
    const rapidjson::Value* annotations = Find(o, "metadata.annotations");
    if (annotations != nullptr && annotations->IsObject()) {
      auto it = annotations->FindMember(kIsDefaultClassAnnotation);
      if (it != annotations->MemberEnd() && it->value.IsString() &&
          std::string(it->value.GetString()) == "true")
        default_mark = " (default)";
    }
    return {name + default_mark,
            GetString(o, "provisioner"),
            GetString(o, "reclaimPolicy"),
            GetString(o, "volumeBindingMode"),
            expand != nullptr && expand->IsBool() && expand->GetBool() ? "true" : "false",
            age};
  }
  return {name, age};
}

}  // namespace kubesim
