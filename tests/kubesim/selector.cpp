#include "selector.h"

#include <cctype>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "store.h"

namespace kubesim {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool ValidLabelValue(const std::string& v) {
  if (v.size() > 63)
    return false;
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

bool ValidLabelKey(const std::string& k) {
  if (k.empty() || k.size() > 316)
    return false;
  for (char c : k) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : text) {
    if (c == '(')
      ++depth;
    if (c == ')')
      --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(const std::string& text) {
  LabelSelector selector;
  if (Trim(text).empty())
    return selector;
  for (const std::string& raw : SplitTopLevel(text)) {
    std::string part = Trim(raw);
    auto bad = [&](const std::string& why) {
      return k8sbridge::Status::InvalidArgument(
          fmt::format("unable to parse requirement: {}: \"{}\"", why, part));
    };
    if (part.empty())
      return bad("empty requirement");
    Requirement req;
    size_t pos;
    if (part[0] == '!') {
      req.key = Trim(part.substr(1));
      req.op = Requirement::Op::kDoesNotExist;
    } else if ((pos = part.find("!=")) != std::string::npos) {
      req.key = Trim(part.substr(0, pos));
      req.op = Requirement::Op::kNotEquals;
      req.values.push_back(Trim(part.substr(pos + 2)));
    } else if ((pos = part.find("==")) != std::string::npos) {
      req.key = Trim(part.substr(0, pos));
      req.op = Requirement::Op::kEquals;
      req.values.push_back(Trim(part.substr(pos + 2)));
    } else if ((pos = part.find('=')) != std::string::npos) {
      req.key = Trim(part.substr(0, pos));
      req.op = Requirement::Op::kEquals;
      req.values.push_back(Trim(part.substr(pos + 1)));
    } else if (part.find('(') != std::string::npos) {
      size_t open = part.find('(');
      size_t close = part.rfind(')');
      if (close == std::string::npos || close < open || Trim(part.substr(close + 1)) != "") {
        return bad("expected a closing parenthesis");
      }
      std::string head = Trim(part.substr(0, open));
      size_t space = head.find_last_of(" \t");
      if (space == std::string::npos)
        return bad("expected 'in' or 'notin' before the values");
      std::string op = head.substr(space + 1);
      req.key = Trim(head.substr(0, space));
      if (op == "in") {
        req.op = Requirement::Op::kIn;
      } else if (op == "notin") {
        req.op = Requirement::Op::kNotIn;
      } else {
        return bad(fmt::format("unknown operator \"{}\"", op));
      }
      std::string inner = part.substr(open + 1, close - open - 1);
      size_t start = 0;
      while (true) {
        size_t comma = inner.find(',', start);
        std::string v = Trim(
            inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        req.values.push_back(v);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
      if (req.values.size() == 1 && req.values[0].empty()) {
        return bad("for 'in', 'notin' operators, values set can't be empty");
      }
    } else {
      req.key = part;
      req.op = Requirement::Op::kExists;
    }
    if (!ValidLabelKey(req.key))
      return bad(fmt::format("invalid label key \"{}\"", req.key));
    for (const auto& v : req.values) {
      if (!ValidLabelValue(v))
        return bad(fmt::format("invalid label value \"{}\"", v));
    }
    selector.requirements_.push_back(std::move(req));
  }
  return selector;
}

bool LabelSelector::Matches(const rapidjson::Value& object) const {
  const rapidjson::Value* labels = Find(object, "metadata.labels");
  for (const auto& req : requirements_) {
    const rapidjson::Value* v = nullptr;
    if (labels != nullptr && labels->IsObject()) {
      auto it = labels->FindMember(req.key.c_str());
      if (it != labels->MemberEnd())
        v = &it->value;
    }
    const std::string_view value = (v != nullptr && v->IsString())
                                       ? std::string_view(v->GetString(), v->GetStringLength())
                                       : std::string_view();
    bool in = false;
    for (const auto& want : req.values)
      in = in || (v != nullptr && value == want);
    switch (req.op) {
      case Requirement::Op::kEquals:
      case Requirement::Op::kIn:
        if (!in)
          return false;
        break;
      case Requirement::Op::kNotEquals:
      case Requirement::Op::kNotIn:
        if (in)
          return false;
        break;
      case Requirement::Op::kExists:
        if (v == nullptr)
          return false;
        break;
      case Requirement::Op::kDoesNotExist:
        if (v != nullptr)
          return false;
        break;
    }
  }
  return true;
}

namespace {

// Field -> path in the stored object, per resource (what the real registries offer).
const std::map<std::string, std::string>* SupportedFields(const std::string& resource) {
  static const std::map<std::string, std::string> common = {
      {"metadata.name", "metadata.name"}, {"metadata.namespace", "metadata.namespace"}};
  static const std::map<std::string, std::string> pods = {
      {"metadata.name", "metadata.name"},
      {"metadata.namespace", "metadata.namespace"},
      {"spec.nodeName", "spec.nodeName"},
      {"spec.restartPolicy", "spec.restartPolicy"},
      {"spec.schedulerName", "spec.schedulerName"},
      {"spec.serviceAccountName", "spec.serviceAccountName"},
      {"spec.hostNetwork", "spec.hostNetwork"},
      {"status.phase", "status.phase"},
      {"status.podIP", "status.podIP"},
      {"status.nominatedNodeName", "status.nominatedNodeName"},
  };
  static const std::map<std::string, std::string> nodes = {
      {"metadata.name", "metadata.name"}, {"spec.unschedulable", "spec.unschedulable"}};
  static const std::map<std::string, std::string> namespaces = {{"metadata.name", "metadata.name"},
                                                                {"status.phase", "status.phase"}};
  static const std::map<std::string, std::string> secrets = {
      {"metadata.name", "metadata.name"},
      {"metadata.namespace", "metadata.namespace"},
      {"type", "type"}};
  static const std::map<std::string, std::string> events = {
      {"metadata.name", "metadata.name"},
      {"metadata.namespace", "metadata.namespace"},
      {"involvedObject.kind", "involvedObject.kind"},
      {"involvedObject.namespace", "involvedObject.namespace"},
      {"involvedObject.name", "involvedObject.name"},
      {"involvedObject.uid", "involvedObject.uid"},
      {"involvedObject.apiVersion", "involvedObject.apiVersion"},
      {"involvedObject.resourceVersion", "involvedObject.resourceVersion"},
      {"involvedObject.fieldPath", "involvedObject.fieldPath"},
      {"reason", "reason"},
      {"reportingComponent", "reportingComponent"},
      {"source", "source.component"},
      {"type", "type"},
      // events.k8s.io/v1 spellings of the same fields.
      {"regarding.kind", "involvedObject.kind"},
      {"regarding.namespace", "involvedObject.namespace"},
      {"regarding.name", "involvedObject.name"},
      {"regarding.uid", "involvedObject.uid"},
      {"regarding.apiVersion", "involvedObject.apiVersion"},
      {"regarding.resourceVersion", "involvedObject.resourceVersion"},
      {"regarding.fieldPath", "involvedObject.fieldPath"},
      {"reportingController", "reportingComponent"},
      {"deprecatedSource.component", "source.component"},
  };
  if (resource == "pods")
    return &pods;
  if (resource == "nodes")
    return &nodes;
  if (resource == "namespaces")
    return &namespaces;
  if (resource == "secrets")
    return &secrets;
  if (resource == "events")
    return &events;
  return &common;
}

std::string FieldValue(const rapidjson::Value& object, const std::string& path) {
  const rapidjson::Value* v = Find(object, path.c_str());
  if (path == "spec.unschedulable" || path == "spec.hostNetwork") {
    return (v != nullptr && v->IsBool() && v->GetBool()) ? "true" : "false";
  }
  if (v == nullptr)
    return "";
  if (v->IsString())
    return v->GetString();
  return ToJson(*v);
}

}  // namespace

Result<FieldSelector> FieldSelector::Parse(const std::string& resource, const std::string& text) {
  FieldSelector selector;
  if (Trim(text).empty())
    return selector;
  const auto* fields = SupportedFields(resource);
  for (const std::string& raw : SplitTopLevel(text)) {
    std::string part = Trim(raw);
    Term term;
    size_t pos;
    std::string field;
    if ((pos = part.find("!=")) != std::string::npos) {
      field = Trim(part.substr(0, pos));
      term.equals = false;
      term.value = Trim(part.substr(pos + 2));
    } else if ((pos = part.find("==")) != std::string::npos) {
      field = Trim(part.substr(0, pos));
      term.equals = true;
      term.value = Trim(part.substr(pos + 2));
    } else if ((pos = part.find('=')) != std::string::npos) {
      field = Trim(part.substr(0, pos));
      term.equals = true;
      term.value = Trim(part.substr(pos + 1));
    } else {
      return k8sbridge::Status::InvalidArgument(
          fmt::format("invalid selector: '{}'; can't understand '{}'", text, part));
    }
    auto it = fields->find(field);
    if (it == fields->end()) {
      return k8sbridge::Status::InvalidArgument(
          fmt::format("field label not supported: {}", field));
    }
    term.path = it->second;
    selector.terms_.push_back(std::move(term));
  }
  return selector;
}

bool FieldSelector::Matches(const rapidjson::Value& object) const {
  for (const auto& term : terms_) {
    bool eq = FieldValue(object, term.path) == term.value;
    if (eq != term.equals)
      return false;
  }
  return true;
}

std::optional<std::string> FieldSelector::RequiredValue(std::string_view path) const {
  for (const auto& term : terms_) {
    if (term.equals && term.path == path)
      return term.value;
  }
  return std::nullopt;
}

std::optional<std::string> LabelSelectorText(const rapidjson::Value* selector) {
  if (selector == nullptr || !selector->IsObject())
    return std::nullopt;
  std::vector<std::string> parts;
  const rapidjson::Value* labels = Find(*selector, "matchLabels");
  if (labels != nullptr && labels->IsObject()) {
    for (const auto& m : labels->GetObject()) {
      if (m.value.IsString())
        parts.push_back(fmt::format("{}={}", m.name.GetString(), m.value.GetString()));
    }
  }
  const rapidjson::Value* exprs = Find(*selector, "matchExpressions");
  if (exprs != nullptr && exprs->IsArray()) {
    for (const auto& e : exprs->GetArray()) {
      const std::string key = GetString(e, "key"), op = GetString(e, "operator");
      std::vector<std::string> values;
      const rapidjson::Value* vs = Find(e, "values");
      if (vs != nullptr && vs->IsArray()) {
        for (const auto& x : vs->GetArray())
          values.push_back(x.IsString() ? x.GetString() : "");
      }
      if (op == "In" || op == "NotIn") {
        parts.push_back(
            fmt::format("{} {} ({})", key, op == "In" ? "in" : "notin", fmt::join(values, ",")));
      } else {
        parts.push_back(op == "Exists" ? key : "!" + key);
      }
    }
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace kubesim
