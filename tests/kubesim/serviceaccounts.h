// ServiceAccounts in kubesim: the ServiceAccount admission plugin on pod creation
// (plugin/pkg/admission/serviceaccount/admission.go), the controllers that give every
// namespace its `default` ServiceAccount (pkg/controller/serviceaccount) and its
// kube-root-ca.crt ConfigMap (pkg/controller/certificates/rootcacertpublisher), and
// the serviceaccounts/token subresource (pkg/registry/core/serviceaccount/storage
// token.go, with pkg/apis/authentication/validation). docs/kubesim.md,
// "Authentication and RBAC".
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>

#include <rapidjson/document.h>

#include "api.h"
#include "authn.h"
#include "store.h"

namespace kubesim {

// Gives namespace `ns` (every namespace when "") what the two controllers keep there:
// the ServiceAccount "default" and the ConfigMap kube-root-ca.crt with ca.crt =
// `ca_pem` (restored when edited). Terminating namespaces are left alone.
void SyncNamespaceDefaults(Store& store, const std::string& ca_pem, const std::string& ns = "");

// The admission of a pod being created in `ns`: spec.serviceAccountName defaults to
// "default" (spec.serviceAccount mirrors it), the ServiceAccount must exist (403
// otherwise, as upstream), and unless automountServiceAccountToken is false (pod, then
// ServiceAccount) the projected volume kube-api-access-<5 chars> is added and mounted
// read-only at /var/run/secrets/kubernetes.io/serviceaccount in every container and
// init container that has nothing mounted there. nullopt: admitted.
std::optional<ApiResponse> AdmitPodServiceAccount(Store& store, const std::string& ca_pem,
                                                  const std::string& ns, rapidjson::Document& pod);

// POST serviceaccounts/NAME/token: a TokenRequest answered with status.token and
// status.expirationTimestamp (201); spec.expirationSeconds defaults to 3600, under 600
// or over 2^32 is 422.
ApiResponse CreateTokenRequest(TokenIssuer& issuer, Store& store, const ApiRequest& request,
                               const Route& route);

}  // namespace kubesim
