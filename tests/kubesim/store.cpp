#include "store.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "finalizers.h"

namespace kubesim {

const char* ChangeTypeName(ChangeType type) {
  switch (type) {
    case ChangeType::kAdded:
      return "ADDED";
    case ChangeType::kModified:
      return "MODIFIED";
    case ChangeType::kDeleted:
      return "DELETED";
  }
  return "UNKNOWN";
}

// ---- helpers -------------------------------------------------------------------------

const rapidjson::Value* Find(const rapidjson::Value& object, const char* dotted_path) {
  // No copy of the path's parts: every list filter and controller pass calls this
  // for each object it looks at.
  const rapidjson::Value* cur = &object;
  std::string_view path(dotted_path);
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    if (!cur->IsObject())
      return nullptr;
    const rapidjson::Value key(rapidjson::StringRef(part.data(), part.size()));
    auto it = cur->FindMember(key);
    if (it == cur->MemberEnd())
      return nullptr;
    cur = &it->value;
    if (dot == std::string_view::npos)
      return cur;
    path.remove_prefix(dot + 1);
  }
}

std::string GetString(const rapidjson::Value& object, const char* dotted_path) {
  const rapidjson::Value* v = Find(object, dotted_path);
  if (v == nullptr || !v->IsString())
    return "";
  return std::string(v->GetString(), v->GetStringLength());
}

void SetMember(rapidjson::Document& doc, const char* dotted_path, rapidjson::Value value) {
  auto& alloc = doc.GetAllocator();
  if (!doc.IsObject())
    doc.SetObject();
  rapidjson::Value* cur = &doc;
  std::string path(dotted_path);
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->IsObject())
      cur->SetObject();
    auto it = cur->FindMember(part.c_str());
    if (dot == std::string::npos) {
      if (it != cur->MemberEnd()) {
        it->value = value;
      } else {
        cur->AddMember(rapidjson::Value(part.c_str(), alloc), value, alloc);
      }
      return;
    }
    if (it == cur->MemberEnd()) {
      cur->AddMember(rapidjson::Value(part.c_str(), alloc),
                     rapidjson::Value(rapidjson::kObjectType), alloc);
      it = cur->FindMember(part.c_str());
    }
    cur = &it->value;
    start = dot + 1;
  }
}

std::unique_ptr<rapidjson::Document> Clone(const rapidjson::Value& value) {
  auto doc = std::make_unique<rapidjson::Document>();
  doc->CopyFrom(value, doc->GetAllocator());
  return doc;
}

std::string ToJson(const rapidjson::Value& value) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buf);
  value.Accept(writer);
  return std::string(buf.GetString(), buf.GetSize());
}

Result<std::unique_ptr<rapidjson::Document>> ParseJson(const std::string& text) {
  auto doc = std::make_unique<rapidjson::Document>();
  doc->Parse(text.c_str(), text.size());
  if (doc->HasParseError()) {
    return Status::InvalidArgument(fmt::format("invalid JSON at offset {}: {}",
                                               doc->GetErrorOffset(),
                                               rapidjson::GetParseError_En(doc->GetParseError())));
  }
  return doc;
}

void SetCondition(rapidjson::Document& object, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message,
                  const std::string& now_timestamp) {
  auto& alloc = object.GetAllocator();
  if (Find(object, "status.conditions") == nullptr) {
    SetMember(object, "status.conditions", rapidjson::Value(rapidjson::kArrayType));
  }
  rapidjson::Value& conditions = object["status"]["conditions"];
  if (!conditions.IsArray())
    conditions.SetArray();
  rapidjson::Value* existing = nullptr;
  for (auto& c : conditions.GetArray()) {
    if (GetString(c, "type") == type)
      existing = &c;
  }
  std::string transition = now_timestamp;
  if (existing != nullptr && GetString(*existing, "status") == status &&
      !GetString(*existing, "lastTransitionTime").empty()) {
    transition = GetString(*existing, "lastTransitionTime");
  }
  rapidjson::Value c(rapidjson::kObjectType);
  c.AddMember("type", rapidjson::Value(type.c_str(), alloc), alloc);
  c.AddMember("status", rapidjson::Value(status.c_str(), alloc), alloc);
  if (!reason.empty())
    c.AddMember("reason", rapidjson::Value(reason.c_str(), alloc), alloc);
  if (!message.empty())
    c.AddMember("message", rapidjson::Value(message.c_str(), alloc), alloc);
  c.AddMember("lastProbeTime", rapidjson::Value(rapidjson::kNullType), alloc);
  c.AddMember("lastTransitionTime", rapidjson::Value(transition.c_str(), alloc), alloc);
  if (existing != nullptr) {
    *existing = c;
  } else {
    conditions.PushBack(c, alloc);
  }
}

