#include "scheduler.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "taints.h"

namespace kubesim {
namespace {

using Labels = std::map<std::string, std::string>;

constexpr const char* kUnschedulableTaintKey = kTaintUnschedulable;
constexpr const char* kNotReadyTaintKey = kTaintNotReady;
constexpr const char* kUnreachableTaintKey = kTaintUnreachable;

// kube-scheduler's reason strings (pkg/scheduler/framework/plugins/...).
constexpr const char* kReasonUnschedulable = "node(s) were unschedulable";
constexpr const char* kReasonNodeAffinity = "node(s) didn't match Pod's node affinity/selector";
constexpr const char* kReasonPodAffinity = "node(s) didn't match pod affinity rules";
constexpr const char* kReasonPodAntiAffinity = "node(s) didn't match pod anti-affinity rules";
constexpr const char* kReasonExistingAntiAffinity =
    "node(s) didn't satisfy existing pods anti-affinity rules";
constexpr const char* kReasonTooManyPods = "Too many pods";

std::string Str(const rapidjson::Value* v) {
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : "";
}

const rapidjson::Value* Member(const rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject())
    return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

const rapidjson::Value* Array(const rapidjson::Value* v, const char* name) {
  const rapidjson::Value* m = Member(v, name);
  return m != nullptr && m->IsArray() ? m : nullptr;
}

Labels ReadLabels(const rapidjson::Value* map) {
  Labels labels;
  if (map == nullptr || !map->IsObject())
    return labels;
  for (const auto& m : map->GetObject()) {
    if (m.value.IsString())
      labels[m.name.GetString()] = m.value.GetString();
  }
  return labels;
}

Labels ObjectLabels(const rapidjson::Value& object) {
  return ReadLabels(Find(object, "metadata.labels"));
}

std::vector<std::string> StringList(const rapidjson::Value* v) {
  std::vector<std::string> out;
  if (v == nullptr || !v->IsArray())
    return out;
  for (const auto& s : v->GetArray()) {
    if (s.IsString())
      out.emplace_back(s.GetString());
  }
  return out;
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// A node selector requirement (node affinity): In, NotIn, Exists, DoesNotExist, Gt, Lt.
bool MatchNodeRequirement(const rapidjson::Value& req, const Labels& labels) {
  const std::string key = Str(Member(&req, "key"));
  const std::string op = Str(Member(&req, "operator"));
  const std::vector<std::string> values = StringList(Member(&req, "values"));
  auto it = labels.find(key);
  const bool has = it != labels.end();
  if (op == "In")
    return has && Contains(values, it->second);
  if (op == "NotIn")
    return !has || !Contains(values, it->second);
  if (op == "Exists")
    return has;
  if (op == "DoesNotExist")
    return !has;
  if (op == "Gt" || op == "Lt") {
    if (!has || values.size() != 1)
      return false;
    char* end = nullptr;
    errno = 0;
    const long long label_value = std::strtoll(it->second.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || it->second.empty())
      return false;
    const long long bound = std::strtoll(values[0].c_str(), &end, 10);
    if (errno != 0 || *end != '\0')
      return false;
    return op == "Gt" ? label_value > bound : label_value < bound;
  }
  return false;  // unknown operator: the API server would have rejected the pod
}

// A node selector term: every matchExpressions entry (on labels) and every matchFields
// entry (only metadata.name, as in Kubernetes) must hold. An empty term matches nothing.
bool MatchNodeSelectorTerm(const rapidjson::Value& term, const rapidjson::Value& node,
                           const Labels& labels) {
  const rapidjson::Value* exprs = Array(&term, "matchExpressions");
  const rapidjson::Value* fields = Array(&term, "matchFields");
  if ((exprs == nullptr || exprs->Empty()) && (fields == nullptr || fields->Empty())) {
    return false;
  }
  if (exprs != nullptr) {
    for (const auto& req : exprs->GetArray()) {
      if (!MatchNodeRequirement(req, labels))
        return false;
    }
  }
  if (fields != nullptr) {
    const Labels name_field{{"metadata.name", GetString(node, "metadata.name")}};
    for (const auto& req : fields->GetArray()) {
      if (Str(Member(&req, "key")) != "metadata.name")
        return false;
      if (!MatchNodeRequirement(req, name_field))
        return false;
    }
  }
  return true;
}

// metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists,
// DoesNotExist). An empty selector matches everything; a missing one nothing.
bool MatchLabelSelector(const rapidjson::Value* selector, const Labels& labels) {
  if (selector == nullptr || !selector->IsObject())
    return false;
  for (const auto& [k, v] : ReadLabels(Member(selector, "matchLabels"))) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v)
      return false;
  }
  if (const rapidjson::Value* exprs = Array(selector, "matchExpressions")) {
    for (const auto& req : exprs->GetArray()) {
      const std::string op = Str(Member(&req, "operator"));
      if (op != "In" && op != "NotIn" && op != "Exists" && op != "DoesNotExist")
        return false;
      if (!MatchNodeRequirement(req, labels))
        return false;
    }
  }
  return true;
}

// The node's taints plus the NoSchedule one the node lifecycle controller adds for a
// node that is not Ready (lifecycle.h), so that a pod created in the moment between
// the condition and the taint is not bound there either.
std::vector<Taint> EffectiveTaints(const rapidjson::Value& node) {
  std::vector<Taint> taints = NodeTaints(node);
  const std::string ready = NodeReadyStatus(node);
  if (!ready.empty() && ready != "True") {
    const char* key = ready == "Unknown" ? kUnreachableTaintKey : kNotReadyTaintKey;
    const bool present = std::any_of(taints.begin(), taints.end(), [&](const Taint& t) {
      return t.key == key && t.effect == "NoSchedule";
    });
    if (!present)
      taints.push_back({key, "", "NoSchedule"});
  }
  return taints;
}

bool IsFinished(const rapidjson::Value& pod) {
  const std::string phase = GetString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

ResourceList NodeAllocatable(const rapidjson::Value& node) {
  ResourceList out;
  const rapidjson::Value* alloc = Find(node, "status.allocatable");
  if (alloc == nullptr || !alloc->IsObject())
    alloc = Find(node, "status.capacity");
  if (alloc == nullptr || !alloc->IsObject())
    return out;
  for (const auto& m : alloc->GetObject()) {
    if (!m.value.IsString())
      continue;
    Result<int64_t> q = ParseQuantityMilli(m.value.GetString());
    if (q.ok())
      out[m.name.GetString()] = *q;
  }
  return out;
}

// The affinity terms of one kind ("podAffinity"/"podAntiAffinity") that are required.
std::vector<const rapidjson::Value*> RequiredTerms(const rapidjson::Value& pod, const char* kind) {
  std::vector<const rapidjson::Value*> terms;
  const rapidjson::Value* aff = Member(Member(Find(pod, "spec"), "affinity"), kind);
  if (const rapidjson::Value* list = Array(aff, "requiredDuringSchedulingIgnoredDuringExecution")) {
    for (const auto& t : list->GetArray())
      terms.push_back(&t);
  }
  return terms;
}

// Does `other` match the affinity term declared by `owner`? Namespaces: the term's
// list, or all namespaces for an empty namespaceSelector ({}), else the owner's own.
bool TermMatchesPod(const rapidjson::Value& term, const rapidjson::Value& owner,
                    const rapidjson::Value& other) {
  const std::string other_ns = GetString(other, "metadata.namespace");
  const std::vector<std::string> namespaces = StringList(Member(&term, "namespaces"));
  const rapidjson::Value* ns_selector = Member(&term, "namespaceSelector");
  bool ns_ok = false;
  if (Contains(namespaces, other_ns)) {
    ns_ok = true;
  } else if (ns_selector != nullptr && ns_selector->IsObject()) {
    // kubesim does not read namespace labels: an empty selector means every namespace,
    // and so does any other (documented difference).
    ns_ok = true;
  } else if (namespaces.empty()) {
    ns_ok = other_ns == GetString(owner, "metadata.namespace");
  }
  if (!ns_ok)
    return false;
  return MatchLabelSelector(Member(&term, "labelSelector"), ObjectLabels(other));
}

const rapidjson::Value* FindNode(const ClusterView& cluster, const std::string& name) {
  for (const rapidjson::Value* n : cluster.nodes) {
    if (GetString(*n, "metadata.name") == name)
      return n;
  }
  return nullptr;
}

std::string InterPodAffinityReason(const rapidjson::Value& pod, const Labels& node_labels,
                                   const ClusterView& cluster) {
  using TopologyPair = std::pair<std::string, std::string>;
  const std::string pod_key =
      GetString(pod, "metadata.namespace") + "/" + GetString(pod, "metadata.name");
  const auto affinity = RequiredTerms(pod, "podAffinity");
  const auto anti = RequiredTerms(pod, "podAntiAffinity");

  std::map<TopologyPair, int> existing_anti, affinity_counts, anti_counts;
  for (const rapidjson::Value* other : cluster.pods) {
    if (GetString(*other, "metadata.namespace") + "/" + GetString(*other, "metadata.name") ==
        pod_key) {
      continue;
    }
    const rapidjson::Value* other_node = FindNode(cluster, GetString(*other, "spec.nodeName"));
    if (other_node == nullptr)
      continue;
    const Labels other_node_labels = ObjectLabels(*other_node);
    auto topology = [&](const rapidjson::Value& term) -> std::optional<TopologyPair> {
      const std::string key = Str(Member(&term, "topologyKey"));
      auto it = other_node_labels.find(key);
      if (it == other_node_labels.end())
        return std::nullopt;
      return TopologyPair{key, it->second};
    };
    for (const rapidjson::Value* term : RequiredTerms(*other, "podAntiAffinity")) {
      if (TermMatchesPod(*term, *other, pod)) {
        if (auto tp = topology(*term))
          ++existing_anti[*tp];
      }
    }
    const bool matches_all =
        !affinity.empty() && std::all_of(affinity.begin(), affinity.end(), [&](auto* term) {
          return TermMatchesPod(*term, pod, *other);
        });
    if (matches_all) {
      for (const rapidjson::Value* term : affinity) {
        if (auto tp = topology(*term))
          ++affinity_counts[*tp];
      }
    }
    for (const rapidjson::Value* term : anti) {
      if (TermMatchesPod(*term, pod, *other)) {
        if (auto tp = topology(*term))
          ++anti_counts[*tp];
      }
    }
  }

  for (const auto& [k, v] : node_labels) {
    if (existing_anti.count({k, v}) != 0)
      return kReasonExistingAntiAffinity;
  }
  if (!affinity.empty()) {
    bool pods_exist = true;
    for (const rapidjson::Value* term : affinity) {
      auto it = node_labels.find(Str(Member(term, "topologyKey")));
      if (it == node_labels.end())
        return kReasonPodAffinity;  // all topology labels needed
      if (affinity_counts[{it->first, it->second}] <= 0)
        pods_exist = false;
    }
    if (!pods_exist) {
      // The first pod of a group with affinity to itself may go anywhere that has the
      // topology labels, as long as no other pod matches yet (kube-scheduler's rule).
      bool any_count = false;
      for (const auto& [tp, n] : affinity_counts)
        any_count = any_count || n > 0;
      const bool self_match = std::all_of(affinity.begin(), affinity.end(), [&](auto* term) {
        return TermMatchesPod(*term, pod, pod);
      });
      if (any_count || !self_match)
        return kReasonPodAffinity;
    }
  }
  for (const rapidjson::Value* term : anti) {
    auto it = node_labels.find(Str(Member(term, "topologyKey")));
    if (it != node_labels.end() && anti_counts[{it->first, it->second}] > 0) {
      return kReasonPodAntiAffinity;
    }
  }
  return "";
}

// Requested resources and pod count per node name, from bound pods.
struct NodeUsage {
  ResourceList requested;
  int64_t pods = 0;
};

NodeUsage UsageOn(const std::string& node_name, const ClusterView& cluster,
                  const rapidjson::Value& excluding) {
  NodeUsage usage;
  const std::string self =
      GetString(excluding, "metadata.namespace") + "/" + GetString(excluding, "metadata.name");
  for (const rapidjson::Value* p : cluster.pods) {
    if (GetString(*p, "spec.nodeName") != node_name || IsFinished(*p))
      continue;
    if (GetString(*p, "metadata.namespace") + "/" + GetString(*p, "metadata.name") == self) {
      continue;
    }
    ++usage.pods;
    Result<ResourceList> req = PodRequests(*p);
    if (!req.ok())
      continue;
    for (const auto& [name, amount] : *req)
      usage.requested[name] += amount;
  }
  return usage;
}

std::vector<std::string> ResourceReasons(const ResourceList& request,
                                         const ResourceList& allocatable, const NodeUsage& usage) {
  std::vector<std::string> reasons;
  auto amount = [](const ResourceList& l, const std::string& k) -> int64_t {
    auto it = l.find(k);
    return it == l.end() ? 0 : it->second;
  };
  const int64_t max_pods = allocatable.count("pods") != 0 ? amount(allocatable, "pods") / 1000
                                                          : 110;  // kubelet's default
  if (usage.pods + 1 > max_pods)
    reasons.emplace_back(kReasonTooManyPods);
  for (const auto& [name, want] : request) {
    if (want <= 0 || name == "pods")
      continue;
    if (want > amount(allocatable, name) - amount(usage.requested, name)) {
      reasons.push_back("Insufficient " + name);
    }
  }
  return reasons;
}

}  // namespace

Result<ResourceList> PodRequests(const rapidjson::Value& pod) {
  auto container_requests = [](const rapidjson::Value& c) -> Result<ResourceList> {
    ResourceList out;
    const rapidjson::Value* res = Member(&c, "resources");
    for (const char* kind : {"limits", "requests"}) {  // requests override limits
      const rapidjson::Value* list = Member(res, kind);
      if (list == nullptr || !list->IsObject())
        continue;
      for (const auto& m : list->GetObject()) {
        std::string text;
        if (m.value.IsString()) {
          text = m.value.GetString();
        } else if (m.value.IsNumber()) {
          text = fmt::format("{}", m.value.GetDouble());
        } else {
          return Status::InvalidArgument(
              fmt::format("container \"{}\" resources.{}.{} is not a quantity string",
                          Str(Member(&c, "name")), kind, m.name.GetString()));
        }
        Result<int64_t> q = ParseQuantityMilli(text);
        if (!q.ok()) {
          return q.status().WithContext(fmt::format("container \"{}\" resources.{}.{}",
                                                    Str(Member(&c, "name")), kind,
                                                    m.name.GetString()));
        }
        out[m.name.GetString()] = *q;
      }
    }
    return out;
  };
  ResourceList total;
  const rapidjson::Value* spec = Find(pod, "spec");
  if (const rapidjson::Value* list = Array(spec, "containers")) {
    for (const auto& c : list->GetArray()) {
      Result<ResourceList> r = container_requests(c);
      if (!r.ok())
        return r.status();
      for (const auto& [k, v] : *r)
        total[k] += v;
    }
  }
  if (const rapidjson::Value* list = Array(spec, "initContainers")) {
    for (const auto& c : list->GetArray()) {
      Result<ResourceList> r = container_requests(c);
      if (!r.ok())
        return r.status();
      for (const auto& [k, v] : *r)
        total[k] = std::max(total[k], v);
    }
  }
  if (const rapidjson::Value* overhead = Member(spec, "overhead");
      overhead != nullptr && overhead->IsObject()) {
    for (const auto& m : overhead->GetObject()) {
      if (!m.value.IsString())
        continue;
      Result<int64_t> q = ParseQuantityMilli(m.value.GetString());
      if (!q.ok())
        return q.status().WithContext("spec.overhead");
      total[m.name.GetString()] += *q;
    }
  }
  return total;
}

std::vector<std::string> FilterNode(const rapidjson::Value& pod, const rapidjson::Value& node,
                                    const ClusterView& cluster) {
  const Labels node_labels = ObjectLabels(node);

  // NodeUnschedulable: a cordoned node, unless the pod tolerates its taint.
  const rapidjson::Value* unsched = Find(node, "spec.unschedulable");
  if (unsched != nullptr && unsched->IsBool() && unsched->GetBool() &&
      !PodTolerates(pod, Taint{kUnschedulableTaintKey, "", "NoSchedule"})) {
    return {kReasonUnschedulable};
  }

  // TaintToleration: the first NoSchedule/NoExecute taint the pod does not tolerate.
  for (const Taint& taint : EffectiveTaints(node)) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute")
      continue;
    if (!PodTolerates(pod, taint)) {
      return {fmt::format("node(s) had untolerated taint {{{}: {}}}", taint.key, taint.value)};
    }
  }

