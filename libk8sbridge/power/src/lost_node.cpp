#include "k8sbridge/power/lost_node.h"

#include <fmt/format.h>
#include <rapidjson/pointer.h>

#include "k8sbridge/contract.h"

namespace k8sbridge::power {

namespace {

const rapidjson::Value* ReadyCondition(const kube::Object& node) {
  const rapidjson::Value* list = rapidjson::Pointer("/status/conditions").Get(node.json());
  if (!list || !list->IsArray())
    return nullptr;
  for (const auto& c : list->GetArray()) {
    if (kube::StringMember(&c, "type") == "Ready")
      return &c;
  }
  return nullptr;
}

bool HasTaint(const kube::Object& node, std::string_view key) {
  const rapidjson::Value* taints = rapidjson::Pointer("/spec/taints").Get(node.json());
  if (!taints || !taints->IsArray())
    return false;
  for (const auto& t : taints->GetArray()) {
    if (kube::StringMember(&t, "key") == key)
      return true;
  }
  return false;
}

}  // namespace

std::string NodeLostWhy(const kube::Object& node) {
  if (const rapidjson::Value* ready = ReadyCondition(node);
      kube::StringMember(ready, "status") == "Unknown") {
    std::string out = "Ready Unknown";
    for (const char* field : {"reason", "message"}) {
      if (std::string text = kube::StringMember(ready, field); !text.empty())
        out += ": " + text;
    }
    return out;
  }
  if (HasTaint(node, contract::kUnreachableTaintKey))
    return fmt::format("taint {}", contract::kUnreachableTaintKey);
  return "";
}

bool NodeShutDown(const kube::Object* node) {
  if (node == nullptr)
    return true;
  const rapidjson::Value* ready = ReadyCondition(*node);
  const bool is_ready = kube::StringMember(ready, "status") == "True";
  return !is_ready && HasTaint(*node, contract::kOutOfServiceTaintKey);
}

std::string WorkerPodName(std::string_view node, int n) {
  if (n == 0)
    return std::string(node);
  return fmt::format("{}{}{}", node, contract::kReplacementPodSeparator, n);
}

std::string SlurmNodeOf(const kube::Object& pod) {
  return pod.String("/metadata/labels/" + kube::PointerEscape(contract::kNodeLabel));
}

bool Stranded(const kube::Object& pod, const kube::Object* host) {
  if (!pod.IsBeingDeleted() || kube::pod::NodeName(pod).empty())
    return false;  // an unbound pod is removed at once
  return host == nullptr || !NodeLostWhy(*host).empty() || NodeShutDown(host);
}

}  // namespace k8sbridge::power