namespace {

std::string FormatTime(k8sbridge::Clock::Wall::time_point t, bool micro) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count();
  std::time_t tt = secs.count();
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (micro)
    return fmt::format("{}.{:06d}Z", buf, us);
  return fmt::format("{}Z", buf);
}

// Parses "YYYY-MM-DDTHH:MM:SS[.frac]Z"; nullopt if malformed.
std::optional<k8sbridge::Clock::Wall::time_point> ParseTime(const std::string& s) {
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr)
    return std::nullopt;
  return k8sbridge::Clock::Wall::from_time_t(timegm(&tm));
}

void SetString(rapidjson::Document& doc, const char* path, const std::string& value) {
  SetMember(doc, path, rapidjson::Value(value.c_str(), doc.GetAllocator()));
}

// metadata.generation counts spec changes (the registry strategies of kinds whose
// controllers report observedGeneration).
void KeepOrBumpGeneration(const rapidjson::Value& stored, rapidjson::Document& next) {
  const rapidjson::Value* old = Find(stored, "metadata.generation");
  int64_t generation = old != nullptr && old->IsInt64() ? old->GetInt64() : 1;
  const rapidjson::Value* old_spec = Find(stored, "spec");
  const rapidjson::Value* new_spec = Find(next, "spec");
  const bool same = (old_spec == nullptr && new_spec == nullptr) ||
                    (old_spec != nullptr && new_spec != nullptr && *old_spec == *new_spec);
  if (!same)
    ++generation;
  SetMember(next, "metadata.generation", rapidjson::Value(generation));
}

const char* KindOf(const std::string& resource) {
  if (resource == "pods")
    return "Pod";
  if (resource == "nodes")
    return "Node";
  if (resource == "namespaces")
    return "Namespace";
  if (resource == "configmaps")
    return "ConfigMap";
  if (resource == "secrets")
    return "Secret";
  if (resource == "events")
    return "Event";
  if (resource == "leases")
    return "Lease";
  if (resource == "poddisruptionbudgets")
    return "PodDisruptionBudget";
  return WorkloadKindOf(resource);
}

// The kinds whose main resource never writes .status (they have a status subresource).
bool KeepsStatusOnUpdate(const std::string& resource) {
  return resource == "pods" || resource == "nodes" || resource == "poddisruptionbudgets" ||
         HasWorkloadStatus(resource);
}

// The kinds whose metadata.generation counts spec changes (their controllers compare
// status.observedGeneration with it).
bool TracksGeneration(const std::string& resource) {
  return resource == "poddisruptionbudgets" || TracksWorkloadGeneration(resource);
}

}  // namespace

// ---- Store ---------------------------------------------------------------------------

Store::Store(k8sbridge::Clock& clock, size_t history_window)
    : clock_(clock), history_window_(std::max<size_t>(history_window, 1)) {}

Store::~Store() {
  Shutdown();
}

std::string Store::NowTimestamp() const {
  return FormatTime(clock_.WallNow(), false);
}
std::string Store::NowMicroTimestamp() const {
  return FormatTime(clock_.WallNow(), true);
}

uint64_t Store::CurrentResourceVersion() const {
  std::lock_guard lock(mu_);
  return resource_version_;
}

Result<ObjectPtr> Store::Get(const std::string& resource, const std::string& ns,
                             const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(Key{resource, IsClusterScoped(resource) ? "" : ns, name});
  if (it == objects_.end()) {
    return Status::NotFound(fmt::format("{} \"{}\" not found", resource, name));
  }
  return it->second;
}

namespace {

// Adds `object` to the page when `filter` passes it; false once the page is full
// (`result.more` set: another object matches).
bool AddToPage(ListResult& result, const ObjectPtr& object,
               const std::function<bool(const rapidjson::Value&)>& filter, size_t limit) {
  if (filter && !filter(*object))
    return true;
  if (limit != 0 && result.items.size() == limit) {
    result.more = true;
    return false;
  }
  result.items.push_back(object);
  return true;
}

}  // namespace

