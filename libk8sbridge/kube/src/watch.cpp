// Watch streams: the decoder that splits a stream into events, and
// Client::Watch, which runs one stream over the request path of client.cpp.
#include "k8sbridge/kube/client.h"

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "client_internal.h"

namespace k8sbridge::kube {

using internal::AddQuery;
using internal::FailureOf;

std::string_view EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
    case EventType::kBookmark:
      return "BOOKMARK";
    case EventType::kError:
      return "ERROR";
  }
  return "?";
}

Result<WatchEvent> WatchDecoder::ParseLine(std::string_view line) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(line.data(), line.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status::InvalidArgument(
        fmt::format("watch stream: line is not a JSON object: {:.200}", line));
  }
  auto type = doc.FindMember("type");
  auto object = doc.FindMember("object");
  if (type == doc.MemberEnd() || !type->value.IsString()) {
    return Status::InvalidArgument("watch stream: event without a type");
  }
  if (object == doc.MemberEnd() || !object->value.IsObject()) {
    return Status::InvalidArgument("watch stream: event without an object");
  }
  std::string_view t(type->value.GetString(), type->value.GetStringLength());
  WatchEvent ev{EventType::kAdded, Object::FromValue(object->value)};
  if (t == "ADDED") {
    ev.type = EventType::kAdded;
  } else if (t == "MODIFIED") {
    ev.type = EventType::kModified;
  } else if (t == "DELETED") {
    ev.type = EventType::kDeleted;
  } else if (t == "BOOKMARK") {
    ev.type = EventType::kBookmark;
  } else if (t == "ERROR") {
    ev.type = EventType::kError;
  } else {
    return Status::InvalidArgument(
        fmt::format("watch stream: unknown event type {:?}", std::string(t.substr(0, 40))));
  }
  return ev;
}

Status WatchDecoder::Feed(std::string_view data,
                          const std::function<bool(WatchEvent&&)>& on_event) {
  buffer_.append(data);
  size_t start = 0;
  Status result;
  for (;;) {
    size_t nl = buffer_.find('\n', start);
    if (nl == std::string::npos)
      break;
    std::string_view line(buffer_.data() + start, nl - start);
    start = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.remove_suffix(1);
    if (line.empty())
      continue;
    auto ev = ParseLine(line);
    if (!ev.ok()) {
      result = ev.status();
      break;
    }
    if (!on_event(std::move(*ev)))
      break;
  }
  buffer_.erase(0, start);
  if (result.ok() && buffer_.size() > kMaxLine) {
    result = Status::InvalidArgument("watch stream: line longer than 64 MiB");
  }
  if (!result.ok())
    buffer_.clear();
  return result;
}

Status WatchDecoder::Finish(const std::function<bool(WatchEvent&&)>& on_event) {
  std::string rest;
  rest.swap(buffer_);
  while (!rest.empty() && (rest.back() == '\r' || rest.back() == ' ' || rest.back() == '\n'))
    rest.pop_back();
  if (rest.empty())
    return Status::Ok();
  // Servers end every event with a newline, but a last event without one is whole JSON.
  auto ev = ParseLine(rest);
  if (!ev.ok())
    return Status::Unavailable("watch stream: cut off in the middle of an event");
  on_event(std::move(*ev));
  return Status::Ok();
}

Result<WatchEnd> Client::Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& on_event,
                               const CallOptions& call) {
  std::string path = Path(r, ns);
  AddQuery(path, "watch", "1");
  AddQuery(path, "resourceVersion", options.resource_version);
  if (options.allow_bookmarks)
    AddQuery(path, "allowWatchBookmarks", "true");
  AddQuery(path, "labelSelector", options.label_selector);
  AddQuery(path, "fieldSelector", options.field_selector);
  AddQuery(path, "timeoutSeconds", std::to_string(options.timeout_seconds));

  WatchDecoder decoder;
  WatchEnd end;
  end.last_resource_version = options.resource_version;
  Status stream_error;
  bool stop = false;
  auto handle = [&](WatchEvent&& ev) -> bool {
    if (ev.type == EventType::kError) {
      ApiError error = ParseApiError(0, ev.object.ToJson());
      stream_error = ApiFailure("WATCH", path, std::move(error));
      return false;
    }
    ++end.events;
    std::string rv = ev.object.ResourceVersion();
    if (!rv.empty())
      end.last_resource_version = rv;
    if (!on_event(ev))
      stop = true;
    return !stop;
  };
  auto on_body = [&](std::string_view chunk) -> bool {
    Status s = decoder.Feed(chunk, handle);
    if (!s.ok())
      stream_error = s;
    return s.ok() && stream_error.ok() && !stop;
  };
  // The server ends the stream after timeoutSeconds; allow slack before we give up.
  auto total = std::chrono::milliseconds(options.timeout_seconds * 1000L) +
               std::chrono::duration_cast<std::chrono::milliseconds>(options.slack);
  StreamHooks hooks;
  hooks.on_body = on_body;
  hooks.timeout = total;
  if (options.on_open) {
    hooks.on_headers = [&options](const HttpResponse& head) {
      if (head.status >= 200 && head.status < 300)
        options.on_open();
    };
  }
  auto resp = Send("WATCH", "GET", path, "", "", call, &hooks);
  if (!stream_error.ok())
    return stream_error;
  if (!resp.ok()) {
    // A stream that breaks after events arrived ends the watch normally: the caller
    // resumes from the last resourceVersion.
    if (end.events > 0 && resp.status().code() != Status::Code::kCancelled)
      return end;
    return resp.status();
  }
  if (resp->status < 200 || resp->status >= 300)
    return FailureOf("WATCH", path, *resp);
  if (!stop) {
    Status s = decoder.Finish(handle);
    if (!stream_error.ok())
      return stream_error;
    if (!s.ok() && end.events == 0)
      return s;
  }
  return end;
}

}  // namespace k8sbridge::kube
