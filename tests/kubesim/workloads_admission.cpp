// Create-time admission of the workload resources and the scale subresource
// (workloads.h): plugin/pkg/admission/storage/storageclass/setdefault (DefaultStorageClass),
// plugin/pkg/admission/storage/storageobjectinuseprotection, the Service cluster IP
// allocator (pkg/registry/core/service/ipallocator) and pkg/registry/apps/*/storage
// (the Scale subresource).
#include <arpa/inet.h>

#include <mutex>
#include <set>

#include <fmt/format.h>

#include "patch.h"
#include "selector.h"
#include "workloads.h"

namespace kubesim {

namespace {

void AddFinalizer(rapidjson::Document& object, const char* finalizer) {
  auto& a = object.GetAllocator();
  const rapidjson::Value* list = Find(object, "metadata.finalizers");
  if (list != nullptr && list->IsArray()) {
    for (const auto& f : list->GetArray()) {
      if (f.IsString() && std::string(f.GetString()) == finalizer)
        return;
    }
  } else {
    SetMember(object, "metadata.finalizers", rapidjson::Value(rapidjson::kArrayType));
  }
  object["metadata"]["finalizers"].PushBack(rapidjson::Value(finalizer, a), a);
}

// The newest StorageClass annotated as default (GetDefaultClass), "" if none.
std::string DefaultClassName(Store& store) {
  std::string name, created;
  for (const ObjectPtr& sc : store.List("storageclasses", "").items) {
    const rapidjson::Value* annotations = Find(*sc, "metadata.annotations");
    if (annotations == nullptr || !annotations->IsObject())
      continue;
    auto it = annotations->FindMember(kIsDefaultClassAnnotation);
    if (it == annotations->MemberEnd() || !it->value.IsString() ||
        std::string(it->value.GetString()) != "true")
      continue;
    std::string at = GetString(*sc, "metadata.creationTimestamp");
    if (name.empty() || at > created) {
      name = GetString(*sc, "metadata.name");
      created = at;
    }
  }
  return name;
}

std::optional<uint32_t> ParseIPv4(const std::string& text) {
  in_addr addr{};
  if (inet_pton(AF_INET, text.c_str(), &addr) != 1)
    return std::nullopt;
  return ntohl(addr.s_addr);
}

std::string FormatIPv4(uint32_t ip) {
  return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 0xff, (ip >> 8) & 0xff, ip & 0xff);
}

constexpr uint32_t kServiceBase = (10u << 24) | (96u << 16);  // 10.96.0.0
constexpr uint32_t kServiceSize = 1u << 20;                   // /12
// The dynamic band starts above the static one (min(max(16, size/16), 256) addresses),
// which upstream keeps for IPs that clients ask for.
constexpr uint32_t kDynamicStart = 256;

ApiResponse IpError(const std::string& name, const std::string& ip, const std::string& why) {
  FieldError e = InvalidRaw("spec.clusterIPs", fmt::format("[]string{{{}}}", GoQuote(ip)),
                            fmt::format("failed to allocate IP {}: {}", ip, why));
  return InvalidResponse("Service", "", name, {e});
}

// Allocates (or checks) the Service's cluster IP. The allocator hands out dynamic IPs
// in order and never reuses one within a kubesim run (upstream picks at random).
std::optional<ApiResponse> AllocateClusterIP(Store& store, rapidjson::Document& svc) {
  static std::mutex mu;
  static uint32_t next_dynamic = kDynamicStart;
  auto& a = svc.GetAllocator();
  if (GetString(svc, "spec.type") == "ExternalName")
    return std::nullopt;
  std::string ip = GetString(svc, "spec.clusterIP");
  const rapidjson::Value* ips = Find(svc, "spec.clusterIPs");
  if (ip.empty() && ips != nullptr && ips->IsArray() && !ips->Empty() && (*ips)[0].IsString())
    ip = (*ips)[0].GetString();
  std::lock_guard lock(mu);
  std::set<std::string> taken;
  for (const ObjectPtr& other : store.List("services", "").items)
    taken.insert(GetString(*other, "spec.clusterIP"));
  const std::string name = GetString(svc, "metadata.name");
  if (ip.empty()) {
    while (next_dynamic < kServiceSize - 1 && taken.count(FormatIPv4(kServiceBase + next_dynamic)))
      ++next_dynamic;
    if (next_dynamic >= kServiceSize - 1)
      return IpError(name, "", "range is full");
    ip = FormatIPv4(kServiceBase + next_dynamic++);
  } else if (ip != "None") {
    std::optional<uint32_t> parsed = ParseIPv4(ip);
    if (!parsed || *parsed <= kServiceBase || *parsed >= kServiceBase + kServiceSize - 1) {
      return IpError(name, ip,
                     fmt::format("the provided IP ({}) is not in the valid range. The range of "
                                 "valid IPs is {}",
                                 ip, kServiceCidr));
    }
    if (taken.count(ip) != 0)
      return IpError(name, ip, "provided IP is already allocated");
  }
  SetMember(svc, "spec.clusterIP", rapidjson::Value(ip.c_str(), a));
  rapidjson::Value list(rapidjson::kArrayType);
  list.PushBack(rapidjson::Value(ip.c_str(), a), a);
  SetMember(svc, "spec.clusterIPs", std::move(list));
  rapidjson::Value families(rapidjson::kArrayType);
  families.PushBack("IPv4", a);
  SetMember(svc, "spec.ipFamilies", std::move(families));
  SetMember(svc, "spec.ipFamilyPolicy", rapidjson::Value("SingleStack", a));
  return std::nullopt;
}

}  // namespace

