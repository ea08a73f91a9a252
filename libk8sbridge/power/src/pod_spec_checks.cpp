// The pod template's checks of a pod spec's mounts and service account token
// (docs/power.md, "Pod templates"), apart from the YAML reading in pod_template.cpp.
#include "pod_spec_checks.h"

#include <cstdint>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "k8sbridge/contract.h"
#include "k8sbridge/kube/object.h"

namespace k8sbridge::power::detail {

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
static Status ForEachVolumeMount(const rapidjson::Value& spec, const std::string& prefix,
                                 Check check) {
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
static bool OwnerOnlyMode(const rapidjson::Value& mode) {
  return mode.IsInt64() && mode.GetInt64() >= 0 && (mode.GetInt64() & 077) == 0;
}

static std::string ModeText(const rapidjson::Value& mode) {
  return mode.IsInt64() ? fmt::format("{:04o}", mode.GetInt64()) : std::string(TypeName(mode));
}

// The index of a projected volume's serviceAccountToken source, if it has one.
static std::optional<rapidjson::SizeType> TokenSource(const rapidjson::Value& volume) {
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
static Status CheckItemModes(const rapidjson::Value& sources, const std::string& path) {
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
static std::optional<int64_t> CommonRunAsUser(const rapidjson::Value& spec) {
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
static Status CheckTokenVolume(const rapidjson::Value& spec, const rapidjson::Value& volume,
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
static bool AtServiceAccountDir(std::string_view mount_path) {
  std::string path = std::filesystem::path(mount_path).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  if (path == "/run" || path.starts_with("/run/"))
    path.insert(0, "/var");
  const std::string_view dir = contract::kServiceAccountDir;
  constexpr std::string_view kRunDir = "/var/run";
  const bool inside =
      path.starts_with(dir) && (path.size() == dir.size() || path[dir.size()] == '/');
  // A path of the directory's own length is `inside`; dir[path.size()] would read
  // past its end (an abort with _GLIBCXX_ASSERTIONS, which Debian's builds set).
  const bool parent = path.size() > kRunDir.size() && path.size() < dir.size() &&
                      dir.starts_with(path) && dir[path.size()] == '/';
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

}  // namespace k8sbridge::power::detail