ListResult Store::List(const std::string& resource, const std::string& ns,
                       const std::function<bool(const rapidjson::Value&)>& filter,
                       const ListPage& page) const {
  // The lock covers only taking the candidates, one consistent snapshot (objects are
  // immutable once stored); the filter runs after it is released, as the API server's
  // cacher filters a list outside its watch cache's lock (storage/cacher, GetList).
  // Filtered under the lock, a label selector over 10,000 pods held every write
  // (a pod create included) for 15 ms.
  ListResult result;
  std::vector<ObjectPtr> candidates;
  {
    std::lock_guard lock(mu_);
    result.resource_version = resource_version_;
    // Unfiltered, the page and one more (to know whether more follow) are enough.
    const size_t enough = filter || page.limit == 0 ? 0 : page.limit + 1;
    candidates = CandidatesLocked(resource, ns, page, enough);
  }
  for (const ObjectPtr& object : candidates) {
    if (!AddToPage(result, object, filter, page.limit))
      break;
  }
  return result;
}

std::vector<ObjectPtr> Store::CandidatesLocked(const std::string& resource, const std::string& ns,
                                               const ListPage& page, size_t enough) const {
  std::vector<ObjectPtr> out;
  const std::set<Key>* index = nullptr;
  if (page.owned_or_deleting) {
    index = &owned_or_deleting_;
  } else if (resource == "pods" && page.pods_on_node) {
    auto node = pods_by_node_.find(*page.pods_on_node);
    if (node == pods_by_node_.end())
      return out;
    index = &node->second;
  }
  auto full = [&] { return enough != 0 && out.size() == enough; };
  if (index != nullptr) {
    auto it = page.after ? index->upper_bound(Key{resource, page.after_ns, page.after_name})
                         : index->lower_bound(Key{resource, ns, ""});
    for (; it != index->end() && std::get<0>(*it) == resource && !full(); ++it) {
      if (!ns.empty() && std::get<1>(*it) != ns)
        break;
      out.push_back(objects_.at(*it));
    }
    return out;
  }
  auto it = page.after ? objects_.upper_bound(Key{resource, page.after_ns, page.after_name})
                       : objects_.lower_bound(Key{resource, ns, ""});
  for (; it != objects_.end() && std::get<0>(it->first) == resource && !full(); ++it) {
    if (!ns.empty() && std::get<1>(it->first) != ns)
      break;
    out.push_back(it->second);
  }
  return out;
}

void Store::IndexLocked(const Key& key, const rapidjson::Value* before,
                        const rapidjson::Value* after) {
  if (before != nullptr)
    owned_or_deleting_.erase(key);
  if (after != nullptr && (Find(*after, "metadata.deletionTimestamp") != nullptr ||
                           Find(*after, "metadata.ownerReferences") != nullptr))
    owned_or_deleting_.insert(key);
  if (std::get<0>(key) != "pods")
    return;
  if (before != nullptr) {
    auto node = pods_by_node_.find(GetString(*before, "spec.nodeName"));
    if (node != pods_by_node_.end()) {
      node->second.erase(key);
      if (node->second.empty())
        pods_by_node_.erase(node);
    }
  }
  if (after != nullptr)
    pods_by_node_[GetString(*after, "spec.nodeName")].insert(key);
}

namespace {

// A stored object's own copy, in chunks sized to it. A parsed or edited document
// keeps rapidjson's first 64 KiB chunk and what its edits left behind: the objects
// and the watch history of a 10,000-node cluster grew kubesim past 1.9 GB, and a list
// walked memory spread that thin.
constexpr size_t kStoredChunk = 4096;
ObjectPtr Compacted(const rapidjson::Value& object) {
  struct Stored {
    rapidjson::MemoryPoolAllocator<> allocator{kStoredChunk};
    rapidjson::Document doc{&allocator};
  };
  auto stored = std::make_shared<Stored>();
  stored->doc.CopyFrom(object, stored->allocator);
  return ObjectPtr(stored, &stored->doc);
}

}  // namespace

Result<ObjectPtr> Store::CommitLocked(ChangeType type, const Key& key, ObjectPtr previous,
                                      std::unique_ptr<rapidjson::Document> next) {
  if (DryRunScope::Active()) {
    // What the write would store, under the stored object's RV (none for a create).
    if (previous != nullptr)
      SetString(*next, "metadata.resourceVersion",
                GetString(*previous, "metadata.resourceVersion"));
    else if (next->HasMember("metadata") && (*next)["metadata"].IsObject())
      (*next)["metadata"].RemoveMember("resourceVersion");
    return ObjectPtr(next.release());
  }
  uint64_t rv = ++resource_version_;
  SetString(*next, "metadata.resourceVersion", std::to_string(rv));
  ObjectPtr committed = Compacted(*next);
  IndexLocked(key, previous.get(), committed.get());
  objects_[key] = committed;
  history_.push_back(Change{type, std::get<0>(key), std::get<1>(key), std::get<2>(key), rv,
                            committed, std::move(previous)});
  while (history_.size() > history_window_) {
    history_floor_ = history_.front().resource_version;
    history_.pop_front();
  }
  changed_.notify_all();
  return committed;
}

