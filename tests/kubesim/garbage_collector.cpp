// The garbage collector of ownerReferences (finalizers.h), after
// k8s.io/kubernetes/pkg/controller/garbagecollector/garbagecollector.go: its
// attemptToDeleteItem (classify each owner reference as solid, dangling or waiting for
// a foreground deletion), processDeletingDependentsItem and orphanDependents.
#include <map>
#include <optional>
#include <vector>

#include "finalizers.h"

namespace kubesim {

namespace {

struct Item {
  std::string resource;
  std::string ns;
  std::string name;
  ObjectPtr object;
};

// Every object that can own or depend, and the dependents of each owner uid.
struct Graph {
  std::vector<Item> items;
  std::multimap<std::string, size_t> dependents;  // owner uid -> index in items
};

const char* const kCollectedResources[] = {"pods",
                                           "configmaps",
                                           "secrets",
                                           "events",
                                           "leases",
                                           "nodes",
                                           "namespaces",
                                           "statefulsets",
                                           "deployments",
                                           "replicasets",
                                           "jobs",
                                           "persistentvolumeclaims",
                                           "persistentvolumes",
                                           "services",
                                           "endpoints",
                                           "controllerrevisions"};

Graph Snapshot(Store& store) {
  Graph graph;
  // Only owners being deleted and dependents matter: the store's index of them.
  ListPage relevant;
  relevant.owned_or_deleting = true;
  for (const char* resource : kCollectedResources) {
    for (auto& object : store.List(resource, "", {}, relevant).items) {
      graph.items.push_back(Item{resource, GetString(*object, "metadata.namespace"),
                                 GetString(*object, "metadata.name"), object});
      const rapidjson::Value* refs = Find(*object, "metadata.ownerReferences");
      if (refs == nullptr || !refs->IsArray())
        continue;
      for (const auto& ref : refs->GetArray())
        graph.dependents.emplace(GetString(ref, "uid"), graph.items.size() - 1);
    }
  }
  return graph;
}

// The resource of an owner reference's kind, for the kinds kubesim serves.
std::optional<std::string> ResourceOfKind(const std::string& api_version, const std::string& kind) {
  std::string group = api_version.find('/') == std::string::npos
                          ? ""
                          : api_version.substr(0, api_version.find('/'));
  static const std::map<std::pair<std::string, std::string>, std::string> kinds = {
      {{"", "Pod"}, "pods"},
      {{"", "Node"}, "nodes"},
      {{"", "Namespace"}, "namespaces"},
      {{"", "ConfigMap"}, "configmaps"},
      {{"", "Secret"}, "secrets"},
      {{"", "Event"}, "events"},
      {{"events.k8s.io", "Event"}, "events"},
      {{"coordination.k8s.io", "Lease"}, "leases"},
      {{"apps", "StatefulSet"}, "statefulsets"},
      {{"apps", "Deployment"}, "deployments"},
      {{"apps", "ReplicaSet"}, "replicasets"},
      {{"apps", "ControllerRevision"}, "controllerrevisions"},
      {{"batch", "Job"}, "jobs"},
      {{"", "PersistentVolumeClaim"}, "persistentvolumeclaims"},
      {{"", "PersistentVolume"}, "persistentvolumes"},
      {{"", "Service"}, "services"},
      {{"", "Endpoints"}, "endpoints"},
  };
  auto it = kinds.find({group, kind});
  if (it == kinds.end())
    return std::nullopt;
  return it->second;
}

bool BeingDeleted(const rapidjson::Value& object) {
  return Find(object, "metadata.deletionTimestamp") != nullptr;
}

bool Blocks(const rapidjson::Value& ref) {
  const rapidjson::Value* block = Find(ref, "blockOwnerDeletion");
  return block != nullptr && block->IsBool() && block->GetBool();
}

void RemoveFinalizer(Store& store, const Item& item, const char* finalizer) {
  kubesim::RemoveFinalizer(store, item.resource, item.ns, item.name, finalizer);
}

// Removes the owner references whose uid is in `uids`.
void RemoveOwnerReferences(Store& store, const Item& item, const std::vector<std::string>& uids) {
  (void)store.Mutate(item.resource, item.ns, item.name, [&](rapidjson::Document& object) {
    rapidjson::Value* refs =
        const_cast<rapidjson::Value*>(Find(object, "metadata.ownerReferences"));
    if (refs == nullptr || !refs->IsArray())
      return Status::Ok();
    for (auto it = refs->Begin(); it != refs->End();) {
      bool drop = std::find(uids.begin(), uids.end(), GetString(*it, "uid")) != uids.end();
      it = drop ? refs->Erase(it) : it + 1;
    }
    if (refs->Empty())
      object["metadata"].RemoveMember("ownerReferences");
    return Status::Ok();
  });
}

enum class OwnerState { kSolid, kDangling, kWaitingForDependents };

OwnerState Classify(Store& store, const Item& dependent, const rapidjson::Value& ref) {
  auto resource = ResourceOfKind(GetString(ref, "apiVersion"), GetString(ref, "kind"));
  if (!resource)
    return OwnerState::kSolid;  // unresolvable kinds are never collected
  std::string ns = Store::IsClusterScoped(*resource) ? "" : dependent.ns;
  auto owner = store.Get(*resource, ns, GetString(ref, "name"));
  if (!owner.ok() || GetString(**owner, "metadata.uid") != GetString(ref, "uid"))
    return OwnerState::kDangling;
  if (BeingDeleted(**owner) && HasFinalizer(**owner, kForegroundDeletionFinalizer) && Blocks(ref))
    return OwnerState::kWaitingForDependents;
  return OwnerState::kSolid;
}

// attemptToDeleteItem for an object with owner references that is not being deleted.
void CollectDependent(Store& store, const Graph& graph, const Item& snapshot) {
  if (Find(*snapshot.object, "metadata.ownerReferences") == nullptr)
    return;
  // Read it again: this pass may already have changed it (an orphaning owner).
  auto current = store.Get(snapshot.resource, snapshot.ns, snapshot.name);
  if (!current.ok())
    return;
  Item item{snapshot.resource, snapshot.ns, snapshot.name, *current};
  const rapidjson::Value* refs = Find(*item.object, "metadata.ownerReferences");
  if (refs == nullptr || !refs->IsArray() || refs->Empty() || BeingDeleted(*item.object))
    return;
  bool solid = false;
  bool waiting = false;
  std::vector<std::string> gone;  // dangling or waiting: references to drop if kept
  for (const auto& ref : refs->GetArray()) {
    OwnerState state = Classify(store, item, ref);
    solid = solid || state == OwnerState::kSolid;
    waiting = waiting || state == OwnerState::kWaitingForDependents;
    if (state != OwnerState::kSolid)
      gone.push_back(GetString(ref, "uid"));
  }
  if (solid) {
    if (!gone.empty())
      RemoveOwnerReferences(store, item, gone);
    return;
  }
  DeleteOptions options;
  options.precondition_uid = GetString(*item.object, "metadata.uid");
  if (waiting && graph.dependents.count(*options.precondition_uid) != 0)
    options.propagation_policy = "Foreground";
  (void)store.Delete(item.resource, item.ns, item.name, options);
}

// An owner being deleted with the "orphan" or "foregroundDeletion" finalizer.
void FinalizeOwner(Store& store, const Graph& graph, const Item& owner) {
  std::string uid = GetString(*owner.object, "metadata.uid");
  auto [begin, end] = graph.dependents.equal_range(uid);
  if (HasFinalizer(*owner.object, kOrphanFinalizer)) {
    for (auto it = begin; it != end; ++it)
      RemoveOwnerReferences(store, graph.items[it->second], {uid});
    RemoveFinalizer(store, owner, kOrphanFinalizer);
    return;
  }
  if (!HasFinalizer(*owner.object, kForegroundDeletionFinalizer))
    return;
  for (auto it = begin; it != end; ++it) {
    const rapidjson::Value* refs =
        Find(*graph.items[it->second].object, "metadata.ownerReferences");
    for (const auto& ref : refs->GetArray()) {
      if (GetString(ref, "uid") == uid && Blocks(ref))
        return;  // a blocking dependent still exists: the owner waits
    }
  }
  RemoveFinalizer(store, owner, kForegroundDeletionFinalizer);
}

}  // namespace

bool HasFinalizer(const rapidjson::Value& object, const char* name) {
  const rapidjson::Value* list = Find(object, "metadata.finalizers");
  if (list == nullptr || !list->IsArray())
    return false;
  for (const auto& f : list->GetArray()) {
    if (f.IsString() && std::string(f.GetString()) == name)
      return true;
  }
  return false;
}

void RemoveFinalizer(Store& store, const std::string& resource, const std::string& ns,
                     const std::string& name, const char* finalizer) {
  (void)store.Mutate(resource, ns, name, [&](rapidjson::Document& object) {
    rapidjson::Value* list = const_cast<rapidjson::Value*>(Find(object, "metadata.finalizers"));
    if (list == nullptr || !list->IsArray())
      return Status::Ok();
    for (auto it = list->Begin(); it != list->End();) {
      it = (it->IsString() && std::string(it->GetString()) == finalizer) ? list->Erase(it) : it + 1;
    }
    if (list->Empty())
      object["metadata"].RemoveMember("finalizers");
    return Status::Ok();
  });
}

void CollectGarbage(Store& store) {
  Graph graph = Snapshot(store);
  for (const Item& item : graph.items) {
    if (BeingDeleted(*item.object))
      FinalizeOwner(store, graph, item);
  }
  for (const Item& item : graph.items)
    CollectDependent(store, graph, item);
}

}  // namespace kubesim
