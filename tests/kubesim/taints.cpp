#include "taints.h"

#include "store.h"

namespace kubesim {

namespace {

std::string Str(const rapidjson::Value& object, const char* name) {
  if (!object.IsObject())
    return "";
  auto it = object.FindMember(name);
  if (it == object.MemberEnd() || !it->value.IsString())
    return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

std::string ConditionStatus(const rapidjson::Value& object, const char* type) {
  const rapidjson::Value* conditions = Find(object, "status.conditions");
  if (conditions == nullptr || !conditions->IsArray())
    return "";
  for (const auto& c : conditions->GetArray()) {
    if (Str(c, "type") == type)
      return Str(c, "status");
  }
  return "";
}

}  // namespace

std::vector<Taint> NodeTaints(const rapidjson::Value& node) {
  std::vector<Taint> taints;
  const rapidjson::Value* list = Find(node, "spec.taints");
  if (list == nullptr || !list->IsArray())
    return taints;
  for (const auto& t : list->GetArray())
    taints.push_back({Str(t, "key"), Str(t, "value"), Str(t, "effect")});
  return taints;
}

bool Tolerates(const rapidjson::Value& toleration, const Taint& taint) {
  const std::string effect = Str(toleration, "effect");
  if (!effect.empty() && effect != taint.effect)
    return false;
  const std::string key = Str(toleration, "key");
  if (!key.empty() && key != taint.key)
    return false;
  if (Str(toleration, "operator") == "Exists")
    return true;
  if (key.empty())
    return false;                                  // an empty key needs operator Exists
  return Str(toleration, "value") == taint.value;  // "Equal" (the default)
}

const rapidjson::Value* MatchingToleration(const rapidjson::Value& pod, const Taint& taint) {
  const rapidjson::Value* list = Find(pod, "spec.tolerations");
  if (list == nullptr || !list->IsArray())
    return nullptr;
  for (const auto& t : list->GetArray()) {
    if (Tolerates(t, taint))
      return &t;
  }
  return nullptr;
}

std::string NodeReadyStatus(const rapidjson::Value& node) {
  return ConditionStatus(node, "Ready");
}

bool PodIsReady(const rapidjson::Value& pod) {
  return ConditionStatus(pod, "Ready") == "True";
}

}  // namespace kubesim
