#include "oci_spec.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace kubesim::oci {

namespace fs = std::filesystem;

namespace {

// Linux capability numbers 0..40, as capability(7) names them.
const char* const kCapabilityNames[] = {"CAP_CHOWN",
                                        "CAP_DAC_OVERRIDE",
                                        "CAP_DAC_READ_SEARCH",
                                        "CAP_FOWNER",
                                        "CAP_FSETID",
                                        "CAP_KILL",
                                        "CAP_SETGID",
                                        "CAP_SETUID",
                                        "CAP_SETPCAP",
                                        "CAP_LINUX_IMMUTABLE",
                                        "CAP_NET_BIND_SERVICE",
                                        "CAP_NET_BROADCAST",
                                        "CAP_NET_ADMIN",
                                        "CAP_NET_RAW",
                                        "CAP_IPC_LOCK",
                                        "CAP_IPC_OWNER",
                                        "CAP_SYS_MODULE",
                                        "CAP_SYS_RAWIO",
                                        "CAP_SYS_CHROOT",
                                        "CAP_SYS_PTRACE",
                                        "CAP_SYS_PACCT",
                                        "CAP_SYS_ADMIN",
                                        "CAP_SYS_BOOT",
                                        "CAP_SYS_NICE",
                                        "CAP_SYS_RESOURCE",
                                        "CAP_SYS_TIME",
                                        "CAP_SYS_TTY_CONFIG",
                                        "CAP_MKNOD",
                                        "CAP_LEASE",
                                        "CAP_AUDIT_WRITE",
                                        "CAP_AUDIT_CONTROL",
                                        "CAP_SETFCAP",
                                        "CAP_MAC_OVERRIDE",
                                        "CAP_MAC_ADMIN",
                                        "CAP_SYSLOG",
                                        "CAP_WAKE_ALARM",
                                        "CAP_BLOCK_SUSPEND",
                                        "CAP_AUDIT_READ",
                                        "CAP_PERFMON",
                                        "CAP_BPF",
                                        "CAP_CHECKPOINT_RESTORE"};

std::string CapName(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), ::toupper);
  return name.rfind("CAP_", 0) == 0 ? name : "CAP_" + name;
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, const std::string& s) {
  w.String(s.c_str(), static_cast<rapidjson::SizeType>(s.size()));
}

void Strings(Writer& w, const std::vector<std::string>& list) {
  w.StartArray();
  for (const std::string& s : list)
    Str(w, s);
  w.EndArray();
}

void Mount(Writer& w, const std::string& destination, const std::string& type,
           const std::string& source, const std::vector<std::string>& options) {
  w.StartObject();
  w.Key("destination");
  Str(w, destination);
  w.Key("type");
  Str(w, type);
  w.Key("source");
  Str(w, source);
  w.Key("options");
  Strings(w, options);
  w.EndObject();
}

// containerd's default mounts (pkg/oci/spec.go), /sys and its cgroups read-write only
// for privileged containers (pkg/cri/opts/spec_linux.go).
void DefaultMounts(Writer& w, bool privileged) {
  Mount(w, "/proc", "proc", "proc", {"nosuid", "noexec", "nodev"});
  Mount(w, "/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"});
  Mount(w, "/dev/pts", "devpts", "devpts",
        {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"});
  Mount(w, "/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"});
  Mount(w, "/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"});
  const std::string rw = privileged ? "rw" : "ro";
  Mount(w, "/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", rw});
  Mount(w, "/sys/fs/cgroup", "cgroup", "cgroup", {"nosuid", "noexec", "nodev", "relatime", rw});
}

void Process(Writer& w, const SpecInput& in) {
  w.Key("process");
  w.StartObject();
  w.Key("terminal");
  w.Bool(false);
  w.Key("user");
  w.StartObject();
  w.Key("uid");
  w.Uint(in.user.uid);
  w.Key("gid");
  w.Uint(in.user.gid);
  if (!in.additional_gids.empty()) {
    w.Key("additionalGids");
    w.StartArray();
    for (uint32_t g : in.additional_gids)
      w.Uint(g);
    w.EndArray();
  }
  w.EndObject();
  w.Key("args");
  Strings(w, in.args);
  w.Key("env");
  Strings(w, in.env);
  w.Key("cwd");
  Str(w, in.cwd.empty() ? "/" : in.cwd);
  w.Key("capabilities");
  w.StartObject();
  for (const char* set : {"bounding", "effective", "permitted"}) {
    w.Key(set);
    Strings(w, in.capabilities);
  }
  w.EndObject();
  // allowPrivilegeEscalation defaults to true in Kubernetes: no no_new_privs.
  w.Key("noNewPrivileges");
  w.Bool(false);
  w.EndObject();
}

