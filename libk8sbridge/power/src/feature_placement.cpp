#include "k8sbridge/power/feature_placement.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/power/worker_pod.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {

namespace {

using rapidjson::Value;

const Value* Member(const Value* v, const char* name) {
  if (!v || !v->IsObject())
    return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string StringOf(const Value* v) {
  return v && v->IsString() ? v->GetString() : "";
}

// A quantity of a countable resource ("2", "2000m"); -1 when unreadable.
double Quantity(const Value* v) {
  std::string s = StringOf(v);
  if (v && v->IsNumber())
    return v->GetDouble();
  auto quantity = text::ParseQuantity(s);
  return quantity.ok() ? *quantity : -1;
}

// The GPUs the pod's containers ask for (requests, else limits, which Kubernetes
// copies into requests for extended resources).
double GpuRequest(const Value& pod, std::string_view resource) {
  double total = 0;
  const Value* containers = Member(Member(&pod, "spec"), "containers");
  if (!containers || !containers->IsArray())
    return 0;
  const std::string key(resource);
  for (const Value& c : containers->GetArray()) {
    const Value* resources = Member(&c, "resources");
    double q = Quantity(Member(Member(resources, "requests"), key.c_str()));
    if (q < 0)
      q = Quantity(Member(Member(resources, "limits"), key.c_str()));
    if (q > 0)
      total += q;
  }
  return total;
}

bool Ready(const Value& node) {
  const Value* conditions = Member(Member(&node, "status"), "conditions");
  if (!conditions || !conditions->IsArray())
    return false;
  for (const Value& c : conditions->GetArray()) {
    if (StringOf(Member(&c, "type")) == "Ready")
      return StringOf(Member(&c, "status")) == "True";
  }
  return false;
}

bool ExpressionHolds(const Value& expr, const std::map<std::string, std::string>& labels) {
  const std::string key = StringOf(Member(&expr, "key"));
  const std::string op = StringOf(Member(&expr, "operator"));
  auto it = labels.find(key);
  const bool has = it != labels.end();
  auto in_values = [&] {
    const Value* values = Member(&expr, "values");
    if (!has || !values || !values->IsArray())
      return false;
    for (const Value& v : values->GetArray()) {
      if (v.IsString() && it->second == v.GetString())
        return true;
    }
    return false;
  };
  if (op == "In")
    return in_values();
  if (op == "NotIn")
    return !in_values();
  if (op == "Exists")
    return has;
  if (op == "DoesNotExist")
    return !has;
  return false;  // Gt/Lt: not used by k8sbridge; count as not met
}

bool NodeMatches(const Value& pod, const std::map<std::string, std::string>& labels) {
  const Value* spec = Member(&pod, "spec");
  if (const Value* selector = Member(spec, "nodeSelector"); selector && selector->IsObject()) {
    for (const auto& m : selector->GetObject()) {
      auto it = labels.find(m.name.GetString());
      if (it == labels.end() || !m.value.IsString() || it->second != m.value.GetString())
        return false;
    }
  }
  const Value* terms = Member(Member(Member(Member(spec, "affinity"), "nodeAffinity"),
                                     "requiredDuringSchedulingIgnoredDuringExecution"),
                              "nodeSelectorTerms");
  if (!terms || !terms->IsArray() || terms->Empty())
    return true;
  for (const Value& term : terms->GetArray()) {  // terms are ORed
    const Value* exprs = Member(&term, "matchExpressions");
    bool all = true;
    if (exprs && exprs->IsArray()) {
      for (const Value& e : exprs->GetArray())
        all = all && ExpressionHolds(e, labels);
    }
    if (all)
      return true;
  }
  return false;
}

}  // namespace

Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods) {
  const double wanted = GpuRequest(pod.json(), gpu_resource);
  std::map<std::string, double> used;  // GPUs requested by pods bound to each node
  for (const kube::Object& p : pods) {
    const std::string phase = kube::pod::Phase(p);
    const std::string bound = kube::pod::NodeName(p);
    if (bound.empty() || phase == "Succeeded" || phase == "Failed")
      continue;
    if (p.Name() == pod.Name() && p.Namespace() == pod.Namespace())
      continue;  // the node's own pod, already there: its GPUs are its own
    used[bound] += GpuRequest(p.json(), gpu_resource);
  }
  int labelled = 0, ready = 0;
  for (const kube::Object& n : nodes) {
    if (!NodeMatches(pod.json(), n.Labels()))
      continue;
    ++labelled;
    if (!Ready(n.json()) || n.Bool("/spec/unschedulable").value_or(false))
      continue;
    ++ready;
    if (wanted <= 0)
      return Status::Ok();
    const std::string key(gpu_resource);
    const double allocatable =
        Quantity(Member(Member(Member(&n.json(), "status"), "allocatable"), key.c_str()));
    if (allocatable - used[n.Name()] >= wanted)
      return Status::Ok();
  }
  const std::string features = pod.Annotations()[std::string(contract::kFeaturesAnnotation)];
  if (labelled == 0) {
    return Status::Unavailable(
        fmt::format("no Kubernetes node offers features [{}]: none has the labels their Feature= "
                    "selectors ask for",
                    features));
  }
  if (ready == 0) {
    return Status::Unavailable(fmt::format(
        "no Kubernetes node offers features [{}]: {} have the labels, none is Ready and "
        "schedulable",
        features, labelled));
  }
  return Status::Unavailable(
      fmt::format("no Kubernetes node offers features [{}]: {} have the labels, none has {} {} "
                  "free",
                  features, labelled, wanted, gpu_resource));
}

const Result<std::pair<std::vector<kube::Object>, std::vector<kube::Object>>>&
PlacementSnapshot::Get(kube::Client& client, std::string_view ns, std::string_view cluster) {
  std::call_once(once_, [&] {
    auto nodes = client.List(kube::kNodes, "");
    if (!nodes.ok()) {
      lists_ = nodes.status();
      return;
    }
    // Only this cluster's worker pods, in Namespace=: what the shipped RBAC grants,
    // and a list that stays small in a large Kubernetes cluster. Other tenants'
    // GPUs are not seen, so the check can only be too hopeful, never fail a node
    // that Kubernetes could place (the scheduler still decides).
    kube::ListOptions options;
    options.label_selector = OwnedPodsSelector(cluster);
    auto pods = client.List(kube::kPods, ns, options);
    if (!pods.ok()) {
      lists_ = pods.status();
      return;
    }
    lists_ = std::make_pair(std::move(nodes->items), std::move(pods->items));
  });
  return lists_;
}

Status CheckFeaturePlacement(const PowerContext& ctx, PlacementSnapshot& snapshot,
                             std::string_view node, const kube::Object& pod) {
  auto annotations = pod.Annotations();
  if (annotations.find(std::string(contract::kFeaturesAnnotation)) == annotations.end())
    return Status::Ok();
  const auto& lists =
      snapshot.Get(ctx.client, ctx.setup.config.kube.namespace_, ctx.setup.config.cluster_name);
  if (!lists.ok()) {
    ctx.log.Warning(
        "node {}: cannot list Kubernetes nodes and pods to check the features' placement ({}); "
        "creating the pod and leaving the choice to Kubernetes' scheduler",
        node, lists.status().message());
    return Status::Ok();
  }
  return FeaturePlacementPossible(ctx.setup.config.power.gpu_resource, pod, lists->first,
                                  lists->second);
}

}  // namespace k8sbridge::power