  // NodeAffinity: nodeSelector and required node affinity (terms are ORed).
  for (const auto& [k, v] : ReadLabels(Find(pod, "spec.nodeSelector"))) {
    auto it = node_labels.find(k);
    if (it == node_labels.end() || it->second != v)
      return {kReasonNodeAffinity};
  }
  const rapidjson::Value* required =
      Member(Member(Member(Find(pod, "spec"), "affinity"), "nodeAffinity"),
             "requiredDuringSchedulingIgnoredDuringExecution");
  if (required != nullptr && required->IsObject()) {
    const rapidjson::Value* terms = Array(required, "nodeSelectorTerms");
    bool any = false;
    if (terms != nullptr) {
      for (const auto& term : terms->GetArray()) {
        if (MatchNodeSelectorTerm(term, node, node_labels)) {
          any = true;
          break;
        }
      }
    }
    if (!any)
      return {kReasonNodeAffinity};
  }

  // NodeResourcesFit.
  Result<ResourceList> request = PodRequests(pod);
  if (request.ok()) {
    std::vector<std::string> reasons = ResourceReasons(
        *request, NodeAllocatable(node), UsageOn(GetString(node, "metadata.name"), cluster, pod));
    if (!reasons.empty())
      return reasons;
  }

  // InterPodAffinity.
  std::string reason = InterPodAffinityReason(pod, node_labels, cluster);
  if (!reason.empty())
    return {reason};
  return {};
}

