// The fields each kind served by kubesim declares, for the API server's unknown-field
// handling (fieldValidation=Ignore|Warn|Strict, docs/kubesim.md "Strictness rules").
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <string>
#include <vector>

#include <rapidjson/document.h>

namespace kubesim {

// The schema type of the objects of `resource` in API `group` ("Pod", "Lease",
// "events.k8s.io/v1.Event", ...); "" for a resource without one.
std::string SchemaTypeFor(const std::string& group, const std::string& resource);

// Removes from `object` every member that `type` does not declare, and every earlier
// copy of a member that appears twice (the last one wins, as in Go's decoder). Returns
// what the apiserver's strict decoder reports, in document order: `unknown field
// "spec.foo"`, `duplicate field "metadata.name"`.
std::vector<std::string> DropUnknownFields(const std::string& type, rapidjson::Value& object);

}  // namespace kubesim
