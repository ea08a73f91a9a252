#include "k8sbridge/power/pod_template.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include "k8sbridge/kube/object.h"
#include "k8sbridge/text.h"
#include "pod_spec_checks.h"

namespace k8sbridge::power {

using detail::TypeName;

namespace {

// Deeper nesting than this is not a pod template, and would risk the stack.
constexpr int kMaxDepth = 64;

bool IsNull(const std::string& s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// Aliases can make a small file expand into a huge document ("billion laughs").
constexpr size_t kMaxNodes = 200'000;

// Scalar shapes of YAML 1.1 (std::regex would do, but trips GCC 12's
// -Wmaybe-uninitialized under the sanitizers).
size_t SkipSign(std::string_view s) {
  return !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
}
size_t CountWhile(std::string_view s, size_t at, bool (*accept)(char)) {
  size_t n = 0;
  while (at + n < s.size() && accept(s[at + n]))
    ++n;
  return n;
}
bool Digit(char c) {
  return c >= '0' && c <= '9';
}
bool OctalDigit(char c) {
  return c >= '0' && c <= '7';
}
bool HexDigit(char c) {
  return Digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// [-+]?(0|[1-9][0-9]*)
bool IsDecimal(std::string_view s) {
  size_t i = SkipSign(s);
  if (i >= s.size())
    return false;
  if (s[i] == '0')
    return i + 1 == s.size();
  return i + CountWhile(s, i, Digit) == s.size();
}
// [-+]?0o?[0-7]+
bool IsOctal(std::string_view s) {
  size_t i = SkipSign(s);
  if (i >= s.size() || s[i] != '0')
    return false;
  ++i;
  if (i < s.size() && s[i] == 'o')
    ++i;
  size_t n = CountWhile(s, i, OctalDigit);
  return n > 0 && i + n == s.size();
}
// [-+]?0x[0-9a-fA-F]+
bool IsHex(std::string_view s) {
  size_t i = SkipSign(s);
  if (i + 2 > s.size() || s[i] != '0' || s[i + 1] != 'x')
    return false;
  size_t n = CountWhile(s, i + 2, HexDigit);
  return n > 0 && i + 2 + n == s.size();
}
// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsFloat(std::string_view s) {
  size_t i = SkipSign(s);
  size_t whole = CountWhile(s, i, Digit);
  i += whole;
  size_t fraction = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    fraction = CountWhile(s, i, Digit);
    i += fraction;
  }
  if (whole == 0 && fraction == 0)
    return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    i += SkipSign(s.substr(i));
    size_t exponent = CountWhile(s, i, Digit);
    if (exponent == 0)
      return false;
    i += exponent;
  }
  return i == s.size();
}

using Allocator = rapidjson::Document::AllocatorType;

Status Convert(const YAML::Node& node, rapidjson::Value& out, Allocator& a, int depth,
               size_t& nodes, std::string_view file);

Status ConvertSequence(const YAML::Node& node, rapidjson::Value& out, Allocator& a, int depth,
                       size_t& nodes, std::string_view file) {
  out.SetArray();
  for (const YAML::Node& item : node) {
    rapidjson::Value v;
    if (Status s = Convert(item, v, a, depth + 1, nodes, file); !s.ok())
      return s;
    out.PushBack(v, a);
  }
  return Status::Ok();
}

Status ConvertMap(const YAML::Node& node, rapidjson::Value& out, Allocator& a, int depth,
                  size_t& nodes, std::string_view file) {
  out.SetObject();
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: a mapping key is not a plain string: use string keys", file,
                      kv.first.Mark().line + 1));
    }
    rapidjson::Value key(kv.first.Scalar().c_str(), a);
    if (out.HasMember(key)) {
      return Status::InvalidArgument(fmt::format("{}:{}: key '{}' appears twice: keep one", file,
                                                 kv.first.Mark().line + 1, kv.first.Scalar()));
    }
    rapidjson::Value v;
    if (Status s = Convert(kv.second, v, a, depth + 1, nodes, file); !s.ok())
      return s;
    out.AddMember(key, v, a);
  }
  return Status::Ok();
}