void AdmitClaim(Store& store, rapidjson::Document& claim) {
  if (Find(claim, "spec.storageClassName") == nullptr) {
    std::string name = DefaultClassName(store);
    if (!name.empty()) {
      SetMember(claim, "spec.storageClassName",
                rapidjson::Value(name.c_str(), claim.GetAllocator()));
    }
  }
  AddFinalizer(claim, kPvcProtectionFinalizer);
}

std::optional<ApiResponse> AdmitWorkloadCreate(Store& store, const std::string& resource,
                                               rapidjson::Document& object) {
  if (resource == "persistentvolumeclaims")
    AdmitClaim(store, object);
  else if (resource == "persistentvolumes")
    AddFinalizer(object, kPvProtectionFinalizer);
  else if (resource == "services")
    return AllocateClusterIP(store, object);
  return std::nullopt;
}

void KeepAllocatedValues(const std::string& resource, rapidjson::Document& next,
                         const rapidjson::Value& stored) {
  std::vector<const char*> kept;
  if (resource == "services")
    kept = {"spec.clusterIP", "spec.clusterIPs", "spec.ipFamilies", "spec.ipFamilyPolicy"};
  else if (resource == "persistentvolumeclaims")
    kept = {"spec.volumeName", "spec.storageClassName"};
  for (const char* path : kept) {
    const rapidjson::Value* old = Find(stored, path);
    if (old != nullptr && Find(next, path) == nullptr)
      SetMember(next, path, rapidjson::Value(*old, next.GetAllocator()));
  }
}

Status CreateDefaultStorageClass(Store& store) {
  auto parsed = ParseJson(fmt::format(
      R"({{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{{"name":"{}",)"
      R"("annotations":{{"{}":"true"}}}},"provisioner":"{}","reclaimPolicy":"Delete",)"
      R"("volumeBindingMode":"Immediate"}})",
      kDefaultStorageClass, kIsDefaultClassAnnotation, kHostPathProvisioner));
  if (!parsed.ok())
    return parsed.status();
  auto created = store.Create("storageclasses", "", std::move(**parsed));
  if (!created.ok() && created.status().code() != Status::Code::kAlreadyExists)
    return created.status();
  return Status::Ok();
}

// ---- scale ---------------------------------------------------------------------------------

