#include "disruption.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "selector.h"
#include "taints.h"

namespace kubesim {

namespace {

// How long an eviction's entry in disruptedPods keeps the pod out of currentHealthy
// when the pod is not deleted (the controller's DeletionTimeout).
constexpr auto kDeletionTimeout = std::chrono::minutes(2);

// An IntOrString of minAvailable/maxUnavailable.
struct IntOrPercent {
  bool percent = false;
  int64_t value = 0;
};

Result<std::optional<IntOrPercent>> ReadIntOrPercent(const rapidjson::Value& pdb,
                                                     const char* field) {
  const rapidjson::Value* v = Find(pdb, (std::string("spec.") + field).c_str());
  if (v == nullptr || v->IsNull())
    return std::optional<IntOrPercent>();
  if (v->IsInt64()) {
    if (v->GetInt64() < 0) {
      return Status::InvalidArgument(fmt::format(
          "spec.{}: Invalid value: {}: must be greater than or equal to 0", field, v->GetInt64()));
    }
    return std::optional<IntOrPercent>(IntOrPercent{false, v->GetInt64()});
  }
  const std::string text = v->IsString() ? v->GetString() : "";
  char* end = nullptr;
  const long long n = text.empty() ? -1 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || std::string(end) != "%") {
    return Status::InvalidArgument(fmt::format(
        "spec.{}: Invalid value: \"{}\": a valid percent string must be a numeric string "
        "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
        "'[0-9]+%')",
        field, text));
  }
  if (n < 0 || n > 100) {
    return Status::InvalidArgument(
        fmt::format("spec.{}: Invalid value: \"{}\": must not be greater than 100%", field, text));
  }
  return std::optional<IntOrPercent>(IntOrPercent{true, n});
}

// intstr.GetScaledValueFromIntOrPercent with roundUp, as the controller uses it.
int64_t Scaled(const IntOrPercent& v, int64_t total) {
  if (!v.percent)
    return v.value;
  return (v.value * total + 99) / 100;
}

// The pods the budget's selector picks in its namespace; nullopt for a bad selector.
std::optional<std::vector<ObjectPtr>> SelectedPods(Store& store, const rapidjson::Value& pdb,
                                                   bool empty_selects_nothing) {
  const std::optional<std::string> text = LabelSelectorText(Find(pdb, "spec.selector"));
  if (!text || (empty_selects_nothing && text->empty()))
    return std::vector<ObjectPtr>();
  Result<LabelSelector> selector = LabelSelector::Parse(*text);
  if (!selector.ok())
    return std::nullopt;
  return store
      .List("pods", GetString(pdb, "metadata.namespace"),
            [&](const rapidjson::Value& pod) { return selector->Matches(pod); })
      .items;
}

std::string ControllerOf(const rapidjson::Value& pod) {
  const rapidjson::Value* refs = Find(pod, "metadata.ownerReferences");
  if (refs == nullptr || !refs->IsArray())
    return "";
  for (const auto& r : refs->GetArray()) {
    const rapidjson::Value* controller = Find(r, "controller");
    if (controller != nullptr && controller->IsBool() && controller->GetBool())
      return GetString(r, "uid") + "/" + GetString(r, "kind") + "/" + GetString(r, "name");
  }
  return "";
}

// getExpectedScale: the sum of the scales of the pods' controllers. kubesim runs no
// workload controllers, so a controller's scale is the number of its pods here; a pod
// without a controller is the controller's error.
Result<int64_t> ExpectedScale(const std::vector<ObjectPtr>& pods) {
  for (const ObjectPtr& pod : pods) {
    if (ControllerOf(*pod).empty()) {
      return Status::InvalidArgument(
          fmt::format("found no controller ref for pod \"{}\"", GetString(*pod, "metadata.name")));
    }
  }
  return static_cast<int64_t>(pods.size());
}

struct BudgetStatus {
  int64_t expected = 0, desired = 0, current = 0, allowed = 0;
  std::map<std::string, std::string> disrupted;  // pod name -> time
};

Result<BudgetStatus> ComputeStatus(Store& store, const rapidjson::Value& pdb,
                                   const std::vector<ObjectPtr>& pods) {
  Result<std::optional<IntOrPercent>> min = ReadIntOrPercent(pdb, "minAvailable");
  Result<std::optional<IntOrPercent>> max = ReadIntOrPercent(pdb, "maxUnavailable");
  if (!min.ok())
    return min.status();
  if (!max.ok())
    return max.status();
  BudgetStatus s;
  if (*max) {
    Result<int64_t> scale = ExpectedScale(pods);
    if (!scale.ok())
      return scale.status();
    s.expected = *scale;
    s.desired = std::max<int64_t>(0, s.expected - Scaled(**max, s.expected));
  } else if (*min && !(*min)->percent) {
    s.expected = static_cast<int64_t>(pods.size());
    s.desired = (*min)->value;
  } else if (*min) {
    Result<int64_t> scale = ExpectedScale(pods);
    if (!scale.ok())
      return scale.status();
    s.expected = *scale;
    s.desired = Scaled(**min, s.expected);
  }
  const auto now = store.clock().WallNow();
  const rapidjson::Value* recorded = Find(pdb, "status.disruptedPods");
  for (const ObjectPtr& pod : pods) {
    const std::string name = GetString(*pod, "metadata.name");
    if (Find(*pod, "metadata.deletionTimestamp") != nullptr)
      continue;
    const rapidjson::Value* when =
        recorded != nullptr && recorded->IsObject() ? Find(*recorded, name.c_str()) : nullptr;
    if (when != nullptr && when->IsString()) {
      std::tm tm{};
      if (strptime(when->GetString(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr &&
          std::chrono::system_clock::from_time_t(timegm(&tm)) + kDeletionTimeout > now) {
        s.disrupted[name] = when->GetString();
        continue;
      }
    }
    if (PodIsReady(*pod))
      ++s.current;
  }
  s.allowed = s.expected <= 0 ? 0 : std::max<int64_t>(0, s.current - s.desired);
  return s;
}

rapidjson::Value Int(int64_t v) {
  return rapidjson::Value(v);
}

// Sets the DisruptionAllowed condition (a metav1.Condition) of a budget status.
void SetAllowedCondition(rapidjson::Document& pdb, bool allowed, const std::string& reason,
                         const std::string& message, const std::string& now) {
  auto& a = pdb.GetAllocator();
  const rapidjson::Value* generation = Find(pdb, "status.observedGeneration");
  rapidjson::Value c(rapidjson::kObjectType);
  c.AddMember("type", "DisruptionAllowed", a);
  c.AddMember("status", rapidjson::StringRef(allowed ? "True" : "False"), a);
  c.AddMember("observedGeneration",
              generation != nullptr && generation->IsInt64() ? generation->GetInt64() : 0, a);
  std::string transition = now;
  const rapidjson::Value* old = Find(pdb, "status.conditions");
  if (old != nullptr && old->IsArray()) {
    for (const auto& o : old->GetArray()) {
      if (GetString(o, "type") == "DisruptionAllowed" &&
          GetString(o, "status") == (allowed ? "True" : "False"))
        transition = GetString(o, "lastTransitionTime");
    }
  }
  c.AddMember("lastTransitionTime", rapidjson::Value(transition.c_str(), a), a);
  c.AddMember("reason", rapidjson::Value(reason.c_str(), a), a);
  c.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  rapidjson::Value conditions(rapidjson::kArrayType);
  conditions.PushBack(c, a);
  SetMember(pdb, "status.conditions", std::move(conditions));
}

void WriteStatus(rapidjson::Document& pdb, const BudgetStatus& s, const std::string& now) {
  auto& a = pdb.GetAllocator();
  SetMember(pdb, "status.currentHealthy", Int(s.current));
  SetMember(pdb, "status.desiredHealthy", Int(s.desired));
  SetMember(pdb, "status.disruptionsAllowed", Int(s.allowed));
  SetMember(pdb, "status.expectedPods", Int(s.expected));
  const rapidjson::Value* generation = Find(pdb, "metadata.generation");
  SetMember(pdb, "status.observedGeneration",
            Int(generation != nullptr && generation->IsInt64() ? generation->GetInt64() : 1));
  rapidjson::Value disrupted(rapidjson::kObjectType);
  for (const auto& [name, when] : s.disrupted)
    disrupted.AddMember(rapidjson::Value(name.c_str(), a), rapidjson::Value(when.c_str(), a), a);
  if (s.disrupted.empty())
    pdb["status"].RemoveMember("disruptedPods");
  else
    SetMember(pdb, "status.disruptedPods", std::move(disrupted));
  SetAllowedCondition(pdb, s.allowed > 0, s.allowed > 0 ? "SufficientPods" : "InsufficientPods", "",
                      now);
}

// failSafe: no disruptions allowed, the error in the condition; observedGeneration
// stays, so evictions answer that the budget is still being processed.
void WriteFailSafe(rapidjson::Document& pdb, const Status& error, const std::string& now) {
  SetMember(pdb, "status.disruptionsAllowed", Int(0));
  for (const char* field : {"currentHealthy", "desiredHealthy", "expectedPods"}) {
    if (Find(pdb, (std::string("status.") + field).c_str()) == nullptr)
      SetMember(pdb, (std::string("status.") + field).c_str(), Int(0));
  }
  SetAllowedCondition(pdb, false, "SyncFailed", error.message(), now);
}

}  // namespace

Status ValidatePodDisruptionBudget(const rapidjson::Value& pdb) {
  Result<std::optional<IntOrPercent>> min = ReadIntOrPercent(pdb, "minAvailable");
  if (!min.ok())
    return min.status();
  Result<std::optional<IntOrPercent>> max = ReadIntOrPercent(pdb, "maxUnavailable");
  if (!max.ok())
    return max.status();
  if (*min && *max) {
    return Status::InvalidArgument(
        "spec: Invalid value: \"policy.PodDisruptionBudgetSpec\": minAvailable and "
        "maxUnavailable cannot be both set");
  }
  return Status::Ok();
}

void UpdateDisruptionBudgets(Store& store) {
  for (const ObjectPtr& pdb : store.List("poddisruptionbudgets", "").items) {
    const std::string ns = GetString(*pdb, "metadata.namespace");
    const std::string name = GetString(*pdb, "metadata.name");
    const std::string rv = GetString(*pdb, "metadata.resourceVersion");
    std::optional<std::vector<ObjectPtr>> pods = SelectedPods(store, *pdb, false);
    Result<BudgetStatus> status = pods ? ComputeStatus(store, *pdb, *pods)
                                       : Result<BudgetStatus>(Status::InvalidArgument(
                                             "the selector is not a valid label selector"));
    const std::string now = store.NowTimestamp();
    (void)store.Mutate(
        "poddisruptionbudgets", ns, name,
        [&](rapidjson::Document& doc) {
          if (status.ok())
            WriteStatus(doc, *status, now);
          else
            WriteFailSafe(doc, status.status(), now);
          return Status::Ok();
        },
        rv);  // a conflict: the next pass sees the new version
  }
}

namespace {

ApiResponse TooManyRequests(const std::string& cause, int retry_after_seconds) {
  ApiResponse r = StatusResponse(
      429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.");
  auto doc = ParseJson(r.body);
  if (!doc.ok())
    return r;
  auto& a = (*doc)->GetAllocator();
  rapidjson::Value causes(rapidjson::kArrayType);
  rapidjson::Value c(rapidjson::kObjectType);
  c.AddMember("reason", "DisruptionBudget", a);
  c.AddMember("message", rapidjson::Value(cause.c_str(), a), a);
  causes.PushBack(c, a);
  SetMember(**doc, "details.causes", std::move(causes));
  if (retry_after_seconds > 0) {
    SetMember(**doc, "details.retryAfterSeconds", rapidjson::Value(retry_after_seconds));
    r.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds));
  }
  r.body = ToJson(**doc);
  return r;
}

int64_t StatusInt(const rapidjson::Value& pdb, const char* field) {
  const rapidjson::Value* v = Find(pdb, (std::string("status.") + field).c_str());
  return v != nullptr && v->IsInt64() ? v->GetInt64() : 0;
}

// checkAndDecrement: the budget must have caught up with its spec and allow one
// more disruption; the eviction takes it (not on a dry run).
std::optional<ApiResponse> CheckAndDecrement(Store& store, const ObjectPtr& pdb,
                                             const std::string& pod_name, bool dry_run) {
  const std::string name = GetString(*pdb, "metadata.name");
  const rapidjson::Value* generation = Find(*pdb, "metadata.generation");
  const int64_t want = generation != nullptr && generation->IsInt64() ? generation->GetInt64() : 1;
  if (StatusInt(*pdb, "observedGeneration") < want) {
    return TooManyRequests(
        fmt::format("The disruption budget {} is still being processed by the server.", name), 10);
  }
  if (StatusInt(*pdb, "disruptionsAllowed") == 0) {
    return TooManyRequests(
        fmt::format("The disruption budget {} needs {} healthy pods and has {} "
                    "currently",
                    name, StatusInt(*pdb, "desiredHealthy"), StatusInt(*pdb, "currentHealthy")),
        0);
  }
  if (dry_run)
    return std::nullopt;
  const std::string now = store.NowTimestamp();
  Result<ObjectPtr> r = store.Mutate(
      "poddisruptionbudgets", GetString(*pdb, "metadata.namespace"), name,
      [&](rapidjson::Document& doc) {
        const int64_t left = StatusInt(doc, "disruptionsAllowed") - 1;
        SetMember(doc, "status.disruptionsAllowed", Int(left));
        if (left == 0)
          SetAllowedCondition(doc, false, "InsufficientPods", "", now);
        if (Find(doc, "status.disruptedPods") == nullptr)
          SetMember(doc, "status.disruptedPods", rapidjson::Value(rapidjson::kObjectType));
        rapidjson::Value& disrupted = doc["status"]["disruptedPods"];
        disrupted.RemoveMember(pod_name.c_str());
        disrupted.AddMember(rapidjson::Value(pod_name.c_str(), doc.GetAllocator()),
                            rapidjson::Value(now.c_str(), doc.GetAllocator()), doc.GetAllocator());
        return Status::Ok();
      },
      GetString(*pdb, "metadata.resourceVersion"));
  if (!r.ok()) {
    return StatusResponse(
        409, "Conflict",
        fmt::format("Operation cannot be fulfilled on poddisruptionbudgets.policy "
                    "\"{}\": the object has been modified; please apply your "
                    "changes to the latest version and try again",
                    name));
  }
  return std::nullopt;
}

bool CanIgnoreBudgets(const rapidjson::Value& pod) {
  const std::string phase = GetString(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed" || phase == "Pending" ||
         Find(pod, "metadata.deletionTimestamp") != nullptr;
}

// The budget check of an eviction: nullopt to go on with the delete.
std::optional<ApiResponse> CheckBudgets(Store& store, const rapidjson::Value& pod, bool dry_run) {
  std::vector<ObjectPtr> matching;
  for (const ObjectPtr& pdb :
       store.List("poddisruptionbudgets", GetString(pod, "metadata.namespace")).items) {
    std::optional<std::vector<ObjectPtr>> pods = SelectedPods(store, *pdb, true);
    if (!pods)
      continue;
    const std::string uid = GetString(pod, "metadata.uid");
    if (std::any_of(pods->begin(), pods->end(),
                    [&](const ObjectPtr& p) { return GetString(*p, "metadata.uid") == uid; }))
      matching.push_back(pdb);
  }
  if (matching.empty())
    return std::nullopt;
  if (matching.size() > 1) {
    return StatusResponse(500, "",
                          "This pod has more than one PodDisruptionBudget, which the eviction "
                          "subresource does not support.");
  }
  const rapidjson::Value& pdb = *matching.front();
  const bool ready = PodIsReady(pod);
  if (!ready && GetString(pdb, "spec.unhealthyPodEvictionPolicy") == "AlwaysAllow")
    return std::nullopt;
  const int64_t desired = StatusInt(pdb, "desiredHealthy");
  if (!ready && StatusInt(pdb, "currentHealthy") >= desired && desired > 0)
    return std::nullopt;  // an unready pod does not count towards the budget
  return CheckAndDecrement(store, matching.front(), GetString(pod, "metadata.name"), dry_run);
}

}  // namespace

ApiResponse EvictPod(Store& store, const Route& route, const rapidjson::Value& body, bool dry_run) {
  if (GetString(body, "metadata.name") != route.name) {
    return StatusResponse(400, "BadRequest", "name in URL does not match name in Eviction object");
  }
  Result<ObjectPtr> pod = store.Get("pods", route.ns, route.name);
  if (!pod.ok()) {
    return StatusResponse(404, "NotFound", pod.status().message(), "pods", route.name);
  }
  DeleteOptions options;
  const rapidjson::Value* grace = Find(body, "deleteOptions.gracePeriodSeconds");
  if (grace != nullptr && grace->IsInt64())
    options.grace_period_seconds = grace->GetInt64();
  std::string uid = GetString(body, "deleteOptions.preconditions.uid");
  if (!uid.empty())
    options.precondition_uid = uid;
  std::string rv = GetString(body, "deleteOptions.preconditions.resourceVersion");
  if (!rv.empty())
    options.precondition_resource_version = rv;
  if (!CanIgnoreBudgets(**pod)) {
    if (std::optional<ApiResponse> refused = CheckBudgets(store, **pod, dry_run))
      return *refused;
  }
  if (dry_run)
    return StatusResponse(201, "", "", "", "");
  const std::string now = store.NowTimestamp();
  auto marked = store.Mutate("pods", route.ns, route.name, [&](rapidjson::Document& doc) {
    SetCondition(doc, "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting",
                 now);
    return Status::Ok();
  });
  if (!marked.ok())
    return StatusResponse(404, "NotFound", marked.status().message(), "pods", route.name);
  if (options.precondition_resource_version)
    options.precondition_resource_version = GetString(**marked, "metadata.resourceVersion");
  Result<DeleteResult> deleted = store.Delete("pods", route.ns, route.name, options);
  if (!deleted.ok()) {
    const bool conflict = deleted.status().code() == Status::Code::kConflict;
    return StatusResponse(conflict ? 409 : 404, conflict ? "Conflict" : "NotFound",
                          deleted.status().message(), "pods", route.name);
  }
  return StatusResponse(201, "", "", "", "");
}

}  // namespace kubesim
