#include "serviceaccounts.h"

#include <ctime>
#include <random>

#include <fmt/format.h>

#include "patch.h"
#include "validation.h"

namespace kubesim {

namespace {

constexpr const char* kRootCaConfigMap = "kube-root-ca.crt";
constexpr const char* kTokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr const char* kVolumePrefix = "kube-api-access-";
// serviceaccount.WarnOnlyBoundTokenExpirationSeconds: what admission asks the kubelet for.
constexpr int64_t kProjectedTokenSeconds = 3607;

void EnsureDefaultServiceAccount(Store& store, const std::string& ns) {
  if (store.Get("serviceaccounts", ns, "default").ok())
    return;
  rapidjson::Document sa(rapidjson::kObjectType);
  auto& a = sa.GetAllocator();
  sa.AddMember("apiVersion", "v1", a);
  sa.AddMember("kind", "ServiceAccount", a);
  SetMember(sa, "metadata.name", rapidjson::Value("default", a));
  SetMember(sa, "metadata.namespace", rapidjson::Value(ns.c_str(), a));
  (void)store.Create("serviceaccounts", ns, std::move(sa));  // lost race: already there
}

void EnsureRootCaConfigMap(Store& store, const std::string& ns, const std::string& ca_pem) {
  auto current = store.Get("configmaps", ns, kRootCaConfigMap);
  if (current.ok()) {
    const rapidjson::Value* data = Find(**current, "data");
    bool same = false;
    if (data != nullptr && data->IsObject() && data->MemberCount() == 1) {
      auto ca = data->FindMember("ca.crt");
      same = ca != data->MemberEnd() && ca->value.IsString() && ca_pem == ca->value.GetString();
    }
    if (same)
      return;
    (void)store.Mutate("configmaps", ns, kRootCaConfigMap, [&](rapidjson::Document& d) {
      d.RemoveMember("data");
      rapidjson::Value fresh(rapidjson::kObjectType);
      fresh.AddMember("ca.crt", rapidjson::Value(ca_pem.c_str(), d.GetAllocator()),
                      d.GetAllocator());
      d.AddMember("data", fresh, d.GetAllocator());
      return Status::Ok();
    });
    return;
  }
  rapidjson::Document cm(rapidjson::kObjectType);
  auto& a = cm.GetAllocator();
  cm.AddMember("apiVersion", "v1", a);
  cm.AddMember("kind", "ConfigMap", a);
  SetMember(cm, "metadata.name", rapidjson::Value(kRootCaConfigMap, a));
  SetMember(cm, "metadata.namespace", rapidjson::Value(ns.c_str(), a));
  // The publisher marks its ConfigMap with this annotation.
  rapidjson::Value annotations(rapidjson::kObjectType);
  annotations.AddMember("kubernetes.io/description",
                        "Contains a CA bundle that can be used to verify the kube-apiserver "
                        "when using internal endpoints such as the internal service IP or "
                        "kubernetes.default.svc. No other usage is guaranteed across "
                        "distributions of Kubernetes clusters.",
                        a);
  SetMember(cm, "metadata.annotations", std::move(annotations));
  rapidjson::Value data(rapidjson::kObjectType);
  data.AddMember("ca.crt", rapidjson::Value(ca_pem.c_str(), a), a);
  cm.AddMember("data", data, a);
  (void)store.Create("configmaps", ns, std::move(cm));
}

// utilrand.String(5): the alphabet of generated names (no vowels, no confusables).
std::string RandomSuffix() {
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  std::string out;
  for (int i = 0; i < 5; ++i)
    out += kAlphabet[pick(rng)];
  return out;
}

std::optional<bool> OptionalBool(const rapidjson::Value& v, const char* path) {
  const rapidjson::Value* b = Find(v, path);
  if (b == nullptr || !b->IsBool())
    return std::nullopt;
  return b->GetBool();
}

// TokenVolumeSource(): the projected volume of token, CA and namespace.
rapidjson::Value TokenVolume(const std::string& name, rapidjson::Document::AllocatorType& a) {
  rapidjson::Document v;
  v.Parse(
      fmt::format(R"({{"name":"{}","projected":{{"defaultMode":420,"sources":[)"
                  R"({{"serviceAccountToken":{{"expirationSeconds":{},"path":"token"}}}},)"
                  R"({{"configMap":{{"name":"{}","items":[{{"key":"ca.crt","path":"ca.crt"}}]}}}},)"
                  R"({{"downwardAPI":{{"items":[{{"path":"namespace","fieldRef":)"
                  R"({{"apiVersion":"v1","fieldPath":"metadata.namespace"}}}}]}}}}]}}}})",
                  name, kProjectedTokenSeconds, kRootCaConfigMap)
          .c_str());
  return rapidjson::Value(v, a);
}

// mountServiceAccountToken: every (init) container without a mount at the token path
// gets one; the volume comes along when one did.
void MountServiceAccountToken(rapidjson::Document& pod) {
  auto& a = pod.GetAllocator();
  rapidjson::Value& spec = pod["spec"];
  std::string volume_name;
  if (spec.HasMember("volumes") && spec["volumes"].IsArray()) {
    for (const auto& v : spec["volumes"].GetArray()) {
      if (GetString(v, "name").rfind(kVolumePrefix, 0) == 0) {
        volume_name = GetString(v, "name");
        break;
      }
    }
  }
  bool has_volume = !volume_name.empty();
  if (!has_volume)
    volume_name = kVolumePrefix + RandomSuffix();
  bool needs_volume = false;
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.HasMember(list) || !spec[list].IsArray())
      continue;
    for (auto& c : spec[list].GetArray()) {
      if (!c.IsObject())
        continue;
      bool mounted = false;
      if (c.HasMember("volumeMounts") && c["volumeMounts"].IsArray()) {
        for (const auto& m : c["volumeMounts"].GetArray())
          mounted = mounted || GetString(m, "mountPath") == kTokenMountPath;
      }
      if (mounted)
        continue;
      if (!c.HasMember("volumeMounts") || !c["volumeMounts"].IsArray()) {
        c.RemoveMember("volumeMounts");
        c.AddMember("volumeMounts", rapidjson::Value(rapidjson::kArrayType), a);
      }
      rapidjson::Value mount(rapidjson::kObjectType);
      mount.AddMember("name", rapidjson::Value(volume_name.c_str(), a), a);
      mount.AddMember("readOnly", true, a);
      mount.AddMember("mountPath", rapidjson::Value(kTokenMountPath, a), a);
      c["volumeMounts"].PushBack(mount, a);
      needs_volume = true;
    }
  }
  if (has_volume || !needs_volume)
    return;
  if (!spec.HasMember("volumes") || !spec["volumes"].IsArray()) {
    spec.RemoveMember("volumes");
    spec.AddMember("volumes", rapidjson::Value(rapidjson::kArrayType), a);
  }
  spec["volumes"].PushBack(TokenVolume(volume_name, a), a);
}