void Store::RemoveLocked(const Key& key, ObjectPtr previous) {
  if (DryRunScope::Active())
    return;
  uint64_t rv = ++resource_version_;
  auto last = Clone(*previous);
  SetString(*last, "metadata.resourceVersion", std::to_string(rv));
  IndexLocked(key, previous.get(), nullptr);
  objects_.erase(key);
  history_.push_back(Change{ChangeType::kDeleted, std::get<0>(key), std::get<1>(key),
                            std::get<2>(key), rv, Compacted(*last), std::move(previous)});
  while (history_.size() > history_window_) {
    history_floor_ = history_.front().resource_version;
    history_.pop_front();
  }
  changed_.notify_all();
}

Result<ObjectPtr> Store::Create(const std::string& resource, const std::string& ns_in,
                                rapidjson::Document object) {
  if (!object.IsObject())
    return Status::InvalidArgument("the object is not a JSON object");
  const bool cluster = IsClusterScoped(resource);
  std::string ns = cluster ? "" : ns_in;
  if (!cluster && ns.empty())
    ns = GetString(object, "metadata.namespace");
  if (!cluster && ns.empty())
    ns = "default";
  auto doc = std::make_unique<rapidjson::Document>();
  doc->Swap(object);
  std::lock_guard lock(mu_);
  if (!cluster && objects_.find(Key{"namespaces", "", ns}) == objects_.end()) {
    return Status::NotFound(fmt::format("namespaces \"{}\" not found", ns));
  }
  std::string name = GetString(*doc, "metadata.name");
  if (name.empty()) {
    // names.SimpleNameGenerator: at most 58 characters of the prefix, then 5 random.
    std::string prefix = GetString(*doc, "metadata.generateName").substr(0, 58);
    if (prefix.empty()) {
      return Status::InvalidArgument(
          "metadata.name: Required value: name or generateName is required");
    }
    static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    do {
      uint64_t n = ++uid_counter_ * 2654435761u + resource_version_;
      std::string suffix;
      for (int i = 0; i < 5; ++i) {
        suffix += kAlphabet[n % (sizeof kAlphabet - 1)];
        n /= (sizeof kAlphabet - 1);
      }
      name = prefix + suffix;
    } while (objects_.count(Key{resource, ns, name}) != 0);
    SetString(*doc, "metadata.name", name);
  }
  Key key{resource, ns, name};
  if (objects_.count(key) != 0) {
    return Status::AlreadyExists(fmt::format("{} \"{}\" already exists", resource, name));
  }
  if (!cluster)
    SetString(*doc, "metadata.namespace", ns);
  ++uid_counter_;
  SetString(*doc, "metadata.uid",
            fmt::format("6b1f0a3e-{:04x}-4{:03x}-8{:03x}-{:012x}", (uid_counter_ >> 24) & 0xffff,
                        (uid_counter_ >> 12) & 0xfff, uid_counter_ & 0xfff,
                        resource_version_ * 7919 + uid_counter_));
  SetString(*doc, "metadata.creationTimestamp", NowTimestamp());
  auto& meta = (*doc)["metadata"];
  if (meta.HasMember("deletionTimestamp"))
    meta.RemoveMember("deletionTimestamp");
  if (!doc->HasMember("kind") && KindOf(resource)[0] != '\0') {
    SetString(*doc, "kind", KindOf(resource));
  }
  if (resource == "pods") {
    if (GetString(*doc, "status.phase").empty())
      SetString(*doc, "status.phase", "Pending");
    if (Find(*doc, "spec.schedulerName") == nullptr) {
      SetString(*doc, "spec.schedulerName", "default-scheduler");
    }
    if (Find(*doc, "spec.restartPolicy") == nullptr)
      SetString(*doc, "spec.restartPolicy", "Always");
    if (Find(*doc, "spec.terminationGracePeriodSeconds") == nullptr) {
      SetMember(*doc, "spec.terminationGracePeriodSeconds", rapidjson::Value(int64_t{30}));
    }
  }
  if (TracksGeneration(resource))  // the controllers compare observedGeneration with it
    SetMember(*doc, "metadata.generation", rapidjson::Value(int64_t{1}));
  FillFieldsFromSystemMetadata(resource, *doc);
  if (resource == "namespaces" && GetString(*doc, "status.phase").empty()) {
    SetString(*doc, "status.phase", "Active");
  }
  return CommitLocked(ChangeType::kAdded, key, nullptr, std::move(doc));
}

