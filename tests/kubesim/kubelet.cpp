#include "kubelet.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

namespace kubesim {

namespace fs = std::filesystem;

namespace kubelet_internal {

std::string Str(const rapidjson::Value* v) {
  return v != nullptr && v->IsString() ? std::string(v->GetString(), v->GetStringLength()) : "";
}

const rapidjson::Value* Member(const rapidjson::Value* v, const char* name) {
  if (v == nullptr || !v->IsObject())
    return nullptr;
  auto it = v->FindMember(name);
  return it == v->MemberEnd() ? nullptr : &it->value;
}

std::string ExpandVars(const std::string& text, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out += text[i];
      continue;
    }
    if (text[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (text[i + 1] == '(') {
      const size_t close = text.find(')', i + 2);
      if (close != std::string::npos) {
        auto it = env.find(text.substr(i + 2, close - i - 2));
        if (it != env.end()) {
          out += it->second;
          i = close;
          continue;
        }
      }
    }
    out += text[i];
  }
  return out;
}

Result<std::string> FieldRef(const rapidjson::Value& pod, const std::string& path,
                             const std::string& pod_ip, const std::string& host_ip) {
  for (const char* plain : {"metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                            "spec.serviceAccountName"}) {
    if (path == plain)
      return GetString(pod, plain);
  }
  if (path == "status.podIP" || path == "status.podIPs")
    return pod_ip;
  if (path == "status.hostIP" || path == "status.hostIPs")
    return host_ip;
  for (const char* map : {"metadata.labels", "metadata.annotations"}) {
    const std::string prefix = std::string(map) + "['";
    if (path.rfind(prefix, 0) == 0 && path.size() > prefix.size() + 2 &&
        path.compare(path.size() - 2, 2, "']") == 0) {
      const std::string key = path.substr(prefix.size(), path.size() - prefix.size() - 2);
      const rapidjson::Value* m = Find(pod, map);
      if (m == nullptr || !m->IsObject())
        return std::string();
      auto it = m->FindMember(key.c_str());
      return it != m->MemberEnd() && it->value.IsString() ? std::string(it->value.GetString())
                                                          : std::string();
    }
  }
  return Status::InvalidArgument(fmt::format(
      "fieldRef \"{}\" is not supported: use metadata.name, metadata.namespace, metadata.uid, "
      "metadata.labels['KEY'], metadata.annotations['KEY'], spec.nodeName, "
      "spec.serviceAccountName, status.podIP or status.hostIP",
      path));
}

ExitInfo DescribeExit(int wait_status, bool killed_by_kubelet) {
  ExitInfo info;
  if (WIFEXITED(wait_status)) {
    info.exit_code = WEXITSTATUS(wait_status);
    info.reason = info.exit_code == 0 ? "Completed" : "Error";
  } else if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    info.exit_code = 128 + sig;
    info.reason = sig == SIGKILL && !killed_by_kubelet ? "OOMKilled" : "Error";
  } else {
    info.exit_code = 255;
    info.reason = "Error";
  }
  return info;
}

std::string LogTail(const std::string& path) {
  constexpr size_t kMaxBytes = 2048;
  constexpr size_t kMaxLines = 80;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(kMaxBytes)
                                   ? size - static_cast<std::streamoff>(kMaxBytes)
                                   : 0;
  in.seekg(start);
  std::string tail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t lines = 0;
  for (size_t i = tail.size(); i > 0; --i) {
    if (tail[i - 1] == '\n' && i != tail.size() && ++lines == kMaxLines)
      return tail.substr(i);
  }
  return tail;
}

void SetStatusMember(rapidjson::Document& doc, const char* key, rapidjson::Value value) {
  auto& a = doc.GetAllocator();
  if (!doc.HasMember("status") || !doc["status"].IsObject()) {
    doc.RemoveMember("status");
    doc.AddMember("status", rapidjson::Value(rapidjson::kObjectType), a);
  }
  rapidjson::Value& st = doc["status"];
  if (st.HasMember(key))
    st.RemoveMember(key);
  st.AddMember(rapidjson::StringRef(key), value, a);
}

void SetPodStatusBasics(rapidjson::Document& doc, const std::string& phase,
                        const std::string& host_ip, const std::string& pod_ip,
                        const std::string& start_time) {
  auto& a = doc.GetAllocator();
  auto str = [&](const std::string& v) {
    return rapidjson::Value(v.c_str(), static_cast<rapidjson::SizeType>(v.size()), a);
  };
  auto ips = [&](const std::string& ip) {
    rapidjson::Value list(rapidjson::kArrayType);
    rapidjson::Value entry(rapidjson::kObjectType);
    entry.AddMember("ip", str(ip), a);
    list.PushBack(entry, a);
    return list;
  };
  SetStatusMember(doc, "phase", str(phase));
  SetStatusMember(doc, "hostIP", str(host_ip));
  SetStatusMember(doc, "hostIPs", ips(host_ip));
  if (!pod_ip.empty()) {
    SetStatusMember(doc, "podIP", str(pod_ip));
    SetStatusMember(doc, "podIPs", ips(pod_ip));
  }
  if (!doc["status"].HasMember("startTime"))
    SetStatusMember(doc, "startTime", str(start_time));
}

Result<std::string> DecodeBase64(const std::string& text) {
  std::string out(text.size() / 4 * 3 + 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0)
    return Status::InvalidArgument("secret data is not base64");
  size_t len = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding as zero bytes.
  if (!text.empty() && text.back() == '=')
    --len;
  if (text.size() > 1 && text[text.size() - 2] == '=')
    --len;
  out.resize(len);
  return out;
}

}  // namespace kubelet_internal

namespace {

using kubelet_internal::DecodeBase64;
using kubelet_internal::ExitInfo;

const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

using kubelet_internal::Member;
using kubelet_internal::Str;

bool IsTerminating(const rapidjson::Value& pod) {
  const rapidjson::Value* ts = Find(pod, "metadata.deletionTimestamp");
  return ts != nullptr && ts->IsString();
}

std::string Annotation(const rapidjson::Value& object, const char* key) {
  return Str(Member(Find(object, "metadata.annotations"), key));
}
bool HasAnnotation(const rapidjson::Value& object, const char* key) {
  return Member(Find(object, "metadata.annotations"), key) != nullptr;
}

uint64_t NetnsInode(const std::string& proc_path) {
  struct stat st;
  return stat(proc_path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

rapidjson::Value S(const std::string& s, rapidjson::Document::AllocatorType& a) {
  return rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

}  // namespace

rapidjson::Value kubelet_internal::WaitingJson(const std::string& reason,
                                               const std::string& message,
                                               rapidjson::Document::AllocatorType& a) {
  rapidjson::Value w(rapidjson::kObjectType);
  w.AddMember("reason", S(reason, a), a);
  if (!message.empty())
    w.AddMember("message", S(message, a), a);
  return w;
}

namespace {

// The host mode's one container as ReportStatus and ReportPullFailure write it.
struct HostContainer {
  std::string name, image;
  pid_t pid = 0;
  bool running = false, exited = false;
  int exit_code = 0;
  std::string reason, message, started_at, finished_at;  // a terminated container
  std::string waiting_reason = "ContainerCreating", waiting_message;
};

rapidjson::Value HostContainerState(const HostContainer& c, rapidjson::Document::AllocatorType& a) {
  rapidjson::Value state(rapidjson::kObjectType);
  if (c.running) {
    rapidjson::Value r(rapidjson::kObjectType);
    r.AddMember("startedAt", S(c.started_at, a), a);
    state.AddMember("running", r, a);
  } else if (c.exited) {
    rapidjson::Value t(rapidjson::kObjectType);
    t.AddMember("exitCode", c.exit_code, a);
    t.AddMember("reason", S(c.reason, a), a);
    if (!c.message.empty())
      t.AddMember("message", S(c.message, a), a);
    t.AddMember("startedAt", S(c.started_at, a), a);
    t.AddMember("finishedAt", S(c.finished_at, a), a);
    if (c.pid > 0)
      t.AddMember("containerID", S(fmt::format("kubesim://{}", c.pid), a), a);
    state.AddMember("terminated", t, a);
  } else {
    state.AddMember("waiting",
                    kubelet_internal::WaitingJson(c.waiting_reason, c.waiting_message, a), a);
  }
  return state;
}

// status.containerStatuses and the Initialized, ContainersReady and Ready conditions
// that follow from the one container.
void SetHostContainerStatus(rapidjson::Document& doc, const HostContainer& c,
                            const std::string& now) {
  auto& a = doc.GetAllocator();
  rapidjson::Value cs(rapidjson::kObjectType);
  cs.AddMember("name", S(c.name, a), a);
  cs.AddMember("image", S(c.image, a), a);
  cs.AddMember("imageID", S("", a), a);
  if (c.pid > 0)
    cs.AddMember("containerID", S(fmt::format("kubesim://{}", c.pid), a), a);
  cs.AddMember("ready", c.running, a);
  cs.AddMember("started", c.running, a);
  cs.AddMember("restartCount", 0, a);
  cs.AddMember("state", HostContainerState(c, a), a);
  rapidjson::Value statuses(rapidjson::kArrayType);
  statuses.PushBack(cs, a);
  kubelet_internal::SetStatusMember(doc, "containerStatuses", std::move(statuses));
  SetCondition(doc, "Initialized", "True", "", "", now);
  if (c.running) {
    SetCondition(doc, "ContainersReady", "True", "", "", now);
    SetCondition(doc, "Ready", "True", "", "", now);
  } else if (c.exited) {
    SetCondition(doc, "ContainersReady", "False", "PodCompleted", "", now);
    SetCondition(doc, "Ready", "False", "PodCompleted", "", now);
  } else {
    const std::string not_ready = fmt::format("containers with unready status: [{}]", c.name);
    SetCondition(doc, "ContainersReady", "False", "ContainersNotReady", not_ready, now);
    SetCondition(doc, "Ready", "False", "ContainersNotReady", not_ready, now);
  }
}

// The signals of the whole process group of a pod (its session leader is the pid).
void SignalGroup(pid_t pid, int sig) {
  if (pid <= 0)
    return;
  if (kill(-pid, sig) != 0)
    (void)kill(pid, sig);
}

// SIGKILLs every process whose network namespace is `inode`, so the namespace (and the
// veth in it) goes away with the pod, as it would with a container's PID namespace.
void KillNetnsMembers(uint64_t inode, uint64_t host_inode) {
  if (inode == 0 || inode == host_inode)
    return;
  for (int round = 0; round < 50; ++round) {
    bool found = false;
    DIR* proc = opendir("/proc");
    if (proc == nullptr)
      return;
    while (dirent* e = readdir(proc)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid == getpid())
        continue;
      if (NetnsInode(fmt::format("/proc/{}/ns/net", pid)) == inode) {
        found = true;
        (void)kill(pid, SIGKILL);
      }
    }
    closedir(proc);
    if (!found)
      return;
    usleep(20 * 1000);
  }
}

}  // namespace

Kubelet::Kubelet(Store& store, k8sbridge::Logger& log, KubeletOptions options)
    : store_(store), log_(log), options_(std::move(options)) {
  Result<PodNetwork> net = ParsePodNetwork(options_.pod_network);
  if (net.ok()) {
    network_ = *net;
  } else {
    options_status_ = net.status();
    network_ = *ParsePodNetwork("10.232.0.0/24");
  }
  ips_.emplace(network_);
}

Kubelet::~Kubelet() {
  Stop();
}

Status Kubelet::Start() {
  if (!options_status_.ok())
    return options_status_;
  if (Status s = CheckInterfaceName(options_.bridge); !s.ok())
    return s;
  podrun_path_ = options_.podrun_path;
  if (podrun_path_.empty()) {
    std::error_code ec;
    podrun_path_ = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "kubesim-podrun");
  }
  if (access(podrun_path_.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(fmt::format(
        "kubelet: pod runner {} is not executable: build the kubesim-podrun target or pass "
        "its path",
        podrun_path_));
  }
  host_netns_inode_ = NetnsInode("/proc/self/ns/net");
  if (InterfaceExists(options_.bridge)) {
    // Another stand-in may own it; Stop() would delete it under that one.
    return Status::AlreadyExists(fmt::format(
        "kubelet: bridge {} already exists: another kubesim uses it (pick another --bridge "
        "and --pod-network) or a crashed one left it (ip link del {})",
        options_.bridge, options_.bridge));
  }
  if (!options_.image_store.empty()) {
    if (Status s = StartOci(); !s.ok())
      return s;
  }
  if (Status s = EnsureBridge(options_.bridge, network_); !s.ok()) {
    (void)DeleteBridge(options_.bridge);
    return s.WithContext(
        fmt::format("kubelet: bridge {} for {}", options_.bridge, options_.pod_network));
  }
  for (const std::string& node : options_.nodes) {
    store_.RegisterKubelet(node);
    Heartbeat(node);
  }
  started_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
  log_.Info("kubelet: running nodes [{}] on bridge {} ({})", fmt::join(options_.nodes, ", "),
            options_.bridge, options_.pod_network);
  return Status::Ok();
}

void Kubelet::Stop() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();  // the loop stops the pods itself before it ends
  std::lock_guard lock(mu_);
  StopAllPodsLocked();
}

void Kubelet::StopAllPodsLocked() {
  if (!started_)
    return;
  started_ = false;
  if (OciMode())
    StopOciPods();  // the containers first, gracefully; then their sandboxes below
  for (auto& [uid, rp] : pods_) {
    if (rp.state != RunningPod::State::kExited && rp.pid > 0)
      SignalGroup(rp.pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& [uid, rp] : pods_) {
    while (rp.pid > 0 && rp.state != RunningPod::State::kExited &&
           std::chrono::steady_clock::now() < deadline) {
      int ws = 0;
      if (waitpid(rp.pid, &ws, WNOHANG) == rp.pid) {
        rp.state = RunningPod::State::kExited;
        break;
      }
      usleep(20 * 1000);
    }
    KillEverything(rp);
    ReleaseNetwork(rp);
    RemovePodDir(uid);
  }
  pods_.clear();
  if (OciMode())
    CleanOciLeftovers();
  for (const std::string& node : options_.nodes)
    store_.UnregisterKubelet(node);
  std::error_code ec;
  fs::remove_all(fs::path(options_.state_dir) / options_.bridge, ec);
  if (Status s = DeleteBridge(options_.bridge); !s.ok())
    log_.Warning("kubelet: {}", s.ToString());
}

void Kubelet::Loop() {
  std::unique_ptr<Watcher> watcher;
  while (!stop_) {
    Tick();
    // Wake on a change to pods or nodes, or after the poll interval (to see exits).
    WaitForPodOrNodeChange(store_, watcher, std::chrono::steady_clock::now() + options_.poll,
                           stop_);
  }
  // Pods were forked from this thread with PR_SET_PDEATHSIG: stop them gracefully before
  // the thread ends and the kernel SIGKILLs them.
  std::lock_guard lock(mu_);
  StopAllPodsLocked();
}

void Kubelet::Tick() {
  std::lock_guard lock(mu_);
  TickLocked();
}

void Kubelet::TickLocked() {
  const std::set<std::string> mine(options_.nodes.begin(), options_.nodes.end());

  // Node-level faults requested through the annotation.
  std::set<std::string> pulls_fail;
  for (const ObjectPtr& node : store_.List("nodes", "").items) {
    const std::string name = GetString(*node, "metadata.name");
    if (mine.count(name) == 0)
      continue;
    if (Annotation(*node, kFaultAnnotation) == "ImagePullError")
      pulls_fail.insert(name);
    const bool want_not_ready = Annotation(*node, kFaultAnnotation) == "NotReady";
    if (want_not_ready && NodeReady(name))
      (void)SetNodeNotReadyLocked(name);
    if (!want_not_ready && !NodeReady(name))
      (void)SetNodeReadyLocked(name);
  }
  const auto now = std::chrono::steady_clock::now();
  for (const std::string& node : options_.nodes) {
    if (NodeReady(node) && now - last_heartbeat_[node] >= options_.heartbeat)
      Heartbeat(node);
  }

  ListResult pods = store_.List("pods", "", [&](const rapidjson::Value& p) {
    return mine.count(GetString(p, "spec.nodeName")) != 0;
  });
  std::set<std::string> present;
  for (const ObjectPtr& pod : pods.items) {
    const std::string uid = GetString(*pod, "metadata.uid");
    const std::string node = GetString(*pod, "spec.nodeName");
    const std::string ns = GetString(*pod, "metadata.namespace");
    const std::string name = GetString(*pod, "metadata.name");
    present.insert(uid);
    if (!NodeReady(node))
      continue;  // a partitioned kubelet sees nothing
    auto it = pods_.find(uid);
    if (HasAnnotation(*pod, kEvictAnnotation) && evicting_.insert(uid).second) {
      std::optional<int64_t> grace;
      const std::string value = Annotation(*pod, kEvictAnnotation);
      if (!value.empty())
        grace = std::atoll(value.c_str());
      if (Status s = EvictPod(ns, name, grace); !s.ok())
        log_.Warning("kubelet: {}", s.ToString());
    }
    if (it == pods_.end()) {
      const std::string phase = GetString(*pod, "status.phase");
      if (IsTerminating(*pod)) {
        // Never started here (or a kubesim restart): nothing to stop.
        (void)store_.FinalizePodDeletion(ns, name, uid);
        pull_failing_.erase(uid);
        continue;
      }
      if (phase == "Succeeded" || phase == "Failed")
        continue;
      if (pulls_fail.count(node) != 0) {
        ReportPullFailure(*pod);
        continue;
      }
      pull_failing_.erase(uid);
      StartPod(*pod);
      continue;
    }
    RunningPod& rp = it->second;
    if (IsTerminating(*pod) && !rp.term_sent) {
      const rapidjson::Value* g = Find(*pod, "metadata.deletionGracePeriodSeconds");
      BeginTermination(rp, g != nullptr && g->IsInt64() ? g->GetInt64() : 30);
    }
  }

  for (auto it = pods_.begin(); it != pods_.end();) {
    RunningPod& rp = it->second;
    if (!NodeReady(rp.node)) {
      ++it;
      continue;
    }
    if (present.count(rp.uid) == 0 && !rp.object_gone) {
      rp.object_gone = true;  // removed without waiting for us (grace 0, force)
      if (rp.state != RunningPod::State::kExited)
        ForceKill(rp);
    }
    PollPod(rp);
    if (rp.term_sent && !rp.kill_sent && rp.state != RunningPod::State::kExited &&
        std::chrono::steady_clock::now() >= rp.kill_at) {
      log_.Info("kubelet: {}/{} outlived its grace period: SIGKILL", rp.ns, rp.name);
      ForceKill(rp);
    }
    if (rp.state == RunningPod::State::kExited && (rp.term_sent || rp.object_gone)) {
      // The pod's mounts and directory go before its object: the kubelet's status
      // manager deletes a pod only once podResourcesAreReclaimed (volumes unmounted),
      // so whoever saw the object go finds them gone too (idempotent on a retry).
      RemovePodDir(rp.uid);
      if (!rp.object_gone) {
        Status s = store_.FinalizePodDeletion(rp.ns, rp.name, rp.uid);
        if (!s.ok() && s.code() != Status::Code::kNotFound) {
          log_.Warning("kubelet: finalizing {}/{}: {}", rp.ns, rp.name, s.ToString());
          ++it;
          continue;
        }
        log_.Info("kubelet: {}/{} deleted", rp.ns, rp.name);
      }
      evicting_.erase(rp.uid);
      it = pods_.erase(it);
      continue;
    }
    if (!rp.object_gone)
      ReportStatus(rp);
    ++it;
  }
}

void Kubelet::ForceKill(RunningPod& rp) {
  rp.kill_sent = true;
  if (OciMode()) {
    SignalOciContainers(rp, true);  // the sandbox goes once they are gone (PollOciPod)
    return;
  }
  SignalGroup(rp.pid, SIGKILL);
}

void Kubelet::RemovePodDir(const std::string& uid) {
  if (OciMode()) {
    // Nothing may still be mounted there (container roots): remove_all would descend.
    for (const std::string& m : oci::MountsUnder(PodDir(uid)))
      (void)umount2(m.c_str(), MNT_DETACH);
  }
  std::error_code ec;
  fs::remove_all(PodDir(uid), ec);
}

std::string Kubelet::PodDir(const std::string& uid) const {
  return (fs::path(options_.state_dir) / options_.bridge / "pods" / uid).string();
}

std::string Kubelet::HostIP(const std::string& node) const {
  Result<ObjectPtr> n = store_.Get("nodes", "", node);
  if (n.ok()) {
    const rapidjson::Value* addrs = Find(**n, "status.addresses");
    if (addrs != nullptr && addrs->IsArray()) {
      for (const auto& a : addrs->GetArray()) {
        if (Str(Member(&a, "type")) == "InternalIP")
          return Str(Member(&a, "address"));
      }
    }
  }
  return FormatIPv4(network_.Gateway());
}

void Kubelet::StartPod(const rapidjson::Value& pod) {
  RunningPod rp;
  rp.ns = GetString(pod, "metadata.namespace");
  rp.name = GetString(pod, "metadata.name");
  rp.uid = GetString(pod, "metadata.uid");
  rp.node = GetString(pod, "spec.nodeName");
  rp.started_at = store_.NowTimestamp();
  const rapidjson::Value* containers = Find(pod, "spec.containers");
  if (containers == nullptr || !containers->IsArray() || containers->Empty()) {
    RunningPod& stored = pods_[rp.uid] = rp;
    FailStart(stored, "CreateContainerConfigError", "the pod has no containers");
    return;
  }
  const rapidjson::Value& c = (*containers)[0];
  rp.container = Str(Member(&c, "name"));
  rp.image = Str(Member(&c, "image"));
  rp.fallback_to_logs = Str(Member(&c, "terminationMessagePolicy")) == "FallbackToLogsOnError";
  RunningPod& p = pods_[rp.uid] = rp;

  if (HasAnnotation(pod, kFailStartAnnotation)) {
    FailStart(p, "StartError", Annotation(pod, kFailStartAnnotation));
    return;
  }
  std::optional<uint32_t> ip = ips_->Allocate();
  if (!ip) {
    FailStart(p, "StartError",
              fmt::format("no free address left in pod network {}", options_.pod_network));
    return;
  }
  p.ip = *ip;
  p.veth = fmt::format("ksv{:08x}", p.ip);  // addresses, so names, differ between stand-ins
  const std::string pod_ip = FormatIPv4(p.ip);
  const std::string host_ip = HostIP(p.node);
  std::string hostname = GetString(pod, "spec.hostname");
  if (hostname.empty())
    hostname = p.name.substr(0, 63);
  if (OciMode()) {
    p.hostname = hostname;
    StartOciPod(p, pod, pod_ip);
    return;
  }

  EnvList env_list = {{"PATH", kDefaultPath}, {"HOSTNAME", hostname}, {"HOME", "/root"}};
  if (Status st = ContainerEnv(pod, c, pod_ip, host_ip, env_list); !st.ok()) {
    FailStart(p, "CreateContainerConfigError", st.message());
    return;
  }
  const std::map<std::string, std::string> env(env_list.begin(), env_list.end());

  // Command and args, with $(VAR) references expanded.
  std::vector<std::string> command;
  for (const char* field : {"command", "args"}) {
    if (const rapidjson::Value* l = Member(&c, field); l != nullptr && l->IsArray()) {
      for (const auto& a : l->GetArray()) {
        command.push_back(kubelet_internal::ExpandVars(Str(&a), env));
      }
    }
  }
  if (const rapidjson::Value* l = Member(&c, "command");
      l == nullptr || !l->IsArray() || l->Empty()) {
    FailStart(p, "CreateContainerConfigError",
              fmt::format("container \"{}\" has no command: kubesim does not pull image {} and "
                          "cannot run its entrypoint; give the container a command",
                          p.container, p.image));
    return;
  }

  // Volumes: bind mounts prepared here, made by kubesim-podrun in the pod's namespace.
  std::vector<std::string> binds;
  const std::string pod_dir = PodDir(p.uid);
  std::vector<oci::SpecMount> mounts;
  if (Status st = VolumeMounts(pod, c, pod_dir, mounts); !st.ok()) {
    FailStart(p, "CreateContainerConfigError", st.message());
    return;
  }
  for (const oci::SpecMount& m : mounts)
    binds.insert(binds.end(), {"--bind", m.source, m.destination, m.read_only ? "ro" : "rw"});

  // Container output goes to a log file (kubectl logs is not served).
  std::error_code ec;
  fs::create_directories(pod_dir, ec);
  // The pod's resolv.conf (kubelet_dns.cpp); a volume mounted at /etc/resolv.conf wins.
  if (kubelet_internal::WriteResolvConf(store_, options_, pod, p.node, pod_dir + "/resolv.conf")
          .ok())
    binds.insert(binds.begin(), {"--bind", pod_dir + "/resolv.conf", "/etc/resolv.conf", "ro"});
  const std::string log_path = pod_dir + "/" + p.container + ".log";
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int status_pipe[2];
  if (log_fd < 0 || null_fd < 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
    if (log_fd >= 0)
      close(log_fd);
    if (null_fd >= 0)
      close(null_fd);
    FailStart(p, "StartError", fmt::format("preparing {}: {}", log_path, std::strerror(errno)));
    return;
  }

  std::vector<std::string> args = {podrun_path_,
                                   "--status-fd",
                                   "3",
                                   "--hostname",
                                   hostname,
                                   "--bridge",
                                   options_.bridge,
                                   "--veth",
                                   p.veth,
                                   "--address",
                                   fmt::format("{}/{}", pod_ip, network_.prefix),
                                   "--gateway",
                                   FormatIPv4(network_.Gateway())};
  if (const rapidjson::Value* wd = Member(&c, "workingDir"); wd != nullptr && wd->IsString()) {
    args.insert(args.end(), {"--workdir", wd->GetString()});
  }
  args.insert(args.end(), binds.begin(), binds.end());
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  const pid_t pid = Spawn(args, env_list, log_fd, status_pipe[1]);
  close(log_fd);
  close(null_fd);
  close(status_pipe[1]);
  if (pid < 0) {
    close(status_pipe[0]);
    FailStart(p, "StartError", fmt::format("fork: {}", std::strerror(errno)));
    return;
  }
  (void)fcntl(status_pipe[0], F_SETFL, O_NONBLOCK);
  p.pid = pid;
  p.status_fd = status_pipe[0];
  log_.Info("kubelet: starting {}/{} on {} as pid {} with IP {}", p.ns, p.name, p.node, pid,
            pod_ip);
  ReportStatus(p);
}

Status Kubelet::ContainerEnv(const rapidjson::Value& pod, const rapidjson::Value& c,
                             const std::string& pod_ip, const std::string& host_ip,
                             EnvList& env_list) {
  // Environment, in order, each value expanded against the ones before it.
  const std::string ns = GetString(pod, "metadata.namespace");
  std::map<std::string, std::string> env(env_list.begin(), env_list.end());
  auto set_env = [&](const std::string& k, const std::string& v) {
    auto it = std::find_if(env_list.begin(), env_list.end(),
                           [&](const auto& kv) { return kv.first == k; });
    if (it == env_list.end()) {
      env_list.emplace_back(k, v);
    } else {
      it->second = v;
    }
    env[k] = v;
  };
  if (!options_.service_host.empty()) {
    set_env("KUBERNETES_SERVICE_HOST", options_.service_host);
    set_env("KUBERNETES_SERVICE_PORT", options_.service_port);
  }
  auto config_value = [&](const char* resource, const rapidjson::Value& ref,
                          bool base64) -> Result<std::string> {
    const std::string obj_name = Str(Member(&ref, "name"));
    const std::string key = Str(Member(&ref, "key"));
    Result<ObjectPtr> obj = store_.Get(resource, ns, obj_name);
    if (!obj.ok())
      return obj.status();
    const rapidjson::Value* v = Member(Member(obj->get(), "data"), key.c_str());
    if (v == nullptr || !v->IsString()) {
      return Status::NotFound(
          fmt::format("couldn't find key {} in {} {}/{}", key,
                      resource == std::string("secrets") ? "Secret" : "ConfigMap", ns, obj_name));
    }
    return base64 ? DecodeBase64(v->GetString()) : Result<std::string>(v->GetString());
  };
  if (const rapidjson::Value* list = Member(&c, "envFrom"); list != nullptr && list->IsArray()) {
    for (const auto& from : list->GetArray()) {
      const std::string prefix = Str(Member(&from, "prefix"));
      for (auto [field, resource, b64] : {std::tuple{"configMapRef", "configmaps", false},
                                          std::tuple{"secretRef", "secrets", true}}) {
        const rapidjson::Value* ref = Member(&from, field);
        if (ref == nullptr)
          continue;
        Result<ObjectPtr> obj = store_.Get(resource, ns, Str(Member(ref, "name")));
        if (!obj.ok())
          return obj.status();
        const rapidjson::Value* data = Member(obj->get(), "data");
        if (data == nullptr || !data->IsObject())
          continue;
        for (const auto& m : data->GetObject()) {
          if (!m.value.IsString())
            continue;
          std::string v = m.value.GetString();
          if (b64) {
            Result<std::string> d = DecodeBase64(v);
            if (d.ok())
              v = *d;
          }
          set_env(prefix + m.name.GetString(), v);
        }
      }
    }
  }
  if (const rapidjson::Value* list = Member(&c, "env"); list != nullptr && list->IsArray()) {
    for (const auto& e : list->GetArray()) {
      const std::string name = Str(Member(&e, "name"));
      const rapidjson::Value* from = Member(&e, "valueFrom");
      if (from == nullptr) {
        set_env(name, kubelet_internal::ExpandVars(Str(Member(&e, "value")), env));
        continue;
      }
      Result<std::string> v = Status::InvalidArgument(fmt::format(
          "env {}: valueFrom supports fieldRef, configMapKeyRef and secretKeyRef", name));
      if (const rapidjson::Value* f = Member(from, "fieldRef")) {
        v = kubelet_internal::FieldRef(pod, Str(Member(f, "fieldPath")), pod_ip, host_ip);
      } else if (const rapidjson::Value* f = Member(from, "configMapKeyRef")) {
        v = config_value("configmaps", *f, false);
      } else if (const rapidjson::Value* f = Member(from, "secretKeyRef")) {
        v = config_value("secrets", *f, true);
      }
      if (!v.ok())
        return v.status();
      set_env(name, *v);
    }
  }

  return Status::Ok();
}

Status Kubelet::VolumeMounts(const rapidjson::Value& pod, const rapidjson::Value& c,
                             const std::string& pod_dir, std::vector<oci::SpecMount>& mounts) {
  const std::string ns = GetString(pod, "metadata.namespace");
  if (const rapidjson::Value* list = Member(&c, "volumeMounts");
      list != nullptr && list->IsArray()) {
    for (const auto& m : list->GetArray()) {
      const std::string vol_name = Str(Member(&m, "name"));
      const rapidjson::Value* volume = nullptr;
      if (const rapidjson::Value* vols = Find(pod, "spec.volumes"); vols && vols->IsArray()) {
        for (const auto& v : vols->GetArray()) {
          if (Str(Member(&v, "name")) == vol_name)
            volume = &v;
        }
      }
      if (volume == nullptr) {
        return Status::InvalidArgument(
            fmt::format("volumeMount \"{}\" names no volume of the pod", vol_name));
      }
      const fs::path vol_dir = fs::path(pod_dir) / "volumes" / vol_name;
      Result<std::string> prepared = PrepareVolume(pod, *volume, vol_dir.string());
      if (!prepared.ok()) {
        // The kubelet's FailedMount: the container waits (ContainerCreating).
        return Status::Unavailable(fmt::format("MountVolume.SetUp failed for volume \"{}\" : {}",
                                               vol_name, prepared.status().message()));
      }
      std::string source = *prepared;
      std::error_code ec;
      const std::string sub = Str(Member(&m, "subPath"));
      if (!sub.empty()) {
        if (sub[0] == '/' || sub.find("..") != std::string::npos) {
          return Status::InvalidArgument(
              fmt::format("volumeMount \"{}\": subPath \"{}\" must be a relative path "
                          "without \"..\"",
                          vol_name, sub));
        }
        source = (fs::path(source) / sub).string();
        if (!fs::exists(source, ec))
          fs::create_directories(source, ec);  // the kubelet makes a missing subPath
      }
      const rapidjson::Value* ro = Member(&m, "readOnly");
      const rapidjson::Value* pvc = Member(volume, "persistentVolumeClaim");
      oci::SpecMount mount;
      mount.source = source;
      mount.destination = Str(Member(&m, "mountPath"));
      mount.read_only = (ro != nullptr && ro->IsBool() && ro->GetBool()) ||
                        (pvc != nullptr && Member(pvc, "readOnly") != nullptr &&
                         Member(pvc, "readOnly")->IsBool() && Member(pvc, "readOnly")->GetBool());
      const std::string propagation = Str(Member(&m, "mountPropagation"));
      mount.propagation = propagation == "Bidirectional"     ? "rshared"
                          : propagation == "HostToContainer" ? "rslave"
                                                             : "";
      mounts.push_back(mount);
    }
  }

  return Status::Ok();
}

pid_t Kubelet::Spawn(std::vector<std::string> args, const EnvList& env, int out_fd, int status_fd) {
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: kubesim is multi-threaded.
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    if (status_fd >= 0)
      dup2(status_fd, 3);
    close_range(status_fd >= 0 ? 4 : 3, ~0U, 0);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (null_fd >= 0)
    close(null_fd);
  return pid;
}

void Kubelet::ReportPullFailure(const rapidjson::Value& pod) {
  const std::string uid = GetString(pod, "metadata.uid");
  const auto now = std::chrono::steady_clock::now();
  auto [it, first] = pull_failing_.emplace(uid, now);
  // As OCI mode (kubelet_oci.cpp): ErrImagePull for about a kubelet sync, then
  // ImagePullBackOff while pulls keep failing.
  const bool backoff = now - it->second >= std::chrono::seconds(1);
  const rapidjson::Value* containers = Find(pod, "spec.containers");
  const rapidjson::Value* first_container =
      containers != nullptr && containers->IsArray() && !containers->Empty() ? &(*containers)[0]
                                                                             : nullptr;
  const std::string container = Str(Member(first_container, "name"));
  const std::string image = Str(Member(first_container, "image"));
  const std::string reason = backoff ? "ImagePullBackOff" : "ErrImagePull";
  const std::string message =
      backoff ? fmt::format("Back-off pulling image \"{}\"", image)
              : fmt::format(
                    "rpc error: code = Unknown desc = failed to pull and unpack image "
                    "\"{}\": failed to resolve reference \"{}\": dial tcp: i/o timeout",
                    image, image);
  const std::string ns = GetString(pod, "metadata.namespace");
  const std::string name = GetString(pod, "metadata.name");
  if (first) {
    log_.Warning("kubelet: {}/{} container {}: ErrImagePull (node fault ImagePullError)", ns, name,
                 container);
  }
  const std::string stamp = store_.NowTimestamp();
  const std::string host_ip = HostIP(GetString(pod, "spec.nodeName"));  // not under Mutate
  (void)store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
    if (GetString(doc, "metadata.uid") != uid)
      return Status::Conflict("another pod");
    const rapidjson::Value* reported = Find(doc, "status.containerStatuses");
    if (reported != nullptr && reported->IsArray() && !reported->Empty() &&
        GetString((*reported)[0], "state.waiting.reason") == reason)
      return Status::AlreadyExists("reported");  // nothing new: no write
    kubelet_internal::SetPodStatusBasics(doc, "Pending", host_ip, "", "");
    HostContainer c;
    c.name = container;
    c.image = image;
    c.waiting_reason = reason;
    c.waiting_message = message;
    SetHostContainerStatus(doc, c, stamp);
    return Status::Ok();
  });
}

void Kubelet::FailStart(RunningPod& rp, const std::string& reason, const std::string& message) {
  log_.Warning("kubelet: {}/{} failed to start: {}: {}", rp.ns, rp.name, reason, message);
  rp.state = RunningPod::State::kExited;
  rp.exit_code = 128;
  rp.reason = reason;
  rp.message = message;
  rp.finished_at = store_.NowTimestamp();
  ReleaseNetwork(rp);
  ReportStatus(rp);
}

void Kubelet::PollPod(RunningPod& rp) {
  if (rp.status_fd >= 0) {
    char buf[1024];
    for (;;) {
      const ssize_t n = read(rp.status_fd, buf, sizeof(buf));
      if (n > 0) {
        rp.status_text.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        break;
      // EOF: the runner exec'd the command (close-on-exec) or failed and said why.
      close(rp.status_fd);
      rp.status_fd = -1;
      if (rp.status_text.empty()) {
        if (uint64_t inode = NetnsInode(fmt::format("/proc/{}/ns/net", rp.pid)); inode != 0)
          rp.netns_inode = inode;
        if (rp.state == RunningPod::State::kStarting)
          rp.state = RunningPod::State::kRunning;
      }
      break;
    }
  }
  if (OciMode()) {
    PollOciPod(rp);
    return;
  }
  if (rp.state == RunningPod::State::kExited || rp.pid <= 0)
    return;
  // Learn the pod's network namespace as early as possible: a container that
  // exits at once is a zombie by the next poll, and what it left running in the
  // namespace (a daemon it started) could no longer be found.
  if (rp.netns_inode == 0) {
    const uint64_t inode = NetnsInode(fmt::format("/proc/{}/ns/net", rp.pid));
    if (inode != 0 && inode != host_netns_inode_)
      rp.netns_inode = inode;
  }
  int ws = 0;
  const pid_t r = waitpid(rp.pid, &ws, WNOHANG);
  if (r != rp.pid)
    return;
  if (rp.status_fd >= 0) {  // drain what the runner wrote before exiting
    char buf[1024];
    ssize_t n;
    while ((n = read(rp.status_fd, buf, sizeof(buf))) > 0) {
      rp.status_text.append(buf, static_cast<size_t>(n));
    }
    close(rp.status_fd);
    rp.status_fd = -1;
  }
  rp.finished_at = store_.NowTimestamp();
  if (!rp.status_text.empty()) {
    // "<reason>\t<message>\n" from kubesim-podrun: the container never started.
    std::string line = rp.status_text.substr(0, rp.status_text.find('\n'));
    const size_t tab = line.find('\t');
    rp.reason = tab == std::string::npos ? "StartError" : line.substr(0, tab);
    rp.message = tab == std::string::npos ? line : line.substr(tab + 1);
    rp.exit_code = 128;
    log_.Warning("kubelet: {}/{} failed to start: {}: {}", rp.ns, rp.name, rp.reason, rp.message);
  } else {
    ExitInfo info = kubelet_internal::DescribeExit(ws, rp.kill_sent);
    rp.exit_code = info.exit_code;
    rp.reason = info.reason;
    // There is no terminationMessagePath file here (the pod shares the host's
    // /dev); FallbackToLogsOnError takes the log's tail, as the kubelet does.
    if (rp.fallback_to_logs && rp.exit_code != 0)
      rp.message = kubelet_internal::LogTail(PodDir(rp.uid) + "/" + rp.container + ".log");
    log_.Info("kubelet: {}/{} exited with code {} ({})", rp.ns, rp.name, rp.exit_code, rp.reason);
  }
  rp.state = RunningPod::State::kExited;
  KillEverything(rp);
  ReleaseNetwork(rp);
}

void Kubelet::BeginTermination(RunningPod& rp, int64_t grace_seconds) {
  rp.term_sent = true;
  rp.kill_at =
      std::chrono::steady_clock::now() + std::chrono::seconds(std::max<int64_t>(0, grace_seconds));
  if (rp.state == RunningPod::State::kExited || rp.pid <= 0)
    return;
  log_.Info("kubelet: stopping {}/{} (grace {} s)", rp.ns, rp.name, grace_seconds);
  if (OciMode()) {
    rp.kill_sent = grace_seconds <= 0;
    SignalOciContainers(rp, grace_seconds <= 0);
    return;
  }
  if (grace_seconds <= 0) {
    rp.kill_sent = true;
    SignalGroup(rp.pid, SIGKILL);
  } else {
    SignalGroup(rp.pid, SIGTERM);
  }
}

void Kubelet::KillEverything(RunningPod& rp) {
  for (OciContainer& c : rp.oci)
    CleanOciContainer(c);
  if (rp.pid > 0) {
    SignalGroup(rp.pid, SIGKILL);
    if (rp.state != RunningPod::State::kExited) {
      int ws = 0;
      (void)waitpid(rp.pid, &ws, 0);
      rp.state = RunningPod::State::kExited;
    }
  }
  KillNetnsMembers(rp.netns_inode, host_netns_inode_);
  if (rp.status_fd >= 0) {
    close(rp.status_fd);
    rp.status_fd = -1;
  }
}

void Kubelet::ReleaseNetwork(RunningPod& rp) {
  if (rp.ip == 0)
    return;
  // The veth dies with the pod's namespace; delete the host side in case it survived
  // (a runner that failed after creating it).
  if (!rp.veth.empty())
    (void)DeleteLink(rp.veth);
  ips_->Release(rp.ip);
  rp.ip = 0;
}

void Kubelet::ReportStatus(RunningPod& rp) {
  if (!NodeReady(rp.node))
    return;
  if (OciMode()) {
    ReportOciStatus(rp);
    return;
  }
  const bool running = rp.state == RunningPod::State::kRunning;
  const bool exited = rp.state == RunningPod::State::kExited;
  std::string phase = "Pending";
  if (running)
    phase = "Running";
  if (exited)
    phase = rp.exit_code == 0 && rp.reason == "Completed" ? "Succeeded" : "Failed";
  const std::string pod_ip = rp.ip != 0 && running ? FormatIPv4(rp.ip) : "";
  const std::string signature =
      fmt::format("{}|{}|{}|{}|{}", phase, pod_ip, rp.exit_code, rp.reason, rp.message);
  if (signature == rp.reported)
    return;
  const std::string now = store_.NowTimestamp();
  const std::string host_ip = HostIP(rp.node);
  const std::string uid = rp.uid;
  Result<ObjectPtr> r = store_.Mutate("pods", rp.ns, rp.name, [&](rapidjson::Document& doc) {
    if (GetString(doc, "metadata.uid") != uid)
      return Status::Conflict("another pod");
    kubelet_internal::SetPodStatusBasics(doc, phase, host_ip, pod_ip, rp.started_at);
    HostContainer c;
    c.name = rp.container;
    c.image = rp.image;
    c.pid = rp.pid;
    c.running = running;
    c.exited = exited;
    c.exit_code = rp.exit_code;
    c.reason = rp.reason;
    c.message = rp.message;
    c.started_at = rp.started_at;
    c.finished_at = rp.finished_at;
    SetHostContainerStatus(doc, c, now);
    return Status::Ok();
  });
  if (r.ok())
    rp.reported = signature;
}

void Kubelet::Heartbeat(const std::string& node) {
  last_heartbeat_[node] = std::chrono::steady_clock::now();
  const std::string now = store_.NowTimestamp();
  (void)store_.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    SetNodeReadyCondition(doc, "True", "KubeletReady", "kubelet is posting ready status", now);
    return Status::Ok();
  });
}

