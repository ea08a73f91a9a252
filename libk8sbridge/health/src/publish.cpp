#include "k8sbridge/health/publish.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fmt/format.h>

#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/kube/credentials.h"
#include "k8sbridge/kube/object.h"

namespace k8sbridge::health {

Result<PublishResult> PublishCondition(kube::Client& client, kube::EventRecorder* events,
                                       const std::string& k8s_node,
                                       const std::string& condition_type,
                                       const std::vector<Finding>& findings) {
  auto node = client.Get(kube::kNodes, "", k8s_node);
  if (!node.ok()) {
    return node.status().WithContext(
        fmt::format("reading Kubernetes node {} (set KubeNode= to the node's name)", k8s_node));
  }
  std::string previous_status, previous_transition;
  const rapidjson::Value& json = node->json();
  if (auto status = json.FindMember("status");
      status != json.MemberEnd() && status->value.IsObject() &&
      status->value.HasMember("conditions") && status->value["conditions"].IsArray()) {
    const rapidjson::Value* conditions = &status->value["conditions"];
    for (const auto& c : conditions->GetArray()) {
      if (kube::StringMember(&c, "type") == condition_type) {
        previous_status = kube::StringMember(&c, "status");
        previous_transition = kube::StringMember(&c, "lastTransitionTime");
      }
    }
  }
  const bool problem = !findings.empty();
  PublishResult result;
  result.status = problem ? "True" : "False";
  result.changed = previous_status != result.status;
  const std::string now = kube::FormatRfc3339(client.clock().WallNow());
  const std::string reason = problem ? "HealthCheckFailed" : "HealthCheckPassed";
  const std::string message =
      problem ? DrainReason(findings) : std::string("k8sbridge-health: all checks passed");

  rapidjson::Document patch(rapidjson::kObjectType);
  auto& a = patch.GetAllocator();
  rapidjson::Value condition(rapidjson::kObjectType);
  auto str = [&](const std::string& s) { return rapidjson::Value(s.c_str(), a); };
  condition.AddMember("type", str(condition_type), a);
  condition.AddMember("status", str(result.status), a);
  condition.AddMember("reason", str(reason), a);
  condition.AddMember("message", str(message), a);
  condition.AddMember("lastHeartbeatTime", str(now), a);
  condition.AddMember(
      "lastTransitionTime",
      str(result.changed || previous_transition.empty() ? now : previous_transition), a);
  rapidjson::Value conditions(rapidjson::kArrayType);
  conditions.PushBack(condition, a);
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("conditions", conditions, a);
  patch.AddMember("status", status, a);
  rapidjson::StringBuffer body;
  rapidjson::Writer<rapidjson::StringBuffer> writer(body);
  patch.Accept(writer);

  // Strategic merge: conditions merge by type, so other conditions stay as they are.
  const std::string path = kube::Client::Path(kube::kNodes, "", k8s_node) + "/status";
  auto answer =
      client.Request("PATCH", path, body.GetString(), "application/strategic-merge-patch+json");
  if (!answer.ok())
    return answer.status().WithContext(
        fmt::format("setting condition {} on node {}", condition_type, k8s_node));
  if (answer->status < 200 || answer->status >= 300) {
    return Status::Unavailable(fmt::format("setting condition {} on node {}: HTTP {}: {}",
                                           condition_type, k8s_node, answer->status,
                                           answer->body.substr(0, 300)));
  }
  if (result.changed && events != nullptr && (problem || !previous_status.empty())) {
    events->Record(kube::ObjectReference::Of(*node), problem ? "Warning" : "Normal", reason,
                   "HealthCheck", message);
  }
  return result;
}

}  // namespace k8sbridge::health