Result<ObjectPtr> Store::Update(const std::string& resource, const std::string& ns_in,
                                const std::string& name, rapidjson::Document object,
                                bool status_only) {
  if (!object.IsObject())
    return Status::InvalidArgument("the object is not a JSON object");
  std::string ns = IsClusterScoped(resource) ? "" : ns_in;
  std::lock_guard lock(mu_);
  Key key{resource, ns, name};
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return Status::NotFound(fmt::format("{} \"{}\" not found", resource, name));
  }
  const rapidjson::Document& stored = *it->second;
  std::string given_rv = GetString(object, "metadata.resourceVersion");
  if (!given_rv.empty() && given_rv != GetString(stored, "metadata.resourceVersion")) {
    return Status::Conflict(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply "
        "your changes to the latest version and try again",
        resource, name));
  }
  std::string given_uid = GetString(object, "metadata.uid");
  if (!given_uid.empty() && given_uid != GetString(stored, "metadata.uid")) {
    return Status::Conflict(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": Precondition failed: UID in precondition: "
        "{}, UID in object meta: {}",
        resource, name, given_uid, GetString(stored, "metadata.uid")));
  }
  std::unique_ptr<rapidjson::Document> next;
  if (status_only) {
    next = Clone(stored);
    auto& alloc = next->GetAllocator();
    next->RemoveMember("status");
    if (object.HasMember("status")) {
      next->AddMember("status", rapidjson::Value(object["status"], alloc), alloc);
    }
  } else {
    next = std::make_unique<rapidjson::Document>();
    next->Swap(object);
    auto& alloc = next->GetAllocator();
    if (KeepsStatusOnUpdate(resource) && stored.HasMember("status")) {
      next->RemoveMember("status");
      next->AddMember("status", rapidjson::Value(stored["status"], alloc), alloc);
    }
    if (TracksGeneration(resource))
      KeepOrBumpGeneration(stored, *next);
    for (const char* keep :
         {"metadata.uid", "metadata.creationTimestamp", "metadata.namespace", "metadata.name",
          "metadata.deletionTimestamp", "metadata.deletionGracePeriodSeconds"}) {
      const rapidjson::Value* v = Find(stored, keep);
      if (v != nullptr)
        SetMember(*next, keep, rapidjson::Value(*v, alloc));
    }
    if (!next->HasMember("kind") && KindOf(resource)[0] != '\0') {
      SetString(*next, "kind", KindOf(resource));
    }
    if (stored.HasMember("apiVersion") && !next->HasMember("apiVersion")) {
      next->AddMember("apiVersion", rapidjson::Value(stored["apiVersion"], alloc), alloc);
    }
  }
  // An unchanged object still gets a new RV, as in Kubernetes only when it changed.
  SetString(*next, "metadata.resourceVersion", GetString(stored, "metadata.resourceVersion"));
  if (*next == stored)
    return it->second;
  return CommitUpdateLocked(key, it->second, std::move(next));
}

Result<ObjectPtr> Store::CommitUpdateLocked(const Key& key, ObjectPtr stored,
                                            std::unique_ptr<rapidjson::Document> next) {
  if (Status s = CheckNoNewFinalizers(*stored, *next); !s.ok())
    return s;
  if (ShouldDeleteDuringUpdate(*stored, *next)) {
    // The update emptied the finalizers of an object being deleted: it goes now.
    RemoveLocked(key, stored);
    return ObjectPtr(next.release());
  }
  return CommitLocked(ChangeType::kModified, key, std::move(stored), std::move(next));
}

Result<ObjectPtr> Store::Mutate(const std::string& resource, const std::string& ns_in,
                                const std::string& name,
                                const std::function<Status(rapidjson::Document&)>& mutate,
                                const std::string& expected_resource_version) {
  std::string ns = IsClusterScoped(resource) ? "" : ns_in;
  std::lock_guard lock(mu_);
  Key key{resource, ns, name};
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return Status::NotFound(fmt::format("{} \"{}\" not found", resource, name));
  }
  const rapidjson::Document& stored = *it->second;
  if (!expected_resource_version.empty() &&
      expected_resource_version != GetString(stored, "metadata.resourceVersion")) {
    return Status::Conflict(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply "
        "your changes to the latest version and try again",
        resource, name));
  }
  auto next = Clone(stored);
  Status s = mutate(*next);
  if (!s.ok())
    return s;
  if (!next->IsObject())
    return Status::InvalidArgument("the mutated object is not an object");
  // Identity fields cannot change through a mutation.
  auto& alloc = next->GetAllocator();
  for (const char* keep :
       {"metadata.uid", "metadata.creationTimestamp", "metadata.name", "metadata.namespace"}) {
    const rapidjson::Value* v = Find(stored, keep);
    if (v != nullptr)
      SetMember(*next, keep, rapidjson::Value(*v, alloc));
  }
  SetString(*next, "metadata.resourceVersion", GetString(stored, "metadata.resourceVersion"));
  if (*next == stored)
    return it->second;
  return CommitUpdateLocked(key, it->second, std::move(next));
}

