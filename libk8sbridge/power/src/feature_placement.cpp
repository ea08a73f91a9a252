#include "k8sbridge/power/feature_placement.h"

#include <algorithm>
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

constexpr int64_t kFirstNodePage = 50;

const Value* Member(const Value* v, const char* name) {
  if (!v || !v->IsObject())
    return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

// The quantity of a countable resource ("2", "2000m") in member `name` of
// `object`; -1 when unreadable.
double Quantity(const Value* object, const char* name) {
  if (const Value* v = Member(object, name); v && v->IsNumber())
    return v->GetDouble();
  auto quantity = text::ParseQuantity(kube::StringMember(object, name));
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
    double q = Quantity(Member(resources, "requests"), key.c_str());
    if (q < 0)
      q = Quantity(Member(resources, "limits"), key.c_str());
    if (q > 0)
      total += q;
  }
  return total;
}

bool ExpressionHolds(const Value& expr, const std::map<std::string, std::string>& labels) {
  const std::string key = kube::StringMember(&expr, "key");
  const std::string op = kube::StringMember(&expr, "operator");
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

// `exprs` (a nodeSelectorTerm's matchExpressions) in label selector syntax, those a
// selector can say.
void AddExpressions(const Value* exprs, std::vector<std::string>& parts) {
  if (!exprs || !exprs->IsArray())
    return;
  for (const Value& e : exprs->GetArray()) {
    const std::string key = kube::StringMember(&e, "key");
    const std::string op = kube::StringMember(&e, "operator");
    std::vector<std::string> values;
    if (const Value* v = Member(&e, "values"); v && v->IsArray()) {
      for (const Value& value : v->GetArray())
        values.push_back(value.IsString() ? value.GetString() : "");
    }
    if (key.empty())
      continue;
    if ((op == "In" || op == "NotIn") && !values.empty())
      parts.push_back(
          fmt::format("{} {} ({})", key, op == "In" ? "in" : "notin", text::Join(values, ",")));
    else if (op == "Exists")
      parts.push_back(key);
    else if (op == "DoesNotExist")
      parts.push_back("!" + key);
  }
}

// A label selector that every node `pod` may go to satisfies, for the server to
// filter the node list with: its nodeSelector, and the expressions of its required
// node affinity when there is one term (terms are ORed, which a selector cannot
// say). What a selector cannot say is left to NodeMatches.
std::string LabelSelectorOf(const Value& pod) {
  std::vector<std::string> parts;
  const Value* spec = Member(&pod, "spec");
  if (const Value* selector = Member(spec, "nodeSelector"); selector && selector->IsObject()) {
    for (const auto& m : selector->GetObject()) {
      if (m.value.IsString())
        parts.push_back(fmt::format("{}={}", m.name.GetString(), m.value.GetString()));
    }
  }
  const Value* terms = Member(Member(Member(Member(spec, "affinity"), "nodeAffinity"),
                                     "requiredDuringSchedulingIgnoredDuringExecution"),
                              "nodeSelectorTerms");
  if (terms && terms->IsArray() && terms->Size() == 1)
    AddExpressions(Member(&(*terms)[0], "matchExpressions"), parts);
  return text::Join(parts, ",");
}

Status NoNodeFor(const kube::Object& pod, size_t labelled, int ready, double wanted,
                 std::string_view gpu_resource) {
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

}  // namespace

PlacementSearch::PlacementSearch(std::string_view gpu_resource, PlacementReads reads)
    : gpu_resource_(gpu_resource), reads_(std::move(reads)) {}

Status PlacementSearch::Remember(Status failure) {
  read_failure_ = failure;
  return failure;
}

Status PlacementSearch::ReadNodePage(Cursor& cursor, const kube::Object& pod) {
  auto page = reads_.node_page(cursor.selector, cursor.next);
  if (!page.ok())
    return page.status();
  for (const kube::Object& n : page->items) {
    auto [it, added] = node_index_.try_emplace(n.Name(), nodes_.size());
    if (added) {
      NodeInfo info{n.Name(), n.Labels()};
      info.schedulable =
          kube::node::ConditionStatus(n, "Ready") == "True" && !kube::node::Unschedulable(n);
      info.allocatable =
          Quantity(Member(Member(&n.json(), "status"), "allocatable"), gpu_resource_.c_str());
      nodes_.push_back(std::move(info));
    }
    if (NodeMatches(pod.json(), nodes_[it->second].labels))
      cursor.matching.push_back(it->second);
  }
  cursor.next = std::move(page->continue_token);
  cursor.done = cursor.next.empty();
  return Status::Ok();
}

void PlacementSearch::AddPods(const std::vector<kube::Object>& pods, const std::string& node) {
  for (const kube::Object& p : pods) {
    const std::string phase = kube::pod::Phase(p);
    std::string bound = kube::pod::NodeName(p);
    if (bound.empty() || phase == "Succeeded" || phase == "Failed")
      continue;
    if (!node.empty() && bound != node)
      continue;  // a reader that does not filter
    uses_[bound].push_back({p.Namespace() + "/" + p.Name(), GpuRequest(p.json(), gpu_resource_)});
  }
  if (node.empty())
    all_pods_read_ = true;
  else
    uses_.try_emplace(node);  // read, and empty
}

std::vector<std::string> PlacementSearch::UnreadFrom(const Cursor& cursor, size_t at) const {
  const int budget = kPerNodePodReads - per_node_reads_;
  const size_t wanted =
      static_cast<size_t>(std::min(per_node_reads_ == 0 ? 1 : kPodReadBatch, budget));
  std::vector<std::string> batch;
  for (size_t j = at; j < cursor.matching.size() && batch.size() < wanted; ++j) {
    const NodeInfo& n = nodes_[cursor.matching[j]];
    if (n.schedulable && uses_.find(n.name) == uses_.end())
      batch.push_back(n.name);
  }
  return batch;
}

Status PlacementSearch::ReadPodsOf(const std::vector<std::string>& nodes) {
  std::vector<std::vector<kube::Object>> pods(nodes.size());
  // Side by side: a busy cluster's nodes are mostly taken, and each read waits a round trip.
  std::vector<Status> read = kube::ForEachBounded(nodes.size(), nodes.size(), [&](size_t i) {
    auto listed = reads_.pods(nodes[i]);
    if (!listed.ok())
      return listed.status();
    pods[i] = std::move(*listed);
    return Status::Ok();
  });
  per_node_reads_ += static_cast<int>(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!read[i].ok())
      return read[i];
    AddPods(pods[i], nodes[i]);
  }
  return Status::Ok();
}

