// Authentication of kubesim's API server: who a request comes from (user, uid, groups,
// extra), from the admin bearer token, a client certificate of the test CA, or a
// ServiceAccount token minted by the TokenIssuer below (docs/kubesim.md,
// "Authentication and RBAC").
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store.h"

namespace kubesim {

// k8s.io/apiserver/pkg/authentication/user: the well-known names.
inline constexpr const char* kSystemMasters = "system:masters";
inline constexpr const char* kAllAuthenticated = "system:authenticated";
inline constexpr const char* kAllUnauthenticated = "system:unauthenticated";
inline constexpr const char* kAnonymousUser = "system:anonymous";
inline constexpr const char* kAdminUser = "kubesim-admin";

struct UserInfo {
  std::string name;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;

  bool InGroup(const std::string& group) const;
  // Members of system:masters pass every authorization check (kube-apiserver's
  // privileged-group authorizer comes before RBAC).
  bool Privileged() const { return InGroup(kSystemMasters); }
};

// pkg/serviceaccount/util.go: "system:serviceaccount:<ns>:<name>" and back.
std::string ServiceAccountUsername(const std::string& ns, const std::string& name);
// True (with ns and name set) when `username` names a ServiceAccount.
bool SplitServiceAccountUsername(const std::string& username, std::string& ns, std::string& name);
// system:serviceaccounts, system:serviceaccounts:<ns>.
std::vector<std::string> ServiceAccountGroups(const std::string& ns);

// The identity of a verified client certificate: CN the user, each O a group, plus
// system:authenticated (x509 request authenticator).
UserInfo UserFromCertificate(const std::string& common_name,
                             const std::vector<std::string>& organizations);

// The admin token's identity (the kubesim-admin user in system:masters).
UserInfo AdminUser();
// Unauthenticated requests to the health and version paths (anonymous authentication
// limited to those paths, as kube-apiserver's AnonymousAuthConfigurableEndpoints).
UserInfo AnonymousUser();

// Bound ServiceAccount tokens (pkg/serviceaccount/claims.go, jwt.go): JWTs with the
// claims iss, sub, aud, exp, iat, nbf, jti and kubernetes.io {namespace,
// serviceaccount {name, uid}}, signed with HMAC-SHA256 over a key made at start (so
// tokens die with the kubesim process). Thread-safe.
class TokenIssuer {
 public:
  // The API server's issuer and audience (--service-account-issuer, --api-audiences).
  static constexpr const char* kIssuer = "https://kubernetes.default.svc.cluster.local";

  explicit TokenIssuer(Store& store);

  struct Issued {
    std::string token;
    int64_t expiration_unix = 0;  // seconds since the epoch
  };
  // A token for the stored ServiceAccount ns/name living `expiration_seconds` (>= 1).
  // kNotFound when there is no such ServiceAccount. `audiences` empty: the API
  // server's own.
  Result<Issued> IssueToken(const std::string& ns, const std::string& service_account,
                            int64_t expiration_seconds,
                            const std::vector<std::string>& audiences = {});
  // The kubelet's hook for projected serviceAccountToken volumes: the token only.
  Result<std::string> Issue(const std::string& ns, const std::string& service_account,
                            int64_t expiration_seconds);

  // The ServiceAccount identity of `token`, or kUnauthenticated (bad signature, not
  // ours, other audience, expired or not yet valid beyond the 60 s leeway of
  // go-jose, ServiceAccount deleted or recreated with another uid).
  Result<UserInfo> Authenticate(const std::string& token) const;

 private:
  std::string Sign(const std::string& signing_input) const;

  Store& store_;
  std::string key_;
};

// base64url without padding (RFC 7515) and back (nullopt on bad input).
std::string Base64UrlEncode(const std::string& data);
std::optional<std::string> Base64UrlDecode(const std::string& text);

}  // namespace kubesim
