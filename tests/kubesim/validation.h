// Validation of the objects kubesim stores, rule by rule as kube-apiserver does it
// (docs/kubesim.md, "Strictness rules", names the upstream file of each rule): object
// names per kind, metadata (labels, annotations, owner references, finalizers), events
// of both API versions, pods on create and on update.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "api.h"

namespace kubesim {

// One entry of the apiserver's field.ErrorList: `field` is the path
// ("spec.containers[0].image"), `reason` the Status cause reason ("FieldValueRequired"),
// `body` what follows "field: " in the message ("Required value").
struct FieldError {
  std::string reason;
  std::string field;
  std::string body;
  std::string Text() const { return field + ": " + body; }
};
using FieldErrors = std::vector<FieldError>;

// The constructors of k8s.io/apimachinery/pkg/util/validation/field, same wording.
FieldError Required(const std::string& field, const std::string& detail = "");
FieldError Invalid(const std::string& field, const std::string& value, const std::string& detail);
// `value` printed as is (numbers, JSON).
FieldError InvalidRaw(const std::string& field, const std::string& value,
                      const std::string& detail);
FieldError Forbidden(const std::string& field, const std::string& detail);
FieldError NotSupported(const std::string& field, const std::string& value,
                        const std::vector<std::string>& supported);
FieldError Duplicate(const std::string& field, const std::string& value);
FieldError NotFound(const std::string& field, const std::string& value);
FieldError TooLong(const std::string& field, int max_bytes);

// Go's %q of a string.
std::string GoQuote(const std::string& s);

// k8s.io/apimachinery/pkg/util/validation: the messages of each failed check, empty
// when the value is valid.
std::vector<std::string> IsDns1123Subdomain(const std::string& value);
std::vector<std::string> IsDns1123Label(const std::string& value);
std::vector<std::string> IsQualifiedName(const std::string& value);
std::vector<std::string> IsLabelValue(const std::string& value);

// How a kind's metadata.name is checked.
enum class NameRule { kDnsSubdomain, kDnsLabel, kPathSegment };
NameRule NameRuleFor(const std::string& group, const std::string& resource);
// The messages for `name` (with `prefix`: a generateName, whose trailing '-' is fine).
std::vector<std::string> CheckName(NameRule rule, const std::string& name, bool prefix);

// The errors of creating `object` (namespace already filled in for namespaced kinds)
// through API `group`; empty when it is valid.
FieldErrors ValidateCreate(const std::string& group, const std::string& resource,
                           const rapidjson::Value& object);
// The errors of replacing `old` by `object` through the main resource (not /status).
FieldErrors ValidateUpdate(const std::string& group, const std::string& resource,
                           const rapidjson::Value& object, const rapidjson::Value& old);

// Pods (validation_pod.cpp).
void ValidatePodSpec(const rapidjson::Value& spec, FieldErrors& errors);
void ValidatePodSpecUpdate(const rapidjson::Value& spec, const rapidjson::Value& old_spec,
                           FieldErrors& errors);

// The 422 Invalid answer for `errors`: message `<Kind>[.<group>] "<name>" is invalid: ...`
// (one error, or all in brackets) and details.causes, as apierrors.NewInvalid.
ApiResponse InvalidResponse(const std::string& kind, const std::string& group,
                            const std::string& name, const FieldErrors& errors);

// ---- request-level hooks of the API server (validation_api.cpp) -----------------------

// fieldValidation (Ignore, Warn = the default, Strict) for a create or update body, or
// for the result of a patch (`patch` true): drops the fields `schema_type` does not
// declare, and either adds one warning per field to `warnings` (Warn) or answers
// Strict's error (400 for create/update, 422 for patch). Also the 422 for a bad
// directive. nullopt: go on. `kind` and `version` name the body's type in messages.
std::optional<ApiResponse> ApplyFieldValidation(const ApiRequest& request,
                                                const std::string& schema_type,
                                                const std::string& kind, const std::string& version,
                                                bool patch, rapidjson::Value& object,
                                                std::vector<std::string>& warnings);
// Adds `Warning: 299 - "<text>"` headers, as the apiserver's warning recorder.
void AddWarningHeaders(ApiResponse& response, const std::vector<std::string>& warnings);

// A create body carrying metadata.resourceVersion (a non-zero number): the etcd3
// storage's refusal, which reaches the client as a 500 without a reason.
std::optional<ApiResponse> RefuseResourceVersionOnCreate(const rapidjson::Value& object);

// Replaces invalid UTF-8 in every string of `value` by U+FFFD, as Go's JSON decoder
// does with a request body.
void ReplaceInvalidUtf8(rapidjson::Value& value, rapidjson::Document::AllocatorType& allocator);

}  // namespace kubesim
