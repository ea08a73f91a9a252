// PersistentVolume binding and the hostPath provisioner, after
// pkg/controller/volume/persistentvolume (pv_controller.go: syncUnboundClaim, bind,
// syncVolume, provisionClaimOperation, reclaimVolume/deleteVolumeOperation),
// pkg/volume/hostpath (the in-tree kubernetes.io/host-path provisioner and deleter),
// pkg/controller/volume/pvcprotection and pvprotection; and the Endpoints controller
// (pkg/controller/endpoint/endpoints_controller.go: syncService).
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "finalizers.h"
#include "quantity.h"
#include "selector.h"
#include "workload_controllers.h"
#include "workloads.h"

namespace kubesim {

namespace {

using Alloc = rapidjson::Document::AllocatorType;

void RemoveFinalizer(Store& store, const std::string& resource, const rapidjson::Value& object,
                     const char* finalizer) {
  kubesim::RemoveFinalizer(store, resource, GetString(object, "metadata.namespace"),
                           GetString(object, "metadata.name"), finalizer);
}

void SetAnnotation(rapidjson::Document& doc, const char* key, const std::string& value) {
  auto& a = doc.GetAllocator();
  if (Find(doc, "metadata.annotations") == nullptr)
    SetMember(doc, "metadata.annotations", rapidjson::Value(rapidjson::kObjectType));
  rapidjson::Value& annotations = doc["metadata"]["annotations"];
  annotations.RemoveMember(key);
  annotations.AddMember(rapidjson::StringRef(key), rapidjson::Value(value.c_str(), a), a);
}

// The pods of the namespace that use the claim (the pvc-protection controller's
// podUsesPVC: not yet finished pods).
bool ClaimInUse(Store& store, const std::string& ns, const std::string& claim) {
  for (const ObjectPtr& pod : store.List("pods", ns).items) {
    if (IsPodFinished(*pod))
      continue;
    const rapidjson::Value* volumes = Find(*pod, "spec.volumes");
    if (volumes == nullptr || !volumes->IsArray())
      continue;
    for (const auto& v : volumes->GetArray()) {
      if (GetString(v, "persistentVolumeClaim.claimName") == claim)
        return true;
    }
  }
  return false;
}

Status ProvisionHostPath(Store& store, const std::string& state_dir, const rapidjson::Value& pvc,
                         const rapidjson::Value& storage_class) {
  const std::string uid = GetString(pvc, "metadata.uid");
  const std::string pv_name = "pvc-" + uid;
  if (store.Get("persistentvolumes", "", pv_name).ok())
    return Status::Ok();
  const std::filesystem::path dir = std::filesystem::path(state_dir) / "volumes" / pv_name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::IoError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  std::filesystem::permissions(dir, std::filesystem::perms(0750), ec);
  rapidjson::Document pv(rapidjson::kObjectType);
  auto& a = pv.GetAllocator();
  pv.AddMember("apiVersion", "v1", a);
  pv.AddMember("kind", "PersistentVolume", a);
  SetMember(pv, "metadata.name", rapidjson::Value(pv_name.c_str(), a));
  SetAnnotation(pv, "pv.kubernetes.io/provisioned-by", kHostPathProvisioner);
  SetMember(pv, "metadata.finalizers", rapidjson::Value(rapidjson::kArrayType));
  pv["metadata"]["finalizers"].PushBack(rapidjson::StringRef(kPvProtectionFinalizer), a);
  SetMember(pv, "spec.capacity.storage",
            rapidjson::Value(GetString(pvc, "spec.resources.requests.storage").c_str(), a));
  SetMember(pv, "spec.accessModes", rapidjson::Value(*Find(pvc, "spec.accessModes"), a));
  SetMember(pv, "spec.hostPath.path", rapidjson::Value(dir.string().c_str(), a));
  SetMember(pv, "spec.hostPath.type", rapidjson::Value("", a));
  std::string policy = GetString(storage_class, "reclaimPolicy");
  SetMember(pv, "spec.persistentVolumeReclaimPolicy",
            rapidjson::Value(policy.empty() ? "Delete" : policy.c_str(), a));
  SetMember(pv, "spec.storageClassName",
            rapidjson::Value(GetString(storage_class, "metadata.name").c_str(), a));
  SetMember(pv, "spec.volumeMode", rapidjson::Value("Filesystem", a));
  rapidjson::Value ref(rapidjson::kObjectType);
  ref.AddMember("kind", "PersistentVolumeClaim", a);
  ref.AddMember("namespace", rapidjson::Value(GetString(pvc, "metadata.namespace").c_str(), a), a);
  ref.AddMember("name", rapidjson::Value(GetString(pvc, "metadata.name").c_str(), a), a);
  ref.AddMember("uid", rapidjson::Value(uid.c_str(), a), a);
  ref.AddMember("apiVersion", "v1", a);
  ref.AddMember("resourceVersion",
                rapidjson::Value(GetString(pvc, "metadata.resourceVersion").c_str(), a), a);
  SetMember(pv, "spec.claimRef", std::move(ref));
  SetMember(pv, "status.phase", rapidjson::Value("Bound", a));
  auto created = store.Create("persistentvolumes", "", std::move(pv));
  return created.ok() || created.status().code() == Status::Code::kAlreadyExists ? Status::Ok()
                                                                                 : created.status();
}

bool Contains(const rapidjson::Value* have, const rapidjson::Value* want) {
  if (want == nullptr || !want->IsArray())
    return true;
  if (have == nullptr || !have->IsArray())
    return false;
  for (const auto& w : want->GetArray()) {
    bool found = false;
    for (const auto& h : have->GetArray())
      found = found || h == w;
    if (!found)
      return false;
  }
  return true;
}

// findMatchingVolume: an Available PV of the claim's class with its access modes and at
// least its request (the smallest such one), or one already pre-bound to it.
ObjectPtr MatchingVolume(Store& store, const rapidjson::Value& pvc) {
  ObjectPtr best;
  int64_t best_size = 0;
  Result<int64_t> want = ParseQuantityMilli(GetString(pvc, "spec.resources.requests.storage"));
  for (const ObjectPtr& pv : store.List("persistentvolumes", "").items) {
    const std::string ref_uid = GetString(*pv, "spec.claimRef.uid");
    if (ref_uid == GetString(pvc, "metadata.uid"))
      return pv;
    if (!ref_uid.empty() || Find(*pv, "spec.claimRef") != nullptr || IsPodTerminating(*pv))
      continue;
    if (GetString(*pv, "spec.storageClassName") != GetString(pvc, "spec.storageClassName") ||
        !Contains(Find(*pv, "spec.accessModes"), Find(pvc, "spec.accessModes")))
      continue;
    Result<int64_t> size = ParseQuantityMilli(GetString(*pv, "spec.capacity.storage"));
    if (!size.ok() || !want.ok() || *size < *want)
      continue;
    if (best == nullptr || *size < best_size) {
      best = pv;
      best_size = *size;
    }
  }
  return best;
}

// bind: the PV's claimRef and phase, then the claim's volumeName, annotations and status.
void Bind(Store& store, const rapidjson::Value& pvc, const rapidjson::Value& pv) {
  const std::string pv_name = GetString(pv, "metadata.name");
  (void)store.Mutate("persistentvolumes", "", pv_name, [&](rapidjson::Document& doc) {
    auto& a = doc.GetAllocator();
    if (Find(doc, "spec.claimRef") == nullptr) {
      SetMember(doc, "spec.claimRef.kind", rapidjson::Value("PersistentVolumeClaim", a));
      SetMember(doc, "spec.claimRef.namespace",
                rapidjson::Value(GetString(pvc, "metadata.namespace").c_str(), a));
      SetMember(doc, "spec.claimRef.name",
                rapidjson::Value(GetString(pvc, "metadata.name").c_str(), a));
      SetMember(doc, "spec.claimRef.uid",
                rapidjson::Value(GetString(pvc, "metadata.uid").c_str(), a));
      SetMember(doc, "spec.claimRef.apiVersion", rapidjson::Value("v1", a));
      SetAnnotation(doc, "pv.kubernetes.io/bound-by-controller", "yes");
    }
    SetMember(doc, "status.phase", rapidjson::Value("Bound", a));
    return Status::Ok();
  });
  (void)store.Mutate(
      "persistentvolumeclaims", GetString(pvc, "metadata.namespace"),
      GetString(pvc, "metadata.name"), [&](rapidjson::Document& doc) {
        auto& a = doc.GetAllocator();
        SetMember(doc, "spec.volumeName", rapidjson::Value(pv_name.c_str(), a));
        SetAnnotation(doc, "pv.kubernetes.io/bind-completed", "yes");
        SetAnnotation(doc, "pv.kubernetes.io/bound-by-controller", "yes");
        SetMember(doc, "status.phase", rapidjson::Value("Bound", a));
        SetMember(doc, "status.accessModes", rapidjson::Value(*Find(pv, "spec.accessModes"), a));
        SetMember(doc, "status.capacity", rapidjson::Value(*Find(pv, "spec.capacity"), a));
        return Status::Ok();
      });
}

void SyncClaim(Store& store, const std::string& state_dir, const rapidjson::Value& pvc,
               k8sbridge::Logger& log) {
  const std::string ns = GetString(pvc, "metadata.namespace");
  const std::string name = GetString(pvc, "metadata.name");
  if (IsPodTerminating(pvc)) {
    if (!ClaimInUse(store, ns, name))
      RemoveFinalizer(store, "persistentvolumeclaims", pvc, kPvcProtectionFinalizer);
    return;
  }
  if (GetString(pvc, "status.phase") == "Bound")
    return;
  if (ObjectPtr pv = MatchingVolume(store, pvc)) {
    Bind(store, pvc, *pv);
    return;
  }
  const std::string class_name = GetString(pvc, "spec.storageClassName");
  auto storage_class = store.Get("storageclasses", "", class_name);
  if (class_name.empty() || !storage_class.ok() ||
      GetString(**storage_class, "provisioner") != kHostPathProvisioner)
    return;
  (void)store.Mutate("persistentvolumeclaims", ns, name, [&](rapidjson::Document& doc) {
    SetAnnotation(doc, "volume.kubernetes.io/storage-provisioner", kHostPathProvisioner);
    SetAnnotation(doc, "volume.beta.kubernetes.io/storage-provisioner", kHostPathProvisioner);
    return Status::Ok();
  });
  if (Status s = ProvisionHostPath(store, state_dir, pvc, **storage_class); !s.ok()) {
    log.Warning("persistentvolume provisioner: claim {}/{}: {}", ns, name, s.ToString());
    return;
  }
  if (auto pv = store.Get("persistentvolumes", "", "pvc-" + GetString(pvc, "metadata.uid"));
      pv.ok())
    Bind(store, pvc, **pv);
}

// syncVolume: a volume whose claim is gone is Released, and deleted (with its hostPath
// directory, for the volumes this provisioner made) under the Delete policy.
void SyncVolume(Store& store, const std::string& state_dir, const rapidjson::Value& pv) {
  const std::string name = GetString(pv, "metadata.name");
  if (IsPodTerminating(pv)) {
    if (GetString(pv, "status.phase") != "Bound")
      RemoveFinalizer(store, "persistentvolumes", pv, kPvProtectionFinalizer);
    return;
  }
  if (Find(pv, "spec.claimRef") == nullptr) {
    if (GetString(pv, "status.phase") != "Available")
      (void)store.Mutate("persistentvolumes", "", name, [](rapidjson::Document& doc) {
        SetMember(doc, "status.phase", rapidjson::Value("Available"));
        return Status::Ok();
      });
    return;
  }
  auto claim = store.Get("persistentvolumeclaims", GetString(pv, "spec.claimRef.namespace"),
                         GetString(pv, "spec.claimRef.name"));
  if (claim.ok() && GetString(**claim, "metadata.uid") == GetString(pv, "spec.claimRef.uid"))
    return;
  if (GetString(pv, "spec.persistentVolumeReclaimPolicy") != "Delete") {
    (void)store.Mutate("persistentvolumes", "", name, [](rapidjson::Document& doc) {
      SetMember(doc, "status.phase", rapidjson::Value("Released"));
      return Status::Ok();
    });
    return;
  }
  const std::filesystem::path volumes = std::filesystem::path(state_dir) / "volumes";
  const std::filesystem::path path = GetString(pv, "spec.hostPath.path");
  std::error_code ec;
  if (path.parent_path() == volumes && path.filename().string().rfind("pvc-", 0) == 0)
    std::filesystem::remove_all(path, ec);
  RemoveFinalizer(store, "persistentvolumes", pv, kPvProtectionFinalizer);
  (void)store.Delete("persistentvolumes", "", name);
}

}  // namespace

void WorkloadControllers::VolumePass() {
  for (const ObjectPtr& pvc : store_.List("persistentvolumeclaims", "").items)
    SyncClaim(store_, options_.state_dir, *pvc, log_);
  for (const ObjectPtr& pv : store_.List("persistentvolumes", "").items)
    SyncVolume(store_, options_.state_dir, *pv);
}

// ---- endpoints ---------------------------------------------------------------------------

namespace {

constexpr char kEndpointsMarker[] = "endpoints.kubernetes.io/last-change-trigger-time";

// The target port of a service port for `pod`: a number, or a named container port.
int64_t TargetPort(const rapidjson::Value& port, const rapidjson::Value& pod) {
  const rapidjson::Value* target = Find(port, "targetPort");
  if (target == nullptr)
    return IntAt(port, "port", 0);
  if (target->IsInt64())
    return target->GetInt64();
  const std::string name = target->IsString() ? target->GetString() : "";
  const rapidjson::Value* containers = Find(pod, "spec.containers");
  if (containers != nullptr && containers->IsArray()) {
    for (const auto& c : containers->GetArray()) {
      const rapidjson::Value* ports = Find(c, "ports");
      if (ports == nullptr || !ports->IsArray())
        continue;
      for (const auto& p : ports->GetArray()) {
        if (GetString(p, "name") == name)
          return IntAt(p, "containerPort", 0);
      }
    }
  }
  return 0;
}

rapidjson::Value Address(const rapidjson::Value& pod, const std::string& service, Alloc& a) {
  rapidjson::Value address(rapidjson::kObjectType);
  address.AddMember("ip", rapidjson::Value(GetString(pod, "status.podIP").c_str(), a), a);
  if (!GetString(pod, "spec.hostname").empty() && GetString(pod, "spec.subdomain") == service)
    address.AddMember("hostname", rapidjson::Value(GetString(pod, "spec.hostname").c_str(), a), a);
  if (!GetString(pod, "spec.nodeName").empty())
    address.AddMember("nodeName", rapidjson::Value(GetString(pod, "spec.nodeName").c_str(), a), a);
  rapidjson::Value ref(rapidjson::kObjectType);
  ref.AddMember("kind", "Pod", a);
  ref.AddMember("namespace", rapidjson::Value(GetString(pod, "metadata.namespace").c_str(), a), a);
  ref.AddMember("name", rapidjson::Value(GetString(pod, "metadata.name").c_str(), a), a);
  ref.AddMember("uid", rapidjson::Value(GetString(pod, "metadata.uid").c_str(), a), a);
  address.AddMember("targetRef", ref, a);
  return address;
}

// The subsets of `svc`: one per pod here (upstream repacks equal port sets into one).
rapidjson::Value Subsets(Store& store, const rapidjson::Value& svc, Alloc& a) {
  rapidjson::Value subsets(rapidjson::kArrayType);
  const rapidjson::Value* selector_map = Find(svc, "spec.selector");
  std::string text;
  for (const auto& m : selector_map->GetObject())
    text += (text.empty() ? "" : ",") + std::string(m.name.GetString()) + "=" +
            (m.value.IsString() ? m.value.GetString() : "");
  Result<LabelSelector> selector = LabelSelector::Parse(text);
  if (!selector.ok())
    return subsets;
  const std::string service = GetString(svc, "metadata.name");
  // publishNotReadyAddresses: every pod with an address is an endpoint in `addresses`,
  // terminating ones too (endpoints_controller.go, ShouldPodBeInEndpoints).
  const rapidjson::Value* publish = Find(svc, "spec.publishNotReadyAddresses");
  const bool tolerate_unready = publish != nullptr && publish->IsBool() && publish->GetBool();
  for (const ObjectPtr& pod :
       store
           .List("pods", GetString(svc, "metadata.namespace"),
                 [&](const rapidjson::Value& p) { return selector->Matches(p); })
           .items) {
    if (GetString(*pod, "status.podIP").empty() || (IsPodTerminating(*pod) && !tolerate_unready) ||
        IsPodFinished(*pod))
      continue;
    rapidjson::Value subset(rapidjson::kObjectType);
    rapidjson::Value addresses(rapidjson::kArrayType);
    addresses.PushBack(Address(*pod, service, a), a);
    subset.AddMember(rapidjson::StringRef(
                         tolerate_unready || IsPodReady(*pod) ? "addresses" : "notReadyAddresses"),
                     addresses, a);
    rapidjson::Value ports(rapidjson::kArrayType);
    static const rapidjson::Value kNoPorts(rapidjson::kArrayType);
    const rapidjson::Value* service_ports = Find(svc, "spec.ports");
    if (service_ports == nullptr || !service_ports->IsArray())
      service_ports = &kNoPorts;
    for (const auto& p : service_ports->GetArray()) {
      rapidjson::Value port(rapidjson::kObjectType);
      if (!GetString(p, "name").empty())
        port.AddMember("name", rapidjson::Value(GetString(p, "name").c_str(), a), a);
      port.AddMember("port", TargetPort(p, *pod), a);
      port.AddMember("protocol", rapidjson::Value(GetString(p, "protocol").c_str(), a), a);
      ports.PushBack(port, a);
    }
    subset.AddMember("ports", ports, a);
    subsets.PushBack(subset, a);
  }
  return subsets;
}

void SyncEndpoints(Store& store, const rapidjson::Value& svc) {
  const std::string ns = GetString(svc, "metadata.namespace");
  const std::string name = GetString(svc, "metadata.name");
  rapidjson::Document subsets_doc;
  rapidjson::Value subsets = Subsets(store, svc, subsets_doc.GetAllocator());
  auto current = store.Get("endpoints", ns, name);
  if (current.ok()) {
    const rapidjson::Value* have = Find(**current, "subsets");
    if ((have == nullptr && subsets.Empty()) || (have != nullptr && *have == subsets))
      return;
    (void)store.Mutate("endpoints", ns, name, [&](rapidjson::Document& doc) {
      doc.RemoveMember("subsets");
      if (!subsets.Empty())
        doc.AddMember("subsets", rapidjson::Value(subsets, doc.GetAllocator()), doc.GetAllocator());
      SetAnnotation(doc, kEndpointsMarker, store.NowTimestamp());
      return Status::Ok();
    });
    return;
  }
  rapidjson::Document ep = NewObject("v1", "Endpoints", name, Find(svc, "metadata.labels"));
  auto& a = ep.GetAllocator();
  SetAnnotation(ep, kEndpointsMarker, store.NowTimestamp());
  if (!subsets.Empty())
    ep.AddMember("subsets", rapidjson::Value(subsets, a), a);
  (void)store.Create("endpoints", ns, std::move(ep));
}

}  // namespace

void WorkloadControllers::EndpointsPass() {
  std::set<std::pair<std::string, std::string>> services;
  for (const ObjectPtr& svc : store_.List("services", "").items) {
    services.emplace(GetString(*svc, "metadata.namespace"), GetString(*svc, "metadata.name"));
    const rapidjson::Value* selector = Find(*svc, "spec.selector");
    if (selector != nullptr && selector->IsObject() && !selector->ObjectEmpty())
      SyncEndpoints(store_, *svc);
  }
  // The Endpoints this controller wrote for services that are gone.
  for (const ObjectPtr& ep : store_.List("endpoints", "").items) {
    const rapidjson::Value* annotations = Find(*ep, "metadata.annotations");
    if (annotations == nullptr || !annotations->IsObject() ||
        !annotations->HasMember(kEndpointsMarker))
      continue;
    if (services.count({GetString(*ep, "metadata.namespace"), GetString(*ep, "metadata.name")}) ==
        0)
      (void)store_.Delete("endpoints", GetString(*ep, "metadata.namespace"),
                          GetString(*ep, "metadata.name"));
  }
}

}  // namespace kubesim
