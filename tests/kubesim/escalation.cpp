// RBAC escalation prevention (pkg/registry/rbac/escalation_check.go, the policybased
// storages of roles, clusterroles, rolebindings and clusterrolebindings, and
// ConfirmNoEscalation / Covers of pkg/registry/rbac/validation): declared in rbac.h.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "rbac.h"

namespace kubesim {

namespace {

constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";

struct Rule {
  std::vector<std::string> verbs, groups, resources, names, urls;
};

Rule RuleOf(const rapidjson::Value& v) {
  return Rule{StringsAt(v, "verbs"), StringsAt(v, "apiGroups"), StringsAt(v, "resources"),
              StringsAt(v, "resourceNames"), StringsAt(v, "nonResourceURLs")};
}

bool Has(const std::vector<std::string>& set, const std::string& s) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

bool HasAll(const std::vector<std::string>& set, const std::vector<std::string>& wanted) {
  return std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) { return Has(set, w); });
}

// policy_comparator.go BreakdownRule: one rule per group x resource x verb (x name),
// and per URL x verb.
std::vector<Rule> Breakdown(const Rule& r) {
  std::vector<Rule> out;
  for (const auto& g : r.groups) {
    for (const auto& res : r.resources) {
      for (const auto& v : r.verbs) {
        if (r.names.empty())
          out.push_back(Rule{{v}, {g}, {res}, {}, {}});
        for (const auto& n : r.names)
          out.push_back(Rule{{v}, {g}, {res}, {n}, {}});
      }
    }
  }
  for (const auto& u : r.urls) {
    for (const auto& v : r.verbs)
      out.push_back(Rule{{v}, {}, {}, {}, {u}});
  }
  return out;
}

bool ResourcesCover(const std::vector<std::string>& owner, const std::vector<std::string>& sub) {
  if (Has(owner, "*") || HasAll(owner, sub))
    return true;
  for (const auto& path : sub) {
    size_t slash = path.find('/');
    if (!Has(owner, path) &&
        (slash == std::string::npos || !Has(owner, "*/" + path.substr(slash + 1))))
      return false;
  }
  return true;
}

bool UrlsCover(const std::vector<std::string>& owner, const std::vector<std::string>& sub) {
  for (const auto& path : sub) {
    bool covered = std::any_of(owner.begin(), owner.end(), [&](const std::string& o) {
      return o == path || (!o.empty() && o.back() == '*' &&
                           path.rfind(o.substr(0, o.find_last_not_of('*') + 1), 0) == 0);
    });
    if (!covered)
      return false;
  }
  return true;
}

// policy_comparator.go ruleCovers.
bool RuleCovers(const Rule& owner, const Rule& sub) {
  bool verbs = Has(owner.verbs, "*") || HasAll(owner.verbs, sub.verbs);
  bool groups = Has(owner.groups, "*") || HasAll(owner.groups, sub.groups);
  bool names = sub.names.empty() ? owner.names.empty()
                                 : owner.names.empty() || HasAll(owner.names, sub.names);
  return verbs && groups && ResourcesCover(owner.resources, sub.resources) && names &&
         UrlsCover(owner.urls, sub.urls);
}

std::string QuotedList(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : " ") + GoQuote(values[i]);
  return out + "]";
}

// rbacv1helpers.CompactString.
std::string CompactString(const Rule& r) {
  std::vector<std::string> parts;
  if (!r.groups.empty())
    parts.push_back("APIGroups:" + QuotedList(r.groups));
  if (!r.resources.empty())
    parts.push_back("Resources:" + QuotedList(r.resources));
  if (!r.urls.empty())
    parts.push_back("NonResourceURLs:" + QuotedList(r.urls));
  if (!r.names.empty())
    parts.push_back("ResourceNames:" + QuotedList(r.names));
  if (!r.verbs.empty())
    parts.push_back("Verbs:" + QuotedList(r.verbs));
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : ", ") + parts[i];
  return out + "}";
}

// The generated PolicyRule String(), which SortableRuleSlice sorts by.
std::string SortKey(const Rule& r) {
  auto list = [](const std::vector<std::string>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i)
      out += (i == 0 ? "" : " ") + v[i];
    return out + "]";
  };
  return "&PolicyRule{Verbs:" + list(r.verbs) + ",APIGroups:" + list(r.groups) +
         ",Resources:" + list(r.resources) + ",ResourceNames:" + list(r.names) +
         ",NonResourceURLs:" + list(r.urls) + ",}";
}

// CompactRules: simple rules (one group, one resource, at most one name) that differ
// only in their verbs become one; then sorted.
std::vector<Rule> Compact(const std::vector<Rule>& rules) {
  std::vector<Rule> out;
  std::map<std::tuple<std::string, std::string, std::string, bool>, size_t> simple;
  for (const auto& r : rules) {
    if (r.names.size() > 1 || !r.urls.empty() || r.groups.size() != 1 || r.resources.size() != 1) {
      out.push_back(r);
      continue;
    }
    auto key = std::make_tuple(r.groups[0], r.resources[0], r.names.empty() ? "" : r.names[0],
                               !r.names.empty());
    auto it = simple.find(key);
    if (it == simple.end()) {
      simple.emplace(key, out.size());
      out.push_back(r);
    } else {
      auto& verbs = out[it->second].verbs;
      verbs.insert(verbs.end(), r.verbs.begin(), r.verbs.end());
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Rule& a, const Rule& b) { return SortKey(a) < SortKey(b); });
  return out;
}

