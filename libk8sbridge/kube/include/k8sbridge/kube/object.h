// A Kubernetes object kept as the JSON document the server sent, with small typed
// accessors. No model of the whole API is generated: callers read and write the
// few fields they need through JSON pointers ("/spec/nodeName").
//
// Copies share the document (cheap: the informer hands the same object to many
// readers); a setter copies the document first if it is shared, so an Object is a
// value. Reading one Object from several threads is safe; writing is not.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "k8sbridge/status.h"

namespace k8sbridge::kube {

class Object {
 public:
  Object();  // an empty JSON object {}
  static Result<Object> Parse(std::string_view json);
  static Object FromValue(const rapidjson::Value& value);

  std::string ToJson() const;
  const rapidjson::Value& json() const { return *doc_; }
  rapidjson::Document& mutable_json();  // unshares first

  std::string Kind() const { return String("/kind"); }
  std::string ApiVersion() const { return String("/apiVersion"); }
  std::string Name() const { return String("/metadata/name"); }
  std::string Namespace() const { return String("/metadata/namespace"); }
  std::string Uid() const { return String("/metadata/uid"); }
  std::string ResourceVersion() const { return String("/metadata/resourceVersion"); }
  bool IsBeingDeleted() const { return Has("/metadata/deletionTimestamp"); }
  std::map<std::string, std::string> Labels() const { return StringMap("/metadata/labels"); }
  std::map<std::string, std::string> Annotations() const {
    return StringMap("/metadata/annotations");
  }
  // "namespace/name" or "name": the key of the informer cache.
  std::string Key() const;

  bool Has(std::string_view pointer) const;
  // The string at `pointer`, or "" if absent or not a string.
  std::string String(std::string_view pointer) const;
  std::optional<int64_t> Int(std::string_view pointer) const;
  std::optional<bool> Bool(std::string_view pointer) const;
  std::map<std::string, std::string> StringMap(std::string_view pointer) const;

  void SetString(std::string_view pointer, std::string_view value);
  void SetInt(std::string_view pointer, int64_t value);
  void SetBool(std::string_view pointer, bool value);
  // Replaces the value at `pointer` with parsed `json`; false if `json` is invalid.
  bool SetJson(std::string_view pointer, std::string_view json);
  void Remove(std::string_view pointer);

 private:
  explicit Object(std::shared_ptr<rapidjson::Document> doc) : doc_(std::move(doc)) {}
  const rapidjson::Value* Find(std::string_view pointer) const;
  std::shared_ptr<rapidjson::Document> doc_;
};

// Typed accessors for the kinds k8sbridge uses.
namespace pod {
inline std::string Phase(const Object& o) {
  return o.String("/status/phase");
}
inline std::string NodeName(const Object& o) {
  return o.String("/spec/nodeName");
}
inline std::string PodIp(const Object& o) {
  return o.String("/status/podIP");
}
// status of condition `type` ("True"/"False"/"Unknown"), "" if absent.
std::string ConditionStatus(const Object& o, std::string_view type);
}  // namespace pod
namespace node {
inline bool Unschedulable(const Object& o) {
  return o.Bool("/spec/unschedulable").value_or(false);
}
std::string ConditionStatus(const Object& o, std::string_view type);
}  // namespace node
namespace lease {
inline std::string HolderIdentity(const Object& o) {
  return o.String("/spec/holderIdentity");
}
inline int64_t DurationSeconds(const Object& o) {
  return o.Int("/spec/leaseDurationSeconds").value_or(0);
}
inline int64_t Transitions(const Object& o) {
  return o.Int("/spec/leaseTransitions").value_or(0);
}
}  // namespace lease
namespace configmap {
inline std::map<std::string, std::string> Data(const Object& o) {
  return o.StringMap("/data");
}
}  // namespace configmap

// Escapes one segment for a JSON pointer ("a/b" -> "a~1b").
std::string PointerEscape(std::string_view segment);

// The string member `name` of the JSON object `object`; "" when `object` is null
// or not an object, or the member is absent or not a string. For code that walks
// JSON below an Object (conditions, taints, containers) or a document of its own.
std::string StringMember(const rapidjson::Value* object, std::string_view name);

}  // namespace k8sbridge::kube