std::string FitErrorMessage(size_t node_count,
                            const std::vector<std::vector<std::string>>& reasons_per_node) {
  std::map<std::string, int> histogram;
  for (const auto& reasons : reasons_per_node) {
    for (const std::string& r : reasons)
      ++histogram[r];
  }
  std::vector<std::string> parts;
  for (const auto& [reason, count] : histogram)
    parts.push_back(fmt::format("{} {}", count, reason));
  std::sort(parts.begin(), parts.end());
  std::string message = fmt::format("0/{} nodes are available:", node_count);
  if (!parts.empty())
    message += fmt::format(" {}.", fmt::join(parts, ", "));
  return message;
}

ScheduleDecision Schedule(const rapidjson::Value& pod, const ClusterView& cluster) {
  ScheduleDecision decision;
  std::vector<std::vector<std::string>> failures;
  Result<ResourceList> request = PodRequests(pod);
  const ResourceList want = request.ok() ? *request : ResourceList{};
  double best_score = -1;
  std::string best_name;
  for (const rapidjson::Value* node : cluster.nodes) {
    std::vector<std::string> reasons = FilterNode(pod, *node, cluster);
    const std::string name = GetString(*node, "metadata.name");
    if (!reasons.empty()) {
      failures.push_back(std::move(reasons));
      continue;
    }
    // LeastAllocated over cpu and memory.
    const ResourceList alloc = NodeAllocatable(*node);
    const NodeUsage usage = UsageOn(name, cluster, pod);
    double score = 0;
    for (const char* r : {"cpu", "memory"}) {
      auto a = alloc.find(r);
      if (a == alloc.end() || a->second <= 0)
        continue;
      auto u = usage.requested.find(r);
      auto w = want.find(r);
      const double used = (u == usage.requested.end() ? 0.0 : static_cast<double>(u->second)) +
                          (w == want.end() ? 0.0 : static_cast<double>(w->second));
      score += (static_cast<double>(a->second) - used) / static_cast<double>(a->second) / 2;
    }
    if (score > best_score || (score == best_score && name < best_name)) {
      best_score = score;
      best_name = name;
    }
  }
  if (best_score >= 0) {
    decision.node = best_name;
  } else {
    decision.message = FitErrorMessage(cluster.nodes.size(), failures);
  }
  return decision;
}

