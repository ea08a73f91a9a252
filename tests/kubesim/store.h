// THE CONTRACT between the kubesim API server and the scheduler/kubelet that run in the
// same process. Keep this interface stable: both sides build against it.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
//
// The Store holds every Kubernetes object of the stand-in as an immutable JSON document
// (RapidJSON), keyed by (resource, namespace, name). Writers hand in a whole new
// document or a mutation function; readers get shared, immutable snapshots (ObjectPtr)
// that stay valid after later writes. Every write takes the next value of ONE global
// resourceVersion counter and appends a Change to a bounded history, which Watchers
// read in order (the HTTP watch endpoint is one such reader, the scheduler and kubelet
// are others).
//
// Resources are the plural, lowercase names of the REST paths: "pods", "nodes",
// "namespaces", "configmaps", "secrets", "events", "leases". Cluster-scoped ones
// ("nodes", "namespaces") use the namespace "". Events of events.k8s.io/v1 are stored in
// their core/v1 form under "events" (the server converts at the edge), as real
// Kubernetes does.
//
// All methods are thread-safe. None of them calls back into user code while holding
// the store's lock, except the Mutate function, which must not call the Store.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <rapidjson/document.h>

#include "k8sbridge/clock.h"
#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;
using k8sbridge::Status;

// An immutable snapshot of one object (apiVersion, kind, metadata, spec, status ...).
using ObjectPtr = std::shared_ptr<const rapidjson::Document>;

enum class ChangeType { kAdded, kModified, kDeleted };
const char* ChangeTypeName(ChangeType type);  // "ADDED", "MODIFIED", "DELETED"

// One committed write.
struct Change {
  ChangeType type;
  std::string resource;
  std::string ns;
  std::string name;
  uint64_t resource_version = 0;
  ObjectPtr object;    // state after the write; for kDeleted the last state, carrying
                       // the deletion's resourceVersion
  ObjectPtr previous;  // state before the write; null for kAdded
};

struct DeleteOptions {
  // Pods only: seconds the kubelet gives the containers. Absent: the pod's
  // spec.terminationGracePeriodSeconds (default 30). 0: remove at once.
  std::optional<int64_t> grace_period_seconds;
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  // "Foreground", "Background" or "Orphan" (validated by the API); orphanDependents,
  // the deprecated spelling. Absent: the object's own finalizers decide (finalizers.h).
  std::optional<std::string> propagation_policy;
  std::optional<bool> orphan_dependents;
};

struct DeleteResult {
  ObjectPtr object;
  // True when the object is gone; false when it was only marked (pods with a grace
  // period get metadata.deletionTimestamp and deletionGracePeriodSeconds) and waits for
  // the kubelet (or the store's own reaper, see RegisterKubelet) to finalize it.
  bool removed = false;
};

struct ListResult {
  std::vector<ObjectPtr> items;  // sorted by (namespace, name)
  uint64_t resource_version = 0;
  bool more = false;  // with a limit: more matching objects follow the last item
};

// Where a page of a list starts and how long it is (Store::List).
struct ListPage {
  std::string after_ns, after_name;  // the last object of the previous page; "" = first page
  bool after = false;                // whether after_ns/after_name are set
  size_t limit = 0;                  // 0 = no limit
  // Pods only: just those whose spec.nodeName is this, read from the store's index of
  // them, as the API server's watch cache does for a list with the field selector
  // spec.nodeName=X (pkg/registry/core/pod/strategy.go, Indexers). The same items in
  // the same order as a filter on the field; only the scan of every pod is saved.
  std::optional<std::string> pods_on_node;
  // Only the objects with metadata.ownerReferences or a deletionTimestamp, read from
  // the store's index of them: what the garbage collector looks at, kept as its graph
  // builder keeps the owner graph from watch events (garbagecollector/graph_builder.go)
  // instead of reading every object on each pass.
  bool owned_or_deleting = false;
};

