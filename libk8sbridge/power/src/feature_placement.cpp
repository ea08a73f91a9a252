#include "k8sbridge/power/feature_placement.h"

#include <cmath>
#include <map>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

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

// The JSON of what decides which nodes `pod` may go to: its nodeSelector and its
// required node affinity. Pods with the same key match the same nodes.
std::string PlacementKey(const Value& pod) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  const Value* spec = Member(&pod, "spec");
  writer.StartArray();
  for (const Value* v :
       {Member(spec, "nodeSelector"), Member(Member(Member(spec, "affinity"), "nodeAffinity"),
                                             "requiredDuringSchedulingIgnoredDuringExecution")}) {
    if (v)
      v->Accept(writer);
    else
      writer.Null();
  }
  writer.EndArray();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace

PlacementIndex::PlacementIndex(std::string_view gpu_resource,
                               const std::vector<kube::Object>& nodes,
                               const std::vector<kube::Object>& pods)
    : gpu_resource_(gpu_resource) {
  for (const kube::Object& p : pods) {
    const std::string phase = kube::pod::Phase(p);
    std::string bound = kube::pod::NodeName(p);
    if (bound.empty() || phase == "Succeeded" || phase == "Failed")
      continue;
    const double gpus = GpuRequest(p.json(), gpu_resource_);
    used_[bound] += gpus;
    uses_.insert_or_assign(p.Namespace() + "/" + p.Name(), PodUse{std::move(bound), gpus});
  }
  nodes_.reserve(nodes.size());
  for (const kube::Object& n : nodes) {
    NodeInfo info{n.Name(), n.Labels()};
    info.schedulable = Ready(n.json()) && !n.Bool("/spec/unschedulable").value_or(false);
    info.allocatable =
        Quantity(Member(Member(Member(&n.json(), "status"), "allocatable"), gpu_resource_.c_str()));
    nodes_.push_back(std::move(info));
  }
}

const std::vector<size_t>& PlacementIndex::Matching(const kube::Object& pod) const {
  const std::string key = PlacementKey(pod.json());
  {
    std::lock_guard lock(mu_);
    if (auto it = matching_.find(key); it != matching_.end())
      return it->second;
  }
  std::vector<size_t> matching;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (NodeMatches(pod.json(), nodes_[i].labels))
      matching.push_back(i);
  }
  std::lock_guard lock(mu_);
  return matching_.try_emplace(key, std::move(matching)).first->second;
}

Status PlacementIndex::Check(const kube::Object& pod) const {
  const double wanted = GpuRequest(pod.json(), gpu_resource_);
  // The node's own pod, already there: its GPUs are its own.
  const PodUse* own = nullptr;
  if (auto it = uses_.find(pod.Namespace() + "/" + pod.Name()); it != uses_.end())
    own = &it->second;
  const std::vector<size_t>& matching = Matching(pod);
  int ready = 0;
  for (size_t i : matching) {
    const NodeInfo& n = nodes_[i];
    if (!n.schedulable)
      continue;
    ++ready;
    if (wanted <= 0)
      return Status::Ok();
    double used = 0;
    if (auto u = used_.find(n.name); u != used_.end())
      used = u->second - (own && own->node == n.name ? own->gpus : 0);
    if (n.allocatable - used >= wanted)
      return Status::Ok();
  }
  const std::string features = pod.Annotations()[std::string(contract::kFeaturesAnnotation)];
  if (matching.empty()) {
    return Status::Unavailable(
        fmt::format("no Kubernetes node offers features [{}]: none has the labels their Feature= "
                    "selectors ask for",
                    features));
  }
  if (ready == 0) {
    return Status::Unavailable(fmt::format(
        "no Kubernetes node offers features [{}]: {} have the labels, none is Ready and "
        "schedulable",
        features, matching.size()));
  }
  return Status::Unavailable(
      fmt::format("no Kubernetes node offers features [{}]: {} have the labels, none has {} {} "
                  "free",
                  features, matching.size(), wanted, gpu_resource_));
}

Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods) {
  return PlacementIndex(gpu_resource, nodes, pods).Check(pod);
}

const Result<std::shared_ptr<const PlacementIndex>>& PlacementSnapshot::Get(
    kube::Client& client, std::string_view ns, std::string_view cluster,
    std::string_view gpu_resource) {
  std::call_once(once_, [&] {
    auto nodes = client.List(kube::kNodes, "");
    if (!nodes.ok()) {
      index_ = nodes.status();
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
      index_ = pods.status();
      return;
    }
    index_ = std::shared_ptr<const PlacementIndex>(
        std::make_shared<PlacementIndex>(gpu_resource, nodes->items, pods->items));
  });
  return index_;
}

Status CheckFeaturePlacement(const PowerContext& ctx, PlacementSnapshot& snapshot,
                             std::string_view node, const kube::Object& pod) {
  auto annotations = pod.Annotations();
  if (annotations.find(std::string(contract::kFeaturesAnnotation)) == annotations.end())
    return Status::Ok();
  const auto& index =
      snapshot.Get(ctx.client, ctx.setup.config.kube.namespace_, ctx.setup.config.cluster_name,
                   ctx.setup.config.power.gpu_resource);
  if (!index.ok()) {
    ctx.log.Warning(
        "node {}: cannot list Kubernetes nodes and pods to check the features' placement ({}); "
        "creating the pod and leaving the choice to Kubernetes' scheduler",
        node, index.status().message());
    return Status::Ok();
  }
  return (*index)->Check(pod);
}

}  // namespace k8sbridge::power