void SetString(rapidjson::Value& out, const std::string& s, Allocator& a) {
  out.SetString(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// `s` is IsDecimal, IsOctal or IsHex as `base` says.
void SetInteger(rapidjson::Value& out, const std::string& s, int base, Allocator& a) {
  std::string digits = s;
  bool negative = !digits.empty() && digits.front() == '-';
  if (!digits.empty() && (digits.front() == '-' || digits.front() == '+'))
    digits.erase(0, 1);
  if (base == 8 && digits.size() > 1 && digits[1] == 'o')
    digits.erase(0, 2);
  if (base == 16)
    digits.erase(0, 2);
  // Too large for an int64: kept as the string it was written as.
  auto n = text::ParseInt<int64_t>(digits, 0, std::numeric_limits<int64_t>::max(), base);
  if (!n.ok()) {
    SetString(out, s, a);
  } else {
    out.SetInt64(negative ? -*n : *n);
  }
}

// JSON has no infinity: a float too large for a double stays a string.
std::optional<double> FiniteFloat(const std::string& s) {
  auto d = text::ParseDouble(s.starts_with('+') ? std::string_view(s).substr(1) : s);
  return d.ok() ? std::optional<double>(*d) : std::nullopt;
}

void ConvertScalar(const YAML::Node& node, rapidjson::Value& out, Allocator& a) {
  const std::string& s = node.Scalar();
  const std::string& tag = node.Tag();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") {
    SetString(out, s, a);
    return;
  }
  // Plain scalars resolve as kubectl reads them (YAML 1.1 via go-yaml): yes/no/on/off
  // are booleans and a leading 0 means octal, as in "defaultMode: 0400".
  static const std::set<std::string> kTrue = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                              "True", "TRUE", "on",  "On",  "ON"};
  static const std::set<std::string> kFalse = {"n",     "N",     "no",  "No",  "NO", "false",
                                               "False", "FALSE", "off", "Off", "OFF"};
  if (IsNull(s)) {
    out.SetNull();
  } else if (kTrue.count(s)) {
    out.SetBool(true);
  } else if (kFalse.count(s)) {
    out.SetBool(false);
  } else if (IsDecimal(s)) {
    SetInteger(out, s, 10, a);
  } else if (IsOctal(s)) {
    SetInteger(out, s, 8, a);
  } else if (IsHex(s)) {
    SetInteger(out, s, 16, a);
  } else if (auto d = IsFloat(s) ? FiniteFloat(s) : std::nullopt) {
    out.SetDouble(*d);
  } else {
    SetString(out, s, a);
  }
}

Status Convert(const YAML::Node& node, rapidjson::Value& out, Allocator& a, int depth,
               size_t& nodes, std::string_view file) {
  if (++nodes > kMaxNodes) {
    return Status::InvalidArgument(fmt::format(
        "{}: more than {} values (aliases expanding?): not a pod template", file, kMaxNodes));
  }
  if (depth > kMaxDepth) {
    return Status::InvalidArgument(
        fmt::format("{}:{}: nested deeper than {} levels", file, node.Mark().line + 1, kMaxDepth));
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      out.SetNull();
      return Status::Ok();
    case YAML::NodeType::Sequence:
      return ConvertSequence(node, out, a, depth, nodes, file);
    case YAML::NodeType::Map:
      return ConvertMap(node, out, a, depth, nodes, file);
    case YAML::NodeType::Scalar:
      break;
  }
  ConvertScalar(node, out, a);
  return Status::Ok();
}

}  // namespace

