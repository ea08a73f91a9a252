// The access reviews of authorization.k8s.io/v1 (pkg/registry/authorization/*, the
// validation of pkg/apis/authorization/validation) and authentication.k8s.io/v1
// SelfSubjectReview (pkg/registry/authentication/selfsubjectreview): declared in rbac.h.
#include <fmt/format.h>

#include "patch.h"
#include "rbac.h"

namespace kubesim {

namespace {

constexpr const char* kAuthorizationGroup = "authorization.k8s.io";
constexpr const char* kAuthenticationGroup = "authentication.k8s.io";

struct ReviewKind {
  const char* group;
  const char* resource;
  const char* kind;
};

const std::vector<ReviewKind>& ReviewKinds() {
  static const std::vector<ReviewKind> kinds = {
      {kAuthorizationGroup, "selfsubjectaccessreviews", "SelfSubjectAccessReview"},
      {kAuthorizationGroup, "subjectaccessreviews", "SubjectAccessReview"},
      {kAuthorizationGroup, "localsubjectaccessreviews", "LocalSubjectAccessReview"},
      {kAuthorizationGroup, "selfsubjectrulesreviews", "SelfSubjectRulesReview"},
      {kAuthenticationGroup, "selfsubjectreviews", "SelfSubjectReview"},
  };
  return kinds;
}

const ReviewKind* FindReview(const std::string& group, const std::string& resource) {
  for (const auto& k : ReviewKinds()) {
    if (group == k.group && resource == k.resource)
      return &k;
  }
  return nullptr;
}

rapidjson::Value StringArray(const std::vector<std::string>& values,
                             rapidjson::Document::AllocatorType& a) {
  rapidjson::Value out(rapidjson::kArrayType);
  for (const auto& v : values)
    out.PushBack(rapidjson::Value(v.c_str(), a), a);
  return out;
}

// ValidateSubjectAccessReviewSpec (the user check only for SubjectAccessReview).
FieldErrors ValidateAccessReviewSpec(const rapidjson::Value& doc, bool needs_user) {
  FieldErrors errors;
  const rapidjson::Value* resource = Find(doc, "spec.resourceAttributes");
  const rapidjson::Value* non_resource = Find(doc, "spec.nonResourceAttributes");
  bool has_resource = resource != nullptr && !resource->IsNull();
  bool has_non_resource = non_resource != nullptr && !non_resource->IsNull();
  if (has_resource && has_non_resource) {
    errors.push_back(
        InvalidRaw("spec.nonResourceAttributes",
                   fmt::format("&authorization.NonResourceAttributes{{Path:{}, Verb:{}}}",
                               GoQuote(GetString(*non_resource, "path")),
                               GoQuote(GetString(*non_resource, "verb"))),
                   "cannot be specified in combination with resourceAttributes"));
  }
  if (!has_resource && !has_non_resource) {
    errors.push_back(InvalidRaw("spec.resourceAttributes", "null",
                                "exactly one of nonResourceAttributes or resourceAttributes must "
                                "be specified"));
  }
  if (needs_user && GetString(doc, "spec.user").empty() && StringsAt(doc, "spec.groups").empty()) {
    errors.push_back(Invalid("spec.user", GetString(doc, "spec.user"),
                             "at least one of user or group must be specified"));
  }
  return errors;
}

// authorizationutil.ResourceAttributesFrom / NonResourceAttributesFrom.
RequestAttributes AttributesOfSpec(const rapidjson::Value& doc, const UserInfo& user) {
  RequestAttributes a;
  a.user = user;
  if (const rapidjson::Value* r = Find(doc, "spec.resourceAttributes");
      r != nullptr && !r->IsNull()) {
    a.resource_request = true;
    a.verb = GetString(*r, "verb");
    a.api_group = GetString(*r, "group");
    a.api_version = GetString(*r, "version");
    a.resource = GetString(*r, "resource");
    a.subresource = GetString(*r, "subresource");
    a.name = GetString(*r, "name");
    a.ns = GetString(*r, "namespace");
  } else {
    a.verb = GetString(doc, "spec.nonResourceAttributes.verb");
    a.path = GetString(doc, "spec.nonResourceAttributes.path");
  }
  return a;
}

UserInfo UserOfSpec(const rapidjson::Value& doc) {
  UserInfo user;
  user.name = GetString(doc, "spec.user");
  user.uid = GetString(doc, "spec.uid");
  user.groups = StringsAt(doc, "spec.groups");
  if (const rapidjson::Value* extra = Find(doc, "spec.extra");
      extra != nullptr && extra->IsObject()) {
    for (const auto& m : extra->GetObject()) {
      auto& values = user.extra[m.name.GetString()];
      if (m.value.IsArray()) {
        for (const auto& v : m.value.GetArray())
          values.emplace_back(v.IsString() ? v.GetString() : "");
      }
    }
  }
  return user;
}

void SetAccessStatus(rapidjson::Document& doc, const Decision& decision) {
  auto& a = doc.GetAllocator();
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("allowed", decision.allowed, a);
  if (!decision.reason.empty())
    status.AddMember("reason", rapidjson::Value(decision.reason.c_str(), a), a);
  doc.RemoveMember("status");
  doc.AddMember("status", status, a);
}

// SelfSubjectRulesReview status: the rules, split as ConvertToResourceRules does.
void SetRulesStatus(rapidjson::Document& doc, const Store& store, const UserInfo& user) {
  auto& a = doc.GetAllocator();
  std::vector<std::string> errors;
  std::vector<rapidjson::Document> rules =
      RulesFor(store, user, GetString(doc, "spec.namespace"), errors);
  rapidjson::Value resource_rules(rapidjson::kArrayType);
  rapidjson::Value non_resource_rules(rapidjson::kArrayType);
  for (const auto& rule : rules) {
    rapidjson::Value out(rapidjson::kObjectType);
    out.AddMember("verbs", StringArray(StringsAt(rule, "verbs"), a), a);
    if (!StringsAt(rule, "nonResourceURLs").empty()) {
      out.AddMember("nonResourceURLs", StringArray(StringsAt(rule, "nonResourceURLs"), a), a);
      non_resource_rules.PushBack(out, a);
      continue;
    }
    out.AddMember("apiGroups", StringArray(StringsAt(rule, "apiGroups"), a), a);
    out.AddMember("resources", StringArray(StringsAt(rule, "resources"), a), a);
    if (!StringsAt(rule, "resourceNames").empty())
      out.AddMember("resourceNames", StringArray(StringsAt(rule, "resourceNames"), a), a);
    resource_rules.PushBack(out, a);
  }
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("resourceRules", resource_rules, a);
  status.AddMember("nonResourceRules", non_resource_rules, a);
  status.AddMember("incomplete", !errors.empty(), a);
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors)
      joined += (joined.empty() ? "" : ", ") + e;
    status.AddMember(
        "evaluationError",
        rapidjson::Value((errors.size() == 1 ? joined : "[" + joined + "]").c_str(), a), a);
  }
  doc.RemoveMember("status");
  doc.AddMember("status", status, a);
}

