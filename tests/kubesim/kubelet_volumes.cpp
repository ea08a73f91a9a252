// The kubesim kubelet's volumes (both modes): emptyDir, hostPath with upstream's type
// checks (pkg/volume/hostpath/host_path.go), configMap, secret, downwardAPI and
// projected volumes written the way pkg/volume/util/atomic_writer.go writes them (a
// timestamped directory, the ..data symlink to it, the visible names as symlinks
// through ..data), and persistentVolumeClaim as the host directory of the bound
// PersistentVolume's spec.hostPath.path.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "kubelet.h"

namespace kubesim {

namespace fs = std::filesystem;

namespace {

using kubelet_internal::Member;
using kubelet_internal::Str;

uint32_t Mode(const rapidjson::Value* v, uint32_t fallback) {
  return v != nullptr && v->IsUint() ? v->GetUint() : fallback;
}

bool Optional(const rapidjson::Value& source) {
  const rapidjson::Value* o = Member(&source, "optional");
  return o != nullptr && o->IsBool() && o->GetBool();
}

using Payload = kubelet_internal::VolumePayload;

// The files of a configMap or secret source: every key, or the items asked for.
Status AddObjectFiles(const rapidjson::Value* object, const rapidjson::Value& source, bool secret,
                      uint32_t default_mode, Payload& payload) {
  const char* kind = secret ? "secret" : "configmap";
  const std::string name = Str(Member(&source, secret ? "secretName" : "name"));
  if (object == nullptr) {
    if (Optional(source))
      return Status::Ok();
    return Status::NotFound(fmt::format("{} \"{}\" not found", kind, name));
  }
  const rapidjson::Value* data = Member(object, "data");
  const rapidjson::Value* binary = secret ? nullptr : Member(object, "binaryData");
  auto value = [&](const std::string& key) -> std::optional<std::string> {
    const rapidjson::Value* v = Member(data, key.c_str());
    if (v != nullptr && v->IsString()) {
      if (!secret)
        return Str(v);
      Result<std::string> decoded = kubelet_internal::DecodeBase64(Str(v));
      return decoded.ok() ? std::optional<std::string>(*decoded) : std::nullopt;
    }
    v = Member(binary, key.c_str());
    if (v != nullptr && v->IsString()) {
      Result<std::string> decoded = kubelet_internal::DecodeBase64(Str(v));
      return decoded.ok() ? std::optional<std::string>(*decoded) : std::nullopt;
    }
    return std::nullopt;
  };
  const rapidjson::Value* items = Member(&source, "items");
  if (items != nullptr && items->IsArray() && !items->Empty()) {
    for (const auto& item : items->GetArray()) {
      const std::string key = Str(Member(&item, "key"));
      std::optional<std::string> v = value(key);
      if (!v) {
        if (Optional(source))
          continue;
        return Status::NotFound(fmt::format("{} references non-existent {} key: {}", kind,
                                            secret ? "secret" : "config", key));
      }
      payload[Str(Member(&item, "path"))] = {*v, Mode(Member(&item, "mode"), default_mode)};
    }
    return Status::Ok();
  }
  for (const rapidjson::Value* map : {data, binary}) {
    if (map == nullptr || !map->IsObject())
      continue;
    for (const auto& m : map->GetObject()) {
      if (std::optional<std::string> v = value(m.name.GetString()))
        payload[m.name.GetString()] = {*v, default_mode};
    }
  }
  return Status::Ok();
}

// metadata.labels / metadata.annotations as the downward API writes a map:
// key="value" lines, sorted by key.
std::string FormatMap(const rapidjson::Value* map) {
  std::map<std::string, std::string> sorted;
  if (map != nullptr && map->IsObject()) {
    for (const auto& m : map->GetObject())
      sorted[m.name.GetString()] = Str(&m.value);
  }
  std::string out;
  for (const auto& [k, v] : sorted) {
    std::string quoted;
    for (char c : v) {
      if (c == '"' || c == '\\')
        quoted += '\\';
      if (c == '\n') {
        quoted += "\\n";
        continue;
      }
      quoted += c;
    }
    out += fmt::format("{}=\"{}\"\n", k, quoted);
  }
  return out;
}

Status AddDownwardFiles(const rapidjson::Value& pod, const rapidjson::Value& source,
                        uint32_t default_mode, Payload& payload) {
  const rapidjson::Value* items = Member(&source, "items");
  if (items == nullptr || !items->IsArray())
    return Status::Ok();
  for (const auto& item : items->GetArray()) {
    const std::string path = Str(Member(&item, "path"));
    const rapidjson::Value* field = Member(&item, "fieldRef");
    if (field == nullptr) {
      return Status::InvalidArgument(fmt::format(
          "downward API file {}: kubesim supports fieldRef only (no resourceFieldRef)", path));
    }
    const std::string field_path = Str(Member(field, "fieldPath"));
    std::string content;
    if (field_path == "metadata.labels" || field_path == "metadata.annotations") {
      content = FormatMap(Find(pod, field_path.c_str()));
    } else {
      Result<std::string> v = kubelet_internal::FieldRef(pod, field_path, "", "");
      if (!v.ok())
        return v.status().WithContext(fmt::format("downward API file {}", path));
      content = *v;
    }
    payload[path] = {content, Mode(Member(&item, "mode"), default_mode)};
  }
  return Status::Ok();
}

// hostPath's type check (pkg/volume/hostpath/host_path.go's messages).
Status CheckHostPath(const std::string& path, const std::string& type) {
  struct stat st;
  const bool exists = stat(path.c_str(), &st) == 0;
  std::error_code ec;
  if (type.empty())
    return Status::Ok();
  if (type == "DirectoryOrCreate" && !exists) {
    fs::create_directories(path, ec);
    if (ec)
      return Status::IoError(fmt::format("creating {}: {}", path, ec.message()));
    (void)chmod(path.c_str(), 0755);
    return Status::Ok();
  }
  if (type == "FileOrCreate" && !exists) {
    if (!std::ofstream(path))
      return Status::IoError(fmt::format("creating {}: it could not be created", path));
    return Status::Ok();
  }
  struct Check {
    const char* type;
    bool (*ok)(mode_t);
    const char* what;
  };
  static const Check checks[] = {
      {"DirectoryOrCreate", [](mode_t m) { return S_ISDIR(m); }, "a directory"},
      {"Directory", [](mode_t m) { return S_ISDIR(m); }, "a directory"},
      {"FileOrCreate", [](mode_t m) { return S_ISREG(m); }, "a file"},
      {"File", [](mode_t m) { return S_ISREG(m); }, "a file"},
      {"Socket", [](mode_t m) { return S_ISSOCK(m); }, "a socket file"},
      {"CharDevice", [](mode_t m) { return S_ISCHR(m); }, "a character device"},
      {"BlockDevice", [](mode_t m) { return S_ISBLK(m); }, "a block device"},
  };
  for (const Check& c : checks) {
    if (type != c.type)
      continue;
    if (!exists || !c.ok(st.st_mode))
      return Status::InvalidArgument(
          fmt::format("hostPath type check failed: {} is not {}", path, c.what));
    return Status::Ok();
  }
  return Status::InvalidArgument(
      fmt::format("hostPath type \"{}\" of {} is not valid", type, path));
}

}  // namespace

namespace kubelet_internal {

Status AtomicWrite(const std::string& dir, const VolumePayload& payload) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  std::tm tm;
  gmtime_r(&secs, &tm);
  const auto nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() %
      1000000000;
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "..%Y_%m_%d_%H_%M_%S.", &tm);
  const std::string ts = fmt::format("{}{:09d}", stamp, nanos);
  const fs::path base(dir);
  for (const auto& [path, file] : payload) {
    if (path.empty() || path[0] == '/' || path.find("..") != std::string::npos)
      return Status::InvalidArgument(fmt::format("volume file path \"{}\" is not valid", path));
    const fs::path target = base / ts / path;
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    out << file.content;
    out.close();
    if (!out)
      return Status::IoError(fmt::format("writing {}", target.string()));
    (void)chmod(target.c_str(), file.mode);
  }
  fs::create_directories(base / ts, ec);
  (void)chmod((base / ts).c_str(), 0755);
  // Swap ..data to the new directory in one rename, as the atomic writer does.
  const std::string old =
      fs::is_symlink(base / "..data", ec) ? fs::read_symlink(base / "..data", ec).string() : "";
  fs::remove(base / "..data_tmp", ec);
  fs::create_symlink(ts, base / "..data_tmp", ec);
  if (ec)
    return Status::IoError(fmt::format("linking {}/..data_tmp: {}", dir, ec.message()));
  fs::rename(base / "..data_tmp", base / "..data", ec);
  if (ec)
    return Status::IoError(fmt::format("renaming {}/..data: {}", dir, ec.message()));
  std::set<std::string> visible;
  for (const auto& [path, file] : payload)
    visible.insert(path.substr(0, path.find('/')));
  for (const std::string& name : visible) {
    if (!fs::is_symlink(base / name, ec))
      fs::create_symlink(fs::path("..data") / name, base / name, ec);
  }
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("..", 0) != 0 && visible.count(name) == 0 && e.is_symlink())
      fs::remove(e.path(), ec);
  }
  if (!old.empty() && old != ts)
    fs::remove_all(base / old, ec);
  return Status::Ok();
}