namespace {

std::string ScaleJson(const rapidjson::Value& object) {
  rapidjson::Document scale(rapidjson::kObjectType);
  auto& a = scale.GetAllocator();
  scale.AddMember("kind", "Scale", a);
  scale.AddMember("apiVersion", "autoscaling/v1", a);
  rapidjson::Value meta(rapidjson::kObjectType);
  for (const char* key : {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"}) {
    std::string v = GetString(object, (std::string("metadata.") + key).c_str());
    meta.AddMember(rapidjson::StringRef(key), rapidjson::Value(v.c_str(), a), a);
  }
  scale.AddMember("metadata", meta, a);
  const rapidjson::Value* replicas = Find(object, "spec.replicas");
  rapidjson::Value spec(rapidjson::kObjectType);
  spec.AddMember("replicas", replicas != nullptr && replicas->IsInt64() ? replicas->GetInt64() : 1,
                 a);
  scale.AddMember("spec", spec, a);
  const rapidjson::Value* current = Find(object, "status.replicas");
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("replicas", current != nullptr && current->IsInt64() ? current->GetInt64() : 0,
                   a);
  std::string selector = LabelSelectorText(Find(object, "spec.selector")).value_or("");
  status.AddMember("selector", rapidjson::Value(selector.c_str(), a), a);
  scale.AddMember("status", status, a);
  return ToJson(scale);
}

// The new Scale from the request: a PUT body or the patch applied to the current one.
Result<std::unique_ptr<rapidjson::Document>> RequestedScale(const ApiRequest& request,
                                                            const rapidjson::Value& object) {
  if (request.method == "PUT")
    return request.content_type.find("yaml") != std::string::npos ? YamlToJson(request.body)
                                                                  : ParseJson(request.body);
  auto patch = ParseJson(request.body);
  if (!patch.ok())
    return patch.status();
  auto scale = ParseJson(ScaleJson(object));
  if (!scale.ok())
    return scale.status();
  if (request.content_type.find("json-patch") != std::string::npos) {
    if (Status s = ApplyJsonPatch(**scale, **patch); !s.ok())
      return s;
  } else {
    ApplyMergePatch(**scale, **patch, (*scale)->GetAllocator());  // Scale has no lists
  }
  return scale;
}

}  // namespace

ApiResponse HandleScale(Store& store, const ApiRequest& request, const Route& route) {
  auto current = store.Get(route.resource, route.ns, route.name);
  if (!current.ok()) {
    return StatusResponse(
        404, "NotFound",
        fmt::format("{}.{} \"{}\" not found", route.resource, route.group, route.name),
        route.resource, route.name, route.group);
  }
  if (route.verb == "get")
    return ApiResponse{200, ScaleJson(**current), "application/json", {}};
  if (route.verb != "update" && route.verb != "patch")
    return StatusResponse(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource");
  auto scale = RequestedScale(request, **current);
  if (!scale.ok())
    return StatusResponse(400, "BadRequest", scale.status().message());
  const rapidjson::Value* replicas = Find(**scale, "spec.replicas");
  int64_t want = replicas != nullptr && replicas->IsInt64() ? replicas->GetInt64() : 0;
  if (want < 0) {
    return InvalidResponse(
        "Scale", "autoscaling", route.name,
        {InvalidRaw("spec.replicas", std::to_string(want), "must be greater than or equal to 0")});
  }
  std::string rv = GetString(**scale, "metadata.resourceVersion");
  auto updated = store.Mutate(
      route.resource, route.ns, route.name,
      [&](rapidjson::Document& object) {
        const rapidjson::Value* have = Find(object, "spec.replicas");
        if (have != nullptr && have->IsInt64() && have->GetInt64() == want)
          return Status::Ok();
        SetMember(object, "spec.replicas", rapidjson::Value(want));
        const rapidjson::Value* generation = Find(object, "metadata.generation");
        int64_t g = generation != nullptr && generation->IsInt64() ? generation->GetInt64() : 1;
        SetMember(object, "metadata.generation", rapidjson::Value(g + 1));
        return Status::Ok();
      },
      request.method == "PUT" ? rv : "");
  if (!updated.ok()) {
    return StatusResponse(409, "Conflict", updated.status().message(), route.resource, route.name,
                          route.group);
  }
  return ApiResponse{200, ScaleJson(**updated), "application/json", {}};
}

}  // namespace kubesim
