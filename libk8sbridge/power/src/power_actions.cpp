#include "k8sbridge/power/power_actions.h"

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/contract.h"
#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/power/feature_placement.h"
#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/pod_calls.h"
#include "k8sbridge/power/resume_features.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {

std::string_view NodeActionName(NodeAction action) {
  switch (action) {
    case NodeAction::kCreated:
      return "created";
    case NodeAction::kExisting:
      return "already running";
    case NodeAction::kReplaced:
      return "replaced";
    case NodeAction::kDeleted:
      return "deleted";
    case NodeAction::kAbsent:
      return "no pod";
    case NodeAction::kFailed:
      return "failed";
  }
  return "?";
}

size_t PowerReport::Failed() const {
  return static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [](const NodeOutcome& o) {
    return o.action == NodeAction::kFailed;
  }));
}

namespace {

struct CreateResult {
  NodeAction action = NodeAction::kFailed;
  Status status;
  std::string name;  // of the pod that serves the node
};

// What became of a pod of ours on the Kubernetes node it is bound to.
enum class OnLostNode {
  kNotLost,       // its node is there and not lost: judge the pod as usual
  kForceDeleted,  // its node is gone or out of service: removed, the name is free
  kLeftBehind,    // its node is lost: deleted gracefully (it may stay Terminating for
                  // ever), and the Slurm node gets its next pod name
};

// A pod on a lost Kubernetes node is never waited for: the API server keeps it
// until the kubelet confirms. It is force-deleted only where Kubernetes' pod GC
// would do so too (the Node object gone, or not Ready with out-of-service), since
// anywhere else its processes may still run.
Result<OnLostNode> LeaveLostNode(const PowerContext& ctx, Steady::time_point deadline,
                                 const std::string& node, const kube::Object& pod) {
  const std::string host = kube::pod::NodeName(pod);
  if (host.empty())
    return OnLostNode::kNotLost;
  auto read = WithRetry(ctx, deadline, fmt::format("get node {}", host),
                        [&] { return ctx.client.Get(kube::kNodes, "", host); });
  if (!read.ok() && !IsNotFound(read.status())) {
    ctx.log.Warning("node {}: Kubernetes node {} of pod {} cannot be read ({}): judged as if up",
                    node, host, pod.Name(), read.status().message());
    return OnLostNode::kNotLost;
  }
  const kube::Object* k8s_node = read.ok() ? &*read : nullptr;
  if (NodeShutDown(k8s_node)) {
    kube::DeleteOptions options;
    options.precondition_uid = pod.Uid();
    options.grace_period_seconds = 0;
    const std::string ns = ctx.setup.config.kube.namespace_;
    auto r = WithRetry(ctx, deadline, fmt::format("force-delete pod {}/{}", ns, pod.Name()),
                       [&] { return ctx.client.Delete(kube::kPods, ns, pod.Name(), options); });
    if (!r.ok() && !IsNotFound(r.status()))
      return r.status();
    ctx.log.Warning("node {}: pod {} was on Kubernetes node {}, which is {}: force-deleted", node,
                    pod.Name(), host,
                    k8s_node ? fmt::format("shut down ({})", contract::kOutOfServiceTaintKey)
                             : std::string("deleted"));
    return OnLostNode::kForceDeleted;
  }
  const std::string why = NodeLostWhy(*k8s_node);
  if (why.empty())
    return OnLostNode::kNotLost;
  if (!pod.IsBeingDeleted()) {
    if (auto deleted = DeleteOwned(ctx, deadline, pod); !deleted.ok())
      return deleted.status();
  }
  ctx.log.Warning(
      "node {}: pod {} is on lost Kubernetes node {} ({}): left to Kubernetes (never "
      "force-deleted while that node may still run it); the node gets a pod of another name",
      node, pod.Name(), host, why);
  return OnLostNode::kLeftBehind;
}

// The rendered pod under the Slurm node's n-th name (lost_node.h); a replacement
// keeps the node's name as its hostname.
void NamePod(kube::Object& pod, const std::string& node, int n) {
  pod.SetString("/metadata/name", WorkerPodName(node, n));
  if (n > 0 && !pod.Has("/spec/hostname"))
    pod.SetString("/spec/hostname", node);
  if (n > 0) {
    pod.SetString("/metadata/labels/" + kube::PointerEscape(contract::kReplacementLabel),
                  std::to_string(n));
  }
}

// What a pod of ours that is already there for a node came to (SettleOurPod).
struct SettledPod {
  OnLostNode lost = OnLostNode::kNotLost;  // not lost: kept, or deleted
  bool kept = false;                       // healthy: it is the node's pod
};

// A pod already there for `node` (`what`: "pod", "replacement pod"), settled the one
// way for a create's conflict and for a live replacement: not ours fails the node;
// on a lost Kubernetes node it is left to Kubernetes (LeaveLostNode); healthy it is
// kept as the node's pod; a leftover (failed, stale template...) is deleted.
Result<SettledPod> SettleOurPod(const PowerContext& ctx, Steady::time_point deadline,
                                const std::string& node, const kube::Object& pod,
                                std::string_view what) {
  const std::string& ns = ctx.setup.config.kube.namespace_;
  ExistingPodVerdict verdict = JudgeExistingPod(pod, ctx.setup.config.cluster_name, node);
  if (verdict.action == ExistingPod::kNotOurs)
    return Status::AlreadyExists(verdict.reason);
  auto lost = LeaveLostNode(ctx, deadline, node, pod);
  if (!lost.ok())
    return lost.status();
  if (*lost != OnLostNode::kNotLost)
    return SettledPod{*lost, false};
  if (verdict.action == ExistingPod::kHealthy) {
    ctx.log.Info("node {}: {} {}/{} is still there ({}): counted as resumed", node, what, ns,
                 pod.Name(), verdict.reason);
    return SettledPod{OnLostNode::kNotLost, true};
  }
  ctx.log.Info("node {}: deleting leftover {} {}/{}: {}", node, what, ns, pod.Name(),
               verdict.reason);
  if (!pod.IsBeingDeleted()) {
    if (auto deleted = DeleteOwned(ctx, deadline, pod); !deleted.ok())
      return deleted.status();
  }
  return SettledPod{};
}

// After a 409 for `name`: the pod found there, settled. nullopt: create again under
// `n` (which may have moved on to the next name); else the result for the node.
std::optional<CreateResult> OnConflict(const PowerContext& ctx, Steady::time_point deadline,
                                       const std::string& node, const std::string& name, int& n,
                                       bool& replaced) {
  const std::string& ns = ctx.setup.config.kube.namespace_;
  auto existing = WithRetry(ctx, deadline, fmt::format("get pod {}/{}", ns, name),
                            [&] { return ctx.client.Get(kube::kPods, ns, name); });
  if (!existing.ok()) {
    if (IsNotFound(existing.status()))
      return std::nullopt;  // gone in between: create again
    return CreateResult{NodeAction::kFailed, existing.status(), name};
  }
  auto settled = SettleOurPod(ctx, deadline, node, *existing, "pod");
  if (!settled.ok())
    return CreateResult{NodeAction::kFailed, settled.status(), name};
  if (settled->kept)
    return CreateResult{NodeAction::kExisting, {}, name};
  replaced = true;
  if (settled->lost != OnLostNode::kNotLost) {
    n += settled->lost == OnLostNode::kLeftBehind ? 1 : 0;
    return std::nullopt;
  }
  if (Status gone = WaitGone(ctx, deadline, name); !gone.ok())
    return CreateResult{NodeAction::kFailed, gone, name};
  return std::nullopt;
}

CreateResult CreatePod(const PowerContext& ctx, Steady::time_point deadline,
                       const std::string& node, kube::Object pod) {
  const std::string& ns = ctx.setup.config.kube.namespace_;
  bool replaced = false;
  int n = 0;
  // Only the verdict of a create is judged, never the pod it answers with.
  kube::CallOptions verdict_only;
  verdict_only.decode_answer = false;
  // Create; on 409 look at what is there. Bounded: a pod that keeps reappearing is
  // someone else's loop, not ours to fight, and so are many pods stuck on lost nodes.
  for (int attempt = 0; attempt < 8; ++attempt) {
    NamePod(pod, node, n);
    const std::string name = pod.Name();
    auto created = WithRetry(ctx, deadline, fmt::format("create pod {}/{}", ns, name),
                             [&] { return ctx.client.Create(kube::kPods, ns, pod, verdict_only); });
    if (created.ok())
      return {replaced ? NodeAction::kReplaced : NodeAction::kCreated, {}, name};
    if (kube::HttpCode(created.status()) != 409)
      return {NodeAction::kFailed, created.status(), name};
    if (auto done = OnConflict(ctx, deadline, node, name, n, replaced))
      return *done;
  }
  return {NodeAction::kFailed,
          Status::Conflict(fmt::format(
              "pod {}/{} kept reappearing while k8sbridge replaced it: is another controller "
              "creating pods of this name, or are its pods stuck on lost Kubernetes nodes?",
              ns, pod.Name())),
          pod.Name()};
}

// What the nodes of one resume call share: read or made once, when first needed.
struct ResumeCall {
  PlacementSnapshot placement;
  container::SharedMungeCredential munge;
  std::map<std::string, std::vector<const ResumeJob*>, std::less<>> jobs;  // JobsByNode
  // This cluster's replacement pods (kReplacementLabel), listed once, beside the
  // other reads, from the first node that will need it; nullopt when the list failed.
  std::once_flag replacements_started;
  std::shared_future<std::optional<PodsByNode>> replacements;

