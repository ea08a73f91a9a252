// Pod validation: the rules of pkg/apis/core/validation/validation.go (ValidatePodSpec,
// ValidateContainers, ValidateResourceRequirements, ValidatePodUpdate) that templates
// and tests get wrong.
#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "quantity.h"
#include "validation.h"

namespace kubesim {

namespace {

std::string Str(const rapidjson::Value& v, const char* path) {
  return GetString(v, path);
}

// Names of resources a container may use without a '/' (IsStandardContainerResourceName).
bool IsStandardContainerResource(const std::string& name) {
  return name == "cpu" || name == "memory" || name == "ephemeral-storage" ||
         name.rfind("hugepages-", 0) == 0;
}

// helper.IsNativeResource: no domain, or a kubernetes.io one.
bool IsNativeResource(const std::string& name) {
  return name.find('/') == std::string::npos || name.find("kubernetes.io/") != std::string::npos;
}

// helper.IsOvercommitAllowed: native and not hugepages. Extended resources such as
// nvidia.com/gpu are not: their requests must equal their limits.
bool IsOvercommitAllowed(const std::string& name) {
  return IsNativeResource(name) && name.rfind("hugepages-", 0) != 0;
}

// helper.IsExtendedResourceName (the integer resources of a container).
bool IsExtendedResource(const std::string& name) {
  return !IsNativeResource(name) && name.rfind("requests.", 0) != 0;
}

// validateContainerResourceName and ValidateResourceQuantityValue for one entry.
void ValidateResourceEntry(const std::string& path, const std::string& name,
                           const rapidjson::Value& value, FieldErrors& errors) {
  for (const auto& msg : IsQualifiedName(name))
    errors.push_back(Invalid(path, name, msg));
  if (name.find('/') == std::string::npos) {
    if (!IsStandardContainerResource(name))
      errors.push_back(Invalid(path, name, "must be a standard resource for containers"));
  } else if (!IsNativeResource(name) && !IsExtendedResource(name)) {
    errors.push_back(Invalid(path, name, "doesn't follow extended resource name standard"));
  }
  std::string text = value.IsString() ? value.GetString() : value.IsNumber() ? ToJson(value) : "";
  auto milli = ParseQuantityMilli(text);
  if (!milli.ok())
    return;  // the decoder already refused it upstream; kubesim's parser says why elsewhere
  if (*milli < 0)
    errors.push_back(Invalid(path, text, "must be greater than or equal to 0"));
  if (IsExtendedResource(name) && *milli % 1000 != 0)
    errors.push_back(Invalid(path, text, "must be an integer"));
}

std::string QuantityText(const rapidjson::Value& v) {
  return v.IsString() ? std::string(v.GetString()) : ToJson(v);
}

void CompareRequestToLimit(const std::string& req_path, const std::string& lim_path,
                           const std::string& name, const rapidjson::Value& request,
                           const rapidjson::Value* limits, FieldErrors& errors) {
  const rapidjson::Value* limit = nullptr;
  if (limits != nullptr && limits->IsObject() && limits->HasMember(name.c_str()))
    limit = &(*limits)[name.c_str()];
  if (limit == nullptr) {
    if (!IsOvercommitAllowed(name))
      errors.push_back(Required(lim_path, "Limit must be set for non overcommitable resources"));
    return;
  }
  auto want = ParseQuantityMilli(QuantityText(request));
  auto most = ParseQuantityMilli(QuantityText(*limit));
  if (!want.ok() || !most.ok())
    return;
  if (*want != *most && !IsOvercommitAllowed(name)) {
    errors.push_back(
        Invalid(req_path, QuantityText(request),
                fmt::format("must be equal to {} limit of {}", name, QuantityText(*limit))));
  } else if (*want > *most) {
    errors.push_back(Invalid(
        req_path, QuantityText(request),
        fmt::format("must be less than or equal to {} limit of {}", name, QuantityText(*limit))));
  }
}

// ValidateResourceRequirements of one container. A request without a limit of a
// native resource is fine; the apiserver's defaulting copies limits into missing
// requests before this runs, which the comparison below treats as equal.
void ValidateResources(const rapidjson::Value& container, const std::string& path,
                       FieldErrors& errors) {
  const rapidjson::Value* limits = Find(container, "resources.limits");
  const rapidjson::Value* requests = Find(container, "resources.requests");
  const std::string lim_path = path + ".resources.limits";
  const std::string req_path = path + ".resources.requests";
  if (limits != nullptr && limits->IsObject()) {
    for (const auto& m : limits->GetObject()) {
      std::string name = m.name.GetString();
      ValidateResourceEntry(fmt::format("{}[{}]", lim_path, name), name, m.value, errors);
    }
  }
  if (requests != nullptr && requests->IsObject()) {
    for (const auto& m : requests->GetObject()) {
      std::string name = m.name.GetString();
      ValidateResourceEntry(fmt::format("{}[{}]", req_path, name), name, m.value, errors);
      CompareRequestToLimit(req_path, lim_path, name, m.value, limits, errors);
    }
  }
}

// validateEnv with RelaxedEnvironmentVariableValidation (beta and on in 1.32): any
// printable ASCII but '='.
void ValidateEnv(const rapidjson::Value& container, const std::string& path, FieldErrors& errors) {
  const rapidjson::Value* env = Find(container, "env");
  if (env == nullptr || !env->IsArray())
    return;
  for (rapidjson::SizeType j = 0; j < env->Size(); ++j) {
    std::string field = fmt::format("{}.env[{}].name", path, j);
    std::string name = Str((*env)[j], "name");
    if (name.empty()) {
      errors.push_back(Required(field));
      continue;
    }
    bool ok = std::all_of(name.begin(), name.end(), [](char c) { return c > 0x20 && c < 0x7f; }) &&
              name.find('=') == std::string::npos;
    if (!ok) {
      errors.push_back(Invalid(field, name,
                               "a valid environment variable name must consist only of printable "
                               "ASCII characters other than '='"));
    }
  }
}

void ValidateMounts(const rapidjson::Value& container, const std::string& path,
                    const std::set<std::string>& volumes, FieldErrors& errors) {
  const rapidjson::Value* mounts = Find(container, "volumeMounts");
  if (mounts == nullptr || !mounts->IsArray())
    return;
  for (rapidjson::SizeType j = 0; j < mounts->Size(); ++j) {
    std::string mount_path = fmt::format("{}.volumeMounts[{}]", path, j);
    std::string name = Str((*mounts)[j], "name");
    if (name.empty()) {
      errors.push_back(Required(mount_path + ".name"));
    } else if (volumes.count(name) == 0) {
      errors.push_back(NotFound(mount_path + ".name", name));
    }
    if (Str((*mounts)[j], "mountPath").empty())
      errors.push_back(Required(mount_path + ".mountPath"));
  }
}

// validateContainerCommon + the pod-only image check, for one list of containers.
void ValidateContainerList(const rapidjson::Value& spec, const char* list,
                           const std::set<std::string>& volumes, std::set<std::string>& names,
                           FieldErrors& errors) {
  const rapidjson::Value* containers = Find(spec, list);
  if (containers == nullptr || !containers->IsArray())
    return;
  for (rapidjson::SizeType i = 0; i < containers->Size(); ++i) {
    const rapidjson::Value& c = (*containers)[i];
    std::string path = fmt::format("spec.{}[{}]", list, i);
    std::string name = Str(c, "name");
    if (name.empty()) {
      errors.push_back(Required(path + ".name"));
    } else {
      for (const auto& msg : IsDns1123Label(name))
        errors.push_back(Invalid(path + ".name", name, msg));
      if (!names.insert(name).second)
        errors.push_back(Duplicate(path + ".name", name));
    }
    if (Str(c, "image").empty())
      errors.push_back(Required(path + ".image"));
    ValidateEnv(c, path, errors);
    ValidateMounts(c, path, volumes, errors);
    ValidateResources(c, path, errors);
  }
}

std::set<std::string> ValidateVolumes(const rapidjson::Value& spec, FieldErrors& errors) {
  std::set<std::string> names;
  const rapidjson::Value* volumes = Find(spec, "volumes");
  if (volumes == nullptr || !volumes->IsArray())
    return names;
  for (rapidjson::SizeType i = 0; i < volumes->Size(); ++i) {
    std::string path = fmt::format("spec.volumes[{}].name", i);
    std::string name = Str((*volumes)[i], "name");
    if (name.empty()) {
      errors.push_back(Required(path));
      continue;
    }
    for (const auto& msg : IsDns1123Label(name))
      errors.push_back(Invalid(path, name, msg));
    if (!names.insert(name).second)
      errors.push_back(Duplicate(path, name));
  }
  return names;
}

void ValidateRestartPolicy(const rapidjson::Value& spec, FieldErrors& errors) {
  std::string policy = Str(spec, "restartPolicy");
  if (policy.empty()) {
    errors.push_back(Required("spec.restartPolicy"));
  } else if (policy != "Always" && policy != "OnFailure" && policy != "Never") {
    errors.push_back(NotSupported("spec.restartPolicy", policy, {"Always", "OnFailure", "Never"}));
  }
}

// validateDNSPolicy: only a value that is set can be wrong (defaulting comes after).
void ValidateDnsPolicy(const rapidjson::Value& spec, FieldErrors& errors) {
  const std::string policy = Str(spec, "dnsPolicy");
  if (policy != "ClusterFirstWithHostNet" && policy != "ClusterFirst" && policy != "Default" &&
      policy != "None")
    errors.push_back(NotSupported("spec.dnsPolicy", policy,
                                  {"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"}));
}

bool IsIP(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

std::vector<std::string> Strings(const rapidjson::Value* list) {
  std::vector<std::string> out;
  if (list != nullptr && list->IsArray()) {
    for (const auto& v : list->GetArray())
      out.push_back(v.IsString() ? v.GetString() : "");
  }
  return out;
}

// Go's %#v of a []string, as field.Invalid prints one.
std::string GoStrings(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : ", ") + GoQuote(values[i]);
  return out + "}";
}

// validatePodDNSConfig with the ExpandedDNSConfig limits (3 servers, 32 search paths,
// 2048 characters).
void ValidateDnsConfig(const rapidjson::Value& spec, FieldErrors& errors) {
  const rapidjson::Value* config = Find(spec, "dnsConfig");
  const std::vector<std::string> servers = Strings(config ? Find(*config, "nameservers") : nullptr);
  if (Str(spec, "dnsPolicy") == "None") {
    if (config == nullptr)
      return errors.push_back(
          Required("spec.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"));
    if (servers.empty())
      return errors.push_back(Required("spec.dnsConfig.nameservers",
                                       "must provide at least one DNS nameserver when "
                                       "`dnsPolicy` is None"));
  }
  if (config == nullptr)
    return;
  if (servers.size() > 3)
    errors.push_back(InvalidRaw("spec.dnsConfig.nameservers", GoStrings(servers),
                                "must not have more than 3 nameservers"));
  for (size_t i = 0; i < servers.size(); ++i) {
    if (!IsIP(servers[i]))
      errors.push_back(Invalid(fmt::format("spec.dnsConfig.nameservers[{}]", i), servers[i],
                               "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"));
  }
  const std::vector<std::string> searches = Strings(Find(*config, "searches"));
  if (searches.size() > 32)
    errors.push_back(InvalidRaw("spec.dnsConfig.searches", GoStrings(searches),
                                "must not have more than 32 search paths"));
  if (fmt::format("{}", fmt::join(searches, " ")).size() > 2048)
    errors.push_back(InvalidRaw("spec.dnsConfig.searches", GoStrings(searches),
                                "must not have more than 2048 characters (including spaces) in "
                                "the search list"));
  for (size_t i = 0; i < searches.size(); ++i) {
    std::string search = searches[i];
    if (search.size() > 1 && search.back() == '.')
      search.pop_back();
    for (const std::string& msg : IsDns1123Subdomain(search))
      errors.push_back(Invalid(fmt::format("spec.dnsConfig.searches[{}]", i), searches[i], msg));
  }
  const rapidjson::Value* options = Find(*config, "options");
  for (size_t i = 0; options != nullptr && options->IsArray() && i < options->Size(); ++i) {
    if (Str((*options)[static_cast<rapidjson::SizeType>(i)], "name").empty())
      errors.push_back(Required(fmt::format("spec.dnsConfig.options[{}]", i), "must not be empty"));
  }
}

}  // namespace

void ValidatePodSpec(const rapidjson::Value& spec, FieldErrors& errors) {
  std::set<std::string> volumes = ValidateVolumes(spec, errors);
  const rapidjson::Value* containers = Find(spec, "containers");
  if (containers == nullptr || !containers->IsArray() || containers->Empty())
    errors.push_back(Required("spec.containers"));
  std::set<std::string> names;  // unique across init and regular containers
  ValidateContainerList(spec, "initContainers", volumes, names, errors);
  ValidateContainerList(spec, "containers", volumes, names, errors);
  // kubesim's store defaults restartPolicy to Always (as the apiserver does) after this
  // check; only a value that is set can be wrong here.
  if (spec.HasMember("restartPolicy"))
    ValidateRestartPolicy(spec, errors);
  if (spec.HasMember("dnsPolicy"))
    ValidateDnsPolicy(spec, errors);
  ValidateDnsConfig(spec, errors);
}

namespace {

void CopyMember(rapidjson::Value& to, const rapidjson::Value& from, const char* key,
                rapidjson::Document::AllocatorType& a) {
  if (to.HasMember(key))
    to.RemoveMember(key);
  if (from.IsObject() && from.HasMember(key))
    to.AddMember(rapidjson::Value(key, a), rapidjson::Value(from[key], a), a);
}

// Every element of `part` is in `whole`.
bool Contains(const rapidjson::Value* whole, const rapidjson::Value* part) {
  if (part == nullptr || !part->IsArray())
    return true;
  if (whole == nullptr || !whole->IsArray())
    return part->Empty();
  for (const auto& p : part->GetArray()) {
    if (std::find(whole->Begin(), whole->End(), p) == whole->End())
      return false;
  }
  return true;
}

// The new spec with every change ValidatePodUpdate allows undone: container and init
// container images, activeDeadlineSeconds, tolerations additions, a negative
// terminationGracePeriodSeconds set to 1, removed schedulingGates; fields the
// apiserver would default are taken as defaulted.
std::unique_ptr<rapidjson::Document> MungedSpec(const rapidjson::Value& spec,
                                                const rapidjson::Value& old) {
  auto munged = Clone(spec);
  auto& a = munged->GetAllocator();
  for (const char* list : {"containers", "initContainers"}) {
    rapidjson::Value* now = munged->HasMember(list) ? &(*munged)[list] : nullptr;
    const rapidjson::Value* before = Find(old, list);
    if (now == nullptr || before == nullptr || !now->IsArray() || !before->IsArray() ||
        now->Size() != before->Size())
      continue;
    for (rapidjson::SizeType i = 0; i < now->Size(); ++i) {
      if ((*now)[i].IsObject())
        CopyMember((*now)[i], (*before)[i], "image", a);
    }
  }
  CopyMember(*munged, old, "activeDeadlineSeconds", a);
  if (Contains(Find(spec, "tolerations"), Find(old, "tolerations")))
    CopyMember(*munged, old, "tolerations", a);
  if (Contains(Find(old, "schedulingGates"), Find(spec, "schedulingGates")))
    CopyMember(*munged, old, "schedulingGates", a);
  const rapidjson::Value* grace = Find(spec, "terminationGracePeriodSeconds");
  const rapidjson::Value* old_grace = Find(old, "terminationGracePeriodSeconds");
  if (grace != nullptr && old_grace != nullptr && grace->IsInt64() && old_grace->IsInt64() &&
      old_grace->GetInt64() < 0 && grace->GetInt64() == 1)
    CopyMember(*munged, old, "terminationGracePeriodSeconds", a);
  for (const char* defaulted :
       {"schedulerName", "restartPolicy", "terminationGracePeriodSeconds"}) {
    if (!munged->HasMember(defaulted))
      CopyMember(*munged, old, defaulted, a);
  }
  return munged;
}

}  // namespace

void ValidatePodSpecUpdate(const rapidjson::Value& spec, const rapidjson::Value& old_spec,
                           FieldErrors& errors) {
  for (const char* list : {"containers", "initContainers"}) {
    const rapidjson::Value* containers = Find(spec, list);
    if (containers == nullptr || !containers->IsArray())
      continue;
    for (rapidjson::SizeType i = 0; i < containers->Size(); ++i) {
      if (Str((*containers)[i], "image").empty())
        errors.push_back(Required(fmt::format("spec.{}[{}].image", list, i)));
    }
  }
  const rapidjson::Value* deadline = Find(spec, "activeDeadlineSeconds");
  const rapidjson::Value* old_deadline = Find(old_spec, "activeDeadlineSeconds");
  if (old_deadline != nullptr && old_deadline->IsInt64()) {
    if (deadline == nullptr || deadline->IsNull()) {
      errors.push_back(InvalidRaw("spec.activeDeadlineSeconds", "null",
                                  "must not update from a positive integer to nil value"));
    } else if (deadline->IsInt64() && deadline->GetInt64() > old_deadline->GetInt64()) {
      errors.push_back(InvalidRaw("spec.activeDeadlineSeconds", ToJson(*deadline),
                                  "must be less than or equal to previous value"));
    }
  }
  if (*MungedSpec(spec, old_spec) != old_spec) {
    errors.push_back(Forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
        "set to 1 if it was previously negative)"));
  }
}

}  // namespace kubesim
