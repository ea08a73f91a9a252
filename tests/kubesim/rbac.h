// Authorization of kubesim's API server with the rules of Kubernetes RBAC
// (plugin/pkg/auth/authorizer/rbac/rbac.go, pkg/apis/rbac/v1/evaluation_helpers.go),
// after the request attributes of apiserver's RequestInfoFactory
// (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go), the 403 of
// responsewriters/errors.go, impersonation (endpoints/filters/impersonation.go), the
// bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), the validation
// of the RBAC kinds (pkg/apis/rbac/validation) and the access reviews
// (pkg/registry/authorization). docs/kubesim.md, "Authentication and RBAC".
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "api.h"
#include "authn.h"
#include "store.h"
#include "validation.h"

namespace kubesim {

// authorizer.Attributes.
struct RequestAttributes {
  UserInfo user;
  std::string verb;
  bool resource_request = false;
  std::string path;  // non-resource requests
  std::string api_group;
  std::string api_version;
  std::string resource;
  std::string subresource;
  std::string name;
  std::string ns;
};

// RequestInfoFactory.NewRequestInfo: the verb (get list watch create update patch
// delete deletecollection, or the lowercase method for non-resource paths), group,
// version, resource, subresource, name and namespace of a request; `?watch=1` and
// /watch/ paths are watches, a fieldSelector metadata.name=X names the object of a
// list or watch. nullopt for a resource path too short to name a resource (400).
std::optional<RequestAttributes> AttributesOfRequest(
    const std::string& method, const std::string& path,
    const std::map<std::string, std::string>& query);

// evaluation_helpers.go: one PolicyRule (JSON, rbac/v1) against the request.
bool VerbMatches(const rapidjson::Value& rule, const std::string& verb);
bool ApiGroupMatches(const rapidjson::Value& rule, const std::string& group);
bool ResourceMatches(const rapidjson::Value& rule, const std::string& combined_resource,
                     const std::string& subresource);
bool ResourceNameMatches(const rapidjson::Value& rule, const std::string& name);
bool NonResourceUrlMatches(const rapidjson::Value& rule, const std::string& url);
// rbac.go RuleAllows.
bool RuleAllows(const RequestAttributes& attributes, const rapidjson::Value& rule);

struct Decision {
  bool allowed = false;
  // "RBAC: allowed by ClusterRoleBinding ..." or, for no opinion, the lookup errors
  // ("RBAC: clusterrole.rbac.authorization.k8s.io "x" not found"); "" otherwise.
  std::string reason;
};

// system:masters, then the RBAC authorizer over the stored bindings and roles.
Decision Authorize(const Store& store, const RequestAttributes& attributes);

// The rules that apply to `user` in `ns` (ClusterRoleBindings, then the RoleBindings
// of `ns`), for SelfSubjectRulesReview; `errors` gets the lookup failures.
std::vector<rapidjson::Document> RulesFor(const Store& store, const UserInfo& user,
                                          const std::string& ns, std::vector<std::string>& errors);

// The 403 Forbidden Status of responsewriters.Forbidden for a refused request.
ApiResponse ForbiddenResponse(const RequestAttributes& attributes, const std::string& reason);

// Impersonate-User / -Group / -Uid / -Extra-*: the identity the request acts as,
// each impersonation authorized with verb "impersonate" for `requestor`. `headers`
// holds the Impersonate-* headers (lowercase names). nullopt with `error` set: 400 or
// 403. Without impersonation headers: the requestor.
std::optional<UserInfo> Impersonate(const Store& store, const UserInfo& requestor,
                                    const std::multimap<std::string, std::string>& headers,
                                    ApiResponse& error);

// The bootstrap ClusterRoles and ClusterRoleBindings of the API server: cluster-admin,
// system:discovery, system:basic-user, system:public-info-viewer (the view, edit and
// admin roles are not made). Existing objects are left alone.
Status CreateBootstrapPolicy(Store& store);

// The rules of aggregated ClusterRoles (aggregationRule.clusterRoleSelectors), as the
// clusterrole-aggregation controller fills them in.
void AggregateClusterRoles(Store& store);

// pkg/apis/rbac/validation of roles, clusterroles, rolebindings, clusterrolebindings
// (with the v1 defaulting of subjects' apiGroup done first by DefaultRbacObject).
bool IsRbacResource(const std::string& group, const std::string& resource);
void DefaultRbacObject(const std::string& resource, rapidjson::Document& object);
void ValidateRbacObject(const std::string& resource, const rapidjson::Value& object,
                        FieldErrors& errors);
void ValidateRbacUpdate(const std::string& resource, const rapidjson::Value& object,
                        const rapidjson::Value& old, FieldErrors& errors);

// Escalation prevention on a write of a Role, ClusterRole, RoleBinding or
// ClusterRoleBinding (`old` the stored object of an update): unless `user` is in
// system:masters, may `escalate` the role (`bind` its roleRef for a binding), or the
// grant is unchanged, every rule granted must be one `user` already holds; 403
// otherwise, with upstream's "is attempting to grant RBAC permissions not currently
// held" message (pkg/registry/rbac/escalation_check.go, validation/rule.go).
std::optional<ApiResponse> CheckRbacEscalation(const Store& store, const UserInfo& user,
                                               const std::string& resource, const std::string& ns,
                                               const rapidjson::Value& object,
                                               const rapidjson::Value* old);

// authorization.k8s.io/v1 SelfSubjectAccessReview, SubjectAccessReview,
// LocalSubjectAccessReview, SelfSubjectRulesReview and authentication.k8s.io/v1
// SelfSubjectReview: create-only, answered and never stored.
bool IsReviewResource(const std::string& group, const std::string& resource);
ApiResponse HandleReview(const Store& store, const ApiRequest& request, const Route& route);

// The strings of the array at `dotted_path` (a non-string entry reads as ""); empty
// when there is none.
std::vector<std::string> StringsAt(const rapidjson::Value& object, const char* dotted_path);

// The identity of an ApiRequest (its user, uid, groups and extra).
UserInfo UserOfRequest(const ApiRequest& request);

}  // namespace kubesim