  void StartReadingReplacements(const PowerContext& ctx) {
    std::call_once(replacements_started, [&] {
      std::string selector = fmt::format("{},{}", OwnedPodsSelector(ctx.setup.config.cluster_name),
                                         contract::kReplacementLabel);
      replacements = std::async(std::launch::async, [&ctx, selector] {
                       return ListOurPods(ctx, selector, "the replacement pods");
                     }).share();
    });
  }
};

// A live replacement of `node` (a pod of another name: its first pod was stranded on
// a lost Kubernetes node) that is still there, for example because a suspend during
// an API outage could not delete it, is the node's pod: a new pod under the node's
// own name would be a second slurmd for one Slurm node. Returns the node's result
// when such a pod decides it; nullopt to create the node's pod as usual.
std::optional<CreateResult> UseLiveReplacement(const PowerContext& ctx, ResumeCall& call,
                                               Steady::time_point deadline,
                                               const std::string& node) {
  const std::optional<PodsByNode>& replacements = call.replacements.get();
  if (!replacements)
    return std::nullopt;  // the list failed (warned): the node's own name is judged alone
  auto it = replacements->find(node);
  if (it == replacements->end())
    return std::nullopt;
  for (const kube::Object& pod : it->second) {
    // The label again: a server that ignored the selector would hand every pod over.
    if (pod.IsBeingDeleted() || pod.Labels().count(std::string(contract::kReplacementLabel)) == 0)
      continue;
    auto settled = SettleOurPod(ctx, deadline, node, pod, "replacement pod");
    if (!settled.ok())
      return CreateResult{NodeAction::kFailed, settled.status(), pod.Name()};
    if (settled->kept)
      return CreateResult{NodeAction::kExisting, {}, pod.Name()};
    // Stranded too, or a leftover now deleted: counts as no pod.
  }
  return std::nullopt;
}

// Before the node's pod exists, so before its slurmd can register: the changeable
// features the pod is not placed for leave the node's active features
// (resume_features.h). A failure is logged and the resume goes on: the pod may
// still land where every active feature's labels are.
void ActivateOnlyPlacedFeatures(const PowerContext& ctx, const std::string& node,
                                const Result<slurm::Node>& live,
                                const std::vector<const ResumeJob*>& jobs) {
  if (!live.ok()) {
    ctx.log.Warning(
        "node {}: its active features cannot be read from slurmctld ({}): left as "
        "they are",
        node, live.status().message());
    return;
  }
  const std::vector<std::string> placed = PlacedFeatures(ctx.setup.config, jobs);
  auto change =
      ActiveFeaturesAtResume(ctx.setup.config, live->features, live->features_act, placed);
  if (!change)
    return;
  const std::string before = live->features_act.empty() ? live->features : live->features_act;
  if (Status s = ctx.slurm.SetFeatures(node, live->features, change->active); !s.ok()) {
    ctx.log.Error(
        "node {}: could not drop active features {} (the pod is not placed for "
        "them): {}",
        node, text::Join(change->dropped, ","), s.message());
    return;
  }
  ctx.log.Info(
      "node {}: active features {} -> {}: its pod is not placed for {}, so slurmd "
      "need not report them",
      node, before, change->active == kNoActiveFeatures ? "(none)" : change->active,
      text::Join(change->dropped, ","));
}

NodeOutcome ResumeNode(const PowerContext& ctx, ResumeCall& call, Steady::time_point deadline,
                       const std::string& node, const ResumeRequest& request) {
  auto fail = [&](Status status) {
    std::string reason = NodeReason(status);
    ctx.log.Error("node {}: resume failed: {}; setting it DOWN and POWER_DOWN with reason \"{}\"",
                  node, status.message(), reason);
    if (Status s = ctx.slurm.Fail(node, reason); !s.ok())
      ctx.log.Error("node {}: could not set it DOWN/POWER_DOWN: {}", node, s.message());
    return NodeOutcome{node, NodeAction::kFailed, std::move(status)};
  };

  auto found = ctx.setup.For(node);
  if (!found.ok())
    return fail(found.status());
  const auto [group, tmpl] = *found;
  call.StartReadingReplacements(ctx);

  WorkerPodRequest pod_request;
  pod_request.node = node;
  if (auto jobs = call.jobs.find(node); jobs != call.jobs.end())
    pod_request.jobs = jobs->second;
  pod_request.annotations = request.pod_annotations;
  std::optional<Result<slurm::Node>> live;
  if (!group->gpus || !ctx.setup.config.features.empty())
    live = ctx.slurm.LoadNode(node);
  if (!ctx.setup.config.features.empty())
    ActivateOnlyPlacedFeatures(ctx, node, *live, pod_request.jobs);
  if (!group->gpus) {
    if (!live->ok()) {
      // Fail closed: a pod without the node's GPUs would register a node that lies.
      return fail(live->status().WithContext(
          fmt::format("reading the Gres of node {} from slurmctld (or set Gpus= on NodeGroup={})",
                      node, group->name)));
    }
    pod_request.gres = (*live)->gres;
  }
  if (ctx.munge) {
    const auto& credential = call.munge.Get(*ctx.munge, ctx.setup.config.cluster_name);
    if (!credential.ok())
      return fail(credential.status());
    pod_request.extra_env.emplace_back(contract::kEnvMungeCheck, *credential);
  }
  auto pod = RenderWorkerPod(ctx.setup.config, *group, *tmpl, pod_request, ctx.log);
  if (!pod.ok())
    return fail(pod.status());
  if (Status placeable = CheckFeaturePlacement(ctx, call.placement, node, *pod); !placeable.ok())
    return fail(std::move(placeable));

  auto replacement = UseLiveReplacement(ctx, call, deadline, node);
  CreateResult created =
      replacement ? std::move(*replacement) : CreatePod(ctx, deadline, node, std::move(*pod));
  if (created.action == NodeAction::kFailed)
    return fail(created.status);
  ctx.log.Info("node {}: pod {}/{} {}", node, ctx.setup.config.kube.namespace_, created.name,
               NodeActionName(created.action));
  return {node, created.action, {}};
}

template <typename Fn>
PowerReport ForEachNode(const PowerContext& ctx, const std::vector<std::string>& nodes, Fn fn) {
  PowerReport report;
  report.nodes.resize(nodes.size());
  const auto deadline = ctx.client.clock().Now() + ctx.setup.config.kube.retry_deadline;
  kube::ForEachBounded(nodes.size(), static_cast<size_t>(ctx.setup.config.kube.concurrency),
                       [&](size_t i) {
                         report.nodes[i] = fn(deadline, nodes[i]);
                         return Status::Ok();
                       });
  return report;
}

// Suspend and ResumeFail: delete our pods of `node`; with `resume_failed`, record
// why first. `listed`: the node's pods from the list of our pods (a replacement has
// another name, lost_node.h); none there, the pod named after the node is read (it
// may be absent, or not ours).
NodeOutcome DeleteNodePod(const PowerContext& ctx, Steady::time_point deadline,
                          const std::string& node, bool resume_failed,
                          const kube::Object* listed = nullptr) {
  const std::string& ns = ctx.setup.config.kube.namespace_;
  const std::string& cluster = ctx.setup.config.cluster_name;
  auto failed = [&](Status status) {
    ctx.log.Error("node {}: {}", node, status.message());
    return NodeOutcome{node, NodeAction::kFailed, std::move(status)};
  };
  auto pod = listed ? Result<kube::Object>(*listed)
                    : WithRetry(ctx, deadline, fmt::format("get pod {}/{}", ns, node),
                                [&] { return ctx.client.Get(kube::kPods, ns, node); });
  if (!pod.ok()) {
    if (IsNotFound(pod.status())) {
      if (resume_failed)
        ctx.log.Warning("node {}: failed to resume and has no pod {}/{}", node, ns, node);
      ctx.log.Info("node {}: no pod {}/{}: nothing to delete", node, ns, node);
      return {node, NodeAction::kAbsent, {}};
    }
    return failed(pod.status());
  }
  if (!IsOwnedWorkerPod(*pod, cluster, node)) {
    return failed(Status::PermissionDenied(fmt::format(
        "pod {}/{} lacks k8sbridge's ownership labels ({}={}, {}={}, {}={}): not touched; "
        "delete it yourself if it is stale",
        ns, node, contract::kManagedByLabel, contract::kManagedByValue, contract::kClusterLabel,
        cluster, contract::kNodeLabel, node)));
  }
  if (resume_failed) {
    std::string why = fmt::format(
        "Slurm gave up resuming node {} (ResumeTimeout or slurmd never registered); pod was: {}",
        node, DescribePodState(*pod));
    ctx.log.Warning("node {}: {}", node, why);
    if (ctx.events)
      ctx.events->Record(kube::ObjectReference::Of(*pod), "Warning", contract::kResumeFailedEvent,
                         "Delete", why);
  }
  if (pod->IsBeingDeleted()) {
    ctx.log.Info("node {}: pod {}/{} is already terminating", node, ns, pod->Name());
    return {node, NodeAction::kDeleted, {}};
  }
  auto deleted = DeleteOwned(ctx, deadline, *pod);
  if (!deleted.ok())
    return failed(deleted.status());
  ctx.log.Info("node {}: pod {}/{} deleted", node, ns, pod->Name());
  return {node, NodeAction::kDeleted, {}};
}

NodeOutcome DeleteNodePods(const PowerContext& ctx, Steady::time_point deadline,
                           const std::string& node, bool resume_failed,
                           const std::vector<const kube::Object*>& listed) {
  if (listed.empty())
    return DeleteNodePod(ctx, deadline, node, resume_failed);
  NodeOutcome outcome{node, NodeAction::kDeleted, {}};
  for (const kube::Object* pod : listed) {
    NodeOutcome one = DeleteNodePod(ctx, deadline, node, resume_failed, pod);
    if (one.action == NodeAction::kFailed)
      outcome = std::move(one);
  }
  return outcome;
}

// Suspend and ResumeFail: every pod of ours of each node is deleted. When the list of
// them all fails, each node's pods are listed by its node label again: read by name,
// a replacement pod (another name) would be missed and left running as an orphan.
PowerReport DeleteEachNodesPods(const PowerContext& ctx, const std::vector<std::string>& nodes,
                                bool resume_failed) {
  const auto all = nodes.size() > 1 ? ListNodePods(ctx, nodes) : std::nullopt;
  return ForEachNode(ctx, nodes, [&](Steady::time_point deadline, const std::string& node) {
    std::optional<PodsByNode> own;
    if (!all) {
      own = ListNodePods(ctx, {node});
      if (!own) {
        return NodeOutcome{node, NodeAction::kFailed,
                           Status::Unavailable(fmt::format(
                               "node {}: its pods could not be listed: none deleted", node))};
      }
    }
    const PodsByNode& ours = all ? *all : *own;
    std::vector<const kube::Object*> pods;
    if (auto it = ours.find(node); it != ours.end()) {
      for (const kube::Object& pod : it->second)
        pods.push_back(&pod);
    }
    return DeleteNodePods(ctx, deadline, node, resume_failed, pods);
  });
}

}  // namespace

PowerReport Resume(const PowerContext& ctx, const std::vector<std::string>& nodes,
                   const ResumeRequest& request) {
  ResumeCall call;
  call.jobs = request.JobsByNode();

  return ForEachNode(ctx, nodes, [&](Steady::time_point deadline, const std::string& node) {
    return ResumeNode(ctx, call, deadline, node, request);
  });
}

PowerReport Suspend(const PowerContext& ctx, const std::vector<std::string>& nodes) {
  // One list of our pods instead of a read per node (and a replacement pod is not
  // named after its node); a node missing from it is read by name, so an absent pod
  // and a pod that is not ours stay distinct.
  return DeleteEachNodesPods(ctx, nodes, false);
}

PowerReport ResumeFail(const PowerContext& ctx, const std::vector<std::string>& nodes) {
  return DeleteEachNodesPods(ctx, nodes, true);
}

}  // namespace k8sbridge::power
