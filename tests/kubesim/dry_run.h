// dryRun=All on every write verb, as kube-apiserver does it: the request runs through
// validation and admission and the store computes the result, but nothing is stored, no
// resourceVersion is taken and no watch event is sent (upstream:
// k8s.io/apiserver/pkg/registry/generic/registry/dryrun.go, the handlers' option checks
// in k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go).
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>

#include "api.h"

namespace kubesim {

// The request's dryRun values (query, or for DELETE a DeleteOptions body) checked as
// the handlers check them. Sets `dry_run` for "All"; any other value is 422 Invalid,
// e.g. `DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value:
// []string{"x"}: supported values: "All"`. Reads and watches ignore dryRun.
std::optional<ApiResponse> CheckDryRun(const ApiRequest& request, const Route& route,
                                       bool& dry_run);

}  // namespace kubesim