Status Kubelet::SetNodeNotReady(const std::string& node) {
  std::lock_guard lock(mu_);
  return SetNodeNotReadyLocked(node);
}

Status Kubelet::SetNodeReady(const std::string& node) {
  std::lock_guard lock(mu_);
  return SetNodeReadyLocked(node);
}

Status Kubelet::SetNodeNotReadyLocked(const std::string& node) {
  if (std::find(options_.nodes.begin(), options_.nodes.end(), node) == options_.nodes.end()) {
    return Status::NotFound(fmt::format("node {} is not run by this kubelet", node));
  }
  not_ready_.insert(node);
  const std::string now = store_.NowTimestamp();
  Result<ObjectPtr> r = store_.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    SetNodeReadyCondition(doc, "Unknown", kNodeStatusUnknownReason, kNodeStatusUnknownMessage, now);
    return Status::Ok();
  });
  if (!r.ok())
    return r.status();
  // What the node lifecycle controller does next (lifecycle.h); done here at once so
  // that the node and its pods look lost without waiting for the controller's pass.
  if (Status s = ReconcileNodeConditionTaints(store_, node); !s.ok())
    return s;
  MarkPodsNotReady(store_, node);
  log_.Info("kubelet: node {} is NotReady (simulated)", node);
  return Status::Ok();
}

