// The PATCH flavours of the Kubernetes API, on RapidJSON documents, and YAML to JSON.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;
using k8sbridge::Status;

// RFC 7386 JSON merge patch: null deletes, objects merge, everything else replaces.
void ApplyMergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                     rapidjson::Document::AllocatorType& alloc);

// RFC 6902 JSON patch (add, remove, replace, move, copy, test). kInvalidArgument when an
// operation is malformed or a path is missing; kConflict when a "test" fails.
Status ApplyJsonPatch(rapidjson::Document& target, const rapidjson::Value& patch);

// Kubernetes strategic merge patch for the fields kubesim's kinds use: like a merge
// patch, but lists with a merge key (containers and env by name, conditions by type,
// ...) merge element by element, "finalizers" merges as a set, and the directives
// $patch (replace/delete/merge), $deleteFromPrimitiveList/<field>, $setElementOrder/<field>
// and $retainKeys are honoured. Every other list (taints, tolerations) is atomic.
Status ApplyStrategicMergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                                rapidjson::Document::AllocatorType& alloc);

// The merge key strategic merge uses for a list field ("containers" -> "name"), "" for
// atomic lists; IsSetList: lists merged as sets of scalars ("finalizers").
std::string MergeKeyOf(const std::string& field);
bool IsSetList(const std::string& field);

// YAML (one document) to JSON. Plain scalars become null/bool/number where YAML 1.2's
// core schema says so; quoted scalars stay strings.
Result<std::unique_ptr<rapidjson::Document>> YamlToJson(const std::string& yaml);
// Every document of a multi-document YAML stream ("---"), the same way.
Result<std::vector<std::unique_ptr<rapidjson::Document>>> YamlDocumentsToJson(
    const std::string& yaml);

}  // namespace kubesim