Result<ObjectPtr> Store::BindPod(const std::string& ns, const std::string& name,
                                 const std::string& node_name) {
  std::string now = NowTimestamp();
  return Mutate("pods", ns, name, [&](rapidjson::Document& pod) -> Status {
    std::string bound = GetString(pod, "spec.nodeName");
    if (!bound.empty()) {
      return Status::Conflict(fmt::format(
          "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is already assigned to "
          "node \"{}\"",
          name, name, bound));
    }
    if (Find(pod, "metadata.deletionTimestamp") != nullptr) {
      return Status::Conflict(fmt::format(
          "Operation cannot be fulfilled on pods/binding \"{}\": pod {} is being deleted, cannot "
          "be assigned to a host",
          name, name));
    }
    SetString(pod, "spec.nodeName", node_name);
    SetCondition(pod, "PodScheduled", "True", "", "", now);
    return Status::Ok();
  });
}

Result<DeleteResult> Store::Delete(const std::string& resource, const std::string& ns_in,
                                   const std::string& name, const DeleteOptions& options) {
  std::string ns = IsClusterScoped(resource) ? "" : ns_in;
  std::lock_guard lock(mu_);
  Key key{resource, ns, name};
  auto it = objects_.find(key);
  if (it == objects_.end()) {
    return Status::NotFound(fmt::format("{} \"{}\" not found", resource, name));
  }
  ObjectPtr stored = it->second;
  if (options.precondition_uid && *options.precondition_uid != GetString(*stored, "metadata.uid")) {
    return Status::Conflict(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": Precondition failed: UID in precondition: "
        "{}, UID in object meta: {}",
        resource, name, *options.precondition_uid, GetString(*stored, "metadata.uid")));
  }
  if (options.precondition_resource_version &&
      *options.precondition_resource_version != GetString(*stored, "metadata.resourceVersion")) {
    return Status::Conflict(fmt::format(
        "Operation cannot be fulfilled on {} \"{}\": Precondition failed: ResourceVersion in "
        "precondition: {}, ResourceVersion in object meta: {}",
        resource, name, *options.precondition_resource_version,
        GetString(*stored, "metadata.resourceVersion")));
  }
  if (resource == "namespaces") {
    // Namespaces delete their contents (no Terminating phase here).
    std::vector<std::pair<Key, ObjectPtr>> doomed;
    for (auto& [k, v] : objects_) {
      if (std::get<1>(k) == name)
        doomed.emplace_back(k, v);
    }
    for (auto& [k, v] : doomed)
      RemoveLocked(k, v);
  }
  auto marked = Clone(*stored);
  bool finalizers_changed = ApplyDeletionFinalizers(*marked, options);
  if (resource == "pods") {
    int64_t grace = 30;
    const rapidjson::Value* spec_grace = Find(*stored, "spec.terminationGracePeriodSeconds");
    if (spec_grace != nullptr && spec_grace->IsInt64())
      grace = spec_grace->GetInt64();
    if (options.grace_period_seconds)
      grace = *options.grace_period_seconds;
    if (grace < 0)
      grace = 0;
    // An unbound pod has no containers to stop; a finished pod neither.
    std::string phase = GetString(*stored, "status.phase");
    bool unbound = GetString(*stored, "spec.nodeName").empty();
    if (grace > 0 && !unbound && phase != "Succeeded" && phase != "Failed") {
      const rapidjson::Value* existing = Find(*stored, "metadata.deletionGracePeriodSeconds");
      if (existing != nullptr && existing->IsInt64() && existing->GetInt64() <= grace) {
        return DeleteResult{stored, false};  // already terminating with a shorter grace
      }
      auto deadline = clock_.WallNow() + std::chrono::seconds(grace);
      SetString(*marked, "metadata.deletionTimestamp", FormatTime(deadline, false));
      SetMember(*marked, "metadata.deletionGracePeriodSeconds", rapidjson::Value(grace));
      auto committed = CommitLocked(ChangeType::kModified, key, stored, std::move(marked));
      if (!committed.ok())
        return committed.status();
      return DeleteResult{*committed, false};
    }
  }
  if (HasFinalizers(*marked))
    return MarkForFinalizersLocked(key, stored, std::move(marked), finalizers_changed);
  RemoveLocked(key, stored);
  auto last = Clone(*stored);
  if (!DryRunScope::Active())
    SetString(*last, "metadata.resourceVersion", std::to_string(resource_version_));
  return DeleteResult{ObjectPtr(last.release()), true};
}

