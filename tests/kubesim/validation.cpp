#include "validation.h"

#include "workloads.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "rbac.h"

namespace kubesim {

namespace {

// Limits of pkg/apis/core/validation/events.go and apimachinery objectmeta.go.
constexpr size_t kEventFieldLimit = 128;        // reportingInstance, action, reason
constexpr size_t kEventNoteLimit = 1024;        // message (note)
constexpr int kAnnotationsTotalLimit = 262144;  // 256 KiB, keys and values together

FieldError Make(const char* reason, const std::string& field, std::string body,
                const std::string& detail) {
  if (!detail.empty())
    body += ": " + detail;
  return FieldError{reason, field, std::move(body)};
}

bool LowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
bool Alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool MatchesDnsLabel(const std::string& s) {
  if (s.empty() || !LowerAlnum(s.front()) || !LowerAlnum(s.back()))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return LowerAlnum(c) || c == '-'; });
}

bool MatchesDnsSubdomain(const std::string& s) {
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (!MatchesDnsLabel(s.substr(start, dot == std::string::npos ? dot : dot - start)))
      return false;
    if (dot == std::string::npos)
      return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
bool MatchesLabelKeyName(const std::string& s) {
  if (s.empty() || !Alnum(s.front()) || !Alnum(s.back()))
    return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return Alnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::string RegexError(const std::string& message, const std::string& regex,
                       const std::vector<std::string>& examples) {
  std::string out = message + " (e.g. ";
  for (size_t i = 0; i < examples.size(); ++i)
    out += (i > 0 ? " or '" : "'") + examples[i] + "', ";
  return out + "regex used for validation is '" + regex + "')";
}

std::string MaxLenError(size_t n) {
  return fmt::format("must be no more than {} characters", n);
}

const char kLabelKeyRegex[] = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const char kLabelKeyMessage[] =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character";

}  // namespace

// ---- field errors ----------------------------------------------------------------------

std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

FieldError Required(const std::string& field, const std::string& detail) {
  return Make("FieldValueRequired", field, "Required value", detail);
}
FieldError Invalid(const std::string& field, const std::string& value, const std::string& detail) {
  return Make("FieldValueInvalid", field, "Invalid value: " + GoQuote(value), detail);
}
FieldError InvalidRaw(const std::string& field, const std::string& value,
                      const std::string& detail) {
  return Make("FieldValueInvalid", field, "Invalid value: " + value, detail);
}
FieldError Forbidden(const std::string& field, const std::string& detail) {
  return Make("FieldValueForbidden", field, "Forbidden", detail);
}
FieldError NotSupported(const std::string& field, const std::string& value,
                        const std::vector<std::string>& supported) {
  std::string detail;
  for (const auto& s : supported)
    detail += (detail.empty() ? "supported values: " : ", ") + GoQuote(s);
  return Make("FieldValueNotSupported", field, "Unsupported value: " + GoQuote(value), detail);
}
FieldError Duplicate(const std::string& field, const std::string& value) {
  return Make("FieldValueDuplicate", field, "Duplicate value: " + GoQuote(value), "");
}
FieldError NotFound(const std::string& field, const std::string& value) {
  return Make("FieldValueNotFound", field, "Not found: " + GoQuote(value), "");
}
FieldError TooLong(const std::string& field, int max_bytes) {
  return Make("FieldValueTooLong", field, "Too long",
              fmt::format("may not be more than {} bytes", max_bytes));
}

// ---- names -------------------------------------------------------------------------------

std::vector<std::string> IsDns1123Label(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63)
    errs.push_back(MaxLenError(63));
  if (!MatchesDnsLabel(value)) {
    if (MatchesDnsSubdomain(value)) {
      errs.push_back("must not contain dots");
    } else {
      errs.push_back(RegexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
          "and must start and end with an alphanumeric character",
          "[a-z0-9]([-a-z0-9]*[a-z0-9])?", {"my-name", "123-abc"}));
    }
  }
  return errs;
}

std::vector<std::string> IsDns1123Subdomain(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 253)
    errs.push_back(MaxLenError(253));
  if (!MatchesDnsSubdomain(value)) {
    errs.push_back(RegexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character",
        "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", {"example.com"}));
  }
  return errs;
}

