#include "finalizers.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace kubesim {

namespace {

std::vector<std::string> Finalizers(const rapidjson::Value& object) {
  std::vector<std::string> names;
  const rapidjson::Value* list = Find(object, "metadata.finalizers");
  if (list == nullptr || !list->IsArray())
    return names;
  for (const auto& f : list->GetArray()) {
    if (f.IsString())
      names.emplace_back(f.GetString());
  }
  return names;
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

void SetFinalizers(rapidjson::Document& object, const std::vector<std::string>& names) {
  auto& a = object.GetAllocator();
  if (names.empty()) {
    if (object.HasMember("metadata") && object["metadata"].IsObject())
      object["metadata"].RemoveMember("finalizers");
    return;
  }
  rapidjson::Value list(rapidjson::kArrayType);
  for (const auto& n : names)
    list.PushBack(rapidjson::Value(n.c_str(), a), a);
  SetMember(object, "metadata.finalizers", std::move(list));
}

// shouldOrphanDependents / shouldDeleteDependents: the options first, then the
// finalizers the object already carries. No kubesim kind defaults to orphaning.
bool ShouldOrphan(const std::vector<std::string>& current, const DeleteOptions& options) {
  if (options.orphan_dependents)
    return *options.orphan_dependents;
  if (options.propagation_policy)
    return *options.propagation_policy == "Orphan";
  for (const auto& f : current) {
    if (f == kOrphanFinalizer)
      return true;
    if (f == kForegroundDeletionFinalizer)
      return false;
  }
  return false;
}

bool ShouldDeleteDependents(const std::vector<std::string>& current, const DeleteOptions& options) {
  if (options.orphan_dependents)
    return false;
  if (options.propagation_policy)
    return *options.propagation_policy == "Foreground";
  for (const auto& f : current) {
    if (f == kForegroundDeletionFinalizer)
      return true;
    if (f == kOrphanFinalizer)
      return false;
  }
  return false;
}

}  // namespace

Status ValidatePropagation(const DeleteOptions& options) {
  if (!options.propagation_policy)
    return Status::Ok();
  const std::string& policy = *options.propagation_policy;
  if (options.orphan_dependents) {
    return Status::InvalidArgument(fmt::format(
        "propagationPolicy: Invalid value: \"{}\": orphanDependents and deletionPropagation "
        "cannot be both set",
        policy));
  }
  if (policy != "Foreground" && policy != "Background" && policy != "Orphan") {
    return Status::InvalidArgument(fmt::format(
        "propagationPolicy: Unsupported value: \"{}\": supported values: \"Foreground\", "
        "\"Background\", \"Orphan\", \"nil\"",
        policy));
  }
  return Status::Ok();
}

bool ApplyDeletionFinalizers(rapidjson::Document& object, const DeleteOptions& options) {
  std::vector<std::string> current = Finalizers(object);
  std::vector<std::string> next;
  for (const auto& f : current) {
    if (f != kOrphanFinalizer && f != kForegroundDeletionFinalizer)
      next.push_back(f);
  }
  if (ShouldOrphan(current, options))
    next.emplace_back(kOrphanFinalizer);
  if (ShouldDeleteDependents(current, options))
    next.emplace_back(kForegroundDeletionFinalizer);
  std::vector<std::string> a = current, b = next;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a == b)
    return false;
  SetFinalizers(object, next);
  return true;
}

bool HasFinalizers(const rapidjson::Value& object) {
  return !Finalizers(object).empty();
}

void MarkAsDeleting(rapidjson::Document& object, const std::string& now_timestamp,
                    bool now_is_earlier) {
  auto& a = object.GetAllocator();
  if (Find(object, "metadata.deletionTimestamp") == nullptr || now_is_earlier)
    SetMember(object, "metadata.deletionTimestamp", rapidjson::Value(now_timestamp.c_str(), a));
  SetMember(object, "metadata.deletionGracePeriodSeconds", rapidjson::Value(int64_t{0}));
}

Status CheckNoNewFinalizers(const rapidjson::Value& stored, const rapidjson::Value& next) {
  if (Find(stored, "metadata.deletionTimestamp") == nullptr)
    return Status::Ok();
  std::vector<std::string> old = Finalizers(stored);
  std::vector<std::string> added;
  for (const auto& f : Finalizers(next)) {
    if (!Contains(old, f))
      added.push_back(fmt::format("\"{}\"", f));
  }
  if (added.empty())
    return Status::Ok();
  std::sort(added.begin(), added.end());
  std::string listed;
  for (const auto& f : added)
    listed += (listed.empty() ? "" : ", ") + f;
  return Status::InvalidArgument(fmt::format(
      "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being "
      "deleted, found new finalizers []string{{{}}}",
      listed));
}

bool ShouldDeleteDuringUpdate(const rapidjson::Value& stored, const rapidjson::Value& next) {
  if (HasFinalizers(next) || Find(stored, "metadata.deletionTimestamp") == nullptr)
    return false;
  const rapidjson::Value* grace = Find(stored, "metadata.deletionGracePeriodSeconds");
  return grace == nullptr || !grace->IsInt64() || grace->GetInt64() == 0;
}

}  // namespace kubesim