Result<rapidjson::Document> YamlToJson(std::string_view yaml, std::string_view file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: not valid YAML: {}", file,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  rapidjson::Document doc;
  try {
    size_t nodes = 0;
    if (Status s = Convert(root, doc, doc.GetAllocator(), 0, nodes, file); !s.ok())
      return s;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: {}", file, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  return doc;
}

namespace {

// JSON with object keys sorted, so the hash does not depend on the YAML's key order.
void CanonicalJson(const rapidjson::Value& v, std::string& out) {
  if (v.IsObject()) {
    std::vector<std::pair<std::string_view, const rapidjson::Value*>> members;
    for (const auto& m : v.GetObject())
      members.emplace_back(std::string_view(m.name.GetString(), m.name.GetStringLength()),
                           &m.value);
    std::sort(members.begin(), members.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    out += '{';
    for (const auto& [name, value] : members) {
      out += fmt::format("\"{}\":", name);
      CanonicalJson(*value, out);
      out += ',';
    }
    out += '}';
  } else if (v.IsArray()) {
    out += '[';
    for (const auto& item : v.GetArray()) {
      CanonicalJson(item, out);
      out += ',';
    }
    out += ']';
  } else {
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    v.Accept(writer);
    out.append(buffer.GetString(), buffer.GetSize());
  }
}

std::string TemplateHash(const rapidjson::Value& pod) {
  std::string text;
  CanonicalJson(pod, text);
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a, 64 bits
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

// Where a template's errors point: "pod template <file>: <prefix><field>: ...".
struct TemplateSite {
  std::string_view file;
  std::string prefix;  // field path of the pod inside the file ("template." in a PodTemplate)
  Status Fail(std::string_view field, std::string message) const {
    return Status::InvalidArgument(
        fmt::format("pod template {}: {}{}: {}", file, prefix, field, message));
  }
};

// The pod inside the document: the document itself (a Pod, or no kind), or a
// PodTemplate's template (site.prefix is set to its path).
Result<const rapidjson::Value*> FindPod(const rapidjson::Document& root, TemplateSite& site) {
  if (!root.IsObject()) {
    return site.Fail("(top level)",
                     fmt::format("is {}, expected a mapping with metadata and spec (a PodTemplate "
                                 "or a Pod)",
                                 TypeName(root)));
  }
  const std::string kind = kube::StringMember(&root, "kind");
  if (kind == "PodTemplate") {
    if (!root.HasMember("template") || !root["template"].IsObject()) {
      return site.Fail("template", "a PodTemplate needs template: {metadata, spec}: add it");
    }
    site.prefix = "template.";
    return &root["template"];
  }
  if (!kind.empty() && kind != "Pod")
    return site.Fail("kind", fmt::format("is '{}': use PodTemplate (or Pod)", kind));
  return &root;
}

// labels or annotations: strings only, none of the keys k8sbridge marks its pods with.
Status CheckStringMap(const rapidjson::Value& metadata, const char* map_field,
                      const TemplateSite& site) {
  auto m = metadata.FindMember(map_field);
  if (m == metadata.MemberEnd() || m->value.IsNull())
    return Status::Ok();
  if (!m->value.IsObject()) {
    return site.Fail(fmt::format("metadata.{}", map_field),
                     fmt::format("is {}, expected a mapping of strings", TypeName(m->value)));
  }
  for (const auto& kv : m->value.GetObject()) {
    std::string key = kv.name.GetString();
    std::string path = fmt::format("metadata.{}.{}", map_field, key);
    if (!kv.value.IsString()) {
      return site.Fail(
          path, fmt::format("is {}: quote the value, e.g. \"{}\"", TypeName(kv.value),
                            kv.value.IsBool() ? (kv.value.GetBool() ? "true" : "false") : "..."));
    }
    if (key.starts_with("k8sbridge.io/") || key == "app.kubernetes.io/managed-by") {
      return site.Fail(path,
                       "is set by k8sbridge to mark the pods it owns: remove it from the "
                       "template");
    }
  }
  return Status::Ok();
}

Status CheckMetadata(const rapidjson::Value& metadata, const TemplateSite& site) {
  if (!metadata.IsObject())
    return site.Fail("metadata", fmt::format("is {}, expected a mapping", TypeName(metadata)));
  for (std::string_view forbidden : {"name", "generateName"}) {
    if (metadata.HasMember(forbidden.data())) {
      return site.Fail("metadata." + std::string(forbidden),
                       "remove it: each worker pod is named after its Slurm node");
    }
  }
  for (const char* map_field : {"labels", "annotations"}) {
    if (Status s = CheckStringMap(metadata, map_field, site); !s.ok())
      return s;
  }
  return Status::Ok();
}

// Every container has a name and an image; the one named slurmd (else the first)
// runs the worker.
Status CheckContainers(const rapidjson::Value& spec, const TemplateSite& site,
                       PodTemplate& result) {
  auto containers = spec.FindMember("containers");
  if (containers == spec.MemberEnd() || !containers->value.IsArray() || containers->value.Empty()) {
    return site.Fail("spec.containers",
                     "must list at least one container (the one named slurmd, else the first, "
                     "runs the worker)");
  }
  bool found_slurmd = false;
  for (rapidjson::SizeType i = 0; i < containers->value.Size(); ++i) {
    const rapidjson::Value& c = containers->value[i];
    std::string path = fmt::format("spec.containers[{}]", i);
    if (!c.IsObject())
      return site.Fail(path, fmt::format("is {}, expected a mapping", TypeName(c)));
    for (const char* required : {"name", "image"}) {
      if (!c.HasMember(required) || !c[required].IsString() || c[required].GetStringLength() == 0) {
        return site.Fail(path + "." + required,
                         "is missing: every container needs a name and an image");
      }
    }
    if (!found_slurmd && std::string_view(c["name"].GetString()) == "slurmd") {
      result.worker_container = i;
      found_slurmd = true;
    }
  }
  return Status::Ok();
}

// What a worker pod must not say: a node of its own, a restart in place, and
// the checks of the mounts and the service account token.
Status CheckSpecRules(const rapidjson::Value& spec, const TemplateSite& site) {
  for (const char* forbidden : {"nodeName"}) {
    if (spec.HasMember(forbidden)) {
      return site.Fail(std::string("spec.") + forbidden,
                       "remove it: the scheduler places worker pods (use nodeSelector, affinity "
                       "or Feature= mappings)");
    }
  }
  if (auto rp = spec.FindMember("restartPolicy"); rp != spec.MemberEnd()) {
    if (!rp->value.IsString() || std::string_view(rp->value.GetString()) != "Never") {
      return site.Fail("spec.restartPolicy",
                       "must be Never or unset: a worker that fails must leave a Failed pod that "
                       "k8sbridge replaces, not restart in place as a node Slurm thinks is "
                       "booting");
    }
  }
  for (auto check : {detail::CheckMountPropagation, detail::CheckAutomountToken,
                     detail::CheckTokenVolumes, detail::CheckTokenMounts}) {
    if (Status s = check(spec, site.prefix); !s.ok())
      return Status::InvalidArgument(fmt::format("pod template {}: {}", site.file, s.message()));
  }
  return Status::Ok();
}

}  // namespace

Result<PodTemplate> ParsePodTemplate(std::string_view yaml, std::string_view file) {
  auto parsed = YamlToJson(yaml, file);
  if (!parsed.ok())
    return parsed.status();
  TemplateSite site{file, ""};
  auto found = FindPod(*parsed, site);
  if (!found.ok())
    return found.status();
  const rapidjson::Value* pod = *found;

  auto out = std::make_shared<rapidjson::Document>();
  out->SetObject();
  auto& a = out->GetAllocator();
  rapidjson::Value metadata(rapidjson::kObjectType);
  if (auto it = pod->FindMember("metadata"); it != pod->MemberEnd() && !it->value.IsNull()) {
    if (Status s = CheckMetadata(it->value, site); !s.ok())
      return s;
    metadata.CopyFrom(it->value, a);
  }
  auto spec_it = pod->FindMember("spec");
  if (spec_it == pod->MemberEnd() || !spec_it->value.IsObject()) {
    return site.Fail("spec", "is missing or not a mapping: add the pod spec with its containers");
  }
  const rapidjson::Value& spec = spec_it->value;
  PodTemplate result;
  result.file = file;
  if (Status s = CheckContainers(spec, site, result); !s.ok())
    return s;
  if (Status s = CheckSpecRules(spec, site); !s.ok())
    return s;
  rapidjson::Value spec_copy;
  spec_copy.CopyFrom(spec, a);
  out->AddMember("metadata", metadata, a);
  out->AddMember("spec", spec_copy, a);
  result.hash = TemplateHash(*out);
  result.pod = std::move(out);
  return result;
}

Result<PodTemplate> LoadPodTemplate(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::IoError(fmt::format(
        "cannot read pod template {}: {}; fix PodTemplate= in k8sbridge.conf or create the file "
        "(see conf-templates/worker-pod.yaml)",
        path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParsePodTemplate(text.str(), path);
}

}  // namespace k8sbridge::power
