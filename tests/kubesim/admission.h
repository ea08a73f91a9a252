// The admission plugins of kube-apiserver that kubesim runs on pod creation.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <cstdint>
#include <string>

#include <rapidjson/document.h>

namespace kubesim {

struct AdmissionOptions {
  // DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds): the
  // tolerationSeconds of the NoExecute tolerations for node.kubernetes.io/not-ready and
  // node.kubernetes.io/unreachable every pod gets (kube-apiserver's
  // --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds).
  int64_t default_not_ready_toleration_seconds = 300;
  int64_t default_unreachable_toleration_seconds = 300;
  // The CA that the root-CA publisher puts in every namespace's kube-root-ca.crt
  // (serviceaccounts.h); "" without TLS.
  std::string root_ca_pem;
};

// DefaultTolerationSeconds: adds {key, operator: Exists, effect: NoExecute,
// tolerationSeconds} for each of the two taints the pod does not already tolerate with
// a NoExecute (or effect-less) toleration of that key (or of every key).
void AddDefaultTolerations(rapidjson::Document& pod, const AdmissionOptions& options);

}  // namespace kubesim
