#include "pod_security.h"

#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validation.h"

namespace kubesim {

namespace {

using Containers = std::vector<const rapidjson::Value*>;

// visitContainers: init containers, containers, ephemeral containers.
Containers AllContainers(const rapidjson::Value& spec) {
  Containers out;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const rapidjson::Value* cs = Find(spec, list);
    if (cs == nullptr || !cs->IsArray())
      continue;
    for (const auto& c : cs->GetArray())
      out.push_back(&c);
  }
  return out;
}

std::string JoinQuote(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ", ") + GoQuote(i);
  return out;
}

std::string Pluralize(const char* one, const char* many, size_t n) {
  return n == 1 ? one : many;
}

std::string Containers_(const std::vector<std::string>& names) {
  return Pluralize("container", "containers", names.size()) + " " + JoinQuote(names);
}

bool IsTrue(const rapidjson::Value& object, const char* path) {
  const rapidjson::Value* v = Find(object, path);
  return v != nullptr && v->IsBool() && v->GetBool();
}

bool IsFalse(const rapidjson::Value& object, const char* path) {
  const rapidjson::Value* v = Find(object, path);
  return v != nullptr && v->IsBool() && !v->GetBool();
}

// The names of the containers for which `bad` holds.
std::vector<std::string> Offending(const rapidjson::Value& spec,
                                   const std::function<bool(const rapidjson::Value&)>& bad) {
  std::vector<std::string> names;
  for (const rapidjson::Value* c : AllContainers(spec)) {
    if (bad(*c))
      names.push_back(GetString(*c, "name"));
  }
  return names;
}

using Check = std::function<std::optional<PodSecurityViolation>(const rapidjson::Value& spec)>;

std::optional<PodSecurityViolation> AllowPrivilegeEscalation(const rapidjson::Value& spec) {
  auto bad = Offending(spec, [](const rapidjson::Value& c) {
    return !IsFalse(c, "securityContext.allowPrivilegeEscalation");
  });
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{
      "allowPrivilegeEscalation != false",
      Containers_(bad) + " must set securityContext.allowPrivilegeEscalation=false"};
}

std::vector<std::string> AddedCapabilities(const rapidjson::Value& container) {
  std::vector<std::string> out;
  const rapidjson::Value* add = Find(container, "securityContext.capabilities.add");
  if (add != nullptr && add->IsArray()) {
    for (const auto& cap : add->GetArray())
      out.push_back(cap.IsString() ? cap.GetString() : "");
  }
  return out;
}

// The containers adding capabilities outside `allowed`, and those capabilities (sorted).
std::pair<std::vector<std::string>, std::vector<std::string>> ForbiddenCapabilities(
    const rapidjson::Value& spec, const std::set<std::string>& allowed) {
  std::set<std::string> caps;
  auto bad = Offending(spec, [&](const rapidjson::Value& c) {
    bool any = false;
    for (const std::string& cap : AddedCapabilities(c)) {
      if (allowed.count(cap) == 0) {
        caps.insert(cap);
        any = true;
      }
    }
    return any;
  });
  return {bad, std::vector<std::string>(caps.begin(), caps.end())};
}