void SetUserInfoStatus(rapidjson::Document& doc, const UserInfo& user) {
  auto& a = doc.GetAllocator();
  rapidjson::Value info(rapidjson::kObjectType);
  info.AddMember("username", rapidjson::Value(user.name.c_str(), a), a);
  if (!user.uid.empty())
    info.AddMember("uid", rapidjson::Value(user.uid.c_str(), a), a);
  info.AddMember("groups", StringArray(user.groups, a), a);
  if (!user.extra.empty()) {
    rapidjson::Value extra(rapidjson::kObjectType);
    for (const auto& [key, values] : user.extra)
      extra.AddMember(rapidjson::Value(key.c_str(), a), StringArray(values, a), a);
    info.AddMember("extra", extra, a);
  }
  rapidjson::Value status(rapidjson::kObjectType);
  status.AddMember("userInfo", info, a);
  doc.RemoveMember("status");
  doc.AddMember("status", status, a);
}

}  // namespace

bool IsReviewResource(const std::string& group, const std::string& resource) {
  return FindReview(group, resource) != nullptr;
}

ApiResponse HandleReview(const Store& store, const ApiRequest& request, const Route& route) {
  const ReviewKind* kind = FindReview(route.group, route.resource);
  if (route.verb != "create" || !route.name.empty()) {
    return StatusResponse(405, "MethodNotAllowed",
                          "the server does not allow this method on the requested resource");
  }
  auto parsed = request.content_type.find("yaml") != std::string::npos ? YamlToJson(request.body)
                                                                       : ParseJson(request.body);
  if (!parsed.ok() || !(*parsed)->IsObject())
    return StatusResponse(400, "BadRequest", "the body is not a JSON object");
  rapidjson::Document& doc = **parsed;
  auto& a = doc.GetAllocator();
  doc.RemoveMember("apiVersion");
  doc.RemoveMember("kind");
  doc.AddMember("kind", rapidjson::Value(kind->kind, a), a);
  doc.AddMember("apiVersion", rapidjson::Value(fmt::format("{}/v1", kind->group).c_str(), a), a);
  if (!doc.HasMember("metadata") || !doc["metadata"].IsObject()) {
    doc.RemoveMember("metadata");
    doc.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType), a);
  }
  doc["metadata"].RemoveMember("creationTimestamp");
  doc["metadata"].AddMember("creationTimestamp", rapidjson::Value(rapidjson::kNullType), a);
  std::string resource = route.resource;
  UserInfo requestor = UserOfRequest(request);
  if (resource == "selfsubjectreviews") {
    SetUserInfoStatus(doc, requestor);
  } else if (resource == "selfsubjectrulesreviews") {
    SetRulesStatus(doc, store, requestor);
  } else {
    bool self = resource == "selfsubjectaccessreviews";
    FieldErrors errors = ValidateAccessReviewSpec(doc, !self);
    if (!errors.empty())
      return InvalidResponse(kind->kind, kind->group, GetString(doc, "metadata.name"), errors);
    RequestAttributes attributes = AttributesOfSpec(doc, self ? requestor : UserOfSpec(doc));
    if (resource == "localsubjectaccessreviews") {
      if (!attributes.resource_request || attributes.ns != route.ns) {
        return StatusResponse(
            400, "BadRequest",
            fmt::format("spec.resourceAttributes.namespace must match namespace: {}", route.ns));
      }
    }
    SetAccessStatus(doc, Authorize(store, attributes));
  }
  ApiResponse response;
  response.code = 201;
  response.body = ToJson(doc);
  return response;
}

}  // namespace kubesim