// ConfirmNoEscalation: "" when `user` holds every one of `rules` in `ns`.
std::string ConfirmNoEscalation(const Store& store, const UserInfo& user, const std::string& ns,
                                const std::vector<Rule>& rules) {
  std::vector<std::string> errors;
  std::vector<Rule> owner;
  for (const auto& r : RulesFor(store, user, ns, errors))
    owner.push_back(RuleOf(r));
  std::vector<Rule> missing;
  for (const auto& rule : rules) {
    for (const auto& sub : Breakdown(rule)) {
      if (std::none_of(owner.begin(), owner.end(),
                       [&](const Rule& o) { return RuleCovers(o, sub); }))
        missing.push_back(sub);
    }
  }
  if (missing.empty())
    return "";
  std::string msg = fmt::format(
      "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n",
      GoQuote(user.name), QuotedList(user.groups));
  for (const auto& r : Compact(missing))
    msg += CompactString(r) + "\n";
  if (!errors.empty()) {
    std::string joined;
    for (const auto& e : errors)
      joined += (joined.empty() ? "" : ", ") + e;
    msg += "; resolution errors: [" + joined + "]";
  }
  return msg;
}

bool Allowed(const Store& store, const UserInfo& user, const std::string& verb,
             const std::string& resource, const std::string& ns, const std::string& name) {
  RequestAttributes a;
  a.user = user;
  a.verb = verb;
  a.resource_request = true;
  a.api_group = kRbacGroup;
  a.api_version = "v1";
  a.resource = resource;
  a.ns = ns;
  a.name = name;
  return Authorize(store, a).allowed;
}

ApiResponse EscalationForbidden(const std::string& resource, const std::string& name,
                                const std::string& why) {
  return StatusResponse(
      403, "Forbidden",
      fmt::format("{}.{} {} is forbidden: {}", resource, kRbacGroup, GoQuote(name), why), resource,
      name, kRbacGroup);
}

std::vector<Rule> RulesOfRole(const rapidjson::Value& role) {
  std::vector<Rule> rules;
  if (const rapidjson::Value* list = Find(role, "rules"); list && list->IsArray()) {
    for (const auto& r : list->GetArray())
      rules.push_back(RuleOf(r));
  }
  return rules;
}

// The 403 for granting `rules` that `user` does not hold; nullopt when it holds them.
std::optional<ApiResponse> RefuseUnheld(const Store& store, const UserInfo& user,
                                        const std::string& resource, const std::string& ns,
                                        const std::string& name, const std::vector<Rule>& rules) {
  std::string why = ConfirmNoEscalation(store, user, ns, rules);
  if (why.empty())
    return std::nullopt;
  return EscalationForbidden(resource, name, why);
}

std::optional<ApiResponse> CheckRoleWrite(const Store& store, const UserInfo& user,
                                          const std::string& resource, const std::string& ns,
                                          const rapidjson::Value& object) {
  std::string name = GetString(object, "metadata.name");
  if (Allowed(store, user, "escalate", resource, ns, name))
    return std::nullopt;
  std::vector<Rule> rules = RulesOfRole(object);
  if (Find(object, "aggregationRule") != nullptr && !Find(object, "aggregationRule")->IsNull()) {
    // An aggregated ClusterRole may come to hold anything: writing one takes it all.
    rules = {Rule{{"*"}, {"*"}, {"*"}, {}, {}}, Rule{{"*"}, {}, {}, {}, {"*"}}};
  }
  return RefuseUnheld(store, user, resource, ns, name, rules);
}

std::optional<ApiResponse> CheckBindingWrite(const Store& store, const UserInfo& user,
                                             const std::string& resource, const std::string& ns,
                                             const rapidjson::Value& object) {
  std::string name = GetString(object, "metadata.name");
  std::string kind = GetString(object, "roleRef.kind");
  std::string role = GetString(object, "roleRef.name");
  bool cluster_role = kind == "ClusterRole";
  if (Allowed(store, user, "bind", cluster_role ? "clusterroles" : "roles", ns, role))
    return std::nullopt;
  auto stored = store.Get(cluster_role ? "clusterroles" : "roles", cluster_role ? "" : ns, role);
  if (!stored.ok()) {
    return EscalationForbidden(
        resource, name,
        fmt::format("{}.{} {} not found", cluster_role ? "clusterroles" : "roles", kRbacGroup,
                    GoQuote(role)));
  }
  return RefuseUnheld(store, user, resource, ns, name, RulesOfRole(**stored));
}

// What the escalation check looks at: an update that keeps it is not checked again.
bool SameGrant(const std::string& resource, const rapidjson::Value& object,
               const rapidjson::Value& old) {
  std::vector<const char*> fields = {"rules", "aggregationRule"};
  if (resource == "rolebindings" || resource == "clusterrolebindings")
    fields = {"roleRef", "subjects"};
  for (const char* f : fields) {
    const rapidjson::Value* a = Find(object, f);
    const rapidjson::Value* b = Find(old, f);
    if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b))
      return false;
  }
  return true;
}

}  // namespace

std::optional<ApiResponse> CheckRbacEscalation(const Store& store, const UserInfo& user,
                                               const std::string& resource, const std::string& ns,
                                               const rapidjson::Value& object,
                                               const rapidjson::Value* old) {
  if (user.Privileged() || (old != nullptr && SameGrant(resource, object, *old)))
    return std::nullopt;
  if (resource == "roles" || resource == "clusterroles")
    return CheckRoleWrite(store, user, resource, resource == "roles" ? ns : "", object);
  if (resource == "rolebindings" || resource == "clusterrolebindings")
    return CheckBindingWrite(store, user, resource, resource == "rolebindings" ? ns : "", object);
  return std::nullopt;
}

}  // namespace kubesim
