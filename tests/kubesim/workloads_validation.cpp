// Validation of the workload resources (workloads.h), after pkg/apis/apps/validation,
// pkg/apis/batch/validation and pkg/apis/core/validation (PVC, PV, Service).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "quantity.h"
#include "selector.h"
#include "workloads.h"

namespace kubesim {

namespace {

const rapidjson::Value& OrEmpty(const rapidjson::Value* v) {
  static const rapidjson::Value kEmpty(rapidjson::kObjectType);
  return v != nullptr && v->IsObject() ? *v : kEmpty;
}

bool Equal(const rapidjson::Value* a, const rapidjson::Value* b) {
  if (a == nullptr || b == nullptr)
    return a == b;
  return *a == *b;
}

int64_t IntOr(const rapidjson::Value& object, const char* path, int64_t fallback) {
  const rapidjson::Value* v = Find(object, path);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : fallback;
}

void NonNegative(const rapidjson::Value& object, const char* path, FieldErrors& errors) {
  const rapidjson::Value* v = Find(object, path);
  if (v != nullptr && v->IsInt64() && v->GetInt64() < 0) {
    errors.push_back(
        InvalidRaw(path, std::to_string(v->GetInt64()), "must be greater than or equal to 0"));
  }
}

// Go's %#v of a *metav1.LabelSelector, as ValidateImmutableField prints it.
std::string GoLabelSelector(const rapidjson::Value* selector) {
  if (selector == nullptr || !selector->IsObject())
    return "null";
  const rapidjson::Value* exprs = Find(*selector, "matchExpressions");
  std::string expressions = "[]v1.LabelSelectorRequirement(nil)";
  if (exprs != nullptr && exprs->IsArray() && !exprs->Empty())
    expressions = "[]v1.LabelSelectorRequirement{" + ToJson(*exprs) + "}";
  return fmt::format("v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
                     GoStringMap(Find(*selector, "matchLabels")), expressions);
}

// ValidatePodTemplateSpec's pod spec checks, with paths under spec.template.
void ValidateTemplatePodSpec(const rapidjson::Value& object, FieldErrors& errors) {
  FieldErrors pod_errors;
  ValidatePodSpec(OrEmpty(Find(object, "spec.template.spec")), pod_errors);
  for (FieldError& e : pod_errors) {
    if (e.field.rfind("spec.", 0) == 0)
      e.field = "spec.template." + e.field;
    errors.push_back(std::move(e));
  }
}

// The selector and template checks every pod controller shares
// (ValidateDeploymentSpec, ValidateReplicaSetSpec, ValidateStatefulSetSpec,
// validateJobSpec); `kind_word` names the kind in "empty selector is invalid for ...".
void ValidateSelectorAndTemplate(const rapidjson::Value& object, const char* kind_word,
                                 FieldErrors& errors) {
  const rapidjson::Value* selector = Find(object, "spec.selector");
  if (selector == nullptr || !selector->IsObject()) {
    errors.push_back(Required("spec.selector"));
  } else {
    const rapidjson::Value& labels = OrEmpty(Find(*selector, "matchLabels"));
    const rapidjson::Value* exprs = Find(*selector, "matchExpressions");
    if (labels.ObjectEmpty() && (exprs == nullptr || !exprs->IsArray() || exprs->Empty())) {
      errors.push_back(InvalidRaw("spec.selector", GoLabelSelector(selector),
                                  fmt::format("empty selector is invalid for {}", kind_word)));
    }
    std::optional<std::string> text = LabelSelectorText(selector);
    Result<LabelSelector> parsed = LabelSelector::Parse(text.value_or(""));
    if (!parsed.ok()) {
      errors.push_back(
          InvalidRaw("spec.selector", GoLabelSelector(selector), parsed.status().message()));
    } else if (!text->empty() && !parsed->Matches(OrEmpty(Find(object, "spec.template")))) {
      errors.push_back(InvalidRaw("spec.template.metadata.labels",
                                  GoStringMap(Find(object, "spec.template.metadata.labels")),
                                  "`selector` does not match template `labels`"));
    }
  }
  NonNegative(object, "spec.replicas", errors);
  // Upstream's ValidatePodTemplateSpecForStatefulSet leaves the pod spec out on
  // purpose: its volumeMounts may name volumeClaimTemplates, which are no volumes
  // yet. The StatefulSet's pods are validated when the controller creates them.
  if (std::string_view(kind_word) != "statefulset")
    ValidateTemplatePodSpec(object, errors);
}

void RequireRestartPolicy(const rapidjson::Value& object, const std::vector<std::string>& allowed,
                          FieldErrors& errors) {
  std::string policy = GetString(object, "spec.template.spec.restartPolicy");
  if (std::find(allowed.begin(), allowed.end(), policy) == allowed.end())
    errors.push_back(NotSupported("spec.template.spec.restartPolicy", policy, allowed));
}

void ValidateStatefulSet(const rapidjson::Value& sts, FieldErrors& errors) {
  ValidateSelectorAndTemplate(sts, "statefulset", errors);
  std::string policy = GetString(sts, "spec.podManagementPolicy");
  if (policy != "OrderedReady" && policy != "Parallel") {
    errors.push_back(
        Invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"));
  }
  std::string strategy = GetString(sts, "spec.updateStrategy.type");
  if (strategy == "OnDelete" && Find(sts, "spec.updateStrategy.rollingUpdate") != nullptr) {
    errors.push_back(InvalidRaw("spec.updateStrategy.rollingUpdate",
                                ToJson(*Find(sts, "spec.updateStrategy.rollingUpdate")),
                                "only allowed for updateStrategy 'RollingUpdate'"));
  } else if (strategy != "OnDelete" && strategy != "RollingUpdate") {
    errors.push_back(InvalidRaw("spec.updateStrategy",
                                ToJson(OrEmpty(Find(sts, "spec.updateStrategy"))),
                                "must be 'RollingUpdate' or 'OnDelete'"));
  }
  NonNegative(sts, "spec.updateStrategy.rollingUpdate.partition", errors);
  NonNegative(sts, "spec.ordinals.start", errors);
  RequireRestartPolicy(sts, {"Always"}, errors);
  const rapidjson::Value* claims = Find(sts, "spec.volumeClaimTemplates");
  if (claims != nullptr && claims->IsArray()) {
    for (rapidjson::SizeType i = 0; i < claims->Size(); ++i) {
      FieldErrors claim_errors;
      ValidateWorkloadCreate("persistentvolumeclaims", (*claims)[i], claim_errors);
      for (FieldError& e : claim_errors) {
        e.field = fmt::format("spec.volumeClaimTemplates[{}].{}", i, e.field);
        errors.push_back(std::move(e));
      }
    }
  }
}

// An int or "N%" within 0..100 (ValidatePositiveIntOrPercent, IsNotMoreThan100Percent).
std::optional<int64_t> IntOrPercent(const rapidjson::Value* v, int64_t total, bool round_up) {
  if (v == nullptr)
    return 0;
  if (v->IsInt64())
    return v->GetInt64();
  if (!v->IsString())
    return std::nullopt;
  std::string s = v->GetString();
  if (s.empty() || s.back() != '%' || s.find_first_not_of("0123456789") != s.size() - 1)
    return std::nullopt;
  int64_t pct = std::stoll(s.substr(0, s.size() - 1));
  return round_up ? (pct * total + 99) / 100 : pct * total / 100;
}

void ValidateDeploymentStrategy(const rapidjson::Value& deploy, FieldErrors& errors) {
  std::string type = GetString(deploy, "spec.strategy.type");
  if (type == "Recreate") {
    if (Find(deploy, "spec.strategy.rollingUpdate") != nullptr) {
      errors.push_back(Forbidden("spec.strategy.rollingUpdate",
                                 "may not be specified when strategy `type` is 'Recreate'"));
    }
    return;
  }
  if (type != "RollingUpdate") {
    errors.push_back(NotSupported("spec.strategy.type", type, {"Recreate", "RollingUpdate"}));
    return;
  }
  const rapidjson::Value* surge = Find(deploy, "spec.strategy.rollingUpdate.maxSurge");
  const rapidjson::Value* unavailable = Find(deploy, "spec.strategy.rollingUpdate.maxUnavailable");
  for (auto [path, v] : {std::pair{"spec.strategy.rollingUpdate.maxSurge", surge},
                         std::pair{"spec.strategy.rollingUpdate.maxUnavailable", unavailable}}) {
    std::optional<int64_t> n = IntOrPercent(v, 100, false);
    if (!n) {
      errors.push_back(Invalid(path, v->IsString() ? v->GetString() : ToJson(*v),
                               "a valid percent string must be a numeric string followed by an "
                               "ending '%' (e.g. '1%',  or '93%', regex used for validation is "
                               "'[0-9]+%')"));
    } else if (*n < 0) {
      errors.push_back(InvalidRaw(path, std::to_string(*n), "must be greater than or equal to 0"));
    }
  }
  if (IntOrPercent(surge, 100, false) == 0 && IntOrPercent(unavailable, 100, false) == 0) {
    errors.push_back(InvalidRaw(
        "spec.strategy.rollingUpdate.maxUnavailable",
        unavailable != nullptr && unavailable->IsString() ? GoQuote(unavailable->GetString()) : "0",
        "may not be 0 when `maxSurge` is 0"));
  }
}

void ValidateJob(const rapidjson::Value& job, FieldErrors& errors) {
  // The selector is generated after the uid (workloads.cpp) unless manualSelector.
  const rapidjson::Value* manual = Find(job, "spec.manualSelector");
  if ((manual != nullptr && manual->IsBool() && manual->GetBool()) ||
      Find(job, "spec.selector") != nullptr) {
    ValidateSelectorAndTemplate(job, "job", errors);
  } else {
    ValidateTemplatePodSpec(job, errors);
  }
  for (const char* path : {"spec.parallelism", "spec.completions", "spec.backoffLimit",
                           "spec.activeDeadlineSeconds", "spec.ttlSecondsAfterFinished"})
    NonNegative(job, path, errors);
  std::string policy = GetString(job, "spec.template.spec.restartPolicy");
  if (policy.empty()) {
    errors.push_back(
        Required("spec.template.spec.restartPolicy", "valid values: \"OnFailure\", \"Never\""));
  } else if (policy != "OnFailure" && policy != "Never") {
    errors.push_back(
        NotSupported("spec.template.spec.restartPolicy", policy, {"OnFailure", "Never"}));
  }
}

const std::vector<std::string>& AccessModes() {
  static const std::vector<std::string> modes = {"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce",
                                                 "ReadWriteOncePod"};
  return modes;
}

void ValidateAccessModes(const rapidjson::Value& spec, FieldErrors& errors) {
  const rapidjson::Value* modes = Find(spec, "accessModes");
  if (modes == nullptr || !modes->IsArray() || modes->Empty()) {
    errors.push_back(Required("spec.accessModes", "at least 1 access mode is required"));
    return;
  }
  for (const auto& m : modes->GetArray()) {
    std::string mode = m.IsString() ? m.GetString() : ToJson(m);
    if (std::find(AccessModes().begin(), AccessModes().end(), mode) == AccessModes().end())
      errors.push_back(NotSupported("spec.accessModes", mode, AccessModes()));
  }
}

void ValidateClaim(const rapidjson::Value& pvc, FieldErrors& errors) {
  const rapidjson::Value& spec = OrEmpty(Find(pvc, "spec"));
  ValidateAccessModes(spec, errors);
  const rapidjson::Value* storage = Find(spec, "resources.requests");
  auto it = storage != nullptr && storage->IsObject() ? storage->FindMember("storage")
                                                      : rapidjson::Value::ConstMemberIterator();
  if (storage == nullptr || !storage->IsObject() || it == storage->MemberEnd()) {
    errors.push_back(Required("spec.resources[storage]"));
    return;
  }
  std::string text = it->value.IsString() ? it->value.GetString() : ToJson(it->value);
  Result<int64_t> milli = ParseQuantityMilli(text);
  if (!milli.ok() || *milli <= 0) {
    errors.push_back(Invalid("spec.resources[storage]", text, "must be greater than zero"));
  }
}

void ValidateVolume(const rapidjson::Value& pv, FieldErrors& errors) {
  const rapidjson::Value& spec = OrEmpty(Find(pv, "spec"));
  ValidateAccessModes(spec, errors);
  const rapidjson::Value* capacity = Find(spec, "capacity");
  if (capacity == nullptr || !capacity->IsObject() || capacity->ObjectEmpty()) {
    errors.push_back(Required("spec.capacity"));
  } else if (!capacity->HasMember("storage")) {
    errors.push_back(Required("spec.capacity", "must specify storage"));
  }
  static const char* const kSources[] = {"hostPath", "local", "nfs", "csi", "iscsi", "fc"};
  int sources = 0;
  for (const char* s : kSources)
    sources += spec.HasMember(s) ? 1 : 0;
  if (sources == 0)
    errors.push_back(Required("spec", "must specify a volume type"));
  std::string policy = GetString(spec, "persistentVolumeReclaimPolicy");
  if (policy != "Retain" && policy != "Delete" && policy != "Recycle")
    errors.push_back(NotSupported("spec.persistentVolumeReclaimPolicy", policy,
                                  {"Delete", "Recycle", "Retain"}));
}

void ValidateServicePorts(const rapidjson::Value& spec, FieldErrors& errors) {
  const rapidjson::Value* ports = Find(spec, "ports");
  const bool headless = GetString(spec, "clusterIP") == "None";
  if (ports == nullptr || !ports->IsArray() || ports->Empty()) {
    if (!headless)
      errors.push_back(Required("spec.ports"));
    return;
  }
  std::set<std::string> names;
  for (rapidjson::SizeType i = 0; i < ports->Size(); ++i) {
    const rapidjson::Value& p = (*ports)[i];
    std::string at = fmt::format("spec.ports[{}]", i);
    std::string name = GetString(p, "name");
    if (ports->Size() > 1 && name.empty())
      errors.push_back(Required(at + ".name"));
    else if (!name.empty() && !names.insert(name).second)
      errors.push_back(Duplicate(at + ".name", name));
    int64_t port = IntOr(p, "port", 0);
    if (port < 1 || port > 65535) {
      errors.push_back(
          InvalidRaw(at + ".port", std::to_string(port), "must be between 1 and 65535, inclusive"));
    }
    std::string protocol = GetString(p, "protocol");
    if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP")
      errors.push_back(NotSupported(at + ".protocol", protocol, {"SCTP", "TCP", "UDP"}));
  }
}

void ValidateService(const rapidjson::Value& svc, FieldErrors& errors) {
  const rapidjson::Value& spec = OrEmpty(Find(svc, "spec"));
  std::string type = GetString(spec, "type");
  static const std::vector<std::string> kTypes = {"ClusterIP", "ExternalName", "LoadBalancer",
                                                  "NodePort"};
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end())
    errors.push_back(NotSupported("spec.type", type, kTypes));
  if (type != "ExternalName")
    ValidateServicePorts(spec, errors);
}

}  // namespace

void ValidateWorkloadCreate(const std::string& resource, const rapidjson::Value& object,
                            FieldErrors& errors) {
  if (resource == "statefulsets") {
    ValidateStatefulSet(object, errors);
  } else if (resource == "deployments" || resource == "replicasets") {
    ValidateSelectorAndTemplate(object, "deployment", errors);
    RequireRestartPolicy(object, {"Always"}, errors);
    if (resource == "deployments")
      ValidateDeploymentStrategy(object, errors);
  } else if (resource == "jobs") {
    ValidateJob(object, errors);
  } else if (resource == "persistentvolumeclaims") {
    ValidateClaim(object, errors);
  } else if (resource == "persistentvolumes") {
    ValidateVolume(object, errors);
  } else if (resource == "services") {
    ValidateService(object, errors);
  } else if (resource == "storageclasses" && GetString(object, "provisioner").empty()) {
    errors.push_back(Required("provisioner"));
  }
}

namespace {

// ValidateStatefulSetUpdate: only these spec fields may change.
void ValidateStatefulSetUpdate(const rapidjson::Value& sts, const rapidjson::Value& old,
                               FieldErrors& errors) {
  static const std::set<std::string> kMutable = {"replicas",
                                                 "ordinals",
                                                 "template",
                                                 "updateStrategy",
                                                 "revisionHistoryLimit",
                                                 "persistentVolumeClaimRetentionPolicy",
                                                 "minReadySeconds"};
  const rapidjson::Value& spec = OrEmpty(Find(sts, "spec"));
  const rapidjson::Value& old_spec = OrEmpty(Find(old, "spec"));
  std::set<std::string> keys;
  for (const auto& m : spec.GetObject())
    keys.insert(m.name.GetString());
  for (const auto& m : old_spec.GetObject())
    keys.insert(m.name.GetString());
  for (const std::string& key : keys) {
    if (kMutable.count(key) == 0 && !Equal(Find(spec, key.c_str()), Find(old_spec, key.c_str()))) {
      errors.push_back(Forbidden(
          "spec",
          "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
          "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
          "'minReadySeconds' are forbidden"));
      return;
    }
  }
}

void ImmutableSelector(const rapidjson::Value& object, const rapidjson::Value& old,
                       FieldErrors& errors) {
  const rapidjson::Value* selector = Find(object, "spec.selector");
  if (!Equal(selector, Find(old, "spec.selector"))) {
    errors.push_back(InvalidRaw("spec.selector", GoLabelSelector(selector), "field is immutable"));
  }
}

// ValidatePersistentVolumeClaimUpdate: a bound claim may only grow its request.
void ValidateClaimUpdate(const rapidjson::Value& pvc, const rapidjson::Value& old,
                         FieldErrors& errors) {
  rapidjson::Document spec, old_spec;
  spec.CopyFrom(OrEmpty(Find(pvc, "spec")), spec.GetAllocator());
  old_spec.CopyFrom(OrEmpty(Find(old, "spec")), old_spec.GetAllocator());
  // The binder fills volumeName and the class admission storageClassName once.
  for (const char* once : {"volumeName", "storageClassName"}) {
    if (!spec.HasMember(once) && old_spec.HasMember(once))
      spec.AddMember(rapidjson::StringRef(once),
                     rapidjson::Value(old_spec[once], spec.GetAllocator()), spec.GetAllocator());
  }
  const bool bound = GetString(old, "status.phase") == "Bound";
  const rapidjson::Value* request = Find(spec, "resources.requests.storage");
  const rapidjson::Value* old_request = Find(old_spec, "resources.requests.storage");
  if (bound && request != nullptr && old_request != nullptr && request->IsString() &&
      old_request->IsString()) {
    Result<int64_t> now = ParseQuantityMilli(request->GetString());
    Result<int64_t> before = ParseQuantityMilli(old_request->GetString());
    if (now.ok() && before.ok() && *now < *before) {
      errors.push_back(Forbidden("spec.resources.requests.storage",
                                 "field can not be less than status.capacity"));
      return;
    }
    spec["resources"]["requests"]["storage"].CopyFrom(*old_request, spec.GetAllocator());
  }
  if (spec != old_spec) {
    errors.push_back(Forbidden("spec",
                               "spec is immutable after creation except resources.requests and "
                               "volumeAttributesClassName for bound claims"));
  }
}

void ValidateServiceUpdate(const rapidjson::Value& svc, const rapidjson::Value& old,
                           FieldErrors& errors) {
  std::string ip = GetString(svc, "spec.clusterIP");
  std::string old_ip = GetString(old, "spec.clusterIP");
  if (!ip.empty() && ip != old_ip) {
    errors.push_back(Invalid("spec.clusterIPs[0]", ip, "may not change once set"));
  }
}

}  // namespace

void ValidateWorkloadUpdate(const std::string& resource, const rapidjson::Value& object,
                            const rapidjson::Value& old, FieldErrors& errors) {
  if (WorkloadKindOf(resource)[0] == '\0')
    return;
  if (resource != "persistentvolumeclaims")
    ValidateWorkloadCreate(resource, object, errors);
  if (resource == "statefulsets") {
    ImmutableSelector(object, old, errors);
    ValidateStatefulSetUpdate(object, old, errors);
  } else if (resource == "deployments" || resource == "replicasets") {
    if (resource == "deployments")
      ImmutableSelector(object, old, errors);
  } else if (resource == "jobs") {
    ImmutableSelector(object, old, errors);
    // ValidateJobSpecUpdate: the template is immutable (kubesim does not print Go's
    // dump of the whole PodTemplateSpec as the value).
    if (!Equal(Find(object, "spec.template"), Find(old, "spec.template")))
      errors.push_back(
          InvalidRaw("spec.template", "core.PodTemplateSpec{...}", "field is immutable"));
    for (const char* path : {"spec.completions", "spec.completionMode"}) {
      if (!Equal(Find(object, path), Find(old, path)))
        errors.push_back(
            InvalidRaw(path, ToJson(OrEmpty(Find(object, path))), "field is immutable"));
    }
  } else if (resource == "persistentvolumeclaims") {
    ValidateClaimUpdate(object, old, errors);
  } else if (resource == "services") {
    ValidateServiceUpdate(object, old, errors);
  }
}

}  // namespace kubesim