void Namespaces(Writer& w, const SpecInput& in) {
  w.Key("namespaces");
  w.StartArray();
  const std::pair<const char*, const std::string*> namespaces[] = {{"pid", &in.pidns},
                                                                   {"ipc", &in.ipcns},
                                                                   {"uts", &in.utsns},
                                                                   {"mount", nullptr},
                                                                   {"network", &in.netns}};
  for (const auto& [type, path] : namespaces) {
    w.StartObject();
    w.Key("type");
    w.String(type);
    if (path != nullptr && !path->empty()) {
      w.Key("path");
      Str(w, *path);
    }
    w.EndObject();
  }
  w.EndArray();
}

void Linux(Writer& w, const SpecInput& in) {
  w.Key("linux");
  w.StartObject();
  Namespaces(w, in);
  if (in.privileged) {
    w.Key("devices");
    w.StartArray();
    for (const SpecDevice& d : in.devices) {
      w.StartObject();
      w.Key("path");
      Str(w, d.path);
      w.Key("type");
      Str(w, std::string(1, d.type));
      w.Key("major");
      w.Int64(d.major);
      w.Key("minor");
      w.Int64(d.minor);
      w.Key("fileMode");
      w.Uint(d.mode);
      w.EndObject();
    }
    w.EndArray();
    w.Key("resources");
    w.StartObject();
    w.Key("devices");
    w.StartArray();
    w.StartObject();
    w.Key("allow");
    w.Bool(true);
    w.Key("access");
    w.String("rwm");
    w.EndObject();
    w.EndArray();
    w.EndObject();
  } else {
    // containerd's defaults; privileged containers get neither.
    w.Key("maskedPaths");
    Strings(w, {"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
                "/sys/firmware", "/sys/devices/virtual/powercap"});
    w.Key("readonlyPaths");
    Strings(w, {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"});
  }
  w.EndObject();
}

// /etc/passwd or /etc/group of the rootfs: name or number -> (id, primary gid).
std::optional<std::pair<uint32_t, uint32_t>> LookUp(const std::string& file,
                                                    const std::string& who) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream s(line);
    std::string part;
    while (std::getline(s, part, ':'))
      f.push_back(part);
    if (f.size() < 3 || (f[0] != who && f[2] != who))
      continue;
    const uint32_t id = static_cast<uint32_t>(std::stoul(f[2]));
    const uint32_t gid =
        f.size() > 3 && !f[3].empty() ? static_cast<uint32_t>(std::stoul(f[3])) : 0;
    return std::make_pair(id, gid);
  }
  return std::nullopt;
}

bool IsNumber(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
}

}  // namespace

std::vector<std::string> MergeArgv(const ImageConfig& image,
                                   const std::optional<std::vector<std::string>>& command,
                                   const std::optional<std::vector<std::string>>& args) {
  std::vector<std::string> argv = command ? *command : image.entrypoint;
  if (args) {
    argv.insert(argv.end(), args->begin(), args->end());
  } else if (!command) {
    argv.insert(argv.end(), image.cmd.begin(), image.cmd.end());
  }
  return argv;
}

std::vector<std::string> MergeEnv(const std::vector<std::string>& image_env,
                                  const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> out = image_env;
  for (const auto& [name, value] : env) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
    if (it == out.end()) {
      out.push_back(name + "=" + value);
    } else {
      *it = name + "=" + value;
    }
  }
  return out;
}

std::vector<std::string> DefaultCapabilities() {
  return {"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",           "CAP_FOWNER",
          "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",           "CAP_SETUID",
          "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
          "CAP_KILL",    "CAP_AUDIT_WRITE"};
}

