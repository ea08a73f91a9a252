// What the API server said when a call failed. Carried by the Status that a
// Kubernetes call returns (Status::api_error()), so callers keep one result type
// and can still branch on the HTTP code, the Status reason or Retry-After.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge {

struct ApiError {
  int http_code = 0;    // 0: no HTTP response (connection error, timeout)
  std::string reason;   // Status.reason: NotFound, Conflict, Expired, ...
  std::string message;  // Status.message, or the body when it was not a Status
  std::string details;  // Status.details as compact JSON, "" if absent
  std::optional<std::chrono::seconds> retry_after;  // Retry-After header
};

namespace kube {

// Parses a Kubernetes Status body (or anything else) returned with `http_code`.
// Never fails: a body that is not a Status becomes the message (truncated).
ApiError ParseApiError(int http_code, std::string_view body);

// The Status code a caller should branch on for this HTTP answer.
Status::Code CodeForHttp(int http_code, std::string_view reason);

// A failed Status carrying `error`; the message names the verb and the path.
Status ApiFailure(std::string_view verb, std::string_view path, ApiError error);

// Convenience: the HTTP code of a failed Kubernetes call, 0 if none.
inline int HttpCode(const Status& status) {
  return status.api_error() ? status.api_error()->http_code : 0;
}
inline std::string_view Reason(const Status& status) {
  return status.api_error() ? std::string_view(status.api_error()->reason) : std::string_view();
}

// A 504 whose Status says ResourceVersionTooLarge: the server (a lagging watch
// cache) has not seen the resourceVersion asked for yet. client-go relists with
// resourceVersion "" instead of asking again for the same version.
bool IsResourceVersionTooLarge(const Status& status);

}  // namespace kube
}  // namespace k8sbridge