std::string Rfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void SyncNamespaceDefaults(Store& store, const std::string& ca_pem, const std::string& ns) {
  std::vector<ObjectPtr> namespaces;
  if (ns.empty()) {
    namespaces = store.List("namespaces", "").items;
  } else if (auto one = store.Get("namespaces", "", ns); one.ok()) {
    namespaces.push_back(*one);
  }
  for (const auto& n : namespaces) {
    if (Find(*n, "metadata.deletionTimestamp") != nullptr)
      continue;
    std::string name = GetString(*n, "metadata.name");
    EnsureDefaultServiceAccount(store, name);
    EnsureRootCaConfigMap(store, name, ca_pem);
  }
}

std::optional<ApiResponse> AdmitPodServiceAccount(Store& store, const std::string& ca_pem,
                                                  const std::string& ns, rapidjson::Document& pod) {
  if (!pod.HasMember("spec") || !pod["spec"].IsObject())
    return std::nullopt;  // validation refuses it
  if (const rapidjson::Value* annotations = Find(pod, "metadata.annotations");
      annotations != nullptr && annotations->IsObject() &&
      annotations->HasMember("kubernetes.io/config.mirror")) {
    return std::nullopt;  // mirror pods keep their spec
  }
  auto& a = pod.GetAllocator();
  rapidjson::Value& spec = pod["spec"];
  std::string sa_name = GetString(spec, "serviceAccountName");
  if (sa_name.empty())
    sa_name = GetString(spec, "serviceAccount");  // the deprecated spelling
  if (sa_name.empty())
    sa_name = "default";
  for (const char* field : {"serviceAccountName", "serviceAccount"}) {
    spec.RemoveMember(field);
    spec.AddMember(rapidjson::Value(field, a), rapidjson::Value(sa_name.c_str(), a), a);
  }
  auto sa = store.Get("serviceaccounts", ns, sa_name);
  if (!sa.ok() && sa_name == "default") {
    // Upstream retries the default ServiceAccount while its controller catches up.
    SyncNamespaceDefaults(store, ca_pem, ns);
    sa = store.Get("serviceaccounts", ns, sa_name);
  }
  if (!sa.ok()) {
    std::string name = GetString(pod, "metadata.name");
    if (name.empty())
      name = GetString(pod, "metadata.generateName");
    return StatusResponse(
        403, "Forbidden",
        fmt::format("pods {} is forbidden: error looking up service account {}/{}: "
                    "serviceaccount {} not found",
                    GoQuote(name), ns, sa_name, GoQuote(sa_name)),
        "pods", name);
  }
  std::optional<bool> automount = OptionalBool(spec, "automountServiceAccountToken");
  if (!automount)
    automount = OptionalBool(**sa, "automountServiceAccountToken");
  if (automount.value_or(true))
    MountServiceAccountToken(pod);
  return std::nullopt;
}