Result<DeleteResult> Store::MarkForFinalizersLocked(const Key& key, ObjectPtr stored,
                                                    std::unique_ptr<rapidjson::Document> marked,
                                                    bool finalizers_changed) {
  std::string now = NowTimestamp();
  std::string existing = GetString(*stored, "metadata.deletionTimestamp");
  auto deadline = ParseTime(existing);
  MarkAsDeleting(*marked, now, deadline && *deadline > clock_.WallNow());
  if (!finalizers_changed && *marked == *stored)
    return DeleteResult{stored, false};
  auto committed = CommitLocked(ChangeType::kModified, key, stored, std::move(marked));
  if (!committed.ok())
    return committed.status();
  return DeleteResult{*committed, false};
}

// The stand-in kubelet of a node without a registered kubelet confirms a deletion only
// while the node exists and is not NotReady/Unknown (a node without a Ready condition,
// as tests create them, counts as Ready here).
bool Store::StandInKubeletMayFinalizeLocked(const rapidjson::Value& pod) const {
  const std::string node = GetString(pod, "spec.nodeName");
  if (node.empty())
    return true;
  if (kubelet_nodes_.count(node) != 0)
    return false;
  auto it = objects_.find(Key{"nodes", "", node});
  if (it == objects_.end())
    return false;
  const rapidjson::Value* conditions = Find(*it->second, "status.conditions");
  if (conditions == nullptr || !conditions->IsArray())
    return true;
  for (const auto& c : conditions->GetArray()) {
    if (GetString(c, "type") == "Ready")
      return GetString(c, "status") == "True";
  }
  return true;
}

bool Store::HasKubelet(const std::string& node_name) const {
  std::lock_guard lock(mu_);
  return kubelet_nodes_.count(node_name) != 0;
}

void Store::RegisterKubelet(const std::string& node_name) {
  std::lock_guard lock(mu_);
  kubelet_nodes_.insert(node_name);
}

void Store::UnregisterKubelet(const std::string& node_name) {
  std::lock_guard lock(mu_);
  kubelet_nodes_.erase(node_name);
}

Status Store::FinalizePodDeletion(const std::string& ns, const std::string& name,
                                  const std::string& uid) {
  std::lock_guard lock(mu_);
  Key key{"pods", ns, name};
  auto it = objects_.find(key);
  if (it == objects_.end())
    return Status::NotFound(fmt::format("pods \"{}\" not found", name));
  if (!uid.empty() && GetString(*it->second, "metadata.uid") != uid) {
    return Status::Conflict(fmt::format("pods \"{}\" has uid {}, not {}", name,
                                        GetString(*it->second, "metadata.uid"), uid));
  }
  if (HeldByFinalizersLocked(key, it->second))
    return Status::Ok();
  RemoveLocked(key, it->second);
  return Status::Ok();
}

void Store::ReapExpired() {
  std::lock_guard lock(mu_);
  auto now = clock_.WallNow();
  std::vector<std::pair<Key, ObjectPtr>> doomed;
  // The pods being deleted are among those the garbage collector's index holds.
  auto it = owned_or_deleting_.lower_bound(Key{"pods", "", ""});
  for (; it != owned_or_deleting_.end() && std::get<0>(*it) == "pods"; ++it) {
    const Key& key = *it;
    const ObjectPtr& pod = objects_.at(key);
    // Only a deletionTimestamp's passing lets the pod go (not a null, not an owner).
    const std::string ts = GetString(*pod, "metadata.deletionTimestamp");
    if (ts.empty() || !StandInKubeletMayFinalizeLocked(*pod))
      continue;
    auto deadline = ParseTime(ts);
    if (!deadline || *deadline <= now)
      doomed.emplace_back(key, pod);
  }
  for (auto& [k, v] : doomed) {
    if (!HeldByFinalizersLocked(k, v))
      RemoveLocked(k, v);
  }
}

