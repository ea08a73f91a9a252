// Label and field selectors as the Kubernetes API parses them.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidjson/document.h>

#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;

struct Requirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kDoesNotExist };
  std::string key;
  Op op;
  std::vector<std::string> values;
};

// A parsed labelSelector: every requirement must hold. Empty matches everything.
class LabelSelector {
 public:
  // "a=b,c!=d,e in (x,y),f notin (z),g,!h"; kInvalidArgument names the bad part.
  static Result<LabelSelector> Parse(const std::string& text);
  bool Matches(const rapidjson::Value& object) const;  // reads metadata.labels
  const std::vector<Requirement>& requirements() const { return requirements_; }

 private:
  std::vector<Requirement> requirements_;
};

// A parsed fieldSelector for one resource: only the fields Kubernetes supports for
// that kind ("field label not supported: X" otherwise), with =, == and !=.
class FieldSelector {
 public:
  static Result<FieldSelector> Parse(const std::string& resource, const std::string& text);
  bool Matches(const rapidjson::Value& object) const;
  // The value an `=` (or `==`) term requires at `path` (a stored object's path, for
  // example "spec.nodeName"); nullopt when no term does.
  std::optional<std::string> RequiredValue(std::string_view path) const;

 private:
  struct Term {
    std::string path;  // where the value lives in the stored (core/v1) object
    bool equals;
    std::string value;
  };
  std::vector<Term> terms_;
};

// metav1.LabelSelectorAsSelector as selector text ("a=b,c in (x,y),!d") for a
// LabelSelector object (spec.selector of a budget or a workload); nullopt for a null
// selector (which selects nothing), "" for an empty one (everything).
std::optional<std::string> LabelSelectorText(const rapidjson::Value* selector);

}  // namespace kubesim
