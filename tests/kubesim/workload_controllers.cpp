// The loop of the workload controllers and what they share (workload_controllers.h).
#include "workload_controllers.h"

#include <fmt/format.h>

#include "pod_security.h"
#include "serviceaccounts.h"
#include "workloads.h"

namespace kubesim {

WorkloadControllers::WorkloadControllers(Store& store, k8sbridge::Logger& log,
                                         WorkloadControllerOptions options)
    : store_(store), log_(log), options_(std::move(options)) {}

WorkloadControllers::~WorkloadControllers() {
  Stop();
}

Status WorkloadControllers::Start() {
  if (Status s = CreateDefaultStorageClass(store_); !s.ok())
    return s;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void WorkloadControllers::Stop() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

void WorkloadControllers::Loop() {
  RunControllerLoop(
      store_, stop_, options_.resync,
      [](const std::string& resource) {
        return resource != "events" && resource != "leases" && resource != "endpoints";
      },
      [this] { RunOnce(); });
}

void WorkloadControllers::RunOnce() {
  VolumePass();
  StatefulSetPass();
  DeploymentPass();
  ReplicaSetPass();
  JobPass();
  EndpointsPass();
}

int64_t IntAt(const rapidjson::Value& object, const char* path, int64_t fallback) {
  const rapidjson::Value* v = Find(object, path);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : fallback;
}

rapidjson::Document NewObject(const char* api_version, const char* kind, const std::string& name,
                              const rapidjson::Value* labels) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("apiVersion", rapidjson::StringRef(api_version), a);
  doc.AddMember("kind", rapidjson::StringRef(kind), a);
  SetMember(doc, "metadata.name", rapidjson::Value(name.c_str(), a));
  if (labels != nullptr)
    SetMember(doc, "metadata.labels", rapidjson::Value(*labels, a));
  return doc;
}

std::vector<ObjectPtr> OwnedBy(Store& store, const std::string& resource, const std::string& ns,
                               const std::string& owner_uid) {
  return store
      .List(resource, ns,
            [&](const rapidjson::Value& o) {
              const rapidjson::Value* refs = Find(o, "metadata.ownerReferences");
              if (refs == nullptr || !refs->IsArray())
                return false;
              for (const auto& r : refs->GetArray()) {
                const rapidjson::Value* controller = Find(r, "controller");
                if (controller != nullptr && controller->IsBool() && controller->GetBool() &&
                    GetString(r, "uid") == owner_uid)
                  return true;
              }
              return false;
            })
      .items;
}

rapidjson::Value ControllerRef(const rapidjson::Value& owner, const char* api_version,
                               const char* kind, rapidjson::Document::AllocatorType& a) {
  rapidjson::Value ref(rapidjson::kObjectType);
  ref.AddMember("apiVersion", rapidjson::StringRef(api_version), a);
  ref.AddMember("kind", rapidjson::StringRef(kind), a);
  ref.AddMember("name", rapidjson::Value(GetString(owner, "metadata.name").c_str(), a), a);
  ref.AddMember("uid", rapidjson::Value(GetString(owner, "metadata.uid").c_str(), a), a);
  ref.AddMember("controller", true, a);
  ref.AddMember("blockOwnerDeletion", true, a);
  return ref;
}

std::unique_ptr<rapidjson::Document> PodFromTemplate(const rapidjson::Value& pod_template,
                                                     const rapidjson::Value& owner,
                                                     const char* api_version, const char* kind,
                                                     const std::string& name,
                                                     const std::string& generate_name) {
  auto pod = std::make_unique<rapidjson::Document>(rapidjson::kObjectType);
  auto& a = pod->GetAllocator();
  pod->AddMember("apiVersion", "v1", a);
  pod->AddMember("kind", "Pod", a);
  rapidjson::Value meta(rapidjson::kObjectType);
  if (!name.empty())
    meta.AddMember("name", rapidjson::Value(name.c_str(), a), a);
  else
    meta.AddMember("generateName", rapidjson::Value(generate_name.c_str(), a), a);
  std::string ns = GetString(owner, "metadata.namespace");
  meta.AddMember("namespace", rapidjson::Value(ns.c_str(), a), a);
  for (const char* key : {"labels", "annotations", "finalizers"}) {
    const rapidjson::Value* v = Find(pod_template, (std::string("metadata.") + key).c_str());
    if (v != nullptr)
      meta.AddMember(rapidjson::StringRef(key), rapidjson::Value(*v, a), a);
  }
  if (!meta.HasMember("labels"))
    meta.AddMember("labels", rapidjson::Value(rapidjson::kObjectType), a);
  rapidjson::Value refs(rapidjson::kArrayType);
  refs.PushBack(ControllerRef(owner, api_version, kind, a), a);
  meta.AddMember("ownerReferences", refs, a);
  pod->AddMember("metadata", meta, a);
  const rapidjson::Value* spec = Find(pod_template, "spec");
  pod->AddMember(
      "spec",
      spec != nullptr ? rapidjson::Value(*spec, a) : rapidjson::Value(rapidjson::kObjectType), a);
  return pod;
}

// Controllers create pods through the API server, so every pod admission applies:
// DefaultTolerationSeconds, ServiceAccount (the token volume), Pod Security.
Status CreateControllerPod(Store& store, const AdmissionOptions& admission,
                           std::unique_ptr<rapidjson::Document> pod) {
  auto refusal = [](const ApiResponse& refused) {
    auto body = ParseJson(refused.body);
    return Status::PermissionDenied(body.ok() ? GetString(**body, "message") : refused.body);
  };
  const std::string ns = GetString(*pod, "metadata.namespace");
  AddDefaultTolerations(*pod, admission);
  if (auto refused = AdmitPodServiceAccount(store, admission.root_ca_pem, ns, *pod))
    return refusal(*refused);
  std::vector<std::string> warnings;
  if (auto refused = AdmitPodSecurity(store, "pods", *pod, warnings))
    return refusal(*refused);
  auto created = store.Create("pods", ns, std::move(*pod));
  return created.ok() ? Status::Ok() : created.status();
}

void WriteStatus(Store& store, const std::string& resource, const rapidjson::Value& object,
                 rapidjson::Document& status) {
  const rapidjson::Value* old = Find(object, "status");
  if (old != nullptr && *old == status)
    return;
  (void)store.Mutate(resource, GetString(object, "metadata.namespace"),
                     GetString(object, "metadata.name"), [&](rapidjson::Document& doc) {
                       if (GetString(doc, "metadata.uid") != GetString(object, "metadata.uid"))
                         return Status::NotFound("replaced");
                       doc.RemoveMember("status");
                       doc.AddMember("status", rapidjson::Value(status, doc.GetAllocator()),
                                     doc.GetAllocator());
                       return Status::Ok();
                     });
}

}  // namespace kubesim
