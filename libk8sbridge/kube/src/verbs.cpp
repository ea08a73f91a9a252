// The API's verbs on a resource (get, list, create, replace, patch, delete,
// update) over the request path of client.cpp.
#include "k8sbridge/kube/client.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "client_internal.h"

namespace k8sbridge::kube {

namespace {

std::string Escape(std::string_view in) {
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

namespace internal {

void AddQuery(std::string& path, std::string_view key, std::string_view value) {
  if (value.empty())
    return;
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += key;
  path += '=';
  path += Escape(value);
}

}  // namespace internal

using internal::AddQuery;
using internal::FailureOf;

std::string_view ContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

std::string Client::Path(const Resource& r, std::string_view ns, std::string_view name) {
  std::string path(r.api_path);
  if (r.namespaced && !ns.empty())
    path += fmt::format("/namespaces/{}", Escape(ns));
  path += '/';
  path += r.plural;
  if (!name.empty()) {
    path += '/';
    path += Escape(name);
  }
  return path;
}

Result<Object> Client::ObjectCall(std::string_view verb, std::string_view method,
                                  const std::string& path, std::string_view body,
                                  std::string_view content_type, const CallOptions& call) {
  auto resp = Send(verb, method, path, body, content_type, call);
  if (!resp.ok())
    return resp.status();
  if (resp->status < 200 || resp->status >= 300)
    return FailureOf(method, path, *resp);
  if (resp->body.empty() || !call.decode_answer)
    return Object();
  auto obj = Object::Parse(resp->body);
  if (!obj.ok())
    return obj.status().WithContext(fmt::format("{} {}: answer", method, path));
  return obj;
}

Result<Object> Client::Get(const Resource& r, std::string_view ns, std::string_view name,
                           const CallOptions& call) {
  return ObjectCall("GET", "GET", Path(r, ns, name), "", "", call);
}

Result<ObjectList> Client::List(const Resource& r, std::string_view ns, const ListOptions& options,
                                const CallOptions& call) {
  bool restarted = false;
  ObjectList out;
  std::string cont;
  for (;;) {
    auto page = ListPage(r, ns, options, cont, call);
    if (!page.ok() && page.status().code() == Status::Code::kExpired && !cont.empty() &&
        !restarted) {
      // The continue token expired between pages: start over once (new snapshot).
      restarted = true;
      out = ObjectList();
      cont.clear();
      logger_->Info("kube: LIST {}: continue token expired; listing again from the start",
                    Path(r, ns));
      continue;
    }
    if (!page.ok())
      return page.status();
    std::move(page->items.begin(), page->items.end(), std::back_inserter(out.items));
    out.resource_version = std::move(page->resource_version);
    cont = std::move(page->continue_token);
    if (cont.empty())
      return out;
  }
}

Result<ObjectList> Client::ListPage(const Resource& r, std::string_view ns,
                                    const ListOptions& options, std::string_view continue_token,
                                    const CallOptions& call) {
  std::string path = Path(r, ns);
  AddQuery(path, "labelSelector", options.label_selector);
  AddQuery(path, "fieldSelector", options.field_selector);
  if (options.page_size > 0)
    AddQuery(path, "limit", std::to_string(options.page_size));
  if (continue_token.empty()) {
    AddQuery(path, "resourceVersion", options.resource_version);
  } else {
    AddQuery(path, "continue", continue_token);
  }
  auto resp = Send("LIST", "GET", path, "", "", call);
  if (!resp.ok())
    return resp.status();
  if (resp->status < 200 || resp->status >= 300)
    return FailureOf("LIST", path, *resp);
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(resp->body.data(), resp->body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status::Unavailable(fmt::format("LIST {}: answer is not a JSON object", path));
  }
  ObjectList out;
  auto items = doc.FindMember("items");
  if (items != doc.MemberEnd() && items->value.IsArray()) {
    out.items.reserve(items->value.Size());
    for (const auto& item : items->value.GetArray()) {
      if (item.IsObject())
        out.items.push_back(Object::FromValue(item));
    }
  } else if (items != doc.MemberEnd() && !items->value.IsNull()) {
    return Status::Unavailable(fmt::format("LIST {}: items is not a list", path));
  }
  if (auto meta = doc.FindMember("metadata"); meta != doc.MemberEnd()) {
    out.resource_version = StringMember(&meta->value, "resourceVersion");
    out.continue_token = StringMember(&meta->value, "continue");
  }
  return out;
}

Result<Object> Client::Create(const Resource& r, std::string_view ns, const Object& object,
                              const CallOptions& call) {
  std::string n(ns);
  if (n.empty())
    n = object.Namespace();
  return ObjectCall("POST", "POST", Path(r, n), object.ToJson(), "application/json", call);
}

Result<Object> Client::Replace(const Resource& r, std::string_view ns, const Object& object,
                               const CallOptions& call) {
  std::string n(ns);
  if (n.empty())
    n = object.Namespace();
  if (object.Name().empty())
    return Status::InvalidArgument("Replace: object has no metadata.name");
  return ObjectCall("PUT", "PUT", Path(r, n, object.Name()), object.ToJson(), "application/json",
                    call);
}

Result<Object> Client::Patch(const Resource& r, std::string_view ns, std::string_view name,
                             PatchType type, std::string_view body, const PatchOptions& options,
                             const CallOptions& call) {
  std::string path = Path(r, ns, name);
  if (type == PatchType::kApply) {
    if (options.field_manager.empty()) {
      return Status::InvalidArgument("Patch: server-side apply needs PatchOptions.field_manager");
    }
    AddQuery(path, "fieldManager", options.field_manager);
    if (options.force)
      AddQuery(path, "force", "true");
  } else if (!options.field_manager.empty()) {
    AddQuery(path, "fieldManager", options.field_manager);
  }
  return ObjectCall("PATCH", "PATCH", path, body, ContentType(type), call);
}

Result<Object> Client::Delete(const Resource& r, std::string_view ns, std::string_view name,
                              const DeleteOptions& options, const CallOptions& call) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("kind");
  w.String("DeleteOptions");
  w.Key("apiVersion");
  w.String("v1");
  if (options.grace_period_seconds) {
    w.Key("gracePeriodSeconds");
    w.Int64(*options.grace_period_seconds);
  }
  if (!options.propagation_policy.empty()) {
    w.Key("propagationPolicy");
    w.String(options.propagation_policy.c_str());
  }
  if (!options.precondition_uid.empty() || !options.precondition_resource_version.empty()) {
    w.Key("preconditions");
    w.StartObject();
    if (!options.precondition_uid.empty()) {
      w.Key("uid");
      w.String(options.precondition_uid.c_str());
    }
    if (!options.precondition_resource_version.empty()) {
      w.Key("resourceVersion");
      w.String(options.precondition_resource_version.c_str());
    }
    w.EndObject();
  }
  w.EndObject();
  auto obj =
      ObjectCall("DELETE", "DELETE", Path(r, ns, name),
                 std::string_view(buffer.GetString(), buffer.GetSize()), "application/json", call);
  if (obj.ok() && obj->Kind() == "Status")
    return Object();
  return obj;
}

Result<Object> Client::Update(const Resource& r, std::string_view ns, std::string_view name,
                              const std::function<Status(Object&)>& mutate, int attempts,
                              const CallOptions& call) {
  Status last;
  for (int i = 0; i < std::max(1, attempts); ++i) {
    auto current = Get(r, ns, name, call);
    if (!current.ok())
      return current.status();
    Object obj = std::move(*current);
    if (Status s = mutate(obj); !s.ok())
      return s;
    auto updated = Replace(r, ns, obj, call);
    if (updated.ok() || updated.status().code() != Status::Code::kConflict)
      return updated;
    last = updated.status();
    logger_->Debug("kube: update {}: conflict, reading again", Path(r, ns, name));
  }
  return last.WithContext(fmt::format("update gave up after {} conflicts", attempts));
}

Result<Object> SetNodeUnschedulable(Client& c, std::string_view node, bool unschedulable) {
  return c.Patch(
      kNodes, "", node, PatchType::kMerge,
      unschedulable ? R"({"spec":{"unschedulable":true}})" : R"({"spec":{"unschedulable":null}})");
}

}  // namespace k8sbridge::kube
