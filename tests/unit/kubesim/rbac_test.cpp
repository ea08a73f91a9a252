// The RBAC rules of kubesim (rbac.h, authn.h): rule evaluation in tables that follow
// upstream's tests (each row names the upstream test and case), request attributes,
// the authorizer over stored bindings, the 403 message, impersonation and tokens.
#include <chrono>

#include <boost/test/unit_test.hpp>

#include "api_fixture.h"
#include "authn.h"
#include "rbac.h"

namespace kubesim {
namespace {

using testing::Json;

RequestAttributes ResourceRequest(const std::string& verb, const std::string& group,
                                  const std::string& resource, const std::string& subresource = "",
                                  const std::string& name = "") {
  RequestAttributes a;
  a.resource_request = true;
  a.verb = verb;
  a.api_group = group;
  a.resource = resource;
  a.subresource = subresource;
  a.name = name;
  return a;
}

RequestAttributes NonResourceRequest(const std::string& verb, const std::string& path) {
  RequestAttributes a;
  a.verb = verb;
  a.path = path;
  return a;
}

struct RuleCase {
  const char* upstream;  // the test and case of upstream's this row follows
  const char* rule;
  RequestAttributes request;
  bool allowed;
};

BOOST_AUTO_TEST_SUITE(rbac)

BOOST_AUTO_TEST_CASE(rule_allows_follows_upstream_tables) {
  const char* star_verb = R"({"verbs":["*"],"apiGroups":["group1"],"resources":["resource1"]})";
  const char* star_group = R"({"verbs":["verb1"],"apiGroups":["*"],"resources":["resource1"]})";
  const char* star_resource = R"({"verbs":["verb1"],"apiGroups":["group1"],"resources":["*"]})";
  const char* tuple = R"({"verbs":["verb1","verb2"],"apiGroups":["group1","group2"],)"
                      R"("resources":["resource1","resource2"]})";
  const char* subresource =
      R"({"verbs":["*"],"apiGroups":["*"],"resources":["resource1/subresource1"]})";
  const char* star_url = R"({"verbs":["verb1"],"nonResourceURLs":["*"]})";
  const char* url_subpath = R"({"verbs":["verb1"],"nonResourceURLs":["/foo/*"]})";
  const char* exact_urls = R"({"verbs":["*"],"nonResourceURLs":["/foo","/foo/bar/one"]})";
  const char* star_scale = R"({"verbs":["get"],"apiGroups":["apps"],"resources":["*/scale"]})";
  const char* named = R"({"verbs":["*"],"apiGroups":[""],"resources":["pods"],)"
                      R"("resourceNames":["w-0"]})";
  const std::vector<RuleCase> cases = {
      {"rbac_test.go TestRuleMatches: star verb, exact match other", star_verb,
       ResourceRequest("verb1", "group1", "resource1"), true},
      {"TestRuleMatches: star verb, exact match other", star_verb,
       ResourceRequest("verb2", "group1", "resource1"), true},
      {"TestRuleMatches: star verb, exact match other", star_verb,
       ResourceRequest("verb1", "group2", "resource1"), false},
      {"TestRuleMatches: star verb, exact match other", star_verb,
       ResourceRequest("verb1", "group1", "resource2"), false},
      {"TestRuleMatches: star group, exact match other", star_group,
       ResourceRequest("verb1", "group2", "resource1"), true},
      {"TestRuleMatches: star group, exact match other", star_group,
       ResourceRequest("verb2", "group1", "resource1"), false},
      {"TestRuleMatches: star resource, exact match other", star_resource,
       ResourceRequest("verb1", "group1", "resource2"), true},
      {"TestRuleMatches: star resource, exact match other", star_resource,
       ResourceRequest("verb1", "group2", "resource2"), false},
      {"TestRuleMatches: tuple expansion", tuple, ResourceRequest("verb2", "group2", "resource2"),
       true},
      {"TestRuleMatches: tuple expansion", tuple, ResourceRequest("verb3", "group2", "resource2"),
       false},
      {"TestRuleMatches: subresource expansion", subresource,
       ResourceRequest("verb1", "group1", "resource1", "subresource1"), true},
      {"TestRuleMatches: subresource expansion", subresource,
       ResourceRequest("verb1", "group2", "resource1", "subresource2"), false},
      {"TestRuleMatches: subresource expansion", subresource,
       ResourceRequest("verb1", "group1", "resource2", "subresource1"), false},
      {"TestRuleMatches: subresource expansion (the main resource is another resource)",
       subresource, ResourceRequest("verb1", "group1", "resource1"), false},
      {"TestRuleMatches: star nonresource, exact match other", star_url,
       NonResourceRequest("verb1", "/foo/bar/one"), true},
      {"TestRuleMatches: star nonresource, exact match other", star_url,
       NonResourceRequest("verb2", "/foo"), false},
      {"TestRuleMatches: star nonresource subpath", url_subpath,
       NonResourceRequest("verb1", "/foo"), false},
      {"TestRuleMatches: star nonresource subpath", url_subpath,
       NonResourceRequest("verb1", "/foo/baz/one"), true},
      {"TestRuleMatches: star nonresource subpath", url_subpath,
       NonResourceRequest("verb1", "/notfoo/bar"), false},
      {"TestRuleMatches: star verb, exact nonresource", exact_urls,
       NonResourceRequest("verb2", "/foo/bar/one"), true},
      {"TestRuleMatches: star verb, exact nonresource", exact_urls,
       NonResourceRequest("verb1", "/foo/bar"), false},
      {"evaluation_helpers.go ResourceMatches: */subresource", star_scale,
       ResourceRequest("get", "apps", "deployments", "scale"), true},
      {"ResourceMatches: */subresource does not match the resource", star_scale,
       ResourceRequest("get", "apps", "deployments"), false},
      {"ResourceMatches: */subresource needs the same subresource", star_scale,
       ResourceRequest("get", "apps", "deployments", "status"), false},
      {"ResourceNameMatches: a listed name", named, ResourceRequest("get", "", "pods", "", "w-0"),
       true},
      {"ResourceNameMatches: another name", named, ResourceRequest("get", "", "pods", "", "w-1"),
       false},
      {"ResourceNameMatches: a list has no name", named, ResourceRequest("list", "", "pods"),
       false},
      {"ResourceNameMatches: a create has no name", named, ResourceRequest("create", "", "pods"),
       false},
      {"a resource rule never allows a path", star_resource, NonResourceRequest("verb1", "/foo"),
       false},
  };
  for (const auto& c : cases) {
    rapidjson::Document rule = Json(c.rule);
    BOOST_TEST(RuleAllows(c.request, rule) == c.allowed,
               c.upstream << " (" << c.request.verb << " " << c.request.resource << "/"
                          << c.request.subresource << " " << c.request.path << ")");
  }
}

struct InfoCase {
  const char* upstream;
  const char* method;
  const char* path;
  std::map<std::string, std::string> query;
  const char* verb;
  const char* group;
  const char* ns;
  const char* resource;
  const char* subresource;
  const char* name;
  bool resource_request;
};

BOOST_AUTO_TEST_CASE(request_attributes_follow_request_info_factory) {
  const std::vector<InfoCase> cases = {
      {"requestinfo_test.go TestGetAPIRequestInfo: GET /api/v1/namespaces",
       "GET",
       "/api/v1/namespaces",
       {},
       "list",
       "",
       "",
       "namespaces",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: GET namespaces/other",
       "GET",
       "/api/v1/namespaces/other",
       {},
       "get",
       "",
       "other",
       "namespaces",
       "",
       "other",
       true},
      {"TestGetAPIRequestInfo: list pods in a namespace",
       "GET",
       "/api/v1/namespaces/other/pods",
       {},
       "list",
       "",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: get a pod",
       "GET",
       "/api/v1/namespaces/other/pods/foo",
       {},
       "get",
       "",
       "other",
       "pods",
       "",
       "foo",
       true},
      {"TestGetAPIRequestInfo: pods across namespaces",
       "GET",
       "/api/v1/pods",
       {},
       "list",
       "",
       "",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: watch path",
       "GET",
       "/api/v1/watch/namespaces/other/pods",
       {},
       "watch",
       "",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: ?watch=true",
       "GET",
       "/api/v1/namespaces/other/pods",
       {{"watch", "true"}},
       "watch",
       "",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: ?watch=false",
       "GET",
       "/api/v1/namespaces/other/pods",
       {{"watch", "false"}},
       "list",
       "",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: subresource",
       "PUT",
       "/api/v1/namespaces/other/pods/foo/status",
       {},
       "update",
       "",
       "other",
       "pods",
       "status",
       "foo",
       true},
      {"TestGetAPIRequestInfo: create",
       "POST",
       "/apis/extensions/v1/namespaces/other/pods",
       {},
       "create",
       "extensions",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: deletecollection",
       "DELETE",
       "/api/v1/namespaces/other/pods",
       {},
       "deletecollection",
       "",
       "other",
       "pods",
       "",
       "",
       true},
      {"TestGetAPIRequestInfo: namespace status",
       "PUT",
       "/api/v1/namespaces/other/status",
       {},
       "update",
       "",
       "other",
       "namespaces",
       "status",
       "other",
       true},
      {"TestFieldSelectorParsing: metadata.name names the list",
       "GET",
       "/api/v1/namespaces/other/pods",
       {{"fieldSelector", "metadata.name=foo"}},
       "list",
       "",
       "other",
       "pods",
       "",
       "foo",
       true},
      {"TestFieldSelectorParsing: a watch by name",
       "GET",
       "/api/v1/namespaces/other/pods",
       {{"watch", "1"}, {"fieldSelector", "metadata.name==foo"}},
       "watch",
       "",
       "other",
       "pods",
       "",
       "foo",
       true},
      {"TestGetNonAPIRequestInfo: /apis", "GET", "/apis", {}, "get", "", "", "", "", "", false},
      {"TestGetNonAPIRequestInfo: /healthz",
       "GET",
       "/healthz",
       {},
       "get",
       "",
       "",
       "",
       "",
       "",
       false},
      {"TestGetNonAPIRequestInfo: group discovery",
       "GET",
       "/apis/rbac.authorization.k8s.io/v1",
       {},
       "get",
       "",
       "",
       "",
       "",
       "",
       false},
      {"cluster-scoped resource of a group",
       "GET",
       "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin",
       {},
       "get",
       "rbac.authorization.k8s.io",
       "",
       "clusterroles",
       "",
       "admin",
       true},
  };
  for (const auto& c : cases) {
    auto info = AttributesOfRequest(c.method, c.path, c.query);
    BOOST_TEST_REQUIRE(info.has_value(), c.upstream);
    BOOST_TEST(info->verb == c.verb, c.upstream);
    BOOST_TEST(info->api_group == c.group, c.upstream);
    BOOST_TEST(info->ns == c.ns, c.upstream);
    BOOST_TEST(info->resource == c.resource, c.upstream);
    BOOST_TEST(info->subresource == c.subresource, c.upstream);
    BOOST_TEST(info->name == c.name, c.upstream);
    BOOST_TEST(info->resource_request == c.resource_request, c.upstream);
  }
  BOOST_TEST(!AttributesOfRequest("GET", "/api/v1/watch", {}).has_value());
}

struct RbacFixture : testing::ApiFixture {
  void Put(const std::string& resource, const std::string& ns, const std::string& json) {
    BOOST_REQUIRE(store.Create(resource, ns, Json(json)).ok());
  }
  UserInfo ServiceAccount(const std::string& ns, const std::string& name) {
    UserInfo u;
    u.name = ServiceAccountUsername(ns, name);
    u.groups = ServiceAccountGroups(ns);
    u.groups.push_back(kAllAuthenticated);
    return u;
  }
  Decision Check(const UserInfo& user, const std::string& verb, const std::string& resource,
                 const std::string& ns, const std::string& sub = "", const std::string& name = "") {
    RequestAttributes a = ResourceRequest(verb, "", resource, sub, name);
    a.user = user;
    a.ns = ns;
    return Authorize(store, a);
  }
};

BOOST_FIXTURE_TEST_CASE(authorizer_walks_bindings_as_upstream, RbacFixture) {
  BOOST_REQUIRE(CreateBootstrapPolicy(store).ok());
  BOOST_REQUIRE(store.Create("namespaces", "", Json(R"({"metadata":{"name":"ns1"}})")).ok());
  Put("clusterroles", "",
      R"({"metadata":{"name":"admin"},"rules":[{"verbs":["*"],"apiGroups":["*"],)"
      R"("resources":["pods/status"]}]})");
  Put("clusterroles", "",
      R"({"metadata":{"name":"node-reader"},"rules":[{"verbs":["get"],"apiGroups":[""],)"
      R"("resources":["nodes"]}]})");
  // rbac_test.go TestAuthorizer "test subresource resolution": a RoleBinding to a
  // ClusterRole grants pods/status in its namespace only, not pods.
  Put("rolebindings", "ns1",
      R"({"metadata":{"name":"admin"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"ClusterRole","name":"admin"},"subjects":[{"kind":"ServiceAccount","name":"sa"}]})");
  Put("clusterrolebindings", "",
      R"({"metadata":{"name":"nodes"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"ClusterRole","name":"node-reader"},"subjects":[{"kind":"Group",)"
      R"("apiGroup":"rbac.authorization.k8s.io","name":"system:serviceaccounts:ns1"}]})");
  UserInfo sa = ServiceAccount("ns1", "sa");
  Decision status = Check(sa, "get", "pods", "ns1", "status");
  BOOST_TEST(status.allowed);
  BOOST_TEST(status.reason ==
             R"(RBAC: allowed by RoleBinding "admin/ns1" of ClusterRole "admin" to )"
             R"(ServiceAccount "sa/ns1")");
  BOOST_TEST(!Check(sa, "get", "pods", "ns1").allowed);
  BOOST_TEST(!Check(sa, "get", "pods", "default", "status").allowed);
  BOOST_TEST(!Check(ServiceAccount("ns2", "sa"), "get", "pods", "ns1", "status").allowed);
  // A ClusterRoleBinding applies in every namespace and at the cluster scope.
  BOOST_TEST(Check(sa, "get", "nodes", "").allowed);
  BOOST_TEST(Check(sa, "get", "nodes", "ns1").reason ==
             R"(RBAC: allowed by ClusterRoleBinding "nodes" of ClusterRole "node-reader" to )"
             R"(Group "system:serviceaccounts:ns1")");
  // system:masters passes without RBAC; the bootstrap discovery role serves everyone
  // authenticated.
  BOOST_TEST(Check(AdminUser(), "delete", "nodes", "").allowed);
  RequestAttributes discovery = NonResourceRequest("get", "/apis/apps/v1");
  discovery.user = sa;
  BOOST_TEST(Authorize(store, discovery).allowed);
  discovery.user = AnonymousUser();
  BOOST_TEST(!Authorize(store, discovery).allowed);
  discovery.path = "/healthz";
  BOOST_TEST(Authorize(store, discovery).allowed);  // system:public-info-viewer
}

BOOST_FIXTURE_TEST_CASE(missing_roles_give_the_reason_of_no_opinion, RbacFixture) {
  Put("rolebindings", "default",
      R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"Role","name":"gone"},"subjects":[{"kind":"User",)"
      R"("apiGroup":"rbac.authorization.k8s.io","name":"alice"}]})");
  UserInfo alice;
  alice.name = "alice";
  Decision d = Check(alice, "list", "pods", "default");
  BOOST_TEST(!d.allowed);
  BOOST_TEST(d.reason == R"(RBAC: role.rbac.authorization.k8s.io "gone" not found)");
}

BOOST_AUTO_TEST_CASE(forbidden_message_is_upstreams) {
  RequestAttributes a = ResourceRequest("list", "", "pods");
  a.user.name = "system:serviceaccount:slurm:k8sbridge-power";
  a.ns = "slurm";
  auto body = Json(ForbiddenResponse(a, "").body);
  BOOST_TEST(GetString(body, "message") ==
             R"(pods is forbidden: User "system:serviceaccount:slurm:k8sbridge-power" cannot )"
             R"(list resource "pods" in API group "" in the namespace "slurm")");
  BOOST_TEST(GetString(body, "reason") == "Forbidden");
  BOOST_TEST(GetString(body, "details.kind") == "pods");
  a = ResourceRequest("patch", "", "nodes", "status", "w-0");
  a.user.name = "x";
  body = Json(ForbiddenResponse(a, "").body);
  BOOST_TEST(GetString(body, "message") ==
             R"(nodes "w-0" is forbidden: User "x" cannot patch resource "nodes/status" in API )"
             R"(group "" at the cluster scope)");
  BOOST_TEST(GetString(body, "details.name") == "w-0");
  a = ResourceRequest("get", "apps", "deployments");
  a.user.name = "x";
  a.ns = "n";
  BOOST_TEST(GetString(Json(ForbiddenResponse(a, "RBAC: why").body), "message") ==
             R"(deployments.apps is forbidden: User "x" cannot get resource "deployments" in )"
             R"(API group "apps" in the namespace "n": RBAC: why)");
  a = NonResourceRequest("get", "/apis");
  a.user.name = "x";
  BOOST_TEST(GetString(Json(ForbiddenResponse(a, "").body), "message") ==
             R"(forbidden: User "x" cannot get path "/apis")");
}

BOOST_FIXTURE_TEST_CASE(impersonation_needs_the_impersonate_verb, RbacFixture) {
  BOOST_REQUIRE(CreateBootstrapPolicy(store).ok());
  std::multimap<std::string, std::string> as_sa = {
      {"impersonate-user", "system:serviceaccount:ns1:worker"}};
  ApiResponse error;
  auto acting = Impersonate(store, AdminUser(), as_sa, error);
  BOOST_REQUIRE(acting.has_value());
  BOOST_TEST(acting->name == "system:serviceaccount:ns1:worker");
  std::vector<std::string> groups = {"system:serviceaccounts", "system:serviceaccounts:ns1",
                                     "system:authenticated"};
  BOOST_TEST(acting->groups == groups, boost::test_tools::per_element());
  UserInfo bob;
  bob.name = "bob";
  bob.groups = {kAllAuthenticated};
  BOOST_TEST(!Impersonate(store, bob, as_sa, error).has_value());
  BOOST_TEST(error.code == 403);
  BOOST_TEST(GetString(Json(error.body), "message") ==
             R"(serviceaccounts "worker" is forbidden: User "bob" cannot impersonate resource )"
             R"("serviceaccounts" in API group "" in the namespace "ns1")");
  Put("clusterroles", "",
      R"({"metadata":{"name":"imp"},"rules":[{"verbs":["impersonate"],"apiGroups":[""],)"
      R"("resources":["users","groups"]}]})");
  Put("clusterrolebindings", "",
      R"({"metadata":{"name":"imp"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"ClusterRole","name":"imp"},"subjects":[{"kind":"User",)"
      R"("apiGroup":"rbac.authorization.k8s.io","name":"bob"}]})");
  std::multimap<std::string, std::string> as_user = {{"impersonate-user", "carol"},
                                                     {"impersonate-group", "devs"}};
  acting = Impersonate(store, bob, as_user, error);
  BOOST_REQUIRE(acting.has_value());
  BOOST_TEST(acting->name == "carol");
  std::vector<std::string> carol_groups = {"devs", "system:authenticated"};
  BOOST_TEST(acting->groups == carol_groups, boost::test_tools::per_element());
  std::multimap<std::string, std::string> group_only = {{"impersonate-group", "devs"}};
  BOOST_TEST(!Impersonate(store, bob, group_only, error).has_value());
  BOOST_TEST(error.code == 500);
}

BOOST_FIXTURE_TEST_CASE(tokens_expire_and_die_with_their_service_account, RbacFixture) {
  Put("serviceaccounts", "default", R"({"metadata":{"name":"power"}})");
  TokenIssuer issuer(store);
  auto token = issuer.Issue("default", "power", 600);
  BOOST_REQUIRE(token.ok());
  auto user = issuer.Authenticate(*token);
  BOOST_REQUIRE(user.ok());
  BOOST_TEST(user->name == "system:serviceaccount:default:power");
  BOOST_TEST(user->InGroup("system:serviceaccounts:default"));
  BOOST_TEST(!issuer.Authenticate(*token + "x").ok());
  BOOST_TEST(!TokenIssuer(store).Authenticate(*token).ok());  // another run's key
  // go-jose's minute of leeway after exp.
  clock.Advance(std::chrono::seconds(600 + 60));
  BOOST_TEST(issuer.Authenticate(*token).ok());
  clock.Advance(std::chrono::seconds(1));
  BOOST_TEST((issuer.Authenticate(*token).status().code() == Status::Code::kUnauthenticated));
  // Recreated with another uid: the old token is dead.
  auto fresh = issuer.Issue("default", "power", 3600);
  BOOST_REQUIRE(fresh.ok());
  BOOST_REQUIRE(store.Delete("serviceaccounts", "default", "power").ok());
  BOOST_TEST(!issuer.Authenticate(*fresh).ok());
  Put("serviceaccounts", "default", R"({"metadata":{"name":"power"}})");
  BOOST_TEST(!issuer.Authenticate(*fresh).ok());
  BOOST_TEST((issuer.Issue("default", "nobody", 600).status().code() == Status::Code::kNotFound));
}

BOOST_FIXTURE_TEST_CASE(rbac_objects_are_validated_as_upstream, RbacFixture) {
  auto rb = Send("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                 R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
                 R"("kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"alice"},)"
                 R"({"kind":"Robot","name":"x"}]})");
  BOOST_TEST(rb.code == 422);
  BOOST_TEST(GetString(Json(rb.body), "message") ==
             R"(RoleBinding.rbac.authorization.k8s.io "b" is invalid: subjects[1].kind: )"
             R"(Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group")");
  rb = Send("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
            R"("kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"alice"}]})");
  BOOST_TEST(rb.code == 201);
  BOOST_TEST(GetString(Json(rb.body)["subjects"][0], "apiGroup") == "rbac.authorization.k8s.io");
  auto changed =
      Send("PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/b",
           R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
           R"("kind":"Role","name":"other"}})");
  BOOST_TEST(changed.code == 422);
  BOOST_TEST(GetString(Json(changed.body), "message") ==
             R"(RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: )"
             R"(rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"other"}: )"
             R"(cannot change roleRef)");
  auto role = Send("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                   R"({"metadata":{"name":"r"},"rules":[{"verbs":["get"],)"
                   R"("nonResourceURLs":["/healthz"]}]})");
  BOOST_TEST(role.code == 422);
  BOOST_TEST(GetString(Json(role.body), "message") ==
             R"(Role.rbac.authorization.k8s.io "r" is invalid: rules[0].nonResourceURLs: )"
             R"(Invalid value: []string{"/healthz"}: namespaced rules cannot apply to )"
             R"(non-resource URLs)");
  auto crb =
      Send("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
           R"({"metadata":{"name":"c"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
           R"("kind":"Role","name":"r"},"subjects":[{"kind":"ServiceAccount","name":"s"}]})");
  BOOST_TEST(crb.code == 422);
  BOOST_TEST(GetString(Json(crb.body), "message") ==
             R"(ClusterRoleBinding.rbac.authorization.k8s.io "c" is invalid: [roleRef.kind: )"
             R"(Unsupported value: "Role": supported values: "ClusterRole", )"
             R"(subjects[0].namespace: Required value])");
}

BOOST_FIXTURE_TEST_CASE(pods_get_the_service_account_volume, RbacFixture) {
  auto pod = Send("POST", "/api/v1/namespaces/default/pods",
                  R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}],)"
                  R"("initContainers":[{"name":"i","image":"i"}]}})");
  BOOST_REQUIRE(pod.code == 201);
  auto body = Json(pod.body);
  BOOST_TEST(GetString(body, "spec.serviceAccountName") == "default");
  BOOST_TEST(GetString(body, "spec.serviceAccount") == "default");
  const auto& volume = body["spec"]["volumes"][0];
  std::string name = GetString(volume, "name");
  BOOST_TEST(name.rfind("kube-api-access-", 0) == 0u);
  BOOST_TEST(name.size() == std::string("kube-api-access-").size() + 5);
  BOOST_TEST(
      volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"].GetInt() ==
      3607);
  BOOST_TEST(GetString(volume["projected"]["sources"][1], "configMap.name") == "kube-root-ca.crt");
  for (const char* list : {"containers", "initContainers"}) {
    const auto& mount = body["spec"][list][0]["volumeMounts"][0];
    BOOST_TEST(GetString(mount, "name") == name);
    BOOST_TEST(GetString(mount, "mountPath") == "/var/run/secrets/kubernetes.io/serviceaccount");
    BOOST_TEST(mount["readOnly"].GetBool());
  }
  auto no_token = Send("POST", "/api/v1/namespaces/default/pods",
                       R"({"metadata":{"name":"q"},"spec":{"automountServiceAccountToken":false,)"
                       R"("containers":[{"name":"c","image":"i"}]}})");
  BOOST_TEST(Find(Json(no_token.body), "spec.volumes") == nullptr);
  auto missing = Send("POST", "/api/v1/namespaces/default/pods",
                      R"({"metadata":{"name":"r"},"spec":{"serviceAccountName":"worker",)"
                      R"("containers":[{"name":"c","image":"i"}]}})");
  BOOST_TEST(missing.code == 403);
  BOOST_TEST(GetString(Json(missing.body), "message") ==
             R"(pods "r" is forbidden: error looking up service account default/worker: )"
             R"(serviceaccount "worker" not found)");
}

