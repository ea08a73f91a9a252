#include "rbac.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace kubesim {

namespace {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos)
      slash = path.size();
    if (slash > start)
      parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

std::string Lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The verb of a resource request from its HTTP method (get becomes list or watch
// later, delete deletecollection, when no name is given).
std::string VerbOfMethod(const std::string& method) {
  if (method == "POST")
    return "create";
  if (method == "GET" || method == "HEAD")
    return "get";
  if (method == "PUT")
    return "update";
  if (method == "PATCH")
    return "patch";
  if (method == "DELETE")
    return "delete";
  return "";
}

// ListOptions.watch as the parameter codec reads it (strconv.ParseBool), falling back
// to "anything but false/0" when the value does not parse, as NewRequestInfo does.
bool WatchRequested(const std::map<std::string, std::string>& query) {
  auto it = query.find("watch");
  if (it == query.end())
    return false;
  static const std::vector<std::string> no = {"0", "f", "F", "false", "FALSE", "False"};
  return std::find(no.begin(), no.end(), it->second) == no.end();
}

// fields.Selector.RequiresExactMatch("metadata.name") of a fieldSelector.
std::string ExactNameOfFieldSelector(const std::map<std::string, std::string>& query) {
  auto it = query.find("fieldSelector");
  if (it == query.end())
    return "";
  std::string found;
  size_t start = 0;
  const std::string& text = it->second;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos)
      comma = text.size();
    std::string term = text.substr(start, comma - start);
    for (const char* prefix : {"metadata.name==", "metadata.name="}) {
      if (term.rfind(prefix, 0) == 0) {
        found = term.substr(std::string(prefix).size());
        break;
      }
    }
    start = comma + 1;
  }
  // path.IsValidPathSegmentName.
  if (found == "." || found == ".." || found.find_first_of("/%") != std::string::npos)
    return "";
  return found;
}

bool HasString(const rapidjson::Value& rule, const char* field, const std::string& value) {
  auto it = rule.FindMember(field);
  if (it == rule.MemberEnd() || !it->value.IsArray())
    return false;
  for (const auto& v : it->value.GetArray()) {
    if (v.IsString() && value == v.GetString())
      return true;
  }
  return false;
}

}  // namespace

std::optional<RequestAttributes> AttributesOfRequest(
    const std::string& method, const std::string& path,
    const std::map<std::string, std::string>& query) {
  RequestAttributes info;
  info.path = path;
  info.verb = Lower(method);
  std::vector<std::string> parts = SplitPath(path);
  if (parts.size() < 3 || (parts[0] != "api" && parts[0] != "apis"))
    return info;
  bool grouped = parts[0] == "apis";
  parts.erase(parts.begin());
  if (grouped) {
    if (parts.size() < 3)
      return info;
    info.api_group = parts[0];
    parts.erase(parts.begin());
  }
  info.resource_request = true;
  info.api_version = parts[0];
  parts.erase(parts.begin());
  if (parts[0] == "watch" || parts[0] == "proxy") {
    if (parts.size() < 2)
      return std::nullopt;  // "unable to determine kind and namespace from url"
    info.verb = parts[0];
    parts.erase(parts.begin());
  } else {
    info.verb = VerbOfMethod(method);
  }
  if (parts[0] == "namespaces" && parts.size() > 1) {
    info.ns = parts[1];
    // namespaces/NAME/status and /finalize are subresources of the namespace itself.
    if (parts.size() > 2 && parts[2] != "status" && parts[2] != "finalize")
      parts.erase(parts.begin(), parts.begin() + 2);
  }
  if (parts.size() >= 3 && info.verb != "proxy")
    info.subresource = parts[2];
  if (parts.size() >= 2)
    info.name = parts[1];
  info.resource = parts[0];
  if (info.name.empty() && info.verb == "get") {
    info.verb = WatchRequested(query) ? "watch" : "list";
    info.name = ExactNameOfFieldSelector(query);
  }
  if (info.name.empty() && info.verb == "delete")
    info.verb = "deletecollection";
  return info;
}

bool VerbMatches(const rapidjson::Value& rule, const std::string& verb) {
  return HasString(rule, "verbs", "*") || HasString(rule, "verbs", verb);
}

bool ApiGroupMatches(const rapidjson::Value& rule, const std::string& group) {
  return HasString(rule, "apiGroups", "*") || HasString(rule, "apiGroups", group);
}