// projected.go's collectData: a token file takes the volume's defaultMode (0644 from
// ServiceAccount admission, so a non-root container can read it), but 0600 when
// the pod gives an fsGroup or a run-as user for the volume's ownership. kubesim does
// not then chown the file to them (upstream's SetVolumeOwnership makes it 0640 for
// the fsGroup): docs/kubesim.md lists it.
static uint32_t TokenFileMode(const rapidjson::Value& pod, uint32_t default_mode) {
  const rapidjson::Value* context = Member(Member(&pod, "spec"), "securityContext");
  if (Member(context, "fsGroup") != nullptr || Member(context, "runAsUser") != nullptr)
    return 0600;
  return default_mode;
}

Status AddToken(const TokenIssuer& issue_token, const rapidjson::Value& pod,
                const rapidjson::Value& source, uint32_t mode, VolumePayload& payload);

Result<std::string> PrepareVolume(const Store& store, const TokenIssuer& issue_token,
                                  const rapidjson::Value& pod, const rapidjson::Value& volume,
                                  const std::string& vol_dir) {
  const std::string ns = GetString(pod, "metadata.namespace");
  std::error_code ec;
  auto object = [&](const char* resource, const std::string& name) -> ObjectPtr {
    Result<ObjectPtr> got = store.Get(resource, ns, name);
    return got.ok() ? *got : nullptr;
  };
  if (const rapidjson::Value* hp = Member(&volume, "hostPath")) {
    const std::string path = Str(Member(hp, "path"));
    if (Status s = CheckHostPath(path, Str(Member(hp, "type"))); !s.ok())
      return s;
    return path;
  }
  if (Member(&volume, "emptyDir") != nullptr) {
    // Made 0777 once, as the kubelet's emptyDir SetUpAt: a set-up volume (its ready
    // marker) is left alone when another container of the pod starts, so a mode one
    // container set (munged wants its socket directory 0755) stays.
    if (!fs::exists(vol_dir, ec)) {
      fs::create_directories(vol_dir, ec);
      (void)chmod(vol_dir.c_str(), 0777);
    }
    return vol_dir;
  }
  if (const rapidjson::Value* pvc = Member(&volume, "persistentVolumeClaim"))
    return ClaimHostPath(store, ns, Str(Member(pvc, "claimName")));
  Payload payload;
  Status s = Status::Ok();
  if (const rapidjson::Value* cm = Member(&volume, "configMap")) {
    ObjectPtr o = object("configmaps", Str(Member(cm, "name")));
    s = AddObjectFiles(o.get(), *cm, false, Mode(Member(cm, "defaultMode"), 0644), payload);
  } else if (const rapidjson::Value* sec = Member(&volume, "secret")) {
    ObjectPtr o = object("secrets", Str(Member(sec, "secretName")));
    s = AddObjectFiles(o.get(), *sec, true, Mode(Member(sec, "defaultMode"), 0644), payload);
  } else if (const rapidjson::Value* da = Member(&volume, "downwardAPI")) {
    s = AddDownwardFiles(pod, *da, Mode(Member(da, "defaultMode"), 0644), payload);
  } else if (const rapidjson::Value* pr = Member(&volume, "projected")) {
    s = ProjectedFiles(store, issue_token, pod, *pr, payload);
  } else {
    return Status::InvalidArgument(
        "kubesim supports hostPath, emptyDir, configMap, secret, downwardAPI, projected and "
        "persistentVolumeClaim volumes only");
  }
  if (!s.ok())
    return s;
  if (Status w = AtomicWrite(vol_dir, payload); !w.ok())
    return w;
  return vol_dir;
}