std::optional<PodSecurityViolation> CapabilitiesBaseline(const rapidjson::Value& spec) {
  static const std::set<std::string> kDefault = {
      "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
      "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};
  auto [bad, caps] = ForbiddenCapabilities(spec, kDefault);
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{"non-default capabilities",
                              Containers_(bad) + " must not include " + JoinQuote(caps) +
                                  " in securityContext.capabilities.add"};
}

std::optional<PodSecurityViolation> CapabilitiesRestricted(const rapidjson::Value& spec) {
  auto no_drop_all = Offending(spec, [](const rapidjson::Value& c) {
    const rapidjson::Value* drop = Find(c, "securityContext.capabilities.drop");
    if (drop == nullptr || !drop->IsArray())
      return true;
    for (const auto& d : drop->GetArray()) {
      if (d.IsString() && std::string(d.GetString()) == "ALL")
        return false;
    }
    return true;
  });
  auto [bad_add, caps] = ForbiddenCapabilities(spec, {"NET_BIND_SERVICE"});
  std::vector<std::string> details;
  if (!no_drop_all.empty())
    details.push_back(Containers_(no_drop_all) +
                      " must set securityContext.capabilities.drop=[\"ALL\"]");
  if (!bad_add.empty()) {
    details.push_back(Containers_(bad_add) + " must not include " + JoinQuote(caps) +
                      " in securityContext.capabilities.add");
  }
  if (details.empty())
    return std::nullopt;
  return PodSecurityViolation{"unrestricted capabilities",
                              fmt::format("{}", fmt::join(details, "; "))};
}

std::optional<PodSecurityViolation> HostNamespaces(const rapidjson::Value& spec) {
  std::vector<std::string> set;
  for (const char* field : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (IsTrue(spec, field))
      set.push_back(std::string(field) + "=true");
  }
  if (set.empty())
    return std::nullopt;
  return PodSecurityViolation{"host namespaces", fmt::format("{}", fmt::join(set, ", "))};
}

std::vector<std::string> VolumesWith(const rapidjson::Value& spec,
                                     const std::function<bool(const rapidjson::Value&)>& bad) {
  std::vector<std::string> names;
  const rapidjson::Value* volumes = Find(spec, "volumes");
  if (volumes != nullptr && volumes->IsArray()) {
    for (const auto& v : volumes->GetArray()) {
      if (bad(v))
        names.push_back(GetString(v, "name"));
    }
  }
  return names;
}

std::optional<PodSecurityViolation> HostPathVolumes(const rapidjson::Value& spec) {
  auto bad = VolumesWith(spec, [](const rapidjson::Value& v) { return v.HasMember("hostPath"); });
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{"hostPath volumes",
                              Pluralize("volume", "volumes", bad.size()) + " " + JoinQuote(bad)};
}

std::optional<PodSecurityViolation> HostPorts(const rapidjson::Value& spec) {
  std::vector<std::string> ports;
  auto bad = Offending(spec, [&](const rapidjson::Value& c) {
    bool any = false;
    const rapidjson::Value* list = Find(c, "ports");
    if (list == nullptr || !list->IsArray())
      return false;
    for (const auto& p : list->GetArray()) {
      const rapidjson::Value* host = Find(p, "hostPort");
      if (host != nullptr && host->IsInt64() && host->GetInt64() != 0) {
        ports.push_back(std::to_string(host->GetInt64()));
        any = true;
      }
    }
    return any;
  });
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{
      "hostPort",
      fmt::format("{} {} {} {}", Containers_(bad), Pluralize("uses", "use", bad.size()),
                  Pluralize("hostPort", "hostPorts", ports.size()), fmt::join(ports, ", "))};
}

std::optional<PodSecurityViolation> Privileged(const rapidjson::Value& spec) {
  auto bad = Offending(
      spec, [](const rapidjson::Value& c) { return IsTrue(c, "securityContext.privileged"); });
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{"privileged",
                              Containers_(bad) + " must not set securityContext.privileged=true"};
}

std::optional<PodSecurityViolation> RestrictedVolumes(const rapidjson::Value& spec) {
  static const std::set<std::string> kAllowed = {"name",
                                                 "configMap",
                                                 "csi",
                                                 "downwardAPI",
                                                 "emptyDir",
                                                 "ephemeral",
                                                 "persistentVolumeClaim",
                                                 "projected",
                                                 "secret"};
  std::set<std::string> types;
  auto bad = VolumesWith(spec, [&](const rapidjson::Value& v) {
    bool any = false;
    for (const auto& m : v.GetObject()) {
      if (kAllowed.count(m.name.GetString()) == 0) {
        types.insert(m.name.GetString());
        any = true;
      }
    }
    return any;
  });
  if (bad.empty())
    return std::nullopt;
  return PodSecurityViolation{
      "restricted volume types",
      fmt::format("{} {} {} restricted volume {} {}", Pluralize("volume", "volumes", bad.size()),
                  JoinQuote(bad), Pluralize("uses", "use", bad.size()),
                  Pluralize("type", "types", types.size()),
                  JoinQuote(std::vector<std::string>(types.begin(), types.end())))};
}

// runAsNonRoot and seccompProfile (restricted): a pod-level setting or one on every
// container; explicit bad values are named first.
std::optional<PodSecurityViolation> PodOrContainers(
    const rapidjson::Value& spec, const char* reason, const char* field,
    const std::function<int(const rapidjson::Value*)>& judge, const std::string& bad_text,
    const std::string& unset_text) {
  // judge: 1 good, -1 explicitly bad, 0 unset.
  const int pod = judge(Find(spec, (std::string("securityContext.") + field).c_str()));
  std::vector<std::string> bad, unset;
  for (const rapidjson::Value* c : AllContainers(spec)) {
    int v = judge(Find(*c, (std::string("securityContext.") + field).c_str()));
    if (v < 0)
      bad.push_back(GetString(*c, "name"));
    else if (v == 0 && pod <= 0)
      unset.push_back(GetString(*c, "name"));
  }
  std::vector<std::string> details;
  if (pod < 0)
    details.push_back("pod must not set " + bad_text);
  if (!bad.empty())
    details.push_back(Containers_(bad) + " must not set " + bad_text);
  if (pod == 0 && !unset.empty())
    details.push_back("pod or " + Containers_(unset) + " must set " + unset_text);
  if (details.empty())
    return std::nullopt;
  return PodSecurityViolation{reason, fmt::format("{}", fmt::join(details, "; "))};
}

std::optional<PodSecurityViolation> RunAsNonRoot(const rapidjson::Value& spec) {
  return PodOrContainers(
      spec, "runAsNonRoot != true", "runAsNonRoot",
      [](const rapidjson::Value* v) {
        return v == nullptr || !v->IsBool() ? 0 : (v->GetBool() ? 1 : -1);
      },
      "securityContext.runAsNonRoot=false", "securityContext.runAsNonRoot=true");
}

std::optional<PodSecurityViolation> SeccompProfile(const rapidjson::Value& spec, bool restricted) {
  auto judge = [restricted](const rapidjson::Value* v) {
    std::string type = v != nullptr && v->IsObject() ? GetString(*v, "type") : "";
    if (type == "Unconfined")
      return -1;
    return type.empty() ? (restricted ? 0 : 1) : 1;
  };
  return PodOrContainers(spec, "seccompProfile", "seccompProfile", judge,
                         "securityContext.seccompProfile.type to \"Unconfined\"",
                         "securityContext.seccompProfile.type to \"RuntimeDefault\" or "
                         "\"Localhost\"");
}

std::optional<PodSecurityViolation> RunAsUser(const rapidjson::Value& spec) {
  auto root = [](const rapidjson::Value& o) {
    const rapidjson::Value* u = Find(o, "securityContext.runAsUser");
    return u != nullptr && u->IsInt64() && u->GetInt64() == 0;
  };
  std::vector<std::string> details;
  if (root(spec))
    details.push_back("pod must not set runAsUser=0");
  auto bad = Offending(spec, root);
  if (!bad.empty())
    details.push_back(Containers_(bad) + " must not set runAsUser=0");
  if (details.empty())
    return std::nullopt;
  return PodSecurityViolation{"runAsUser=0", fmt::format("{}", fmt::join(details, "; "))};
}

}  // namespace

