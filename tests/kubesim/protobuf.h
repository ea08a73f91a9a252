// The protobuf bodies kubesim reads: the policy/v1 Eviction of client-go's typed
// clients, and the v1 ConfigMap, Secret and Namespace that kubectl's generators
// (`kubectl create configmap|secret|namespace`) send as
// application/vnd.kubernetes.protobuf. Every other protobuf body is still 415
// (docs/kubesim.md, "How it differs").
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
//
// The wire format, as the API server reads it (k8s.io/apimachinery/pkg/runtime/
// serializer/protobuf/protobuf.go): the 4-byte magic "k8s\0", then a runtime.Unknown
// (k8s.io/apimachinery/pkg/runtime/generated.proto) whose raw bytes are the object's
// own message, here policy.v1.Eviction (k8s.io/api/policy/v1/generated.proto), with
// ObjectMeta and DeleteOptions of k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;

struct ProtobufEviction {
  std::string api_version, kind;  // runtime.Unknown's typeMeta
  std::string name, ns;           // metadata
  std::optional<int64_t> grace_period_seconds;
  std::string precondition_uid, precondition_resource_version;
  std::optional<bool> orphan_dependents;
  std::string propagation_policy;
  std::vector<std::string> dry_run;
};

// Decodes `body`; an error names what is malformed (the magic, a truncated field,
// a content encoding, another kind).
Result<ProtobufEviction> DecodeEvictionProtobuf(std::string_view body);

// The same Eviction as the JSON body the API takes.
std::string EvictionJson(const ProtobufEviction& eviction);

// A protobuf body as the JSON body the API takes: an Eviction, ConfigMap, Secret or
// Namespace. NotFound: a body of another kind (the caller answers 415);
// InvalidArgument: a malformed one (400).
Result<std::string> ProtobufBodyAsJson(std::string_view body);

}  // namespace kubesim