Status ProjectedFiles(const Store& store, const TokenIssuer& issue_token,
                      const rapidjson::Value& pod, const rapidjson::Value& projected,
                      VolumePayload& payload) {
  const std::string ns = GetString(pod, "metadata.namespace");
  const uint32_t mode = Mode(Member(&projected, "defaultMode"), 0644);
  const rapidjson::Value* sources = Member(&projected, "sources");
  if (sources == nullptr || !sources->IsArray())
    return Status::Ok();
  for (const auto& source : sources->GetArray()) {
    Status s = Status::Ok();
    if (const rapidjson::Value* cm = Member(&source, "configMap")) {
      Result<ObjectPtr> o = store.Get("configmaps", ns, Str(Member(cm, "name")));
      s = AddObjectFiles(o.ok() ? o->get() : nullptr, *cm, false, mode, payload);
    } else if (const rapidjson::Value* sec = Member(&source, "secret")) {
      // A projected secret source names its secret "name", not "secretName".
      rapidjson::Document renamed;
      renamed.CopyFrom(*sec, renamed.GetAllocator());
      if (const rapidjson::Value* n = Member(sec, "name"))
        renamed.AddMember("secretName", rapidjson::Value(*n, renamed.GetAllocator()),
                          renamed.GetAllocator());
      Result<ObjectPtr> o = store.Get("secrets", ns, Str(Member(sec, "name")));
      s = AddObjectFiles(o.ok() ? o->get() : nullptr, renamed, true, mode, payload);
    } else if (const rapidjson::Value* da = Member(&source, "downwardAPI")) {
      s = AddDownwardFiles(pod, *da, mode, payload);
    } else if (const rapidjson::Value* token = Member(&source, "serviceAccountToken")) {
      s = AddToken(issue_token, pod, *token, mode, payload);
    } else {
      s = Status::InvalidArgument(
          "a projected volume source must be configMap, secret, downwardAPI or "
          "serviceAccountToken (clusterTrustBundle is not supported by kubesim)");
    }
    if (!s.ok())
      return s;
  }
  return Status::Ok();
}