std::vector<std::string> IsQualifiedName(const std::string& value) {
  std::vector<std::string> errs;
  std::string name = value;
  size_t slash = value.find('/');
  if (slash != std::string::npos) {
    if (value.find('/', slash + 1) != std::string::npos) {
      return {"a valid label key " +
              RegexError(kLabelKeyMessage, kLabelKeyRegex, {"MyName", "my.name", "123-abc"}) +
              " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"};
    }
    std::string prefix = value.substr(0, slash);
    name = value.substr(slash + 1);
    if (prefix.empty())
      errs.push_back("prefix part must be non-empty");
    for (const auto& m : prefix.empty() ? std::vector<std::string>{} : IsDns1123Subdomain(prefix))
      errs.push_back("prefix part " + m);
  }
  if (name.empty()) {
    errs.push_back("name part must be non-empty");
  } else if (name.size() > 63) {
    errs.push_back("name part " + MaxLenError(63));
  }
  if (!MatchesLabelKeyName(name)) {
    errs.push_back("name part " +
                   RegexError(kLabelKeyMessage, kLabelKeyRegex, {"MyName", "my.name", "123-abc"}));
  }
  return errs;
}

std::vector<std::string> IsLabelValue(const std::string& value) {
  std::vector<std::string> errs;
  if (value.size() > 63)
    errs.push_back(MaxLenError(63));
  if (!value.empty() && !MatchesLabelKeyName(value)) {
    errs.push_back(RegexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
        "'.', and must start and end with an alphanumeric character",
        "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", {"MyValue", "my_value", "12345"}));
  }
  return errs;
}

NameRule NameRuleFor(const std::string& group, const std::string& resource) {
  if (resource == "namespaces")
    return NameRule::kDnsLabel;  // ValidateNamespaceName
  if (resource == "events" && group.empty())
    return NameRule::kPathSegment;  // core/v1 events: only the generic path-segment check
  if (IsRbacResource(group, resource))
    return NameRule::kPathSegment;  // ValidateRBACName
  return NameRule::kDnsSubdomain;   // pods, nodes, configmaps, secrets, leases, events.k8s.io
}

std::vector<std::string> CheckName(NameRule rule, const std::string& name, bool prefix) {
  if (rule == NameRule::kPathSegment) {
    // apimachinery/pkg/api/validation/path: IsValidPathSegmentName / Prefix.
    if (!prefix && (name == "." || name == ".."))
      return {fmt::format("may not be '{}'", name)};
    std::vector<std::string> errs;
    for (const char* bad : {"/", "%"}) {
      if (name.find(bad) != std::string::npos)
        errs.push_back(fmt::format("may not contain '{}'", bad));
    }
    return errs;
  }
  std::string checked = name;
  if (prefix && !checked.empty() && checked.back() == '-')
    checked.back() = 'a';  // maskTrailingDash: a generateName may end in '-'
  return rule == NameRule::kDnsLabel ? IsDns1123Label(checked) : IsDns1123Subdomain(checked);
}

// ---- responses ---------------------------------------------------------------------------

ApiResponse InvalidResponse(const std::string& kind, const std::string& group,
                            const std::string& name, const FieldErrors& errors) {
  std::vector<std::string> texts;
  for (const auto& e : errors) {
    if (std::find(texts.begin(), texts.end(), e.Text()) == texts.end())
      texts.push_back(e.Text());
  }
  std::string joined;
  for (const auto& t : texts)
    joined += (joined.empty() ? "" : ", ") + t;
  if (texts.size() > 1)
    joined = "[" + joined + "]";
  std::string qualified = group.empty() ? kind : kind + "." + group;
  ApiResponse r = StatusResponse(
      422, "Invalid", fmt::format("{} {} is invalid: {}", qualified, GoQuote(name), joined), kind,
      name, group);
  auto doc = ParseJson(r.body);
  if (!doc.ok())
    return r;
  auto& a = (*doc)->GetAllocator();
  if (!(*doc)->HasMember("details"))
    (*doc)->AddMember("details", rapidjson::Value(rapidjson::kObjectType), a);
  rapidjson::Value& details = (**doc)["details"];
  rapidjson::Value causes(rapidjson::kArrayType);
  for (const auto& e : errors) {
    rapidjson::Value c(rapidjson::kObjectType);
    c.AddMember("reason", rapidjson::Value(e.reason.c_str(), a), a);
    c.AddMember("message", rapidjson::Value(e.body.c_str(), a), a);
    c.AddMember("field", rapidjson::Value(e.field.c_str(), a), a);
    causes.PushBack(c, a);
  }
  details.AddMember("causes", causes, a);
  r.body = ToJson(**doc);
  return r;
}