std::vector<std::string> ApplyCapabilities(std::vector<std::string> base,
                                           const std::vector<std::string>& add,
                                           const std::vector<std::string>& drop,
                                           const std::vector<std::string>& all) {
  auto has_all = [](const std::vector<std::string>& l) {
    return std::any_of(l.begin(), l.end(),
                       [](const std::string& c) { return CapName(c) == "CAP_ALL"; });
  };
  if (has_all(add))
    base = all;
  if (has_all(drop))
    base.clear();
  for (const std::string& c : add) {
    const std::string name = CapName(c);
    if (name != "CAP_ALL" && !Contains(base, name))
      base.push_back(name);
  }
  for (const std::string& c : drop) {
    const std::string name = CapName(c);
    base.erase(std::remove(base.begin(), base.end(), name), base.end());
  }
  return base;
}

std::vector<std::string> CurrentCapabilities() {
  std::ifstream in("/proc/self/status");
  std::string line;
  uint64_t mask = 0;
  while (std::getline(in, line)) {
    if (line.rfind("CapBnd:", 0) == 0)
      mask = std::stoull(line.substr(7), nullptr, 16);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < std::size(kCapabilityNames); ++i) {
    if (mask & (uint64_t{1} << i))
      out.emplace_back(kCapabilityNames[i]);
  }
  return out;
}

Result<UserIds> ResolveUser(const std::string& image_user, std::optional<int64_t> run_as_user,
                            std::optional<int64_t> run_as_group, const std::string& rootfs) {
  UserIds ids;
  const size_t colon = image_user.find(':');
  const std::string user = image_user.substr(0, colon);
  const std::string group = colon == std::string::npos ? "" : image_user.substr(colon + 1);
  const std::string passwd = rootfs + "/etc/passwd";
  if (run_as_user) {
    ids.uid = static_cast<uint32_t>(*run_as_user);
    auto entry = LookUp(passwd, std::to_string(*run_as_user));
    ids.gid = entry ? entry->second : 0;
  } else if (!user.empty()) {
    auto entry = LookUp(passwd, user);
    if (!entry && !IsNumber(user))
      return Status::NotFound(fmt::format(
          "unable to find user {}: no matching entries in passwd file of the image", user));
    ids.uid = entry ? entry->first : static_cast<uint32_t>(std::stoul(user));
    ids.gid = entry ? entry->second : 0;
  }
  if (!group.empty() && !run_as_user) {
    auto entry = LookUp(rootfs + "/etc/group", group);
    if (!entry && !IsNumber(group))
      return Status::NotFound(fmt::format(
          "unable to find group {}: no matching entries in group file of the image", group));
    ids.gid = entry ? entry->first : static_cast<uint32_t>(std::stoul(group));
  }
  if (run_as_group)
    ids.gid = static_cast<uint32_t>(*run_as_group);
  return ids;
}

std::string BuildRuntimeSpec(const SpecInput& in) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  w.Key("ociVersion");
  w.String("1.0.2");
  Process(w, in);
  w.Key("root");
  w.StartObject();
  w.Key("path");
  Str(w, in.rootfs);
  w.Key("readonly");
  w.Bool(in.read_only_root);
  w.EndObject();
  w.Key("hostname");
  Str(w, in.hostname);
  w.Key("mounts");
  w.StartArray();
  DefaultMounts(w, in.privileged);
  for (const SpecMount& m : in.mounts) {
    std::vector<std::string> options = {"rbind", m.read_only ? "ro" : "rw"};
    options.push_back(m.propagation.empty() ? "rprivate" : m.propagation);
    Mount(w, m.destination, "bind", m.source, options);
  }
  w.EndArray();
  Linux(w, in);
  w.EndObject();
  return buf.GetString();
}

std::vector<SpecDevice> HostDevices() {
  std::vector<SpecDevice> out;
  std::error_code ec;
  fs::recursive_directory_iterator it("/dev", ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      // As containerd's HostDevices: not the pseudo-terminals, shm, mqueue or fd.
      if (name == "pts" || name == "shm" || name == "mqueue" || name == "fd" || name == ".udev")
        it.disable_recursion_pending();
      continue;
    }
    struct stat st;
    if (lstat(it->path().c_str(), &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
      continue;
    if (it->path() == "/dev/console")
      continue;
    SpecDevice d;
    d.path = it->path().string();
    d.type = S_ISCHR(st.st_mode) ? 'c' : 'b';
    d.major = major(st.st_rdev);
    d.minor = minor(st.st_rdev);
    d.mode = st.st_mode & 07777;
    out.push_back(d);
  }
  return out;
}

}  // namespace kubesim::oci
