#include "k8sbridge/power/pod_template.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <yaml-cpp/yaml.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/text.h"

namespace k8sbridge::power {

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

std::string_view TypeName(const rapidjson::Value& v) {
  if (v.IsObject())
    return "a mapping";
  if (v.IsArray())
    return "a list";
  if (v.IsString())
    return "a string";
  if (v.IsNull())
    return "empty";
  if (v.IsBool())
    return "a boolean";
  return "a number";
}

// Calls `check(mount, path)` on each volume mount of every kind of container,
// `path` naming it in messages ("spec.containers[0].volumeMounts[3]"); the first
// error stops it.
template <typename Check>
Status ForEachVolumeMount(const rapidjson::Value& spec, const std::string& prefix, Check check) {
  for (const char* kind : {"initContainers", "containers", "ephemeralContainers"}) {
    auto list = spec.FindMember(kind);
    if (list == spec.MemberEnd() || !list->value.IsArray())
      continue;
    for (rapidjson::SizeType i = 0; i < list->value.Size(); ++i) {
      const rapidjson::Value& c = list->value[i];
      auto mounts = c.IsObject() ? c.FindMember("volumeMounts") : c.MemberEnd();
      if (!c.IsObject() || mounts == c.MemberEnd() || mounts->value.IsNull())
        continue;
      std::string path = fmt::format("{}spec.{}[{}].volumeMounts", prefix, kind, i);
      if (!mounts->value.IsArray()) {
        return Status::InvalidArgument(
            fmt::format("{}: is {}, expected a list of mounts", path, TypeName(mounts->value)));
      }
      for (rapidjson::SizeType m = 0; m < mounts->value.Size(); ++m) {
        const rapidjson::Value& mount = mounts->value[m];
        if (!mount.IsObject())
          continue;
        if (Status s = check(mount, fmt::format("{}[{}]", path, m)); !s.ok())
          return s;
      }
    }
  }
  return Status::Ok();
}

// Mounts that would leave the pod: Bidirectional propagation makes every mount
// made under the volume in the pod (k8sbridge-jail-prepare's binds of /dev, /sys,
// /run/munge, the Slurm directories and --bind paths) appear in the Kubernetes
// node's mount namespace, where they outlive the pod and mislead the next one
// (docs/jail.md). Checked in every kind of container.
Status CheckMountPropagation(const rapidjson::Value& spec, const std::string& prefix) {
  return ForEachVolumeMount(
      spec, prefix, [](const rapidjson::Value& mount, const std::string& path) {
        auto propagation = mount.FindMember("mountPropagation");
        if (propagation == mount.MemberEnd() || !propagation->value.IsString() ||
            std::string_view(propagation->value.GetString()) != "Bidirectional")
          return Status::Ok();
        return Status::InvalidArgument(fmt::format(
            "{}.mountPropagation: is Bidirectional: the mounts made in the pod (the jail's "
            "binds of /dev, /sys, /run/munge, the Slurm directories and --bind paths) would "
            "reach the Kubernetes node's mount namespace and outlive the pod; remove "
            "mountPropagation (the default, None, keeps them in the pod), or use "
            "HostToContainer",
            path));
      });
}

// Why a token in a worker pod must be a file only root can read: a job's stdio
// (sbatch --input=, --output=) is opened outside the jail, as the job's user.
constexpr std::string_view kJobCouldRead =
    "a job could read it (a job's stdio, such as sbatch --input=, is opened outside the jail, "
    "as the job's user) and act on the cluster with it";
// The one token a worker pod may carry, for node_features_k8s or k8sbridge-health's
// KubePublish=yes.
constexpr std::string_view kRootOnlyToken =
    "a program in the pod that needs a token gets a projected serviceAccountToken volume with "
    "defaultMode: 0400 and no fsGroup (docs/power.md, \"Pod templates\")";

// automountServiceAccountToken: the automounted token is mode 0644, which the pod
// cannot change. RenderWorkerPod sets false when it is unset.
Status CheckAutomountToken(const rapidjson::Value& spec, const std::string& prefix) {
  auto it = spec.FindMember("automountServiceAccountToken");
  if (it == spec.MemberEnd() || it->value.IsFalse())
    return Status::Ok();
  if (it->value.IsTrue()) {
    return Status::InvalidArgument(fmt::format(
        "{}spec.automountServiceAccountToken: is true: the automounted token is readable by "
        "every user (mode 0644, which the pod cannot set), so {}; leave it unset or set false "
        "({})",
        prefix, kJobCouldRead, kRootOnlyToken));
  }
  return Status::InvalidArgument(
      fmt::format("{}spec.automountServiceAccountToken: is {}, expected true or false (unset: "
                  "k8sbridge sets false, so no job can read the pod's token)",
                  prefix, TypeName(it->value)));
}

// Whether a file mode keeps the file to its owner: no group or other bits.
bool OwnerOnlyMode(const rapidjson::Value& mode) {
  return mode.IsInt64() && mode.GetInt64() >= 0 && (mode.GetInt64() & 077) == 0;
}

std::string ModeText(const rapidjson::Value& mode) {
  return mode.IsInt64() ? fmt::format("{:04o}", mode.GetInt64()) : std::string(TypeName(mode));
}

// The index of a projected volume's serviceAccountToken source, if it has one.
std::optional<rapidjson::SizeType> TokenSource(const rapidjson::Value& volume) {
  auto projected = volume.IsObject() ? volume.FindMember("projected") : volume.MemberEnd();
  if (!volume.IsObject() || projected == volume.MemberEnd() || !projected->value.IsObject())
    return std::nullopt;
  auto sources = projected->value.FindMember("sources");
  if (sources == projected->value.MemberEnd() || !sources->value.IsArray())
    return std::nullopt;
  for (rapidjson::SizeType i = 0; i < sources->value.Size(); ++i) {
    if (sources->value[i].IsObject() && sources->value[i].HasMember("serviceAccountToken"))
      return i;
  }
  return std::nullopt;
}

// The other sources' files in a token volume: an item's own mode replaces
// defaultMode, and one named token would be what clients read.
Status CheckItemModes(const rapidjson::Value& sources, const std::string& path) {
  for (rapidjson::SizeType i = 0; i < sources.Size(); ++i) {
    if (!sources[i].IsObject())
      continue;
    for (const auto& source : sources[i].GetObject()) {
      auto items =
          source.value.IsObject() ? source.value.FindMember("items") : source.value.MemberEnd();
      if (!source.value.IsObject() || items == source.value.MemberEnd() || !items->value.IsArray())
        continue;
      for (rapidjson::SizeType j = 0; j < items->value.Size(); ++j) {
        const rapidjson::Value& item = items->value[j];
        auto mode = item.IsObject() ? item.FindMember("mode") : item.MemberEnd();
        if (!item.IsObject() || mode == item.MemberEnd() || OwnerOnlyMode(mode->value))
          continue;
        return Status::InvalidArgument(fmt::format(
            "{}.projected.sources[{}].{}.items[{}].mode: is {}, so group and others can read "
            "that file of the token's volume: {}; remove mode or set 0400",
            path, i, source.name.GetString(), j, ModeText(mode->value), kJobCouldRead));
      }
    }
  }
  return Status::Ok();
}

// The user every container runs as, when they all set the same runAsUser (their
// own or the pod's): the kubelet then gives a projected token to that user.
std::optional<int64_t> CommonRunAsUser(const rapidjson::Value& spec) {
  auto run_as = [](const rapidjson::Value& object) -> std::optional<int64_t> {
    auto security = object.FindMember("securityContext");
    if (security == object.MemberEnd() || !security->value.IsObject())
      return std::nullopt;
    auto user = security->value.FindMember("runAsUser");
    if (user == security->value.MemberEnd() || !user->value.IsInt64())
      return std::nullopt;
    return user->value.GetInt64();
  };
  const std::optional<int64_t> pod_user = run_as(spec);
  std::optional<int64_t> common;
  for (const char* kind : {"initContainers", "containers"}) {
    auto list = spec.FindMember(kind);
    if (list == spec.MemberEnd() || !list->value.IsArray())
      continue;
    for (const rapidjson::Value& c : list->value.GetArray()) {
      std::optional<int64_t> user = c.IsObject() ? run_as(c) : std::nullopt;
      user = user ? user : pod_user;
      if (!user || (common && *common != *user))
        return std::nullopt;
      common = user;
    }
  }
  return common;
}

// A projected token volume is allowed when its files are root's alone: a
// defaultMode without group or other bits (unset is 0644), no item's mode with
// them, no fsGroup (the kubelet makes the token group-readable, 0640), and no
// runAsUser other than root for every container (the kubelet gives the token to
// that user). `path` names the volume ("spec.volumes[2]").
Status CheckTokenVolume(const rapidjson::Value& spec, const rapidjson::Value& volume,
                        const std::string& prefix, const std::string& path) {
  const rapidjson::Value& projected = volume["projected"];
  auto mode = projected.FindMember("defaultMode");
  if (mode == projected.MemberEnd() || mode->value.IsNull() || !OwnerOnlyMode(mode->value)) {
    return Status::InvalidArgument(fmt::format(
        "{}.projected.defaultMode: is {}, so group and others can read the service account "
        "token: {}; set defaultMode: 0400 on the projected volume",
        path,
        mode == projected.MemberEnd() || mode->value.IsNull() ? "unset (0644)"
                                                              : ModeText(mode->value),
        kJobCouldRead));
  }
  if (Status s = CheckItemModes(projected["sources"], path); !s.ok())
    return s;
  auto security = spec.FindMember("securityContext");
  if (security != spec.MemberEnd() && security->value.IsObject() &&
      security->value.HasMember("fsGroup") && !security->value["fsGroup"].IsNull()) {
    return Status::InvalidArgument(fmt::format(
        "{}spec.securityContext.fsGroup: is set, so the kubelet lets that group read the service "
        "account token of {} (mode 0640): {}; remove fsGroup",
        prefix, path, kJobCouldRead));
  }
  if (std::optional<int64_t> user = CommonRunAsUser(spec); user && *user != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}spec: every container runs as user {} (runAsUser), so the kubelet gives that user the "
        "service account token of {}: {}; the worker runs as root: remove runAsUser",
        prefix, *user, path, kJobCouldRead));
  }
  return Status::Ok();
}