std::vector<PodSecurityViolation> CheckPodSecurity(PodSecurityLevel level,
                                                   const rapidjson::Value& spec) {
  if (level == PodSecurityLevel::kPrivileged)
    return {};
  const bool restricted = level == PodSecurityLevel::kRestricted;
  // By check id; the restricted checks replace capabilities_baseline,
  // hostPathVolumes and seccompProfile_baseline.
  std::vector<Check> checks;
  if (restricted)
    checks.push_back(AllowPrivilegeEscalation);
  checks.push_back(restricted ? Check(CapabilitiesRestricted) : Check(CapabilitiesBaseline));
  checks.push_back(HostNamespaces);
  if (!restricted)
    checks.push_back(HostPathVolumes);
  checks.push_back(HostPorts);
  checks.push_back(Privileged);
  if (restricted) {
    checks.push_back(RestrictedVolumes);
    checks.push_back(RunAsNonRoot);
    checks.push_back(RunAsUser);
  }
  checks.push_back(
      [restricted](const rapidjson::Value& s) { return SeccompProfile(s, restricted); });
  std::vector<PodSecurityViolation> out;
  for (const Check& check : checks) {
    if (auto v = check(spec))
      out.push_back(*v);
  }
  return out;
}

std::string FormatViolations(const std::vector<PodSecurityViolation>& violations) {
  std::string out;
  for (const auto& v : violations) {
    out += (out.empty() ? "" : ", ") + v.reason;
    if (!v.detail.empty())
      out += " (" + v.detail + ")";
  }
  return out;
}