Status Kubelet::SetNodeReadyLocked(const std::string& node) {
  not_ready_.erase(node);
  Heartbeat(node);
  Status s = ReconcileNodeConditionTaints(store_, node);
  for (auto& [uid, rp] : pods_) {
    if (rp.node == node)
      rp.reported.clear();  // report every pod again
  }
  log_.Info("kubelet: node {} is Ready again", node);
  return s;
}

Status Kubelet::EvictPod(const std::string& ns, const std::string& name,
                         std::optional<int64_t> grace_seconds) {
  const std::string now = store_.NowTimestamp();
  Result<ObjectPtr> r = store_.Mutate("pods", ns, name, [&](rapidjson::Document& doc) {
    SetCondition(doc, "DisruptionTarget", "True", "EvictionByEvictionAPI", "Eviction API: evicting",
                 now);
    return Status::Ok();
  });
  if (!r.ok())
    return r.status().WithContext(fmt::format("evicting {}/{}", ns, name));
  DeleteOptions options;
  options.grace_period_seconds = grace_seconds;
  Result<DeleteResult> d = store_.Delete("pods", ns, name, options);
  if (!d.ok())
    return d.status().WithContext(fmt::format("evicting {}/{}", ns, name));
  log_.Info("kubelet: evicted {}/{}", ns, name);
  return Status::Ok();
}