Status PlacementSearch::ReadAllPods() {
  auto pods = reads_.pods("");
  if (!pods.ok())
    return pods.status();
  uses_.clear();
  AddPods(*pods, "");
  return Status::Ok();
}

Result<double> PlacementSearch::UsedOn(const Cursor& cursor, size_t at, const std::string& own) {
  const std::string& node = nodes_[cursor.matching[at]].name;
  if (!all_pods_read_ && uses_.find(node) == uses_.end()) {
    // A few nodes are read by name; a search that walks many reads every pod once.
    Status s =
        per_node_reads_ < kPerNodePodReads ? ReadPodsOf(UnreadFrom(cursor, at)) : ReadAllPods();
    if (!s.ok())
      return s;
  }
  double used = 0;
  if (auto it = uses_.find(node); it != uses_.end()) {
    for (const PodUse& use : it->second)
      used += use.key == own ? 0 : use.gpus;  // the node's own pod: its GPUs are its own
  }
  return used;
}

PlacementVerdict PlacementSearch::Check(const kube::Object& pod) {
  std::lock_guard lock(mu_);
  if (!read_failure_.ok())
    return {Status::Ok(), read_failure_};
  const double wanted = GpuRequest(pod.json(), gpu_resource_);
  const std::string own = pod.Namespace() + "/" + pod.Name();
  auto [cursor_it, added] = cursors_.try_emplace(PlacementKey(pod.json()));
  Cursor& cursor = cursor_it->second;
  if (added)
    cursor.selector = LabelSelectorOf(pod.json());
  int ready = 0;
  for (size_t i = 0;;) {
    if (i == cursor.matching.size()) {
      if (cursor.done)
        break;
      if (Status s = ReadNodePage(cursor, pod); !s.ok())
        return {Status::Ok(), Remember(s)};
      continue;
    }
    const size_t at = i++;
    const NodeInfo& n = nodes_[cursor.matching[at]];
    if (!n.schedulable)
      continue;
    ++ready;
    if (wanted <= 0)
      return {};
    auto used = UsedOn(cursor, at, own);
    if (!used.ok())
      return {Status::Ok(), Remember(used.status())};
    if (n.allocatable - *used >= wanted)
      return {};
  }
  return {NoNodeFor(pod, cursor.matching.size(), ready, wanted, gpu_resource_), Status::Ok()};
}