// ---- UTF-8 -------------------------------------------------------------------------------

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 if there is none.
size_t Utf8SequenceLength(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 0x2)
      return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;  // overlong, out of range or a surrogate
  return n;
}

std::string ToValidUtf8(const std::string& s, bool& changed) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD, one per bad byte as Go's decoder
      changed = true;
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

}  // namespace

void ReplaceInvalidUtf8(rapidjson::Value& value, rapidjson::Document::AllocatorType& allocator) {
  if (value.IsString()) {
    bool changed = false;
    std::string fixed =
        ToValidUtf8(std::string(value.GetString(), value.GetStringLength()), changed);
    if (changed)
      value.SetString(fixed.c_str(), static_cast<rapidjson::SizeType>(fixed.size()), allocator);
  } else if (value.IsArray()) {
    for (auto& v : value.GetArray())
      ReplaceInvalidUtf8(v, allocator);
  } else if (value.IsObject()) {
    for (auto& m : value.GetObject())
      ReplaceInvalidUtf8(m.value, allocator);
  }
}

// ---- metadata ----------------------------------------------------------------------------

namespace {

std::string Str(const rapidjson::Value& v, const char* path) {
  return GetString(v, path);
}

void ValidateLabels(const rapidjson::Value* labels, FieldErrors& errors) {
  if (labels == nullptr || !labels->IsObject())
    return;
  for (const auto& m : labels->GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    for (const auto& msg : IsQualifiedName(key))
      errors.push_back(Invalid("metadata.labels", key, msg));
    if (!m.value.IsString())
      continue;
    std::string value(m.value.GetString(), m.value.GetStringLength());
    for (const auto& msg : IsLabelValue(value))
      errors.push_back(Invalid("metadata.labels", value, msg));
  }
}

void ValidateAnnotations(const rapidjson::Value* annotations, FieldErrors& errors) {
  if (annotations == nullptr || !annotations->IsObject())
    return;
  size_t total = 0;
  for (const auto& m : annotations->GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    std::string lower = key;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& msg : IsQualifiedName(lower))
      errors.push_back(Invalid("metadata.annotations", key, msg));
    total += key.size() + (m.value.IsString() ? m.value.GetStringLength() : 0);
  }
  if (total > static_cast<size_t>(kAnnotationsTotalLimit))
    errors.push_back(TooLong("metadata.annotations", kAnnotationsTotalLimit));
}

void ValidateOwnersAndFinalizers(const rapidjson::Value& meta, FieldErrors& errors) {
  const rapidjson::Value* owners = Find(meta, "ownerReferences");
  if (owners != nullptr && owners->IsArray()) {
    for (rapidjson::SizeType i = 0; i < owners->Size(); ++i) {
      std::string path = fmt::format("metadata.ownerReferences[{}]", i);
      for (const char* key : {"apiVersion", "kind", "name", "uid"}) {
        if (Str((*owners)[i], key).empty())
          errors.push_back(Required(path + "." + key, "must not be empty"));
      }
    }
  }
  const rapidjson::Value* finalizers = Find(meta, "finalizers");
  if (finalizers != nullptr && finalizers->IsArray()) {
    for (const auto& f : finalizers->GetArray()) {
      std::string name = f.IsString() ? f.GetString() : "";
      for (const auto& msg : IsQualifiedName(name))
        errors.push_back(Invalid("metadata.finalizers", name, msg));
    }
  }
}

// apimachinery ValidateObjectMetaAccessor. A create without a name gets one generated
// from generateName later (kubesim's store), so only the prefix is checked then.
void ValidateObjectMeta(const rapidjson::Value& object, bool namespaced, NameRule rule,
                        FieldErrors& errors) {
  std::string generate = Str(object, "metadata.generateName");
  std::string name = Str(object, "metadata.name");
  if (!generate.empty()) {
    for (const auto& msg : CheckName(rule, generate, true))
      errors.push_back(Invalid("metadata.generateName", generate, msg));
  }
  if (name.empty() && generate.empty())
    errors.push_back(Required("metadata.name", "name or generateName is required"));
  for (const auto& msg : name.empty() ? std::vector<std::string>{} : CheckName(rule, name, false))
    errors.push_back(Invalid("metadata.name", name, msg));
  std::string ns = Str(object, "metadata.namespace");
  if (namespaced) {
    for (const auto& msg : ns.empty() ? std::vector<std::string>{} : IsDns1123Label(ns))
      errors.push_back(Invalid("metadata.namespace", ns, msg));
  } else if (!ns.empty()) {
    errors.push_back(Forbidden("metadata.namespace", "not allowed on this type"));
  }
  ValidateLabels(Find(object, "metadata.labels"), errors);
  ValidateAnnotations(Find(object, "metadata.annotations"), errors);
  if (const rapidjson::Value* meta = Find(object, "metadata"); meta != nullptr)
    ValidateOwnersAndFinalizers(*meta, errors);
}