bool NeedsScheduling(const rapidjson::Value& pod, const std::string& scheduler_name) {
  if (!GetString(pod, "spec.nodeName").empty())
    return false;
  if (Find(pod, "metadata.deletionTimestamp") != nullptr &&
      !Find(pod, "metadata.deletionTimestamp")->IsNull()) {
    return false;
  }
  if (IsFinished(pod))
    return false;
  const std::string name = GetString(pod, "spec.schedulerName");
  return name.empty() || name == scheduler_name;
}

// ---- The loop ---------------------------------------------------------------------------

Scheduler::Scheduler(Store& store, k8sbridge::Logger& log, Options options)
    : store_(store), log_(log), options_(std::move(options)) {}

Scheduler::~Scheduler() {
  Stop();
}

void Scheduler::Start() {
  if (thread_.joinable())
    return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Scheduler::Stop() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

void Scheduler::Loop() {
  std::unique_ptr<Watcher> watcher;
  while (!stop_) {
    RunOnce();
    // Sleep until pods or nodes change (or the resync interval passes).
    WaitForPodOrNodeChange(store_, watcher, std::chrono::steady_clock::now() + options_.resync,
                           stop_);
  }
}

int Scheduler::RunOnce() {
  ListResult nodes = store_.List("nodes", "");
  ListResult pods = store_.List("pods", "");
  ClusterView cluster;
  for (const ObjectPtr& n : nodes.items)
    cluster.nodes.push_back(n.get());
  std::vector<const rapidjson::Value*> pending;
  for (const ObjectPtr& p : pods.items) {
    if (!GetString(*p, "spec.nodeName").empty() && !IsFinished(*p)) {
      cluster.pods.push_back(p.get());
    } else if (NeedsScheduling(*p, options_.scheduler_name)) {
      pending.push_back(p.get());
    }
  }
  std::stable_sort(pending.begin(), pending.end(), [](const auto* a, const auto* b) {
    return std::make_tuple(GetString(*a, "metadata.creationTimestamp"),
                           GetString(*a, "metadata.namespace"), GetString(*a, "metadata.name")) <
           std::make_tuple(GetString(*b, "metadata.creationTimestamp"),
                           GetString(*b, "metadata.namespace"), GetString(*b, "metadata.name"));
  });
  int bound = 0;
  std::vector<ObjectPtr> keep_alive;  // pods bound in this pass join the cluster view
  for (const rapidjson::Value* pod : pending) {
    const rapidjson::Value* gates = Find(*pod, "spec.schedulingGates");
    if (gates != nullptr && gates->IsArray() && !gates->Empty()) {
      MarkSchedulingGated(*pod);
      continue;
    }
    ScheduleDecision decision = Schedule(*pod, cluster);
    const std::string ns = GetString(*pod, "metadata.namespace");
    const std::string name = GetString(*pod, "metadata.name");
    if (!decision.node) {
      MarkUnschedulable(*pod, decision.message);
      continue;
    }
    Result<ObjectPtr> result = store_.BindPod(ns, name, *decision.node);
    if (!result.ok()) {
      log_.Debug("scheduler: binding {}/{} to {}: {}", ns, name, *decision.node,
                 result.status().ToString());
      continue;
    }
    ++bound;
    log_.Info("scheduler: bound {}/{} to {}", ns, name, *decision.node);
    RecordEvent(**result, "Normal", "Scheduled",
                fmt::format("Successfully assigned {}/{} to {}", ns, name, *decision.node));
    keep_alive.push_back(*result);
    cluster.pods.push_back(result->get());
  }
  return bound;
}

void Scheduler::MarkUnschedulable(const rapidjson::Value& pod, const std::string& message) {
  const std::string ns = GetString(pod, "metadata.namespace");
  const std::string name = GetString(pod, "metadata.name");
  bool changed = true;
  if (const rapidjson::Value* conds = Find(pod, "status.conditions");
      conds != nullptr && conds->IsArray()) {
    for (const auto& c : conds->GetArray()) {
      if (Str(Member(&c, "type")) == "PodScheduled" && Str(Member(&c, "status")) == "False" &&
          Str(Member(&c, "reason")) == "Unschedulable" && Str(Member(&c, "message")) == message) {
        changed = false;
      }
    }
  }
  if (!changed)
    return;
  const std::string uid = GetString(pod, "metadata.uid");
  const std::string now = store_.NowTimestamp();
  Result<ObjectPtr> r = store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
    if (GetString(doc, "metadata.uid") != uid || !GetString(doc, "spec.nodeName").empty()) {
      return Status::Conflict("pod changed");
    }
    SetCondition(doc, "PodScheduled", "False", "Unschedulable", message, now);
    return Status::Ok();
  });
  if (!r.ok())
    return;
  log_.Info("scheduler: {}/{} is unschedulable: {}", ns, name, message);
  RecordEvent(pod, "Warning", "FailedScheduling", message);
}

