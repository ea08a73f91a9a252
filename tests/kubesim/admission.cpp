#include "admission.h"

#include <string>

#include "store.h"
#include "taints.h"

namespace kubesim {

namespace {

// The plugin's test: does a toleration of this key (or of every key) for NoExecute
// (or every effect) exist? Operator and value are not looked at, as upstream.
bool HasNoExecuteToleration(const rapidjson::Value& tolerations, const char* key) {
  for (const auto& t : tolerations.GetArray()) {
    const std::string k = GetString(t, "key");
    const std::string effect = GetString(t, "effect");
    if ((k == key || k.empty()) && (effect == "NoExecute" || effect.empty()))
      return true;
  }
  return false;
}

}  // namespace

void AddDefaultTolerations(rapidjson::Document& pod, const AdmissionOptions& options) {
  const rapidjson::Value* existing = Find(pod, "spec.tolerations");
  if (existing == nullptr || !existing->IsArray())
    SetMember(pod, "spec.tolerations", rapidjson::Value(rapidjson::kArrayType));
  rapidjson::Value& tolerations = pod["spec"]["tolerations"];
  auto& a = pod.GetAllocator();
  const std::pair<const char*, int64_t> defaults[] = {
      {kTaintNotReady, options.default_not_ready_toleration_seconds},
      {kTaintUnreachable, options.default_unreachable_toleration_seconds}};
  for (const auto& [key, seconds] : defaults) {
    if (HasNoExecuteToleration(tolerations, key))
      continue;
    rapidjson::Value t(rapidjson::kObjectType);
    t.AddMember("key", rapidjson::StringRef(key), a);
    t.AddMember("operator", "Exists", a);
    t.AddMember("effect", "NoExecute", a);
    t.AddMember("tolerationSeconds", seconds, a);
    tolerations.PushBack(t, a);
  }
}

}  // namespace kubesim
