// The Job controller, after pkg/controller/job (job_controller.go: syncJob,
// trackJobStatusAndRemoveFinalizers, manageJob, getNewFinishedPods; backoff_utils.go) as
// 1.31+ writes the conditions (SuccessCriteriaMet then Complete, FailureTarget then
// Failed), and the TTL-after-finished controller (pkg/controller/ttlafterfinished).
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "finalizers.h"
#include "workload_controllers.h"
#include "workloads.h"

namespace kubesim {

namespace {

using Alloc = rapidjson::Document::AllocatorType;

void RemovePodFinalizer(Store& store, const rapidjson::Value& pod) {
  RemoveFinalizer(store, "pods", GetString(pod, "metadata.namespace"),
                  GetString(pod, "metadata.name"), kJobTrackingFinalizer);
}

std::string ConditionTime(const rapidjson::Value& job, const char* type) {
  const rapidjson::Value* conditions = Find(job, "status.conditions");
  if (conditions != nullptr && conditions->IsArray()) {
    for (const auto& c : conditions->GetArray()) {
      if (GetString(c, "type") == type)
        return GetString(c, "lastTransitionTime");
    }
  }
  return "";
}

void AddCondition(rapidjson::Document& status, const char* type, const char* reason,
                  const char* message, const std::string& now) {
  auto& a = status.GetAllocator();
  if (!status.HasMember("conditions"))
    status.AddMember("conditions", rapidjson::Value(rapidjson::kArrayType), a);
  for (const auto& c : status["conditions"].GetArray()) {
    if (GetString(c, "type") == type)
      return;
  }
  rapidjson::Value c(rapidjson::kObjectType);
  c.AddMember("type", rapidjson::StringRef(type), a);
  c.AddMember("status", "True", a);
  c.AddMember("lastProbeTime", rapidjson::Value(now.c_str(), a), a);
  c.AddMember("lastTransitionTime", rapidjson::Value(now.c_str(), a), a);
  c.AddMember("reason", rapidjson::StringRef(reason), a);
  c.AddMember("message", rapidjson::StringRef(message), a);
  status["conditions"].PushBack(c, a);
}

std::set<std::string> UidList(const rapidjson::Value& status, const char* path) {
  std::set<std::string> out;
  const rapidjson::Value* list = Find(status, path);
  if (list != nullptr && list->IsArray()) {
    for (const auto& v : list->GetArray())
      out.insert(v.IsString() ? v.GetString() : "");
  }
  return out;
}

void PutUidList(rapidjson::Document& status, const char* key, const std::set<std::string>& uids) {
  auto& a = status.GetAllocator();
  rapidjson::Value& uncounted = status["uncountedTerminatedPods"];
  uncounted.RemoveMember(key);
  if (uids.empty())
    return;
  rapidjson::Value list(rapidjson::kArrayType);
  for (const std::string& uid : uids)
    list.PushBack(rapidjson::Value(uid.c_str(), a), a);
  uncounted.AddMember(rapidjson::StringRef(key), list, a);
}

void SetInt(rapidjson::Document& status, const char* key, int64_t value) {
  status.RemoveMember(key);
  status.AddMember(rapidjson::StringRef(key), value, status.GetAllocator());
}

// trackJobStatusAndRemoveFinalizers: finished pods still carrying the finalizer go to
// uncountedTerminatedPods; those whose finalizer is gone move to the counters. Returns
// the pods whose finalizer may go now (after the status is written).
std::vector<ObjectPtr> TrackFinishedPods(const std::vector<ObjectPtr>& pods,
                                         rapidjson::Document& status) {
  std::set<std::string> succeeded = UidList(status, "uncountedTerminatedPods.succeeded");
  std::set<std::string> failed = UidList(status, "uncountedTerminatedPods.failed");
  std::map<std::string, ObjectPtr> by_uid;
  for (const ObjectPtr& pod : pods)
    by_uid[GetString(*pod, "metadata.uid")] = pod;
  auto move = [&](std::set<std::string>& uids, const char* counter) {
    for (auto it = uids.begin(); it != uids.end();) {
      auto pod = by_uid.find(*it);
      if (pod != by_uid.end() && HasFinalizer(*pod->second, kJobTrackingFinalizer)) {
        ++it;
        continue;
      }
      SetInt(status, counter, IntAt(status, counter, 0) + 1);
      it = uids.erase(it);
    }
  };
  move(succeeded, "succeeded");
  move(failed, "failed");
  std::vector<ObjectPtr> release;
  for (const ObjectPtr& pod : pods) {
    if (!HasFinalizer(*pod, kJobTrackingFinalizer))
      continue;
    const std::string uid = GetString(*pod, "metadata.uid");
    if (GetString(*pod, "status.phase") == "Succeeded")
      succeeded.insert(uid);
    else if (IsPodFinished(*pod) || IsPodTerminating(*pod))
      failed.insert(uid);
    else
      continue;
    release.push_back(pod);
  }
  PutUidList(status, "succeeded", succeeded);
  PutUidList(status, "failed", failed);
  return release;
}

std::optional<std::chrono::system_clock::time_point> ParseTime(const std::string& s) {
  std::tm tm{};
  if (s.empty() || strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr)
    return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// The TTL-after-finished controller: a finished Job with ttlSecondsAfterFinished goes
// (with Foreground propagation) that long after it finished.
void ExpireFinishedJob(Store& store, const rapidjson::Value& job) {
  const rapidjson::Value* ttl = Find(job, "spec.ttlSecondsAfterFinished");
  if (ttl == nullptr || !ttl->IsInt64())
    return;
  std::string finished = GetString(job, "status.completionTime");
  if (finished.empty())
    finished = ConditionTime(job, "Failed");
  auto at = ParseTime(finished);
  if (!at || store.clock().WallNow() < *at + std::chrono::seconds(ttl->GetInt64()))
    return;
  DeleteOptions options;
  options.propagation_policy = "Foreground";
  options.precondition_uid = GetString(job, "metadata.uid");
  (void)store.Delete("jobs", GetString(job, "metadata.namespace"), GetString(job, "metadata.name"),
                     options);
}

}  // namespace

void WorkloadControllers::JobPass() {
  for (const ObjectPtr& job : store_.List("jobs", "").items) {
    if (!IsPodTerminating(*job))
      SyncJob(*job);
  }
}

namespace {

struct JobPods {
  std::vector<ObjectPtr> active;
  int64_t ready = 0;
  int64_t terminating = 0;
};

JobPods ClassifyJobPods(const std::vector<ObjectPtr>& pods) {
  JobPods out;
  for (const ObjectPtr& pod : pods) {
    if (IsPodTerminating(*pod) && !IsPodFinished(*pod)) {
      ++out.terminating;
    } else if (!IsPodFinished(*pod) && !IsPodTerminating(*pod)) {
      out.active.push_back(pod);
      out.ready += IsPodReady(*pod) ? 1 : 0;
    }
  }
  return out;
}

int64_t Counted(const rapidjson::Value& status, const char* counter, const char* uncounted) {
  return IntAt(status, counter, 0) + static_cast<int64_t>(UidList(status, uncounted).size());
}

// The 1.31+ terminal conditions: FailureTarget / SuccessCriteriaMet as soon as the
// outcome is known, Failed / Complete once no pod is left running or uncounted. True
// when the Job's remaining pods must stop.
bool UpdateJobConditions(const rapidjson::Value& job, rapidjson::Document& status,
                         const JobPods& pods, const std::string& now) {
  const int64_t succeeded = Counted(status, "succeeded", "uncountedTerminatedPods.succeeded");
  const int64_t failed = Counted(status, "failed", "uncountedTerminatedPods.failed");
  const int64_t completions = IntAt(job, "spec.completions", -1);
  const bool settled = pods.active.empty() && pods.terminating == 0 &&
                       UidList(status, "uncountedTerminatedPods.succeeded").empty() &&
                       UidList(status, "uncountedTerminatedPods.failed").empty();
  if (failed > IntAt(job, "spec.backoffLimit", 6)) {
    const char* message = "Job has reached the specified backoff limit";
    AddCondition(status, "FailureTarget", "BackoffLimitExceeded", message, now);
    if (settled)
      AddCondition(status, "Failed", "BackoffLimitExceeded", message, now);
    return true;
  }
  if (completions >= 0 && succeeded >= completions) {
    const char* message = "Reached expected number of succeeded pods";
    AddCondition(status, "SuccessCriteriaMet", "CompletionsReached", message, now);
    if (settled) {
      AddCondition(status, "Complete", "CompletionsReached", message, now);
      if (!status.HasMember("completionTime"))
        status.AddMember("completionTime", rapidjson::Value(now.c_str(), status.GetAllocator()),
                         status.GetAllocator());
    }
    return true;
  }
  return false;
}

}  // namespace

// manageJob for NonIndexed Jobs: up to parallelism pods (no more than the completions
// still wanted), a failure's replacement only after the backoff.
void WorkloadControllers::ManageJob(const rapidjson::Value& job, const rapidjson::Value& status,
                                    size_t active) {
  const std::string uid = GetString(job, "metadata.uid");
  const std::string name = GetString(job, "metadata.name");
  const int64_t succeeded = Counted(status, "succeeded", "uncountedTerminatedPods.succeeded");
  const int64_t failed = Counted(status, "failed", "uncountedTerminatedPods.failed");
  int64_t want = IntAt(job, "spec.parallelism", 1);
  if (const int64_t completions = IntAt(job, "spec.completions", -1); completions >= 0)
    want = std::min(want, completions - succeeded);
  auto now = std::chrono::steady_clock::now();
  auto seen = job_last_failure_.emplace(uid + "/" + std::to_string(failed), now).first;
  if (failed > 0) {
    auto delay = options_.job_backoff_base * (1LL << std::min<int64_t>(failed - 1, 10));
    if (now < seen->second + std::min<std::chrono::milliseconds>(delay, std::chrono::minutes(6)))
      return;
  }
  const rapidjson::Value* pod_template = Find(job, "spec.template");
  for (int64_t i = static_cast<int64_t>(active); i < want && pod_template != nullptr; ++i) {
    auto pod = PodFromTemplate(*pod_template, job, "batch/v1", "Job", "", name + "-");
    auto& pa = pod->GetAllocator();
    rapidjson::Value finalizers(rapidjson::kArrayType);
    finalizers.PushBack(rapidjson::StringRef(kJobTrackingFinalizer), pa);
    (*pod)["metadata"].RemoveMember("finalizers");
    (*pod)["metadata"].AddMember("finalizers", finalizers, pa);
    if (Status s = CreateControllerPod(store_, options_.admission, std::move(pod)); !s.ok()) {
      log_.Warning("job {}/{}: {}", GetString(job, "metadata.namespace"), name, s.ToString());
      break;
    }
  }
}

void WorkloadControllers::SyncJob(const rapidjson::Value& job) {
  const std::string ns = GetString(job, "metadata.namespace");
  const std::vector<ObjectPtr> pods = OwnedBy(store_, "pods", ns, GetString(job, "metadata.uid"));
  rapidjson::Document status(rapidjson::kObjectType);
  if (const rapidjson::Value* old = Find(job, "status"); old != nullptr && old->IsObject())
    status.CopyFrom(*old, status.GetAllocator());
  auto& a = status.GetAllocator();
  if (!status.HasMember("uncountedTerminatedPods"))
    status.AddMember("uncountedTerminatedPods", rapidjson::Value(rapidjson::kObjectType), a);
  const std::vector<ObjectPtr> release = TrackFinishedPods(pods, status);
  const bool finished = HasTrueCondition(job, "Complete") || HasTrueCondition(job, "Failed");
  const std::string now = store_.NowTimestamp();
  const rapidjson::Value* suspend = Find(job, "spec.suspend");
  const bool suspended = suspend != nullptr && suspend->IsBool() && suspend->GetBool();
  if (!status.HasMember("startTime") && !suspended)
    status.AddMember("startTime", rapidjson::Value(now.c_str(), a), a);
  const JobPods classified = ClassifyJobPods(pods);
  const bool stop_pods = finished || UpdateJobConditions(job, status, classified, now);
  SetInt(status, "active", static_cast<int64_t>(classified.active.size()));
  SetInt(status, "ready", classified.ready);
  SetInt(status, "terminating", classified.terminating);
  WriteStatus(store_, "jobs", job, status);
  for (const ObjectPtr& pod : release)  // after their counts are in the status
    RemovePodFinalizer(store_, *pod);
  if (finished) {
    ExpireFinishedJob(store_, job);
    return;
  }
  if (stop_pods || suspended) {
    for (const ObjectPtr& pod : classified.active)
      (void)store_.Delete("pods", ns, GetString(*pod, "metadata.name"));
    return;
  }
  ManageJob(job, status, classified.active.size());
}

}  // namespace kubesim