void ValidateObjectMetaUpdate(const rapidjson::Value& object, FieldErrors& errors) {
  ValidateLabels(Find(object, "metadata.labels"), errors);
  ValidateAnnotations(Find(object, "metadata.annotations"), errors);
  if (const rapidjson::Value* meta = Find(object, "metadata"); meta != nullptr)
    ValidateOwnersAndFinalizers(*meta, errors);
}

}  // namespace

// ---- events (pkg/apis/core/validation/events.go) -----------------------------------------

namespace {

void CheckEventLength(const rapidjson::Value& event, const char* field, size_t limit, bool required,
                      FieldErrors& errors) {
  std::string value = Str(event, field);
  if (required && value.empty())
    errors.push_back(Required(field));
  if (value.size() > limit) {
    errors.push_back(Invalid(field, "", fmt::format("can have at most {} characters", limit)));
  }
}

// legacyValidateEvent, on the stored (core/v1) form: reportingController is
// reportingComponent there, note is message.
void LegacyValidateEvent(const rapidjson::Value& event, FieldErrors& errors) {
  const std::string ns = Str(event, "metadata.namespace");
  const std::string involved_ns = Str(event, "involvedObject.namespace");
  auto mismatch = [&] {
    errors.push_back(
        Invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"));
  };
  if (Str(event, "eventTime").empty()) {
    if (involved_ns.empty() ? (!ns.empty() && ns != "default") : ns != involved_ns)
      mismatch();
  } else {
    if (involved_ns.empty() && ns != "default" && ns != "kube-system")
      mismatch();
    std::string controller = Str(event, "reportingComponent");
    if (controller.empty())
      errors.push_back(Required("reportingController"));
    for (const auto& msg : IsQualifiedName(controller))
      errors.push_back(Invalid("reportingController", controller, msg));
    CheckEventLength(event, "reportingInstance", kEventFieldLimit, true, errors);
    CheckEventLength(event, "action", kEventFieldLimit, true, errors);
    CheckEventLength(event, "reason", kEventFieldLimit, true, errors);
    CheckEventLength(event, "message", kEventNoteLimit, false, errors);
  }
  for (const auto& msg : IsDns1123Subdomain(ns))
    errors.push_back(Invalid("namespace", ns, msg));
}

void ValidateEventSeries(const rapidjson::Value& event, FieldErrors& errors) {
  const rapidjson::Value* series = Find(event, "series");
  if (series == nullptr || series->IsNull())
    return;
  const rapidjson::Value* count = Find(*series, "count");
  if (count == nullptr || !count->IsInt64() || count->GetInt64() < 2)
    errors.push_back(Invalid("series.count", "", "should be at least 2"));
  if (Str(*series, "lastObservedTime").empty())
    errors.push_back(Required("series.lastObservedTime"));
}

bool IsSet(const rapidjson::Value& event, const char* path) {
  const rapidjson::Value* v = Find(event, path);
  if (v == nullptr || v->IsNull())
    return false;
  if (v->IsString())
    return v->GetStringLength() != 0;
  if (v->IsNumber())
    return v->GetDouble() != 0;
  return true;
}

// ValidateEventCreate's rules for events.k8s.io/v1 and newer.
void ValidateEventsV1Create(const rapidjson::Value& event, FieldErrors& errors) {
  ValidateObjectMeta(event, true, NameRule::kDnsSubdomain, errors);
  ValidateEventSeries(event, errors);
  if (Str(event, "eventTime").empty())
    errors.push_back(Required("eventTime"));
  std::string type = Str(event, "type");
  if (type != "Normal" && type != "Warning")
    errors.push_back(Invalid("type", "", "has invalid value: " + type));
  for (const char* field : {"firstTimestamp", "lastTimestamp", "count"}) {
    if (IsSet(event, field))
      errors.push_back(Invalid(field, "", "needs to be unset"));
  }
  if (!Str(event, "source.component").empty() || !Str(event, "source.host").empty())
    errors.push_back(Invalid("source", "", "needs to be unset"));
}

void ValidateEventsV1Update(const rapidjson::Value& event, const rapidjson::Value& old,
                            FieldErrors& errors) {
  ValidateObjectMetaUpdate(event, errors);
  const rapidjson::Value* series = Find(event, "series");
  const rapidjson::Value* old_series = Find(old, "series");
  bool same_series = (series == nullptr || series->IsNull())
                         ? (old_series == nullptr || old_series->IsNull())
                         : (old_series != nullptr && *series == *old_series);
  if (!same_series)
    ValidateEventSeries(event, errors);
  static const std::pair<const char*, const char*> kImmutable[] = {
      {"involvedObject", "involvedObject"},
      {"reason", "reason"},
      {"message", "message"},
      {"source", "source"},
      {"firstTimestamp", "firstTimestamp"},
      {"lastTimestamp", "lastTimestamp"},
      {"count", "count"},
      {"type", "type"},
      {"eventTime", "eventTime"},
      {"action", "action"},
      {"related", "related"},
      {"reportingComponent", "reportingController"},
      {"reportingInstance", "reportingInstance"},
  };
  for (const auto& [stored, field] : kImmutable) {
    const rapidjson::Value* now = Find(event, stored);
    const rapidjson::Value* before = Find(old, stored);
    bool same = (now == nullptr || now->IsNull()) ? (before == nullptr || before->IsNull())
                                                  : (before != nullptr && *now == *before);
    if (!same)
      errors.push_back(
          InvalidRaw(field, now == nullptr ? "null" : ToJson(*now), "field is immutable"));
  }
}

}  // namespace

// ---- dispatch ----------------------------------------------------------------------------

FieldErrors ValidateCreate(const std::string& group, const std::string& resource,
                           const rapidjson::Value& object) {
  FieldErrors errors;
  const bool namespaced = !Store::IsClusterScoped(resource);
  if (resource == "events") {
    LegacyValidateEvent(object, errors);
    if (group == "events.k8s.io")
      ValidateEventsV1Create(object, errors);
    if (!errors.empty())
      return errors;  // rest.BeforeCreate stops at the strategy's errors
  }
  // Each kind's strategy validates its metadata with its name rule; events of core/v1
  // only get the generic path-segment check that follows in rest.BeforeCreate.
  ValidateObjectMeta(object, namespaced, NameRuleFor(group, resource), errors);
  if (resource == "pods") {
    const rapidjson::Value* spec = Find(object, "spec");
    static const rapidjson::Value kEmpty(rapidjson::kObjectType);
    ValidatePodSpec(spec != nullptr && spec->IsObject() ? *spec : kEmpty, errors);
  }
  if (IsRbacResource(group, resource))
    ValidateRbacObject(resource, object, errors);
  ValidateWorkloadCreate(resource, object, errors);
  return errors;
}

FieldErrors ValidateUpdate(const std::string& group, const std::string& resource,
                           const rapidjson::Value& object, const rapidjson::Value& old) {
  FieldErrors errors;
  if (resource == "events") {
    LegacyValidateEvent(object, errors);
    if (group == "events.k8s.io") {
      ValidateEventsV1Update(object, old, errors);
      return errors;
    }
  }
  ValidateObjectMetaUpdate(object, errors);
  if (resource == "pods") {
    static const rapidjson::Value kEmpty(rapidjson::kObjectType);
    const rapidjson::Value* spec = Find(object, "spec");
    const rapidjson::Value* old_spec = Find(old, "spec");
    ValidatePodSpecUpdate(spec != nullptr && spec->IsObject() ? *spec : kEmpty,
                          old_spec != nullptr && old_spec->IsObject() ? *old_spec : kEmpty, errors);
  }
  if (IsRbacResource(group, resource))
    ValidateRbacUpdate(resource, object, old, errors);
  if (resource == "configmaps" || resource == "secrets") {
    const rapidjson::Value* immutable = Find(old, "immutable");
    if (immutable != nullptr && immutable->IsBool() && immutable->GetBool()) {
      for (const char* field : {"data", "binaryData", "immutable"}) {
        const rapidjson::Value* now = Find(object, field);
        const rapidjson::Value* before = Find(old, field);
        if ((now == nullptr) != (before == nullptr) || (now != nullptr && *now != *before))
          errors.push_back(Forbidden(field, "field is immutable when `immutable` is set"));
      }
    }
  }
  ValidateWorkloadUpdate(resource, object, old, errors);
  return errors;
}

}  // namespace kubesim