// Each projected volume with a serviceAccountToken source: root's alone, or refused.
Status CheckTokenVolumes(const rapidjson::Value& spec, const std::string& prefix) {
  auto volumes = spec.FindMember("volumes");
  if (volumes == spec.MemberEnd() || !volumes->value.IsArray())
    return Status::Ok();
  for (rapidjson::SizeType v = 0; v < volumes->value.Size(); ++v) {
    const rapidjson::Value& volume = volumes->value[v];
    if (!TokenSource(volume))
      continue;
    if (Status s =
            CheckTokenVolume(spec, volume, prefix, fmt::format("{}spec.volumes[{}]", prefix, v));
        !s.ok())
      return s;
  }
  return Status::Ok();
}

// Whether a volume mounted at `mount_path` is where Kubernetes clients look for
// the pod's token: that directory, inside it, or a parent of it below /var/run
// (the volume could hold the directory). /var/run is /run in the images.
bool AtServiceAccountDir(std::string_view mount_path) {
  std::string path = std::filesystem::path(mount_path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  if (path == "/run" || path.starts_with("/run/"))
    path.insert(0, "/var");
  const std::string_view dir = contract::kServiceAccountDir;
  constexpr std::string_view kRunDir = "/var/run";
  const bool inside =
      path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
  const bool parent =
      path.size() > kRunDir.size() && dir.starts_with(path) && dir[path.size()] == '/';
  return inside || parent;
}

// A volume mounted where clients read the pod's token: only a root-only projected
// token volume (CheckTokenVolume); any other (a Secret holding a token, an
// emptyDir a job could write a token into) is refused.
Status CheckTokenMounts(const rapidjson::Value& spec, const std::string& prefix) {
  auto volumes = spec.FindMember("volumes");
  auto root_only_token_volume = [&](std::string_view name) {
    if (volumes == spec.MemberEnd() || !volumes->value.IsArray())
      return false;
    for (const rapidjson::Value& volume : volumes->value.GetArray()) {
      if (volume.IsObject() && kube::StringMember(&volume, "name") == name)
        return TokenSource(volume) && CheckTokenVolume(spec, volume, prefix, "").ok();
    }
    return false;
  };
  return ForEachVolumeMount(
      spec, prefix, [&](const rapidjson::Value& mount, const std::string& path) {
        auto at = mount.FindMember("mountPath");
        if (at == mount.MemberEnd() || !at->value.IsString() ||
            !AtServiceAccountDir(at->value.GetString()))
          return Status::Ok();
        const std::string name = kube::StringMember(&mount, "name");
        if (root_only_token_volume(name))
          return Status::Ok();
        return Status::InvalidArgument(fmt::format(
            "{}.mountPath: is {}, where Kubernetes clients read the pod's service account token "
            "({}), and volume '{}' is not a projected serviceAccountToken volume only root can "
            "read: if it holds a token, {}; mount it elsewhere ({})",
            path, at->value.GetString(), contract::kServiceAccountDir, name, kJobCouldRead,
            kRootOnlyToken));
      });
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
  for (auto check :
       {CheckMountPropagation, CheckAutomountToken, CheckTokenVolumes, CheckTokenMounts}) {
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