Status FeaturePlacementPossible(std::string_view gpu_resource, const kube::Object& pod,
                                const std::vector<kube::Object>& nodes,
                                const std::vector<kube::Object>& pods) {
  PlacementReads reads;
  reads.node_page = [&](const std::string&, const std::string&) -> Result<kube::ObjectList> {
    return kube::ObjectList{nodes, "", ""};
  };
  reads.pods = [&](const std::string&) -> Result<std::vector<kube::Object>> { return pods; };
  return PlacementSearch(gpu_resource, std::move(reads)).Check(pod).placement;
}

PlacementSearch& PlacementSnapshot::Get(kube::Client& client, std::string_view ns,
                                        std::string_view cluster, std::string_view gpu_resource) {
  std::call_once(once_, [&] {
    PlacementReads reads;
    reads.node_page = [&client](const std::string& selector, const std::string& next) {
      kube::ListOptions options;
      options.label_selector = selector;
      // The first node usually fits: a small first page, then pages of the usual size.
      options.page_size = next.empty() ? kFirstNodePage : options.page_size;
      return client.ListPage(kube::kNodes, "", options, next);
    };
    // Only this cluster's worker pods, in Namespace=: what the shipped RBAC grants.
    // Other tenants' GPUs are not seen, so the check can only be too hopeful, never
    // fail a node that Kubernetes could place (the scheduler still decides).
    reads.pods = [&client, ns = std::string(ns), owned = OwnedPodsSelector(cluster)](
                     const std::string& node) -> Result<std::vector<kube::Object>> {
      kube::ListOptions options;
      options.label_selector = owned;
      if (!node.empty())
        options.field_selector = "spec.nodeName=" + node;
      auto list = client.List(kube::kPods, ns, options);
      if (!list.ok())
        return list.status();
      return std::move(list->items);
    };
    search_ = std::make_unique<PlacementSearch>(gpu_resource, std::move(reads));
  });
  return *search_;
}

Status CheckFeaturePlacement(const PowerContext& ctx, PlacementSnapshot& snapshot,
                             std::string_view node, const kube::Object& pod) {
  auto annotations = pod.Annotations();
  if (annotations.find(std::string(contract::kFeaturesAnnotation)) == annotations.end())
    return Status::Ok();
  auto verdict = snapshot
                     .Get(ctx.client, ctx.setup.config.kube.namespace_,
                          ctx.setup.config.cluster_name, ctx.setup.config.power.gpu_resource)
                     .Check(pod);
  if (!verdict.read_failure.ok()) {
    ctx.log.Warning(
        "node {}: cannot read Kubernetes nodes and pods to check the features' placement ({}); "
        "creating the pod and leaving the choice to Kubernetes' scheduler",
        node, verdict.read_failure.message());
  }
  return verdict.placement;
}

}  // namespace k8sbridge::power
