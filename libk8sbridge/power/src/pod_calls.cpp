#include "k8sbridge/power/pod_calls.h"

#include <fmt/format.h>

#include "k8sbridge/power/lost_node.h"
#include "k8sbridge/power/worker_pod.h"

namespace k8sbridge::power {
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
      if (kube::StringMember(&cond, "status") == "True")
        continue;
      out += fmt::format("; {}={} {}: {}", kube::StringMember(&cond, "type"),
                         kube::StringMember(&cond, "status"), kube::StringMember(&cond, "reason"),
                         kube::StringMember(&cond, "message"));
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
        out += fmt::format("; container {} {}{}: {} {}", kube::StringMember(&container, "name"),
                           which, exit, kube::StringMember(&s->value, "reason"),
                           kube::StringMember(&s->value, "message"));
      }
    }
  }
  return out;
}

bool Transient(const Status& s) {
  const int code = kube::HttpCode(s);
  if (code == 429 || code >= 500)
    return true;
  return code == 0 &&
         (s.code() == Status::Code::kUnavailable || s.code() == Status::Code::kTimeout);
}

bool IsNotFound(const Status& s) {
  return kube::HttpCode(s) == 404 || s.code() == Status::Code::kNotFound;
}

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

std::optional<PodsByNode> ListOurPods(const PowerContext& ctx, const std::string& selector,
                                      std::string_view what) {
  PodsByNode ours;
  const auto deadline = ctx.client.clock().Now() + ctx.setup.config.kube.retry_deadline;
  const std::string& cluster = ctx.setup.config.cluster_name;
  kube::ListOptions options;
  options.label_selector = selector;
  auto listed = WithRetry(ctx, deadline, fmt::format("list {}", what), [&] {
    return ctx.client.List(kube::kPods, ctx.setup.config.kube.namespace_, options);
  });
  if (!listed.ok()) {
    ctx.log.Warning("listing {} failed ({})", what, listed.status().message());
    return std::nullopt;
  }
  for (auto& pod : listed->items) {
    const std::string node = SlurmNodeOf(pod);
    if (IsOwnedWorkerPod(pod, cluster, node))
      ours[node].push_back(std::move(pod));
  }
  return ours;
}

std::optional<PodsByNode> ListNodePods(const PowerContext& ctx,
                                       const std::vector<std::string>& nodes) {
  const std::string& cluster = ctx.setup.config.cluster_name;
  return ListOurPods(
      ctx, nodes.size() == 1 ? NodePodsSelector(cluster, nodes[0]) : OwnedPodsSelector(cluster),
      nodes.size() == 1 ? fmt::format("the worker pods of {}", nodes[0])
                        : std::string("this cluster's worker pods"));
}

}  // namespace k8sbridge::power