// While one lives on a thread, that thread's writes to any Store are computed (checks,
// defaults, deletionTimestamp, finalizers) but not committed: no object changes, no
// resourceVersion is taken, no watch event (dryRun=All; defined in dry_run.cpp).
class DryRunScope {
 public:
  DryRunScope();
  ~DryRunScope();
  DryRunScope(const DryRunScope&) = delete;
  DryRunScope& operator=(const DryRunScope&) = delete;
  static bool Active();

 private:
  bool previous_;
};

class Store;

// A blocking cursor over the change history, filtered by resource and namespace.
// Obtained from Store::Watch. Not thread-safe itself: one thread reads one Watcher.
class Watcher {
 public:
  // Waits up to `timeout` for the next change after the cursor that matches the filter.
  // nullopt on timeout or after Store::Shutdown. Status kExpired when the history no
  // longer holds the cursor's position (the reader fell behind the window: relist).
  Result<std::optional<Change>> Next(std::chrono::milliseconds timeout);
  // resourceVersion of the last change handed out (or the start RV).
  uint64_t position() const { return position_; }

 private:
  friend class Store;
  Watcher(Store* store, std::string resource, std::string ns, uint64_t position)
      : store_(store), resource_(std::move(resource)), ns_(std::move(ns)), position_(position) {}
  Store* store_;
  std::string resource_;  // "" = all resources
  std::string ns_;        // "" = all namespaces
  uint64_t position_;
};

class Store {
 public:
  // `history_window`: how many changes the store remembers for watch resumption; a
  // watch from an older resourceVersion gets kExpired (HTTP 410).
  explicit Store(k8sbridge::Clock& clock, size_t history_window = 10000);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  uint64_t CurrentResourceVersion() const;

  Result<ObjectPtr> Get(const std::string& resource, const std::string& ns,
                        const std::string& name) const;

  // `ns` "" lists all namespaces. `filter` (optional) sees each object of one
  // snapshot, after the store's lock is released (writes go on meanwhile). `page`: only the objects
  // after page.after, at most page.limit of them, found from that key on (as etcd reads a page), so
  // that paging through a large list costs one walk over it, not one per page.
  ListResult List(const std::string& resource, const std::string& ns,
                  const std::function<bool(const rapidjson::Value&)>& filter = {},
                  const ListPage& page = {}) const;

  // Fills metadata.uid, creationTimestamp, resourceVersion, namespace (namespaced
  // kinds), a name from metadata.generateName, and for pods status.phase=Pending.
  // kAlreadyExists if the name is taken; kInvalidArgument if there is no name;
  // kNotFound if the namespace does not exist.
  Result<ObjectPtr> Create(const std::string& resource, const std::string& ns,
                           rapidjson::Document object);

  // Replaces the object. If `object` carries metadata.resourceVersion and it differs
  // from the stored one: kConflict. uid and creationTimestamp are kept from the stored
  // object. `status_only`: keep the stored spec/metadata and take only .status (the
  // /status subresource); otherwise keep the stored .status for pods and nodes.
  Result<ObjectPtr> Update(const std::string& resource, const std::string& ns,
                           const std::string& name, rapidjson::Document object,
                           bool status_only = false);

  // Atomic read-modify-write: `mutate` gets a private copy of the current object, edits
  // it, and returns OK to commit (a non-OK status aborts and is returned). If
  // `expected_resource_version` is not empty and differs: kConflict. Commits only when
  // the document changed (else returns the stored object, no new RV). This is what the
  // scheduler and kubelet should use to set status, conditions and so on.
  Result<ObjectPtr> Mutate(const std::string& resource, const std::string& ns,
                           const std::string& name,
                           const std::function<Status(rapidjson::Document&)>& mutate,
                           const std::string& expected_resource_version = "");

  // The pods/binding subresource: sets spec.nodeName and the PodScheduled=True
  // condition. kConflict if the pod is already bound (to any node).
  Result<ObjectPtr> BindPod(const std::string& ns, const std::string& name,
                            const std::string& node_name);

