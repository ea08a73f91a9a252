// The Kubernetes calls the power actions (power_actions.h) make on worker pods,
// each sent again on a transient failure until the call's deadline (RetryDeadline):
// read, delete, wait until gone, list ours. What to call, and what a pod already
// there means, the actions decide.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/power/power_context.h"
#include "k8sbridge/status.h"

namespace k8sbridge::power {

using Steady = Clock::Steady;

// 429, 5xx, and no answer at all: worth sending again until the deadline. A POST
// that lost its connection may have created the pod; the retry then gets 409 and
// judges the pod it finds, so a retried create is still safe.
bool Transient(const Status& s);

// 404 from the API server, or kNotFound.
bool IsNotFound(const Status& s);

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

// Why a pod is not running, from its status, for logs and events ("phase Pending;
// PodScheduled=False Unschedulable: 0/4 nodes are available ...").
std::string DescribePodState(const kube::Object& pod);

// Deletes `pod` (by uid, so a pod that replaced it meanwhile is left alone) with
// its own grace period. 404 counts as done.
Result<kube::Object> DeleteOwned(const PowerContext& ctx, Steady::time_point deadline,
                                 const kube::Object& pod);

// Polls until the pod named `name` is gone. Used for a leftover whose deletion
// must finish before a pod of the same name can be created.
Status WaitGone(const PowerContext& ctx, Steady::time_point deadline, const std::string& name);

using PodsByNode = std::map<std::string, std::vector<kube::Object>, std::less<>>;

// Our pods that `selector` selects, by the Slurm node of their node label, from one
// list. nullopt (after a warning naming `what`) when the list failed.
std::optional<PodsByNode> ListOurPods(const PowerContext& ctx, const std::string& selector,
                                      std::string_view what);

// Our pods by the Slurm node of their node label, from one list: all of the
// cluster's for several nodes, one node's for one.
std::optional<PodsByNode> ListNodePods(const PowerContext& ctx,
                                       const std::vector<std::string>& nodes);

}  // namespace k8sbridge::power
