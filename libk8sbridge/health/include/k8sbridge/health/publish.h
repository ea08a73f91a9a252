// k8sbridge-health's result on the Kubernetes side (KubePublish=yes): a node
// condition on the Kubernetes node that runs the worker pod (or is the host), and
// an Event on that node when the condition changes. Operators' tooling (node
// problem dashboards, remediation controllers) reads conditions; the sync daemon
// acts on the Slurm drain, not on this.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/health/findings.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/status.h"

namespace k8sbridge::health {

struct PublishResult {
  bool changed = false;  // the condition's status flipped (or was new)
  std::string status;    // "True" (a problem) or "False"
};

// Sets condition `condition_type` on node `k8s_node` (True with reason
// HealthCheckFailed and the drain reason as message, or False with
// HealthCheckPassed), keeping lastTransitionTime while the status holds. When it
// changed, records a Warning (or Normal) Event through `events` (may be null).
Result<PublishResult> PublishCondition(kube::Client& client, kube::EventRecorder* events,
                                       const std::string& k8s_node,
                                       const std::string& condition_type,
                                       const std::vector<Finding>& findings);

}  // namespace k8sbridge::health
