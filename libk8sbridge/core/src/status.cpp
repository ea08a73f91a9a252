#include "k8sbridge/status.h"

namespace k8sbridge {

std::string_view CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "OK";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kAlreadyExists:
      return "already exists";
    case Status::Code::kConflict:
      return "conflict";
    case Status::Code::kPermissionDenied:
      return "permission denied";
    case Status::Code::kUnauthenticated:
      return "unauthenticated";
    case Status::Code::kUnavailable:
      return "unavailable";
    case Status::Code::kTimeout:
      return "timeout";
    case Status::Code::kCancelled:
      return "cancelled";
    case Status::Code::kExpired:
      return "expired";
    case Status::Code::kIoError:
      return "I/O error";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok())
    return "OK";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok())
    return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  Status out(code_, std::move(msg));
  out.api_error_ = api_error_;
  return out;
}

}  // namespace k8sbridge
