#include "k8sbridge/kube/api_error.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fmt/format.h>

#include "k8sbridge/kube/object.h"

namespace k8sbridge::kube {

namespace {
constexpr size_t kMaxMessage = 1024;  // a body that is not a Status may be an HTML page

std::string Truncated(std::string_view s) {
  if (s.size() <= kMaxMessage)
    return std::string(s);
  return std::string(s.substr(0, kMaxMessage)) + "...";
}
}  // namespace

ApiError ParseApiError(int http_code, std::string_view body) {
  ApiError error;
  error.http_code = http_code;
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject() || StringMember(&doc, "kind") != "Status") {
    error.message = Truncated(body);
    return error;
  }
  error.reason = Truncated(StringMember(&doc, "reason"));
  error.message = Truncated(StringMember(&doc, "message"));
  auto code = doc.FindMember("code");
  if (http_code == 0 && code != doc.MemberEnd() && code->value.IsInt()) {
    error.http_code = code->value.GetInt();
  }
  auto details = doc.FindMember("details");
  if (details != doc.MemberEnd() && details->value.IsObject()) {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    details->value.Accept(writer);
    error.details = Truncated(std::string_view(buffer.GetString(), buffer.GetSize()));
  }
  return error;
}

Status::Code CodeForHttp(int http_code, std::string_view reason) {
  if (reason == "Expired" || reason == "Gone" || http_code == 410)
    return Status::Code::kExpired;
  switch (http_code) {
    case 400:
    case 415:
    case 422:
      return Status::Code::kInvalidArgument;
    case 401:
      return Status::Code::kUnauthenticated;
    case 403:
      return Status::Code::kPermissionDenied;
    case 404:
      return Status::Code::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? Status::Code::kAlreadyExists : Status::Code::kConflict;
    case 408:
    case 504:
      return Status::Code::kTimeout;
    case 429:
      return Status::Code::kUnavailable;
    default:
      break;
  }
  if (http_code >= 500)
    return Status::Code::kUnavailable;
  return Status::Code::kInternal;
}

namespace {
Status Make(Status::Code code, std::string msg) {
  switch (code) {
    case Status::Code::kInvalidArgument:
      return Status::InvalidArgument(std::move(msg));
    case Status::Code::kNotFound:
      return Status::NotFound(std::move(msg));
    case Status::Code::kAlreadyExists:
      return Status::AlreadyExists(std::move(msg));
    case Status::Code::kConflict:
      return Status::Conflict(std::move(msg));
    case Status::Code::kPermissionDenied:
      return Status::PermissionDenied(std::move(msg));
    case Status::Code::kUnauthenticated:
      return Status::Unauthenticated(std::move(msg));
    case Status::Code::kUnavailable:
      return Status::Unavailable(std::move(msg));
    case Status::Code::kTimeout:
      return Status::Timeout(std::move(msg));
    case Status::Code::kCancelled:
      return Status::Cancelled(std::move(msg));
    case Status::Code::kExpired:
      return Status::Expired(std::move(msg));
    case Status::Code::kIoError:
      return Status::IoError(std::move(msg));
    default:
      return Status::Internal(std::move(msg));
  }
}
}  // namespace

bool IsResourceVersionTooLarge(const Status& status) {
  const ApiError* error = status.api_error();
  if (!error || error->http_code != 504)
    return false;
  // The cause type is what upstream sets (CauseTypeResourceVersionTooLarge); older
  // servers only said so in the message.
  return error->details.find("ResourceVersionTooLarge") != std::string::npos ||
         error->message.rfind("Too large resource version", 0) == 0;
}

Status ApiFailure(std::string_view verb, std::string_view path, ApiError error) {
  std::string msg = fmt::format("{} {}: HTTP {}", verb, path, error.http_code);
  if (!error.reason.empty())
    msg += fmt::format(" {}", error.reason);
  if (!error.message.empty())
    msg += fmt::format(": {}", error.message);
  Status::Code code = CodeForHttp(error.http_code, error.reason);
  return Make(code, std::move(msg))
      .WithApiError(std::make_shared<const ApiError>(std::move(error)));
}

}  // namespace k8sbridge::kube