BOOST_FIXTURE_TEST_CASE(token_requests_are_validated, RbacFixture) {
  TokenIssuer issuer(store);
  api.set_token_issuer(&issuer);
  Put("serviceaccounts", "default", R"({"metadata":{"name":"power"}})");
  const char* path = "/api/v1/namespaces/default/serviceaccounts/power/token";
  auto r = Send("POST", path, R"({"spec":{"expirationSeconds":599}})");
  BOOST_TEST(r.code == 422);
  BOOST_TEST(GetString(Json(r.body), "message") ==
             R"(TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: )"
             R"(Invalid value: 599: may not specify a duration less than 10 minutes)");
  r = Send("POST", path, R"({"spec":{}})");
  BOOST_REQUIRE(r.code == 201);
  auto body = Json(r.body);
  BOOST_TEST(body["spec"]["expirationSeconds"].GetInt64() == 3600);
  BOOST_TEST(issuer.Authenticate(GetString(body, "status.token")).ok());
  BOOST_TEST(!GetString(body, "status.expirationTimestamp").empty());
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/serviceaccounts/nobody/token", "{}").code ==
             404);
}

// escalation_check.go / rule.go ConfirmNoEscalation, as in upstream's
// TestEscalation-style cases: a user may only grant what it holds, or with
// escalate/bind.
BOOST_FIXTURE_TEST_CASE(escalation_is_prevented, RbacFixture) {
  BOOST_REQUIRE(CreateBootstrapPolicy(store).ok());
  Put("roles", "default",
      R"({"metadata":{"name":"rbac-writer"},"rules":[{"verbs":["create","update"],)"
      R"("apiGroups":["rbac.authorization.k8s.io"],"resources":["roles","rolebindings"]},)"
      R"({"verbs":["get","list"],"apiGroups":[""],"resources":["pods"]}]})");
  Put("rolebindings", "default",
      R"({"metadata":{"name":"w"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"Role","name":"rbac-writer"},"subjects":[{"kind":"User",)"
      R"("apiGroup":"rbac.authorization.k8s.io","name":"bob"}]})");
  Put("roles", "default",
      R"({"metadata":{"name":"deleter"},"rules":[{"verbs":["delete"],"apiGroups":[""],)"
      R"("resources":["pods"]}]})");
  UserInfo bob;
  bob.name = "bob";
  bob.groups = {kAllAuthenticated};
  auto role = Json(R"({"metadata":{"name":"r"},"rules":[{"verbs":["get"],"apiGroups":[""],)"
                   R"("resources":["pods"]}]})");
  BOOST_TEST(!CheckRbacEscalation(store, bob, "roles", "default", role, nullptr).has_value());
  auto more = Json(R"({"metadata":{"name":"r"},"rules":[{"verbs":["get","delete","patch"],)"
                   R"("apiGroups":[""],"resources":["pods"]}]})");
  auto refused = CheckRbacEscalation(store, bob, "roles", "default", more, nullptr);
  BOOST_REQUIRE(refused.has_value());
  BOOST_TEST(refused->code == 403);
  BOOST_TEST(GetString(Json(refused->body), "message") ==
             "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"bob\" "
             "(groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not "
             "currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\" "
             "\"patch\"]}\n");
  BOOST_TEST(
      !CheckRbacEscalation(store, AdminUser(), "roles", "default", more, nullptr).has_value());
  // Binding a role whose rules bob lacks needs bind on it.
  auto binding = Json(R"({"metadata":{"name":"b"},"roleRef":{"apiGroup":)"
                      R"("rbac.authorization.k8s.io","kind":"Role","name":"deleter"}})");
  BOOST_TEST(
      CheckRbacEscalation(store, bob, "rolebindings", "default", binding, nullptr).has_value());
  Put("roles", "default",
      R"({"metadata":{"name":"binder"},"rules":[{"verbs":["bind"],)"
      R"("apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"],)"
      R"("resourceNames":["deleter"]}]})");
  Put("rolebindings", "default",
      R"({"metadata":{"name":"bb"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io",)"
      R"("kind":"Role","name":"binder"},"subjects":[{"kind":"User",)"
      R"("apiGroup":"rbac.authorization.k8s.io","name":"bob"}]})");
  BOOST_TEST(!CheckRbacEscalation(store, bob, "rolebindings", "default", binding, nullptr));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace kubesim
