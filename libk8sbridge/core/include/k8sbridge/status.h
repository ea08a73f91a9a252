// Status and Result<T>: the error type of every k8sbridge API.
//
// No exception crosses a library or plugin boundary. A call that can fail returns
// a Status (or a Result<T> that holds either a value or a failed Status); the
// message is written for the person who will read it in a log, naming the input
// that was wrong and what to do about it.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace k8sbridge {

// Details of a failed Kubernetes API call (HTTP code, Status reason, details,
// Retry-After), defined in k8sbridge/kube/api_error.h. A Status from the Kubernetes
// client carries one; every other Status has none.
struct ApiError;

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad input: config, template, argument; do not retry
    kNotFound,
    kAlreadyExists,
    kConflict,  // optimistic-concurrency failure: re-read and retry
    kPermissionDenied,
    kUnauthenticated,
    kUnavailable,  // transient: connection refused, 5xx, 429
    kTimeout,      // a deadline passed; the outcome may be unknown
    kCancelled,
    kExpired,   // e.g. a watch's resourceVersion is too old (410)
    kIoError,   // local file or process I/O
    kInternal,  // a bug; logged, never crashes a daemon
  };

  Status() = default;  // OK

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {Code::kAlreadyExists, std::move(msg)}; }
  static Status Conflict(std::string msg) { return {Code::kConflict, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) {
    return {Code::kPermissionDenied, std::move(msg)};
  }
  static Status Unauthenticated(std::string msg) {
    return {Code::kUnauthenticated, std::move(msg)};
  }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {Code::kTimeout, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
  static Status Expired(std::string msg) { return {Code::kExpired, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "<code name>: <message>", or "OK".
  std::string ToString() const;

  // A copy whose message is "<context>: <message>"; keeps the code. Used to add
  // the file, node or object a lower-level error was about.
  Status WithContext(std::string_view context) const;

  // The Kubernetes API error behind this Status, or nullptr.
  const ApiError* api_error() const { return api_error_.get(); }
  Status WithApiError(std::shared_ptr<const ApiError> error) const {
    Status copy = *this;
    copy.api_error_ = std::move(error);
    return copy;
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
  std::shared_ptr<const ApiError> api_error_;
};

std::string_view CodeName(Status::Code code);

// Either a T or a failed Status. Constructing a Result from an OK status is a bug.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(value_).ok() && "Result built from an OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace k8sbridge
