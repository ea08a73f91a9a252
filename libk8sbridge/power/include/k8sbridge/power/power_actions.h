// What Slurm's ResumeProgram, SuspendProgram and ResumeFailProgram do, behind
// interfaces: Kubernetes through kube::Client (kube::FakeTransport in tests), Slurm
// through the Slurm port (slurm::Slurm: libslurm in the program, the recording
// fake of tests/fakes in tests).
// Every node is handled on its own: one node's failure never stops the others.
// docs/power.md describes the behaviour.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/power_context.h"
#include "k8sbridge/power/resume_file.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

// What happened to one node.
enum class NodeAction {
  kCreated,   // resume: a new pod
  kExisting,  // resume: a healthy pod of ours was already there
  kReplaced,  // resume: a terminating or failed leftover was deleted, a new pod created
  kDeleted,   // suspend/resume-fail: our pod was deleted
  kAbsent,    // suspend/resume-fail: there was no pod (404)
  kFailed,    // see NodeOutcome::status
};
std::string_view NodeActionName(NodeAction action);

struct NodeOutcome {
  std::string node;
  NodeAction action = NodeAction::kFailed;
  Status status;  // why, for kFailed
};

struct PowerReport {
  std::vector<NodeOutcome> nodes;  // in the order of the hostlist
  size_t Failed() const;
};

// Creates the worker pod of every node, at most Concurrency at a time. A node whose
// pod cannot be created is failed in Slurm (DOWN, then POWER_DOWN) with the reason
// "k8sbridge: <what Kubernetes or the configuration said>".
PowerReport Resume(const PowerContext& ctx, const std::vector<std::string>& nodes,
                   const ResumeRequest& request);

// Deletes the worker pods with their grace period; no pod is success. A pod without
// k8sbridge's ownership labels for this cluster and node is never touched (failure).
PowerReport Suspend(const PowerContext& ctx, const std::vector<std::string>& nodes);

// As Suspend, and first records why the node failed to resume (the pod's phase,
// conditions and container states) in the log and as a Warning Event on the pod.
PowerReport ResumeFail(const PowerContext& ctx, const std::vector<std::string>& nodes);

}  // namespace k8sbridge::power