namespace {

struct NamespacePolicy {
  PodSecurityLevel level = PodSecurityLevel::kPrivileged;
  std::string text;  // "baseline:latest"
};

// The namespace's policy for `mode` (enforce, warn); privileged when unlabelled. An
// unknown level counts as restricted, as upstream's policy parsing does on error.
NamespacePolicy PolicyOf(const rapidjson::Value* labels, const std::string& mode) {
  NamespacePolicy p;
  auto label = [&](const std::string& key) -> std::string {
    if (labels == nullptr || !labels->IsObject())
      return "";
    auto it = labels->FindMember(key.c_str());
    return it != labels->MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
  };
  std::string level = label("pod-security.kubernetes.io/" + mode);
  std::string version = label("pod-security.kubernetes.io/" + mode + "-version");
  if (level.empty())
    return p;
  if (level == "privileged")
    p.level = PodSecurityLevel::kPrivileged;
  else if (level == "baseline")
    p.level = PodSecurityLevel::kBaseline;
  else
    p.level = PodSecurityLevel::kRestricted, level = "restricted";
  p.text = level + ":" + (version.empty() ? "latest" : version);
  return p;
}

const rapidjson::Value* NamespaceLabels(Store& store, const std::string& ns, ObjectPtr& holder) {
  auto got = store.Get("namespaces", "", ns);
  if (!got.ok())
    return nullptr;
  holder = *got;
  return Find(*holder, "metadata.labels");
}

}  // namespace

void WarnPodSecurityOfTemplate(Store& store, const std::string& resource,
                               const rapidjson::Value& object, std::vector<std::string>& warnings) {
  const rapidjson::Value* spec = Find(object, "spec.template.spec");
  if (resource == "pods" || spec == nullptr || !spec->IsObject())
    return;
  ObjectPtr ns;
  const rapidjson::Value* labels =
      NamespaceLabels(store, GetString(object, "metadata.namespace"), ns);
  std::set<std::string> said;
  for (const char* mode : {"enforce", "warn"}) {
    NamespacePolicy policy = PolicyOf(labels, mode);
    auto violations = CheckPodSecurity(policy.level, *spec);
    if (violations.empty())
      continue;
    std::string text = fmt::format("would violate PodSecurity \"{}\": {}", policy.text,
                                   FormatViolations(violations));
    if (said.insert(text).second)
      warnings.push_back(text);
  }
}

std::optional<ApiResponse> AdmitPodSecurity(Store& store, const std::string& resource,
                                            const rapidjson::Value& object,
                                            std::vector<std::string>& warnings) {
  if (resource != "pods") {
    WarnPodSecurityOfTemplate(store, resource, object, warnings);
    return std::nullopt;
  }
  const rapidjson::Value* spec = Find(object, "spec");
  if (spec == nullptr || !spec->IsObject())
    return std::nullopt;
  ObjectPtr ns;
  const rapidjson::Value* labels =
      NamespaceLabels(store, GetString(object, "metadata.namespace"), ns);
  NamespacePolicy enforce = PolicyOf(labels, "enforce");
  auto refused = CheckPodSecurity(enforce.level, *spec);
  const std::string name = GetString(object, "metadata.name");
  if (!refused.empty()) {
    return StatusResponse(403, "Forbidden",
                          fmt::format("pods {} is forbidden: violates PodSecurity \"{}\": {}",
                                      GoQuote(name), enforce.text, FormatViolations(refused)),
                          "pods", name);
  }
  NamespacePolicy warn = PolicyOf(labels, "warn");
  auto warned = CheckPodSecurity(warn.level, *spec);
  if (!warned.empty()) {
    warnings.push_back(
        fmt::format("would violate PodSecurity \"{}\": {}", warn.text, FormatViolations(warned)));
  }
  return std::nullopt;
}

}  // namespace kubesim