bool ResourceMatches(const rapidjson::Value& rule, const std::string& combined_resource,
                     const std::string& subresource) {
  for (const auto& r : StringsAt(rule, "resources")) {
    if (r == "*" || r == combined_resource)
      return true;
    // "*/scale" matches the scale subresource of every resource.
    if (!subresource.empty() && r.size() == subresource.size() + 2 && r.rfind("*/", 0) == 0 &&
        r.compare(2, std::string::npos, subresource) == 0) {
      return true;
    }
  }
  return false;
}

bool ResourceNameMatches(const rapidjson::Value& rule, const std::string& name) {
  std::vector<std::string> names = StringsAt(rule, "resourceNames");
  return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
}

bool NonResourceUrlMatches(const rapidjson::Value& rule, const std::string& url) {
  for (const auto& u : StringsAt(rule, "nonResourceURLs")) {
    if (u == "*" || u == url)
      return true;
    if (!u.empty() && u.back() == '*') {
      std::string prefix = u.substr(0, u.find_last_not_of('*') + 1);
      if (url.rfind(prefix, 0) == 0)
        return true;
    }
  }
  return false;
}

bool RuleAllows(const RequestAttributes& a, const rapidjson::Value& rule) {
  if (!rule.IsObject())
    return false;
  if (a.resource_request) {
    std::string combined = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
    return VerbMatches(rule, a.verb) && ApiGroupMatches(rule, a.api_group) &&
           ResourceMatches(rule, combined, a.subresource) && ResourceNameMatches(rule, a.name);
  }
  return VerbMatches(rule, a.verb) && NonResourceUrlMatches(rule, a.path);
}

namespace {

// rbac/v1 subject matching (rbac.go appliesToUser); `ns` "" for ClusterRoleBindings.
bool SubjectApplies(const rapidjson::Value& subject, const UserInfo& user, const std::string& ns) {
  std::string kind = GetString(subject, "kind");
  std::string name = GetString(subject, "name");
  if (kind == "User")
    return user.name == name;
  if (kind == "Group")
    return user.InGroup(name);
  if (kind == "ServiceAccount") {
    std::string sa_ns = GetString(subject, "namespace");
    if (sa_ns.empty())
      sa_ns = ns;
    return !sa_ns.empty() && user.name == ServiceAccountUsername(sa_ns, name);
  }
  return false;
}

std::string DescribeSubject(const rapidjson::Value& subject, const std::string& binding_ns) {
  std::string kind = GetString(subject, "kind");
  std::string name = GetString(subject, "name");
  if (kind == "ServiceAccount") {
    std::string ns = GetString(subject, "namespace");
    return fmt::format("{} {}", kind, GoQuote(name + "/" + (ns.empty() ? binding_ns : ns)));
  }
  return fmt::format("{} {}", kind, GoQuote(name));
}

// The rules of the binding's roleRef; `error` set when the role is missing.
ObjectPtr RoleOf(const Store& store, const rapidjson::Value& binding, const std::string& ns,
                 std::string& error) {
  std::string kind = GetString(binding, "roleRef.kind");
  std::string name = GetString(binding, "roleRef.name");
  bool cluster = kind == "ClusterRole";
  if (!cluster && kind != "Role") {
    error = fmt::format("unsupported role reference kind: {}", GoQuote(kind));
    return nullptr;
  }
  auto role = store.Get(cluster ? "clusterroles" : "roles", cluster ? "" : ns, name);
  if (!role.ok()) {
    error = fmt::format("{}.rbac.authorization.k8s.io {} not found",
                        cluster ? "clusterrole" : "role", GoQuote(name));
    return nullptr;
  }
  return *role;
}

// Visits every rule that applies to `user` in `ns` with a description of where it
// comes from; the visitor returns false to stop (rule.go VisitRulesFor).
template <class Visit>
void VisitRulesFor(const Store& store, const UserInfo& user, const std::string& ns,
                   std::vector<std::string>& errors, Visit visit) {
  auto walk = [&](const char* resource, const std::string& list_ns) {
    for (const auto& binding : store.List(resource, list_ns).items) {
      const rapidjson::Value* subjects = Find(*binding, "subjects");
      if (subjects == nullptr || !subjects->IsArray())
        continue;
      std::string binding_ns = GetString(*binding, "metadata.namespace");
      for (const auto& subject : subjects->GetArray()) {
        if (!SubjectApplies(subject, user, binding_ns))
          continue;
        std::string error;
        ObjectPtr role = RoleOf(store, *binding, binding_ns, error);
        if (!role) {
          errors.push_back(error);
          break;
        }
        std::string source =
            binding_ns.empty()
                ? fmt::format("ClusterRoleBinding {} of {} {} to {}",
                              GoQuote(GetString(*binding, "metadata.name")),
                              GetString(*binding, "roleRef.kind"),
                              GoQuote(GetString(*binding, "roleRef.name")),
                              DescribeSubject(subject, ""))
                : fmt::format("RoleBinding {} of {} {} to {}",
                              GoQuote(GetString(*binding, "metadata.name") + "/" + binding_ns),
                              GetString(*binding, "roleRef.kind"),
                              GoQuote(GetString(*binding, "roleRef.name")),
                              DescribeSubject(subject, binding_ns));
        const rapidjson::Value* rules = Find(*role, "rules");
        if (rules != nullptr && rules->IsArray()) {
          for (const auto& rule : rules->GetArray()) {
            if (!visit(source, rule))
              return false;
          }
        }
        break;  // one matching subject per binding is enough
      }
    }
    return true;
  };
  if (!walk("clusterrolebindings", ""))
    return;
  if (!ns.empty())
    walk("rolebindings", ns);
}

}  // namespace