void Scheduler::MarkSchedulingGated(const rapidjson::Value& pod) {
  const std::string ns = GetString(pod, "metadata.namespace");
  const std::string name = GetString(pod, "metadata.name");
  const std::string now = store_.NowTimestamp();
  (void)store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
    SetCondition(doc, "PodScheduled", "False", "SchedulingGated",
                 "Scheduling is blocked due to non-empty scheduling gates", now);
    return Status::Ok();
  });
}

void Scheduler::RecordEvent(const rapidjson::Value& pod, const std::string& type,
                            const std::string& reason, const std::string& message) {
  RecordPodEvent(store_, GetString(pod, "metadata.namespace"), GetString(pod, "metadata.name"),
                 GetString(pod, "metadata.uid"), type, reason, message, options_.scheduler_name);
}

void RecordPodEvent(Store& store, const std::string& ns, const std::string& name,
                    const std::string& uid, const std::string& type, const std::string& reason,
                    const std::string& message, const std::string& component,
                    const std::string& host, const std::string& field_path) {
  rapidjson::Document ev(rapidjson::kObjectType);
  auto& a = ev.GetAllocator();
  auto s = [&](const std::string& v) { return rapidjson::Value(v.c_str(), a); };
  const std::string now = store.NowTimestamp();
  ev.AddMember("apiVersion", "v1", a);
  ev.AddMember("kind", "Event", a);
  rapidjson::Value meta(rapidjson::kObjectType);
  meta.AddMember("generateName", s(name + "."), a);
  meta.AddMember("namespace", s(ns), a);
  ev.AddMember("metadata", meta, a);
  rapidjson::Value involved(rapidjson::kObjectType);
  involved.AddMember("apiVersion", "v1", a);
  involved.AddMember("kind", "Pod", a);
  involved.AddMember("name", s(name), a);
  involved.AddMember("namespace", s(ns), a);
  involved.AddMember("uid", s(uid), a);
  if (!field_path.empty())
    involved.AddMember("fieldPath", s(field_path), a);
  ev.AddMember("involvedObject", involved, a);
  ev.AddMember("reason", s(reason), a);
  ev.AddMember("message", s(message), a);
  ev.AddMember("type", s(type), a);
  rapidjson::Value source(rapidjson::kObjectType);
  source.AddMember("component", s(component), a);
  if (!host.empty())
    source.AddMember("host", s(host), a);
  ev.AddMember("source", source, a);
  ev.AddMember("reportingComponent", s(component), a);
  if (!host.empty())
    ev.AddMember("reportingInstance", s(host), a);
  ev.AddMember("firstTimestamp", s(now), a);
  ev.AddMember("lastTimestamp", s(now), a);
  ev.AddMember("count", 1, a);
  (void)store.Create("events", ns, std::move(ev));  // best effort, as in Kubernetes
}

}  // namespace kubesim
