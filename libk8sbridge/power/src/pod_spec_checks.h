// The pod template's checks of a pod spec (pod_spec_checks.cpp): private to
// libk8sbridge/power, shared by pod_template.cpp.
#pragma once

#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "k8sbridge/status.h"

namespace k8sbridge::power::detail {

// "a mapping", "a string", ...: what a YAML value is, for error messages.
std::string_view TypeName(const rapidjson::Value& v);

// Each check takes the pod spec and the prefix that names it in messages
// ("pod template FILE: template."), and refuses what a worker pod must not have.

// Bidirectional mount propagation, in any kind of container.
Status CheckMountPropagation(const rapidjson::Value& spec, const std::string& prefix);
// automountServiceAccountToken: true (the automounted token is world-readable).
Status CheckAutomountToken(const rapidjson::Value& spec, const std::string& prefix);
// A projected serviceAccountToken volume whose files are not root's alone.
Status CheckTokenVolumes(const rapidjson::Value& spec, const std::string& prefix);
// A volume other than a root-only token volume where clients read the token.
Status CheckTokenMounts(const rapidjson::Value& spec, const std::string& prefix);

}  // namespace k8sbridge::power::detail
