// Pod Security admission (k8s.io/pod-security-admission: policy/check_*.go for the
// checks, admission/admission.go for enforce/warn and the messages): the namespace's
// labels pod-security.kubernetes.io/enforce and /warn (privileged, baseline,
// restricted; their -version labels only name the version in messages) decide. A
// namespace without labels is privileged (kubesim's admission configuration default).
// Pods are refused on create by `enforce` (403) and warned about by `warn`; workload
// objects with a pod template only get warnings, from both levels, as upstream.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "api.h"
#include "store.h"

namespace kubesim {

enum class PodSecurityLevel { kPrivileged, kBaseline, kRestricted };

// One failed check: `reason (detail)` in the message.
struct PodSecurityViolation {
  std::string reason;
  std::string detail;
};

// The checks of `level` on a pod's metadata and spec, in upstream's order (by check id).
std::vector<PodSecurityViolation> CheckPodSecurity(PodSecurityLevel level,
                                                   const rapidjson::Value& pod_spec);

// "privileged (container \"c\" must not set ...), host namespaces (...)".
std::string FormatViolations(const std::vector<PodSecurityViolation>& violations);

// Pod create: the 403 of an enforce level the pod violates, else nullopt (with the warn
// level's warning added). Workload kinds with spec.template: warnings only.
std::optional<ApiResponse> AdmitPodSecurity(Store& store, const std::string& resource,
                                            const rapidjson::Value& object,
                                            std::vector<std::string>& warnings);
// The warnings for a workload's updated template.
void WarnPodSecurityOfTemplate(Store& store, const std::string& resource,
                               const rapidjson::Value& object, std::vector<std::string>& warnings);

}  // namespace kubesim