Status Kubelet::CordonNode(const std::string& node, bool unschedulable) {
  Result<ObjectPtr> r = store_.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    if (unschedulable) {
      SetMember(doc, "spec.unschedulable", rapidjson::Value(true));
    } else if (doc.HasMember("spec") && doc["spec"].IsObject()) {
      doc["spec"].RemoveMember("unschedulable");
    }
    return Status::Ok();
  });
  return r.ok() ? Status::Ok() : r.status();
}

Status Kubelet::AddTaint(const std::string& node, const std::string& key, const std::string& value,
                         const std::string& effect) {
  if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
    return Status::InvalidArgument(fmt::format(
        "taint effect \"{}\" is not valid: use NoSchedule, PreferNoSchedule or NoExecute", effect));
  }
  const std::string now = store_.NowTimestamp();
  Result<ObjectPtr> r = store_.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    auto& a = doc.GetAllocator();
    if (Find(doc, "spec.taints") == nullptr) {
      SetMember(doc, "spec.taints", rapidjson::Value(rapidjson::kArrayType));
    }
    rapidjson::Value& taints = doc["spec"]["taints"];
    for (auto it = taints.Begin(); it != taints.End();) {
      if (GetString(*it, "key") == key && GetString(*it, "effect") == effect) {
        it = taints.Erase(it);
      } else {
        ++it;
      }
    }
    rapidjson::Value t(rapidjson::kObjectType);
    t.AddMember("key", S(key, a), a);
    if (!value.empty())
      t.AddMember("value", S(value, a), a);
    t.AddMember("effect", S(effect, a), a);
    if (effect == "NoExecute")
      t.AddMember("timeAdded", S(now, a), a);
    taints.PushBack(t, a);
    return Status::Ok();
  });
  return r.ok() ? Status::Ok() : r.status();
}

Status Kubelet::RemoveTaint(const std::string& node, const std::string& key) {
  Result<ObjectPtr> r = store_.Mutate("nodes", "", node, [&](rapidjson::Document& doc) {
    rapidjson::Value* taints = const_cast<rapidjson::Value*>(Find(doc, "spec.taints"));
    if (taints == nullptr || !taints->IsArray())
      return Status::Ok();
    for (auto it = taints->Begin(); it != taints->End();) {
      if (GetString(*it, "key") == key) {
        it = taints->Erase(it);
      } else {
        ++it;
      }
    }
    return Status::Ok();
  });
  return r.ok() ? Status::Ok() : r.status();
}

}  // namespace kubesim