  Result<DeleteResult> Delete(const std::string& resource, const std::string& ns,
                              const std::string& name, const DeleteOptions& options = {});

  // ---- Kubelet hooks ----------------------------------------------------------------
  // A kubelet that manages `node_name` registers here. Terminating pods bound to a
  // registered node stay until FinalizePodDeletion. On any other node ReapExpired plays
  // that node's kubelet: it removes them once their grace period has passed, but only
  // while the node exists and is Ready (a lost node's pods stay Terminating until the
  // node is deleted or pod GC force-deletes them, as in Kubernetes).
  void RegisterKubelet(const std::string& node_name);
  void UnregisterKubelet(const std::string& node_name);
  bool HasKubelet(const std::string& node_name) const;
  // Removes a terminating pod (the kubelet calls this after its containers are gone).
  // If `uid` is not empty and the stored pod has another uid: kConflict (a new pod of
  // the same name). kNotFound if it is already gone.
  Status FinalizePodDeletion(const std::string& ns, const std::string& name,
                             const std::string& uid = "");
  // Removes terminating pods whose grace period is over and that no registered kubelet
  // manages. The API server calls it periodically; tests with a FakeClock call it.
  void ReapExpired();

  // ---- Watching ------------------------------------------------------------------------
  // A cursor positioned after `from_resource_version` (0 = now). kExpired if that
  // version is older than the history window. `resource` "" = every resource.
  Result<std::unique_ptr<Watcher>> Watch(const std::string& resource, const std::string& ns,
                                         uint64_t from_resource_version);
  // Wakes every blocked Watcher::Next, which then returns nullopt; used at exit.
  void Shutdown();

  // Oldest resourceVersion a watch can still resume from (exclusive).
  uint64_t OldestResumableResourceVersion() const;
  // Drops the whole history, so every resume from an older RV answers 410 (tests).
  void CompactHistory();

  k8sbridge::Clock& clock() { return clock_; }

  // RFC 3339 with seconds ("2026-11-30T10:00:00Z") and with microseconds.
  std::string NowTimestamp() const;
  std::string NowMicroTimestamp() const;

  static bool IsClusterScoped(const std::string& resource) {
    return resource == "nodes" || resource == "namespaces" || resource == "clusterroles" ||
           resource == "clusterrolebindings" || resource == "persistentvolumes" ||
           resource == "storageclasses";
  }

 private:
  friend class Watcher;
  using Key = std::tuple<std::string, std::string, std::string>;  // resource, ns, name

  Result<ObjectPtr> CommitLocked(ChangeType type, const Key& key, ObjectPtr previous,
                                 std::unique_ptr<rapidjson::Document> next);
  void RemoveLocked(const Key& key, ObjectPtr previous);
  // Moves `key` in pods_by_node_ from `before`'s node to `after`'s (either may be null),
  // and keeps owned_or_deleting_.
  void IndexLocked(const Key& key, const rapidjson::Value* before, const rapidjson::Value* after);
  // List's candidates: the objects of `resource` in `ns` from `page`'s start (from
  // the index page.pods_on_node or page.owned_or_deleting names), at most `enough` of
  // them (0: all).
  std::vector<ObjectPtr> CandidatesLocked(const std::string& resource, const std::string& ns,
                                          const ListPage& page, size_t enough) const;
  // Finalizers (finalizers.h): an update that may empty them, a delete they hold, and a
  // terminated pod they keep.
  Result<ObjectPtr> CommitUpdateLocked(const Key& key, ObjectPtr stored,
                                       std::unique_ptr<rapidjson::Document> next);
  Result<DeleteResult> MarkForFinalizersLocked(const Key& key, ObjectPtr stored,
                                               std::unique_ptr<rapidjson::Document> marked,
                                               bool finalizers_changed);
  bool HeldByFinalizersLocked(const Key& key, const ObjectPtr& pod);
  bool StandInKubeletMayFinalizeLocked(const rapidjson::Value& pod) const;

