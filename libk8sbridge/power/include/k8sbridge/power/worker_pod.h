// The worker pod of one Slurm node: rendered from its node group's template, the
// node and the jobs that caused the resume; and the rule for a pod that already
// exists under the node's name. docs/power.md lists the rendering rules.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/pod_template.h"
#include "k8sbridge/power/resume_file.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

struct WorkerPodRequest {
  std::string node;  // Slurm node name = pod name
  std::string gres;  // the node's Gres as Slurm reports it ("gpu:h100:8"); "" = none
  std::vector<const ResumeJob*> jobs;  // from ResumeRequest::JobsOf(node); may be empty
  // More environment for the worker, set by the resume step (the seam for, e.g.,
  // the munge credential the worker checks). Replaces same-named variables.
  std::vector<std::pair<std::string, std::string>> extra_env;
  // More annotations (ResumeRequest::pod_annotations).
  std::map<std::string, std::string> annotations;
};

// Renders the Pod. Errors (an unparseable constraint or Gres, features that need
// one label to hold two values, a template nodeSelector that contradicts a
// feature) name the node and the job; parts of a constraint that cannot be placed
// per pod are logged as warnings.
Result<kube::Object> RenderWorkerPod(const conf::BridgeConfig& config, const conf::NodeGroup& group,
                                     const PodTemplate& tmpl, const WorkerPodRequest& request,
                                     Logger& log);

// "app.kubernetes.io/managed-by=k8sbridge,k8sbridge.io/cluster=<cluster>": lists the
// worker pods of one cluster.
std::string OwnedPodsSelector(std::string_view cluster);

// OwnedPodsSelector and k8sbridge.io/node=<node>: the pods of one Slurm node, whatever
// their names (a replacement is not named after its node, lost_node.h).
std::string NodePodsSelector(std::string_view cluster, std::string_view node);

// What to do about a pod that already exists under a node's name.
enum class ExistingPod {
  kHealthy,  // Pending or Running, not terminating, ours: counts as success
  kReplace,  // ours but terminating, Failed or Succeeded: wait until gone, create anew
  kNotOurs,  // lacks our ownership labels: never touch it, report an error
};
struct ExistingPodVerdict {
  ExistingPod action;
  std::string reason;  // for the log and, for kNotOurs, the node's reason
};
ExistingPodVerdict JudgeExistingPod(const kube::Object& pod, std::string_view cluster,
                                    std::string_view node);

// True if `pod` carries all three ownership labels for this cluster and node:
// the test Suspend and ResumeFail apply before deleting.
bool IsOwnedWorkerPod(const kube::Object& pod, std::string_view cluster, std::string_view node);

}  // namespace k8sbridge::power