Status AddToken(const TokenIssuer& issue_token, const rapidjson::Value& pod,
                const rapidjson::Value& source, uint32_t mode, VolumePayload& payload) {
  std::string account = GetString(pod, "spec.serviceAccountName");
  if (account.empty())
    account = "default";
  const rapidjson::Value* exp = Member(&source, "expirationSeconds");
  const int64_t expiration = exp != nullptr && exp->IsInt64() ? exp->GetInt64() : 3600;
  if (!issue_token) {
    return Status::InvalidArgument(fmt::format(
        "projected serviceAccountToken for service account \"{}\": this kubesim has no token "
        "issuer (KubeletOptions::issue_token is unset)",
        account));
  }
  Result<std::string> token =
      issue_token(GetString(pod, "metadata.namespace"), account, expiration);
  if (!token.ok())
    return token.status().WithContext(
        fmt::format("failed to fetch token for service account \"{}\"", account));
  payload[Str(Member(&source, "path"))] = {*token, TokenFileMode(pod, mode)};
  return Status::Ok();
}

Result<std::string> ClaimHostPath(const Store& store, const std::string& ns,
                                  const std::string& claim) {
  Result<ObjectPtr> pvc = store.Get("persistentvolumeclaims", ns, claim);
  if (!pvc.ok())
    return Status::NotFound(fmt::format("persistentvolumeclaim \"{}\" not found", claim));
  const std::string phase = GetString(**pvc, "status.phase");
  const std::string volume = GetString(**pvc, "spec.volumeName");
  if (phase != "Bound" || volume.empty()) {
    return Status::Unavailable(fmt::format("persistentvolumeclaim \"{}\" is not bound (phase {})",
                                           claim, phase.empty() ? "Pending" : phase));
  }
  Result<ObjectPtr> pv = store.Get("persistentvolumes", "", volume);
  if (!pv.ok())
    return Status::NotFound(fmt::format("persistentvolume \"{}\" not found", volume));
  const std::string path = GetString(**pv, "spec.hostPath.path");
  if (path.empty()) {
    return Status::InvalidArgument(fmt::format(
        "persistentvolume \"{}\" has no spec.hostPath.path: kubesim mounts hostPath volumes only",
        volume));
  }
  std::error_code ec;
  fs::create_directories(path, ec);  // a provisioner's fresh directory
  return path;
}

}  // namespace kubelet_internal

Result<std::string> Kubelet::PrepareVolume(const rapidjson::Value& pod,
                                           const rapidjson::Value& volume,
                                           const std::string& vol_dir) {
  return kubelet_internal::PrepareVolume(store_, options_.issue_token, pod, volume, vol_dir);
}

}  // namespace kubesim