  k8sbridge::Clock& clock_;
  const size_t history_window_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool shutdown_ = false;
  uint64_t resource_version_ = 1;
  uint64_t uid_counter_ = 0;
  std::map<Key, ObjectPtr> objects_;
  // spec.nodeName ("" unbound) -> the keys of those pods, kept by IndexLocked.
  std::map<std::string, std::set<Key>, std::less<>> pods_by_node_;
  // ListPage::owned_or_deleting; ReapExpired reads its pods too (a scan of every pod
  // held the lock, and every write, for milliseconds at 10,000 pods).
  std::set<Key> owned_or_deleting_;
  std::deque<Change> history_;  // ascending resource_version
  uint64_t history_floor_ = 1;  // watches from RVs below this are expired
  std::set<std::string> kubelet_nodes_;
};

// ---- Helpers for building and reading objects --------------------------------------
// A string member or "" (path like "metadata.name").
std::string GetString(const rapidjson::Value& object, const char* dotted_path);
// Pointer to a member by dotted path, or nullptr.
const rapidjson::Value* Find(const rapidjson::Value& object, const char* dotted_path);
// Sets a member by dotted path, creating objects on the way.
void SetMember(rapidjson::Document& doc, const char* dotted_path, rapidjson::Value value);
// Deep copy of an object into a new document.
std::unique_ptr<rapidjson::Document> Clone(const rapidjson::Value& value);
// Compact JSON text.
std::string ToJson(const rapidjson::Value& value);
// Parses JSON text; kInvalidArgument with the parser's message and offset.
Result<std::unique_ptr<rapidjson::Document>> ParseJson(const std::string& text);

// Sets (or replaces, keyed by "type") a condition in `object.status.conditions`, with
// lastTransitionTime changed only if the status changed. For pods and nodes.
void SetCondition(rapidjson::Document& object, const std::string& type, const std::string& status,
                  const std::string& reason, const std::string& message,
                  const std::string& now_timestamp);

// The scheduler's and kubelets' wait between passes: blocks until a pod or node
// changes, `deadline` passes or `stop` is set. `watcher` is (re)opened on every
// resource as needed and kept across calls; while none can be opened, it sleeps
// until the deadline.
void WaitForPodOrNodeChange(Store& store, std::unique_ptr<Watcher>& watcher,
                            std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>& stop);

// The same wait, woken by a change to any resource for which `wakes(resource)` holds
// (the controllers also read poddisruptionbudgets).
void WaitForChange(Store& store, std::unique_ptr<Watcher>& watcher,
                   std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& stop,
                   const std::function<bool(const std::string& resource)>& wakes);

// A controller loop until `stop`: `pass`, then the wait above (at most `resync`), then
// `pass` again. A pass that reads every node and pod takes about 0.1 s at 10,000 of
// each; run on every change (a burst of creates is hundreds a second) and every
// resync, passes kept a core busy, an idle kubesim included. So a pass starts no
// sooner than kPassSpacing times its predecessor's time after that one started: a
// tenth of a core at most. (The controller manager's node monitor runs every 5 s, its
// pod GC every 20 s.)
inline constexpr int kPassSpacing = 10;
void RunControllerLoop(Store& store, const std::atomic<bool>& stop,
                       std::chrono::milliseconds resync,
                       const std::function<bool(const std::string& resource)>& wakes,
                       const std::function<void()>& pass);

// ---- Workload kinds (defined in workloads.cpp) -----------------------------------------
// The Kind of a workload resource ("statefulsets" -> "StatefulSet"), "" for others.
const char* WorkloadKindOf(const std::string& resource);
// Workload resources with a status subresource / a spec generation.
bool HasWorkloadStatus(const std::string& resource);
bool TracksWorkloadGeneration(const std::string& resource);
// What a create fills from the new uid, as the registry strategies do after
// FillObjectMetaSystemFields (a Job's generated selector and template labels).
void FillFieldsFromSystemMetadata(const std::string& resource, rapidjson::Document& object);

}  // namespace kubesim
