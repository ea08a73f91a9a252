// Field ownership for server-side apply: metadata.managedFields with one FieldsV1 set per
// manager and operation, apply conflicts, force, and the removal of fields an applier
// stopped applying (upstream: sigs.k8s.io/structured-merge-diff/v4 fieldpath and merge,
// k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager and
// k8s.io/apimachinery/pkg/util/managedfields/internal: conflict.go, stripmeta.go).
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "store.h"

namespace kubesim {

// One step of a field path, as fieldpath.PathElement: a member name, a list element by
// its merge key ({"name":"c"}), a set-list value, or a list index.
struct PathElement {
  enum class Kind { kField, kKey, kValue, kIndex } kind;
  std::string text;  // the name, or the key/value as JSON, or the index
  bool operator<(const PathElement& o) const {
    return kind != o.kind ? kind < o.kind : text < o.text;
  }
  bool operator==(const PathElement& o) const { return kind == o.kind && text == o.text; }
};
using FieldPath = std::vector<PathElement>;
using FieldSet = std::set<FieldPath>;

// ".spec.containers[name=\"c\"].image", as fieldpath.Path.String.
std::string PathString(const FieldPath& path);

// The fields a configuration sets (or an object has), without the ones the server
// owns (apiVersion, kind, metadata.name/namespace/uid/resourceVersion/... ).
FieldSet FieldsOf(const rapidjson::Value& object);

FieldSet FieldsV1ToSet(const rapidjson::Value& fields_v1);
rapidjson::Value SetToFieldsV1(const FieldSet& set, rapidjson::Document::AllocatorType& alloc);

struct WriteContext {
  std::string manager;      // fieldManager; empty: the write is not tracked
  std::string api_version;  // "v1", "coordination.k8s.io/v1"
  std::string now;          // RFC 3339
  std::string subresource;  // "status" or ""
};

// A non-apply write (create, update, patch): `manager` takes the fields it added or
// changed, from every other manager; fields it removed leave every set. When the client
// itself changed metadata.managedFields, its list is kept as sent.
void TrackUpdate(const rapidjson::Value* before, rapidjson::Document& after,
                 const WriteContext& context);

// One conflict, as a StatusCause of type FieldManagerConflict: "conflict with
// \"alice\"" (upstream's printManager) and the field's path.
struct ApplyConflict {
  std::string message;
  std::string field;
};

// Server-side apply of `config` onto `live` (edited in place): kConflict with upstream's
// "Apply failed with N conflict(s): ..." message when another manager owns a field the
// configuration changes (each one added to `conflicts` when given), unless `force`
// (then the applier takes it); fields the manager applied before, does not apply now
// and nobody else owns are removed.
Status ServerSideApply(rapidjson::Document& live, const rapidjson::Value& config, bool force,
                       const WriteContext& context,
                       std::vector<ApplyConflict>* conflicts = nullptr);

}  // namespace kubesim
