// Finalizers, propagationPolicy and the garbage collector of ownerReferences, as
// kube-apiserver's generic registry and kube-controller-manager's garbage collector do
// them (upstream: k8s.io/apiserver/pkg/registry/generic/registry/store.go,
// k8s.io/apimachinery/pkg/api/validation/objectmeta.go,
// k8s.io/kubernetes/pkg/controller/garbagecollector/garbagecollector.go).
// The Store calls the object-level functions under its lock; CollectGarbage is a pass
// the server runs periodically (and tests call).
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <string>

#include <rapidjson/document.h>

#include "store.h"

namespace kubesim {

inline constexpr char kForegroundDeletionFinalizer[] = "foregroundDeletion";
inline constexpr char kOrphanFinalizer[] = "orphan";

// ValidateDeleteOptions: propagationPolicy is Foreground, Background or Orphan, and not
// given together with orphanDependents. The message is the field error (the API wraps
// it in a 422 for DeleteOptions).
Status ValidatePropagation(const DeleteOptions& options);

// deletionFinalizersForGarbageCollection: drops "orphan" and "foregroundDeletion" from
// metadata.finalizers and adds back the one the options (else the object's current
// finalizers) ask for. True when the list changed.
bool ApplyDeletionFinalizers(rapidjson::Document& object, const DeleteOptions& options);

bool HasFinalizers(const rapidjson::Value& object);
// True when metadata.finalizers holds `name`.
bool HasFinalizer(const rapidjson::Value& object, const char* name);
// Removes `finalizer` from the object (the store deletes it when that empties the list
// of an object whose deletion has started). A missing object is no error.
void RemoveFinalizer(Store& store, const std::string& resource, const std::string& ns,
                     const std::string& name, const char* finalizer);

// markAsDeleting: deletionTimestamp now (unless already earlier), grace period 0.
void MarkAsDeleting(rapidjson::Document& object, const std::string& now_timestamp,
                    bool now_is_earlier);

// ValidateObjectMetaUpdate's rule: no new finalizer once deletion has started.
Status CheckNoNewFinalizers(const rapidjson::Value& stored, const rapidjson::Value& next);

// ShouldDeleteDuringUpdate: the update empties the finalizers of an object whose
// deletion has started without a pending grace period, so the update deletes it.
bool ShouldDeleteDuringUpdate(const rapidjson::Value& stored, const rapidjson::Value& next);

// One pass of the garbage collector: owners being deleted with "orphan" get their
// dependents' ownerReferences removed, then lose the finalizer; owners with
// "foregroundDeletion" get their dependents deleted and lose the finalizer once no
// dependent with blockOwnerDeletion remains; dependents whose owners (by uid) are all
// gone are deleted in the background, dangling references to gone owners are removed.
// References to kinds kubesim does not serve are left alone (the real collector cannot
// resolve them either).
void CollectGarbage(Store& store);

}  // namespace kubesim
