// The RBAC objects themselves: bootstrap policy, ClusterRole aggregation and the
// validation of the four kinds (declared in rbac.h).
#include <fmt/format.h>

#include "rbac.h"
#include "selector.h"

namespace kubesim {

namespace {

constexpr const char* kRbacGroup = "rbac.authorization.k8s.io";

struct BootstrapRole {
  const char* name;
  const char* rules;  // JSON array of rbac/v1 PolicyRules
};

// plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go ClusterRoles().
const std::vector<BootstrapRole>& BootstrapRoles() {
  static const std::vector<BootstrapRole> roles = {
      {"cluster-admin", R"([{"verbs":["*"],"apiGroups":["*"],"resources":["*"]},)"
                        R"({"verbs":["*"],"nonResourceURLs":["*"]}])"},
      {"system:discovery",
       R"([{"verbs":["get"],"nonResourceURLs":["/api","/api/*","/apis","/apis/*","/healthz",)"
       R"("/livez","/openapi","/openapi/*","/readyz","/version","/version/"]}])"},
      {"system:basic-user",
       R"([{"verbs":["create"],"apiGroups":["authorization.k8s.io"],)"
       R"("resources":["selfsubjectaccessreviews","selfsubjectrulesreviews"]},)"
       R"({"verbs":["create"],"apiGroups":["authentication.k8s.io"],)"
       R"("resources":["selfsubjectreviews"]}])"},
      {"system:public-info-viewer",
       R"([{"verbs":["get"],"nonResourceURLs":["/healthz","/livez","/readyz","/version",)"
       R"("/version/"]}])"},
  };
  return roles;
}

struct BootstrapBinding {
  const char* name;
  const char* role;
  std::vector<const char*> groups;
};

// bootstrappolicy ClusterRoleBindings().
const std::vector<BootstrapBinding>& BootstrapBindings() {
  static const std::vector<BootstrapBinding> bindings = {
      {"cluster-admin", "cluster-admin", {kSystemMasters}},
      {"system:discovery", "system:discovery", {kAllAuthenticated}},
      {"system:basic-user", "system:basic-user", {kAllAuthenticated}},
      {"system:public-info-viewer",
       "system:public-info-viewer",
       {kAllAuthenticated, kAllUnauthenticated}},
  };
  return bindings;
}

// The labels and annotation every bootstrap object carries.
void SetBootstrapMeta(rapidjson::Document& d, const std::string& kind, const std::string& name) {
  auto& a = d.GetAllocator();
  d.AddMember("apiVersion", rapidjson::Value("rbac.authorization.k8s.io/v1", a), a);
  d.AddMember("kind", rapidjson::Value(kind.c_str(), a), a);
  SetMember(d, "metadata.name", rapidjson::Value(name.c_str(), a));
  rapidjson::Value labels(rapidjson::kObjectType);
  labels.AddMember("kubernetes.io/bootstrapping", "rbac-defaults", a);
  SetMember(d, "metadata.labels", std::move(labels));
  rapidjson::Value annotations(rapidjson::kObjectType);
  annotations.AddMember("rbac.authorization.kubernetes.io/autoupdate", "true", a);
  SetMember(d, "metadata.annotations", std::move(annotations));
}

Status CreateIfMissing(Store& store, const std::string& resource, rapidjson::Document d) {
  std::string name = GetString(d, "metadata.name");
  auto created = store.Create(resource, "", std::move(d));
  if (!created.ok() && created.status().code() != Status::Code::kAlreadyExists)
    return created.status().WithContext(fmt::format("bootstrap {} {}", resource, name));
  return Status::Ok();
}

// A metav1.LabelSelector (matchLabels, matchExpressions) as selector text.
Result<LabelSelector> SelectorOf(const rapidjson::Value& selector) {
  std::string text;
  auto add = [&](const std::string& term) { text += (text.empty() ? "" : ",") + term; };
  if (const rapidjson::Value* labels = Find(selector, "matchLabels");
      labels != nullptr && labels->IsObject()) {
    for (const auto& m : labels->GetObject())
      add(std::string(m.name.GetString()) + "=" + (m.value.IsString() ? m.value.GetString() : ""));
  }
  if (const rapidjson::Value* exprs = Find(selector, "matchExpressions");
      exprs != nullptr && exprs->IsArray()) {
    for (const auto& e : exprs->GetArray()) {
      std::string key = GetString(e, "key");
      std::string op = GetString(e, "operator");
      std::string values;
      if (const rapidjson::Value* v = Find(e, "values"); v != nullptr && v->IsArray()) {
        for (const auto& s : v->GetArray())
          values += (values.empty() ? "" : ",") + std::string(s.IsString() ? s.GetString() : "");
      }
      if (op == "In" || op == "NotIn")
        add(fmt::format("{} {} ({})", key, op == "In" ? "in" : "notin", values));
      else if (op == "Exists")
        add(key);
      else if (op == "DoesNotExist")
        add("!" + key);
      else
        return Status::InvalidArgument(fmt::format("unknown selector operator {}", op));
    }
  }
  return LabelSelector::Parse(text);
}

}  // namespace

Status CreateBootstrapPolicy(Store& store) {
  for (const auto& role : BootstrapRoles()) {
    rapidjson::Document d(rapidjson::kObjectType);
    SetBootstrapMeta(d, "ClusterRole", role.name);
    rapidjson::Document rules;
    rules.Parse(role.rules);
    d.AddMember("rules", rapidjson::Value(rules, d.GetAllocator()), d.GetAllocator());
    if (Status s = CreateIfMissing(store, "clusterroles", std::move(d)); !s.ok())
      return s;
  }
  for (const auto& binding : BootstrapBindings()) {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    SetBootstrapMeta(d, "ClusterRoleBinding", binding.name);
    rapidjson::Value ref(rapidjson::kObjectType);
    ref.AddMember("apiGroup", rapidjson::Value(kRbacGroup, a), a);
    ref.AddMember("kind", "ClusterRole", a);
    ref.AddMember("name", rapidjson::Value(binding.role, a), a);
    d.AddMember("roleRef", ref, a);
    rapidjson::Value subjects(rapidjson::kArrayType);
    for (const char* group : binding.groups) {
      rapidjson::Value s(rapidjson::kObjectType);
      s.AddMember("apiGroup", rapidjson::Value(kRbacGroup, a), a);
      s.AddMember("kind", "Group", a);
      s.AddMember("name", rapidjson::Value(group, a), a);
      subjects.PushBack(s, a);
    }
    d.AddMember("subjects", subjects, a);
    if (Status s = CreateIfMissing(store, "clusterrolebindings", std::move(d)); !s.ok())
      return s;
  }
  return Status::Ok();
}

void AggregateClusterRoles(Store& store) {
  ListResult roles = store.List("clusterroles", "");
  for (const auto& role : roles.items) {
    const rapidjson::Value* selectors = Find(*role, "aggregationRule.clusterRoleSelectors");
    if (selectors == nullptr || !selectors->IsArray())
      continue;
    std::string name = GetString(*role, "metadata.name");
    rapidjson::Document rules(rapidjson::kArrayType);
    auto& a = rules.GetAllocator();
    for (const auto& selector_json : selectors->GetArray()) {
      auto selector = SelectorOf(selector_json);
      if (!selector.ok())
        continue;
      for (const auto& other : roles.items) {
        const rapidjson::Value* other_rules = Find(*other, "rules");
        if (GetString(*other, "metadata.name") == name || !selector->Matches(*other) ||
            other_rules == nullptr || !other_rules->IsArray())
          continue;
        for (const auto& rule : other_rules->GetArray()) {
          bool seen = false;
          for (const auto& have : rules.GetArray())
            seen = seen || have == rule;
          if (!seen)
            rules.PushBack(rapidjson::Value(rule, a), a);
        }
      }
    }
    const rapidjson::Value* current = Find(*role, "rules");
    if (current != nullptr && *current == rules)
      continue;
    (void)store.Mutate("clusterroles", "", name, [&](rapidjson::Document& d) {
      d.RemoveMember("rules");
      d.AddMember("rules", rapidjson::Value(rules, d.GetAllocator()), d.GetAllocator());
      return Status::Ok();
    });
  }
}

bool IsRbacResource(const std::string& group, const std::string& resource) {
  return group == kRbacGroup && (resource == "roles" || resource == "clusterroles" ||
                                 resource == "rolebindings" || resource == "clusterrolebindings");
}

void DefaultRbacObject(const std::string& resource, rapidjson::Document& object) {
  if (resource != "rolebindings" && resource != "clusterrolebindings")
    return;
  // SetDefaults_Subject: User and Group subjects are of rbac.authorization.k8s.io.
  rapidjson::Value* subjects = object.HasMember("subjects") ? &object["subjects"] : nullptr;
  if (subjects == nullptr || !subjects->IsArray())
    return;
  for (auto& s : subjects->GetArray()) {
    std::string kind = GetString(s, "kind");
    if (s.IsObject() && GetString(s, "apiGroup").empty() && (kind == "User" || kind == "Group")) {
      s.RemoveMember("apiGroup");
      s.AddMember("apiGroup", rapidjson::Value(kRbacGroup, object.GetAllocator()),
                  object.GetAllocator());
    }
  }
}

namespace {

// Go's %#v of a []string.
std::string GoStringSlice(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i == 0 ? "" : ", ") + GoQuote(values[i]);
  return out + "}";
}

// ValidatePolicyRule.
void ValidateRule(const rapidjson::Value& rule, bool namespaced, const std::string& path,
                  FieldErrors& errors) {
  if (StringsAt(rule, "verbs").empty())
    errors.push_back(Required(path + ".verbs", "verbs must contain at least one value"));
  std::vector<std::string> urls = StringsAt(rule, "nonResourceURLs");
  if (!urls.empty()) {
    if (namespaced) {
      errors.push_back(InvalidRaw(path + ".nonResourceURLs", GoStringSlice(urls),
                                  "namespaced rules cannot apply to non-resource URLs"));
    }
    if (!StringsAt(rule, "apiGroups").empty() || !StringsAt(rule, "resources").empty() ||
        !StringsAt(rule, "resourceNames").empty()) {
      errors.push_back(InvalidRaw(path + ".nonResourceURLs", GoStringSlice(urls),
                                  "rules cannot apply to both regular resources and non-resource "
                                  "URLs"));
    }
    return;
  }
  if (Find(rule, "apiGroups") == nullptr || !Find(rule, "apiGroups")->IsArray() ||
      Find(rule, "apiGroups")->Empty()) {
    errors.push_back(
        Required(path + ".apiGroups", "resource rules must supply at least one api group"));
  }
  if (StringsAt(rule, "resources").empty()) {
    errors.push_back(
        Required(path + ".resources", "resource rules must supply at least one resource"));
  }
}

// ValidateRoleBindingSubject.
void ValidateSubject(const rapidjson::Value& s, bool namespaced, const std::string& path,
                     FieldErrors& errors) {
  std::string name = GetString(s, "name");
  std::string kind = GetString(s, "kind");
  std::string group = GetString(s, "apiGroup");
  if (name.empty())
    errors.push_back(Required(path + ".name"));
  if (kind == "ServiceAccount") {
    for (const auto& msg : CheckName(NameRule::kDnsSubdomain, name, false)) {
      if (!name.empty())
        errors.push_back(Invalid(path + ".name", name, msg));
    }
    if (!group.empty())
      errors.push_back(NotSupported(path + ".apiGroup", group, {""}));
    if (!namespaced && GetString(s, "namespace").empty())
      errors.push_back(Required(path + ".namespace"));
  } else if (kind == "User" || kind == "Group") {
    if (group != kRbacGroup)
      errors.push_back(NotSupported(path + ".apiGroup", group, {kRbacGroup}));
  } else {
    errors.push_back(NotSupported(path + ".kind", kind, {"ServiceAccount", "User", "Group"}));
  }
}

void ValidateBinding(const rapidjson::Value& b, bool namespaced, FieldErrors& errors) {
  std::string group = GetString(b, "roleRef.apiGroup");
  std::string kind = GetString(b, "roleRef.kind");
  std::string name = GetString(b, "roleRef.name");
  if (group != kRbacGroup)
    errors.push_back(NotSupported("roleRef.apiGroup", group, {kRbacGroup}));
  if (namespaced && kind != "Role" && kind != "ClusterRole")
    errors.push_back(NotSupported("roleRef.kind", kind, {"Role", "ClusterRole"}));
  if (!namespaced && kind != "ClusterRole")
    errors.push_back(NotSupported("roleRef.kind", kind, {"ClusterRole"}));
  if (name.empty()) {
    errors.push_back(Required("roleRef.name"));
  } else {
    for (const auto& msg : CheckName(NameRule::kPathSegment, name, false))
      errors.push_back(Invalid("roleRef.name", name, msg));
  }
  const rapidjson::Value* subjects = Find(b, "subjects");
  if (subjects != nullptr && subjects->IsArray()) {
    for (rapidjson::SizeType i = 0; i < subjects->Size(); ++i)
      ValidateSubject((*subjects)[i], namespaced, fmt::format("subjects[{}]", i), errors);
  }
}

}  // namespace

void ValidateRbacObject(const std::string& resource, const rapidjson::Value& object,
                        FieldErrors& errors) {
  if (resource == "roles" || resource == "clusterroles") {
    const rapidjson::Value* rules = Find(object, "rules");
    if (rules != nullptr && rules->IsArray()) {
      for (rapidjson::SizeType i = 0; i < rules->Size(); ++i)
        ValidateRule((*rules)[i], resource == "roles", fmt::format("rules[{}]", i), errors);
    }
  } else if (resource == "rolebindings" || resource == "clusterrolebindings") {
    ValidateBinding(object, resource == "rolebindings", errors);
  }
}

void ValidateRbacUpdate(const std::string& resource, const rapidjson::Value& object,
                        const rapidjson::Value& old, FieldErrors& errors) {
  ValidateRbacObject(resource, object, errors);
  if (resource != "rolebindings" && resource != "clusterrolebindings")
    return;
  std::string group = GetString(object, "roleRef.apiGroup");
  std::string kind = GetString(object, "roleRef.kind");
  std::string name = GetString(object, "roleRef.name");
  if (group != GetString(old, "roleRef.apiGroup") || kind != GetString(old, "roleRef.kind") ||
      name != GetString(old, "roleRef.name")) {
    errors.push_back(InvalidRaw("roleRef",
                                fmt::format("rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                                            GoQuote(group), GoQuote(kind), GoQuote(name)),
                                "cannot change roleRef"));
  }
}

}  // namespace kubesim
