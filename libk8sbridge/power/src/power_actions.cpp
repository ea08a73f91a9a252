#include "k8sbridge/power/power_actions.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/power/feature_placement.h"
#include "k8sbridge/power/worker_pod.h"

namespace k8sbridge::power {

// ---- helpers ----

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

std::string MemberString(const rapidjson::Value& v, const char* name) {
  if (!v.IsObject())
    return "";
  auto it = v.FindMember(name);
  return it != v.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

}  // namespace

std::string DescribePodState(const kube::Object& pod) {
  std::string out = "phase " + (kube::pod::Phase(pod).empty() ? "unknown" : kube::pod::Phase(pod));
  if (pod.IsBeingDeleted())
    out += ", terminating";
  if (std::string r = pod.String("/status/reason"); !r.empty())
    out += fmt::format("; {}: {}", r, pod.String("/status/message"));
  const rapidjson::Value& json = pod.json();
  auto status = json.FindMember("status");
  if (status == json.MemberEnd() || !status->value.IsObject())
    return out;
  if (auto c = status->value.FindMember("conditions");
      c != status->value.MemberEnd() && c->value.IsArray()) {
    for (const auto& cond : c->value.GetArray()) {
      if (MemberString(cond, "status") == "True")
        continue;
      out += fmt::format("; {}={} {}: {}", MemberString(cond, "type"), MemberString(cond, "status"),
                         MemberString(cond, "reason"), MemberString(cond, "message"));
    }
  }
  if (auto cs = status->value.FindMember("containerStatuses");
      cs != status->value.MemberEnd() && cs->value.IsArray()) {
    for (const auto& container : cs->value.GetArray()) {
      auto state = container.FindMember("state");
      if (state == container.MemberEnd() || !state->value.IsObject())
        continue;
      for (const char* which : {"waiting", "terminated"}) {
        auto s = state->value.FindMember(which);
        if (s == state->value.MemberEnd() || !s->value.IsObject())
          continue;
        std::string exit;
        if (auto e = s->value.FindMember("exitCode"); e != s->value.MemberEnd() && e->value.IsInt())
          exit = fmt::format(" exit code {}", e->value.GetInt());
        out +=
            fmt::format("; container {} {}{}: {} {}", MemberString(container, "name"), which, exit,
                        MemberString(s->value, "reason"), MemberString(s->value, "message"));
      }
    }
  }
  return out;
}

namespace {

using Steady = Clock::Steady;

// 429, 5xx, and no answer at all: worth sending again until the deadline. A POST
// that lost its connection may have created the pod; the retry then gets 409 and
// judges the pod it finds, so a retried create is still safe.
bool Transient(const Status& s) {
  const int code = kube::HttpCode(s);
  if (code == 429 || code >= 500)
    return true;
  return code == 0 &&
         (s.code() == Status::Code::kUnavailable || s.code() == Status::Code::kTimeout);
}

// Runs `call` until it succeeds, fails for good, or `deadline` passes.
template <typename Call>
auto WithRetry(const PowerContext& ctx, Steady::time_point deadline, std::string_view what,
               const Call& call) -> decltype(call()) {
  Clock& clock = ctx.client.clock();
  std::chrono::milliseconds backoff{200};
  for (;;) {
    auto r = call();
    if (r.ok() || !Transient(r.status()))
      return r;
    const auto now = clock.Now();
    if (now >= deadline) {
      return r.status().WithContext(
          fmt::format("{}: still failing when RetryDeadline ({} ms) ran out", what,
                      ctx.setup.config.kube.retry_deadline.count()));
    }
    Steady::duration delay = backoff;
    if (const ApiError* api = r.status().api_error(); api && api->retry_after)
      delay = *api->retry_after;
    delay = std::min(delay, deadline - now);
    ctx.log.Info("{}: {}; retrying in {} ms", what, r.status().message(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
    clock.SleepFor(delay);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5'000));
  }
}

bool IsNotFound(const Status& s) {
  return kube::HttpCode(s) == 404 || s.code() == Status::Code::kNotFound;
}

// Deletes `pod` (by uid, so a pod that replaced it meanwhile is left alone) with
// its own grace period. 404 counts as done.
Result<kube::Object> DeleteOwned(const PowerContext& ctx, Steady::time_point deadline,
                                 const kube::Object& pod) {
  kube::DeleteOptions options;
  options.precondition_uid = pod.Uid();
  const std::string ns = ctx.setup.config.kube.namespace_;
  const std::string name = pod.Name();
  auto r = WithRetry(ctx, deadline, fmt::format("delete pod {}/{}", ns, name),
                     [&] { return ctx.client.Delete(kube::kPods, ns, name, options); });
  if (!r.ok() && IsNotFound(r.status()))
    return kube::Object();
  return r;
}

// Polls until the pod named `name` is gone. Used for a leftover whose deletion
// must finish before a pod of the same name can be created.
Status WaitGone(const PowerContext& ctx, Steady::time_point deadline, const std::string& name) {
  Clock& clock = ctx.client.clock();
  const std::string ns = ctx.setup.config.kube.namespace_;
  for (;;) {
    auto r = ctx.client.Get(kube::kPods, ns, name);
    if (!r.ok() && IsNotFound(r.status()))
      return Status::Ok();
    if (!r.ok() && !Transient(r.status()))
      return r.status();
    if (clock.Now() >= deadline) {
      return Status::Timeout(
          fmt::format("leftover pod {}/{} ({}) was still there when RetryDeadline ({} ms) ran out",
                      ns, name, r.ok() ? DescribePodState(*r) : r.status().message(),
                      ctx.setup.config.kube.retry_deadline.count()));
    }
    clock.SleepFor(
        std::min<Steady::duration>(std::chrono::milliseconds(500), deadline - clock.Now()));
  }
}

struct CreateResult {
  NodeAction action = NodeAction::kFailed;
  Status status;
};

CreateResult CreatePod(const PowerContext& ctx, Steady::time_point deadline,
                       const std::string& node, const kube::Object& pod) {
  const std::string& ns = ctx.setup.config.kube.namespace_;
  const std::string& cluster = ctx.setup.config.cluster_name;
  bool replaced = false;
  // Create; on 409 look at what is there. Bounded: a pod that keeps reappearing is
  // someone else's loop, not ours to fight.
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto created = WithRetry(ctx, deadline, fmt::format("create pod {}/{}", ns, node),
                             [&] { return ctx.client.Create(kube::kPods, ns, pod); });
    if (created.ok())
      return {replaced ? NodeAction::kReplaced : NodeAction::kCreated, {}};
    if (kube::HttpCode(created.status()) != 409)
      return {NodeAction::kFailed, created.status()};

    auto existing = WithRetry(ctx, deadline, fmt::format("get pod {}/{}", ns, node),
                              [&] { return ctx.client.Get(kube::kPods, ns, node); });
    if (!existing.ok()) {
      if (IsNotFound(existing.status()))
        continue;  // gone in between: create again
      return {NodeAction::kFailed, existing.status()};
    }
    ExistingPodVerdict verdict = JudgeExistingPod(*existing, cluster, node);
    switch (verdict.action) {
      case ExistingPod::kHealthy:
        ctx.log.Info("node {}: pod {}/{} already exists ({}): counted as resumed", node, ns, node,
                     verdict.reason);
        return {NodeAction::kExisting, {}};
      case ExistingPod::kNotOurs:
        return {NodeAction::kFailed, Status::AlreadyExists(verdict.reason)};
      case ExistingPod::kReplace: {
        ctx.log.Info("node {}: replacing leftover pod {}/{}: {}", node, ns, node, verdict.reason);
        if (!existing->IsBeingDeleted()) {
          auto deleted = DeleteOwned(ctx, deadline, *existing);
          if (!deleted.ok())
            return {NodeAction::kFailed, deleted.status()};
        }
        if (Status gone = WaitGone(ctx, deadline, node); !gone.ok())
          return {NodeAction::kFailed, gone};
        replaced = true;
        break;
      }
    }
  }
  return {NodeAction::kFailed,
          Status::Conflict(fmt::format(
              "pod {}/{} kept reappearing while k8sbridge replaced it: is another controller "
              "creating pods of this name?",
              ns, node))};
}

// What the nodes of one resume call share: read or made once, when first needed.
struct ResumeCall {
  PlacementSnapshot placement;
  SharedMungeCredential munge;
};

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

  WorkerPodRequest pod_request;
  pod_request.node = node;
  pod_request.jobs = request.JobsOf(node);
  if (!group->gpus) {
    auto live = ctx.slurm.LoadNode(node);
    if (!live.ok()) {
      // Fail closed: a pod without the node's GPUs would register a node that lies.
      return fail(live.status().WithContext(
          fmt::format("reading the Gres of node {} from slurmctld (or set Gpus= on NodeGroup={})",
                      node, group->name)));
    }
    pod_request.gres = live->gres;
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

  CreateResult created = CreatePod(ctx, deadline, node, *pod);
  if (created.action == NodeAction::kFailed)
    return fail(created.status);
  ctx.log.Info("node {}: pod {}/{} {}", node, ctx.setup.config.kube.namespace_, node,
               NodeActionName(created.action));
  return {node, created.action, {}};
}

// Suspend and ResumeFail: delete our pod; with `resume_failed`, record why first.
// `listed` is the node's pod from Suspend's list of our pods, when it was there;
// otherwise the pod is read by name (it may be absent, or not ours).
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
    ctx.log.Info("node {}: pod {}/{} is already terminating", node, ns, node);
    return {node, NodeAction::kDeleted, {}};
  }
  auto deleted = DeleteOwned(ctx, deadline, *pod);
  if (!deleted.ok())
    return failed(deleted.status());
  ctx.log.Info("node {}: pod {}/{} deleted", node, ns, node);
  return {node, NodeAction::kDeleted, {}};
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

}  // namespace

PowerReport Resume(const PowerContext& ctx, const std::vector<std::string>& nodes,
                   const ResumeRequest& request) {
  ResumeCall call;
  return ForEachNode(ctx, nodes, [&](Steady::time_point deadline, const std::string& node) {
    return ResumeNode(ctx, call, deadline, node, request);
  });
}

PowerReport Suspend(const PowerContext& ctx, const std::vector<std::string>& nodes) {
  // One list of our pods instead of a read per node; a node missing from it is
  // read by name, so an absent pod and a pod that is not ours stay distinct.
  std::map<std::string, kube::Object, std::less<>> ours;
  if (nodes.size() > 1) {
    const auto deadline = ctx.client.clock().Now() + ctx.setup.config.kube.retry_deadline;
    kube::ListOptions options;
    options.label_selector = OwnedPodsSelector(ctx.setup.config.cluster_name);
    auto listed = WithRetry(ctx, deadline, "list worker pods", [&] {
      return ctx.client.List(kube::kPods, ctx.setup.config.kube.namespace_, options);
    });
    if (listed.ok()) {
      for (auto& pod : listed->items)
        ours.emplace(pod.Name(), std::move(pod));
    } else {
      ctx.log.Warning("listing the worker pods failed ({}); reading each node's pod instead",
                      listed.status().message());
    }
  }
  return ForEachNode(ctx, nodes, [&](Steady::time_point deadline, const std::string& node) {
    auto it = ours.find(node);
    return DeleteNodePod(ctx, deadline, node, false, it == ours.end() ? nullptr : &it->second);
  });
}

PowerReport ResumeFail(const PowerContext& ctx, const std::vector<std::string>& nodes) {
  return ForEachNode(ctx, nodes, [&](Steady::time_point deadline, const std::string& node) {
    return DeleteNodePod(ctx, deadline, node, true);
  });
}

}  // namespace k8sbridge::power
