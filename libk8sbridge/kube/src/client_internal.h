// What the client's sources share: client.cpp (the request path), verbs.cpp (the
// API's verbs) and watch.cpp (watch streams). Not an installed header.
#pragma once

#include <string>
#include <string_view>

#include "k8sbridge/kube/transport.h"
#include "k8sbridge/status.h"

namespace k8sbridge::kube::internal {

// Appends `key`=`value`, escaped, to the query of `path`; nothing for an empty value.
void AddQuery(std::string& path, std::string_view key, std::string_view value);

// The failure of an answer that is no 2xx: its API Status and its Retry-After.
Status FailureOf(std::string_view method, const std::string& path, const HttpResponse& resp);

}  // namespace k8sbridge::kube::internal