Decision Authorize(const Store& store, const RequestAttributes& attributes) {
  Decision decision;
  if (attributes.user.Privileged()) {
    decision.allowed = true;
    return decision;
  }
  std::vector<std::string> errors;
  VisitRulesFor(store, attributes.user, attributes.ns, errors,
                [&](const std::string& source, const rapidjson::Value& rule) {
                  if (!RuleAllows(attributes, rule))
                    return true;
                  decision.allowed = true;
                  decision.reason = "RBAC: allowed by " + source;
                  return false;
                });
  if (!decision.allowed && !errors.empty()) {
    // utilerrors.NewAggregate: one error as is, several in brackets.
    std::string joined;
    for (const auto& e : errors)
      joined += (joined.empty() ? "" : ", ") + e;
    decision.reason = "RBAC: " + (errors.size() == 1 ? joined : "[" + joined + "]");
  }
  return decision;
}

std::vector<rapidjson::Document> RulesFor(const Store& store, const UserInfo& user,
                                          const std::string& ns, std::vector<std::string>& errors) {
  std::vector<rapidjson::Document> rules;
  VisitRulesFor(store, user, ns, errors, [&](const std::string&, const rapidjson::Value& rule) {
    rapidjson::Document copy;
    copy.CopyFrom(rule, copy.GetAllocator());
    rules.push_back(std::move(copy));
    return true;
  });
  return rules;
}

ApiResponse ForbiddenResponse(const RequestAttributes& a, const std::string& reason) {
  std::string message;
  if (!a.resource_request) {
    message =
        fmt::format("User {} cannot {} path {}", GoQuote(a.user.name), a.verb, GoQuote(a.path));
  } else {
    std::string resource = a.subresource.empty() ? a.resource : a.resource + "/" + a.subresource;
    message = fmt::format("User {} cannot {} resource {} in API group {}", GoQuote(a.user.name),
                          a.verb, GoQuote(resource), GoQuote(a.api_group));
    message +=
        a.ns.empty() ? " at the cluster scope" : fmt::format(" in the namespace {}", GoQuote(a.ns));
  }
  if (!reason.empty())
    message += ": " + reason;
  // apierrors.NewForbidden over the GroupResource (no subresource).
  std::string qualified = a.api_group.empty() ? a.resource : a.resource + "." + a.api_group;
  if (qualified.empty()) {
    message = "forbidden: " + message;
  } else if (a.name.empty()) {
    message = qualified + " is forbidden: " + message;
  } else {
    message = fmt::format("{} {} is forbidden: {}", qualified, GoQuote(a.name), message);
  }
  return StatusResponse(403, "Forbidden", message, a.resource, a.name, a.api_group);
}

std::vector<std::string> StringsAt(const rapidjson::Value& object, const char* dotted_path) {
  std::vector<std::string> out;
  const rapidjson::Value* list = Find(object, dotted_path);
  if (list != nullptr && list->IsArray()) {
    for (const auto& v : list->GetArray())
      out.emplace_back(v.IsString() ? v.GetString() : "");
  }
  return out;
}

UserInfo UserOfRequest(const ApiRequest& request) {
  UserInfo user;
  user.name = request.user;
  user.uid = request.uid;
  user.groups = request.groups;
  user.extra = request.extra;
  return user;
}

}  // namespace kubesim