bool Store::HeldByFinalizersLocked(const Key& key, const ObjectPtr& pod) {
  if (!HasFinalizers(*pod))
    return false;
  // The grace period is over, but finalizers keep the pod (grace 0) until they go.
  const rapidjson::Value* grace = Find(*pod, "metadata.deletionGracePeriodSeconds");
  if (grace == nullptr || !grace->IsInt64() || grace->GetInt64() != 0) {
    auto next = Clone(*pod);
    SetMember(*next, "metadata.deletionGracePeriodSeconds", rapidjson::Value(int64_t{0}));
    (void)CommitLocked(ChangeType::kModified, key, pod, std::move(next));
  }
  return true;
}

Result<std::unique_ptr<Watcher>> Store::Watch(const std::string& resource, const std::string& ns,
                                              uint64_t from_resource_version) {
  std::lock_guard lock(mu_);
  uint64_t position = from_resource_version == 0 ? resource_version_ : from_resource_version;
  if (position < history_floor_) {
    return Status::Expired(
        fmt::format("too old resource version: {} ({})", position, history_floor_));
  }
  if (position > resource_version_)
    position = resource_version_;
  return std::unique_ptr<Watcher>(new Watcher(this, resource, ns, position));
}

void Store::Shutdown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  changed_.notify_all();
}

uint64_t Store::OldestResumableResourceVersion() const {
  std::lock_guard lock(mu_);
  return history_floor_;
}

void Store::CompactHistory() {
  std::lock_guard lock(mu_);
  history_.clear();
  history_floor_ = resource_version_;
}

Result<std::optional<Change>> Watcher::Next(std::chrono::milliseconds timeout) {
  Store& s = *store_;
  std::unique_lock lock(s.mu_);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (s.shutdown_)
      return std::optional<Change>();
    if (position_ < s.history_floor_) {
      return Status::Expired(
          fmt::format("too old resource version: {} ({})", position_, s.history_floor_));
    }
    // history_ is sorted by RV: find the first change after position_.
    auto it =
        std::upper_bound(s.history_.begin(), s.history_.end(), position_,
                         [](uint64_t rv, const Change& c) { return rv < c.resource_version; });
    for (; it != s.history_.end(); ++it) {
      position_ = it->resource_version;
      if (!resource_.empty() && it->resource != resource_)
        continue;
      if (!ns_.empty() && it->ns != ns_)
        continue;
      return std::optional<Change>(*it);
    }
    if (s.changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      // One more look before giving up, then report the timeout.
      if (!s.history_.empty() && s.history_.back().resource_version > position_)
        continue;
      return std::optional<Change>();
    }
  }
}

void WaitForPodOrNodeChange(Store& store, std::unique_ptr<Watcher>& watcher,
                            std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>& stop) {
  WaitForChange(store, watcher, deadline, stop, [](const std::string& resource) {
    return resource == "pods" || resource == "nodes";
  });
}

void WaitForChange(Store& store, std::unique_ptr<Watcher>& watcher,
                   std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& stop,
                   const std::function<bool(const std::string& resource)>& wakes) {
  using std::chrono::milliseconds;
  if (watcher == nullptr) {
    Result<std::unique_ptr<Watcher>> w = store.Watch("", "", 0);
    if (w.ok())
      watcher = std::move(*w);
  }
  while (!stop && std::chrono::steady_clock::now() < deadline) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (watcher == nullptr) {
      std::this_thread::sleep_for(std::max(left, milliseconds(1)));
      return;
    }
    // Short waits, so that `stop` is seen within 200 ms.
    Result<std::optional<Change>> next =
        watcher->Next(std::clamp(left, milliseconds(1), milliseconds(200)));
    if (!next.ok()) {
      watcher.reset();  // reopened on the next call
      return;
    }
    if (next->has_value() && wakes((*next)->resource))
      return;
  }
}

void RunControllerLoop(Store& store, const std::atomic<bool>& stop,
                       std::chrono::milliseconds resync,
                       const std::function<bool(const std::string& resource)>& wakes,
                       const std::function<void()>& pass) {
  using Steady = std::chrono::steady_clock;
  std::unique_ptr<Watcher> watcher;
  while (!stop) {
    const Steady::time_point start = Steady::now();
    pass();
    const Steady::time_point earliest = start + (Steady::now() - start) * kPassSpacing;
    WaitForChange(store, watcher, std::max(Steady::now() + resync, earliest), stop, wakes);
    // The changes of the wait that remains are read by the next pass, not lost.
    while (!stop && Steady::now() < earliest) {
      std::this_thread::sleep_for(
          std::min<Steady::duration>(earliest - Steady::now(), std::chrono::milliseconds(200)));
    }
  }
}

}  // namespace kubesim
