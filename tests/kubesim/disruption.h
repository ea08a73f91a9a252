// PodDisruptionBudgets (policy/v1): the status the disruption controller keeps
// (pkg/controller/disruption/disruption.go) and the eviction subresource's budget
// check (pkg/registry/core/pod/storage/eviction.go).
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <string>

#include <rapidjson/document.h>

#include "api.h"
#include "store.h"

namespace kubesim {

// The API validation of a PodDisruptionBudget (pkg/apis/policy/validation): not both
// minAvailable and maxUnavailable; an int >= 0 or a percent string "N%" (0..100).
// kInvalidArgument with the API server's field path and words.
Status ValidatePodDisruptionBudget(const rapidjson::Value& pdb);

// The disruption controller's pass: recomputes the status of every
// PodDisruptionBudget from the pods its selector matches (expectedPods, desiredHealthy,
// currentHealthy, disruptionsAllowed, disruptedPods, observedGeneration and the
// DisruptionAllowed condition); writes only the ones that changed.
void UpdateDisruptionBudgets(Store& store);

// POST pods/NAME/eviction with the Eviction `body`: 400 when its metadata.name is not
// NAME; a pod that is Pending, finished or terminating is deleted without looking at
// budgets; otherwise the one budget that selects the pod must allow a disruption (429
// TooManyRequests with a DisruptionBudget cause while disruptionsAllowed is 0, 500 for
// more than one budget); the budget's disruptionsAllowed is decremented and the pod
// recorded in disruptedPods, then the pod gets DisruptionTarget=True (reason
// EvictionByEvictionAPI) and is deleted with the eviction's deleteOptions. `dry_run`
// checks without writing.
ApiResponse EvictPod(Store& store, const Route& route, const rapidjson::Value& body, bool dry_run);

}  // namespace kubesim