ApiResponse CreateTokenRequest(TokenIssuer& issuer, Store& store, const ApiRequest& request,
                               const Route& route) {
  auto parsed = request.content_type.find("yaml") != std::string::npos ? YamlToJson(request.body)
                                                                       : ParseJson(request.body);
  if (!parsed.ok() || !(*parsed)->IsObject())
    return StatusResponse(400, "BadRequest", "the body is not a JSON object");
  rapidjson::Document& doc = **parsed;
  int64_t seconds = 3600;  // SetDefaults_TokenRequestSpec
  if (const rapidjson::Value* e = Find(doc, "spec.expirationSeconds"); e != nullptr && e->IsInt64())
    seconds = e->GetInt64();
  FieldErrors errors;
  if (seconds < 600) {
    errors.push_back(InvalidRaw("spec.expirationSeconds", std::to_string(seconds),
                                "may not specify a duration less than 10 minutes"));
  }
  if (seconds > (int64_t{1} << 32)) {
    errors.push_back(InvalidRaw("spec.expirationSeconds", std::to_string(seconds),
                                "may not specify a duration larger than 2^32 seconds"));
  }
  if (!errors.empty())
    return InvalidResponse("TokenRequest", "authentication.k8s.io", "", errors);
  std::vector<std::string> audiences;
  if (const rapidjson::Value* list = Find(doc, "spec.audiences");
      list != nullptr && list->IsArray()) {
    for (const auto& v : list->GetArray())
      audiences.emplace_back(v.IsString() ? v.GetString() : "");
  }
  if (audiences.empty())
    audiences.push_back(TokenIssuer::kIssuer);
  auto issued = issuer.IssueToken(route.ns, route.name, seconds, audiences);
  if (!issued.ok()) {
    return StatusResponse(404, "NotFound",
                          fmt::format("serviceaccounts {} not found", GoQuote(route.name)),
                          "serviceaccounts", route.name);
  }
  rapidjson::Document out(rapidjson::kObjectType);
  auto& o = out.GetAllocator();
  out.AddMember("kind", "TokenRequest", o);
  out.AddMember("apiVersion", "authentication.k8s.io/v1", o);
  SetMember(out, "metadata.name", rapidjson::Value(route.name.c_str(), o));
  SetMember(out, "metadata.namespace", rapidjson::Value(route.ns.c_str(), o));
  SetMember(out, "metadata.creationTimestamp", rapidjson::Value(store.NowTimestamp().c_str(), o));
  rapidjson::Value spec(rapidjson::kObjectType);
  rapidjson::Value aud(rapidjson::kArrayType);
  for (const auto& s : audiences)
    aud.PushBack(rapidjson::Value(s.c_str(), o), o);
  spec.AddMember("audiences", aud, o);
  spec.AddMember("expirationSeconds", seconds, o);
  const rapidjson::Value* bound = Find(doc, "spec.boundObjectRef");
  spec.AddMember(
      "boundObjectRef",
      bound != nullptr ? rapidjson::Value(*bound, o) : rapidjson::Value(rapidjson::kNullType), o);
  out.AddMember("spec", spec, o);
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("token", rapidjson::Value(issued->token.c_str(), o), o);
  status.AddMember("expirationTimestamp",
                   rapidjson::Value(Rfc3339(issued->expiration_unix).c_str(), o), o);
  out.AddMember("status", status, o);
  ApiResponse response;
  response.code = 201;
  response.body = ToJson(out);
  return response;
}

}  // namespace kubesim
