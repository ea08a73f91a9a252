// The kubesim kubelet's OCI mode (kubelet_oci.h): a sandbox process per pod holds the
// network, UTS and IPC namespaces (as the pause container does); every container runs
// as `runc run` (the container's shim: runc waits for the container and exits with its
// status) on an overlay of its image's root, with a config.json from oci_spec.h.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "kubelet.h"
#include "scheduler.h"  // RecordPodEvent

namespace kubesim {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace kubelet_internal {

std::string ComputePodPhase(const std::string& restart_policy, const std::vector<PhaseInput>& init,
                            const std::vector<PhaseInput>& app) {
  using State = OciContainer::State;
  int pending_init = 0, failed_init = 0;
  for (const PhaseInput& c : init) {
    if (c.state == State::kRunning) {
      ++pending_init;
    } else if (c.state == State::kTerminated) {
      failed_init += c.exit_code != 0;
    } else if (c.has_last_termination) {
      failed_init += c.exit_code != 0;
    } else {
      ++pending_init;
    }
  }
  int running = 0, waiting = 0, stopped = 0, succeeded = 0;
  for (const PhaseInput& c : app) {
    if (c.state == State::kRunning) {
      ++running;
    } else if (c.state == State::kTerminated) {
      ++stopped;
      succeeded += c.exit_code == 0;
    } else if (c.has_last_termination) {
      ++stopped;
    } else {
      ++waiting;
    }
  }
  if (failed_init > 0 && restart_policy == "Never")
    return "Failed";
  if (pending_init > 0 || waiting > 0)
    return "Pending";
  if (running > 0)
    return "Running";
  if (stopped == 0)
    return "Pending";
  if (restart_policy == "Always")
    return "Running";
  if (stopped == succeeded)
    return "Succeeded";
  return restart_policy == "Never" ? "Failed" : "Running";
}

std::chrono::milliseconds RestartDelay(int restart_count, std::chrono::milliseconds base,
                                       std::chrono::milliseconds max) {
  if (restart_count <= 0)
    return std::chrono::milliseconds(0);
  std::chrono::milliseconds delay = base;
  for (int i = 1; i < restart_count && delay < max; ++i)
    delay *= 2;
  return std::min(delay, max);
}

bool ShouldRestart(const std::string& restart_policy, int exit_code) {
  return restart_policy == "Always" || (restart_policy == "OnFailure" && exit_code != 0);
}

}  // namespace kubelet_internal

namespace {

using kubelet_internal::PhaseInput;

PhaseInput PhaseOf(const OciContainer& c) {
  PhaseInput in;
  in.state = c.state;
  in.has_last_termination = c.last.has_value();
  if (c.state == OciContainer::State::kTerminated) {
    in.exit_code = c.exit_code;
  } else if (c.last) {
    in.exit_code = c.last->exit_code;
  }
  return in;
}

using kubelet_internal::Member;
using kubelet_internal::Str;

std::optional<std::vector<std::string>> StringList(const rapidjson::Value* v) {
  if (v == nullptr || !v->IsArray())
    return std::nullopt;
  std::vector<std::string> out;
  for (const auto& s : v->GetArray())
    out.push_back(Str(&s));
  return out;
}

std::optional<int64_t> Int(const rapidjson::Value* v) {
  if (v == nullptr || !v->IsInt64())
    return std::nullopt;
  return v->GetInt64();
}

bool Bool(const rapidjson::Value* v) {
  return v != nullptr && v->IsBool() && v->GetBool();
}

// The pod's container (init or app) of that name.
const rapidjson::Value* ContainerSpec(const rapidjson::Value& pod, const OciContainer& c) {
  const rapidjson::Value* list = Find(pod, c.init ? "spec.initContainers" : "spec.containers");
  if (list == nullptr || !list->IsArray())
    return nullptr;
  for (const auto& spec : list->GetArray()) {
    if (Str(Member(&spec, "name")) == c.name)
      return &spec;
  }
  return nullptr;
}

std::string ReadSmallFile(const std::string& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  std::string out(max, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// runc's own complaint when the process could not be started (exec failure, a
// missing working directory ...): containerd reports that as StartError, exit 128.
std::string RuncStartError(const std::string& log_path) {
  const std::string tail = kubelet_internal::LogTail(log_path);
  const size_t at = tail.rfind("runc run failed: ");
  if (at == std::string::npos)
    return "";
  std::string line = tail.substr(at + 17);
  return line.substr(0, line.find('\n'));
}

rapidjson::Value S(const std::string& s, rapidjson::Document::AllocatorType& a) {
  return rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

}  // namespace

// ---- Events -----------------------------------------------------------------------------

namespace {

// The kubelet's container events (pkg/kubelet/events/event.go reasons), about the
// container's field of the pod as the kubelet's recorder names it.
void ContainerEvent(Store& store, const std::string& ns, const std::string& pod,
                    const std::string& uid, const std::string& node, const OciContainer& c,
                    const char* type, const char* reason, const std::string& message) {
  RecordPodEvent(store, ns, pod, uid, type, reason, message, "kubelet", node,
                 fmt::format("spec.{}{{{}}}", c.init ? "initContainers" : "containers", c.name));
}

// A duration as Go prints one (10s, 1m20s, 5m0s, 1.5s), as the kubelet's messages do.
std::string GoDuration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  const long long minutes = ms / 60000;
  const long long rest = ms % 60000;
  std::string seconds = rest % 1000 == 0 ? fmt::format("{}s", rest / 1000)
                                         : fmt::format("{:g}s", static_cast<double>(rest) / 1000);
  return minutes > 0 ? fmt::format("{}m{}", minutes, seconds) : seconds;
}

}  // namespace

// ---- Start and stop ------------------------------------------------------------------

Status Kubelet::StartOci() {
  std::error_code ec;
  if (!fs::is_directory(options_.image_store, ec)) {
    return Status::InvalidArgument(fmt::format(
        "kubelet: --image-store {} is not a directory: give a directory of OCI image layouts "
        "(docs/kubesim.md, \"OCI mode\")",
        options_.image_store));
  }
  if (Result<std::string> v = oci::RunTool({"runc", "--version"}); !v.ok()) {
    return Status::InvalidArgument(fmt::format(
        "kubelet: --image-store needs runc (apt-get install runc): {}", v.status().message()));
  }
  image_store_.emplace(options_.image_store);
  runc_root_ =
      options_.runc_root.empty() ? "/run/kubesim-runc/" + options_.bridge : options_.runc_root;
  CleanOciLeftovers();  // what a killed kubesim of this bridge left behind
  return Status::Ok();
}

void Kubelet::CleanOciLeftovers() {
  Result<std::string> ids = oci::RunTool({"runc", "--root", runc_root_, "list", "-q"});
  if (ids.ok()) {
    std::stringstream s(*ids);
    std::string id;
    while (std::getline(s, id)) {
      if (id.empty())
        continue;
      log_.Info("kubelet: removing runc container {} left in {}", id, runc_root_);
      (void)oci::RunTool({"runc", "--root", runc_root_, "kill", id, "KILL"});
      (void)oci::RunTool({"runc", "--root", runc_root_, "delete", "--force", id});
    }
  }
  const std::string pods = (fs::path(options_.state_dir) / options_.bridge / "pods").string();
  for (const std::string& m : oci::MountsUnder(pods))
    (void)umount2(m.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(pods, ec);
}

void Kubelet::StopOciPods() {
  for (auto& [uid, rp] : pods_)
    SignalOciContainers(rp, false);
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  for (auto& [uid, rp] : pods_) {
    for (OciContainer& c : rp.oci) {
      while (c.runc_pid > 0 && Clock::now() < deadline) {
        int ws = 0;
        if (waitpid(c.runc_pid, &ws, WNOHANG) == c.runc_pid) {
          c.runc_pid = -1;
          break;
        }
        usleep(20 * 1000);
      }
    }
  }
}

Status Kubelet::WritePodFiles(const RunningPod& p, const rapidjson::Value& pod,
                              const std::string& ip) {
  const fs::path dir = PodDir(p.uid);
  std::error_code ec;
  fs::create_directories(dir, ec);
  // pkg/kubelet/kubelet_pods.go's managed hosts file.
  std::string hosts =
      "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
      "ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\n"
      "fe00::2\tip6-allrouters\n";
  const std::string subdomain = GetString(pod, "spec.subdomain");
  if (subdomain.empty()) {
    hosts += fmt::format("{}\t{}\n", ip, p.hostname);
  } else {
    hosts += fmt::format("{}\t{}.{}.{}.svc.cluster.local\t{}\n", ip, p.hostname, subdomain, p.ns,
                         p.hostname);
  }
  if (const rapidjson::Value* aliases = Find(pod, "spec.hostAliases");
      aliases != nullptr && aliases->IsArray() && !aliases->Empty()) {
    hosts += "\n# Entries added by HostAliases.\n";
    for (const auto& a : aliases->GetArray()) {
      std::vector<std::string> names =
          StringList(Member(&a, "hostnames")).value_or(std::vector<std::string>{});
      hosts += fmt::format("{}\t{}\n", Str(Member(&a, "ip")), fmt::join(names, "\t"));
    }
  }
  std::ofstream(dir / "hosts") << hosts;
  std::ofstream(dir / "hostname") << p.hostname << "\n";
  // The pod's dnsPolicy and dnsConfig over the cluster DNS (kubelet_dns.cpp).
  if (Status s = kubelet_internal::WriteResolvConf(store_, options_, pod, p.node,
                                                   (dir / "resolv.conf").string());
      !s.ok())
    return s;
  if (!std::ofstream(dir / "hosts", std::ios::app))
    return Status::IoError(fmt::format("writing {}/hosts", dir.string()));
  return Status::Ok();
}

void Kubelet::StartOciPod(RunningPod& p, const rapidjson::Value& pod, const std::string& pod_ip) {
  p.restart_policy = GetString(pod, "spec.restartPolicy");
  if (p.restart_policy.empty())
    p.restart_policy = "Always";
  for (const char* list : {"spec.initContainers", "spec.containers"}) {
    const rapidjson::Value* l = Find(pod, list);
    if (l == nullptr || !l->IsArray())
      continue;
    const bool has_init = Find(pod, "spec.initContainers") != nullptr;
    for (const auto& spec : l->GetArray()) {
      OciContainer c;
      c.name = Str(Member(&spec, "name"));
      c.image = Str(Member(&spec, "image"));
      c.init = list == std::string("spec.initContainers");
      c.fallback_to_logs =
          Str(Member(&spec, "terminationMessagePolicy")) == "FallbackToLogsOnError";
      c.waiting_reason = has_init ? "PodInitializing" : "ContainerCreating";
      p.oci.push_back(c);
    }
  }
  if (Status s = WritePodFiles(p, pod, pod_ip); !s.ok()) {
    FailStart(p, "CreatePodSandboxError", s.message());
    return;
  }
  const std::string pod_dir = PodDir(p.uid);
  const std::string log_path = pod_dir + "/sandbox.log";
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int status_pipe[2];
  if (log_fd < 0 || pipe2(status_pipe, O_CLOEXEC) != 0) {
    if (log_fd >= 0)
      close(log_fd);
    FailStart(p, "CreatePodSandboxError",
              fmt::format("preparing {}: {}", log_path, std::strerror(errno)));
    return;
  }
  const pid_t pid = Spawn(
      {podrun_path_, "--sandbox", "--status-fd", "3", "--hostname", p.hostname, "--bridge",
       options_.bridge, "--veth", p.veth, "--address",
       fmt::format("{}/{}", pod_ip, network_.prefix), "--gateway", FormatIPv4(network_.Gateway())},
      {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}}, log_fd, status_pipe[1]);
  close(log_fd);
  close(status_pipe[1]);
  if (pid < 0) {
    close(status_pipe[0]);
    FailStart(p, "CreatePodSandboxError", fmt::format("fork: {}", std::strerror(errno)));
    return;
  }
  (void)fcntl(status_pipe[0], F_SETFL, O_NONBLOCK);
  p.pid = pid;
  p.status_fd = status_pipe[0];
  log_.Info("kubelet: sandbox of {}/{} on {} is pid {} with IP {} (OCI mode)", p.ns, p.name, p.node,
            pid, pod_ip);
  ReportStatus(p);
}

// ---- The loop's step for one pod ------------------------------------------------------

void Kubelet::PollOciPod(RunningPod& rp) {
  if (rp.state == RunningPod::State::kExited)
    return;
  if (rp.state == RunningPod::State::kStarting) {
    if (rp.status_fd >= 0 || rp.status_text.empty())
      return;  // the sandbox is still coming up
    std::string line = rp.status_text.substr(0, rp.status_text.find('\n'));
    const size_t tab = line.find('\t');
    int ws = 0;
    (void)waitpid(rp.pid, &ws, 0);  // the runner exits right after saying why
    rp.pid = -1;
    FailStart(rp, "CreatePodSandboxError", tab == std::string::npos ? line : line.substr(tab + 1));
    return;
  }
  ReapOciContainers(rp);
  if (rp.term_sent || rp.object_gone) {
    const bool any_running = std::any_of(rp.oci.begin(), rp.oci.end(), [](const OciContainer& c) {
      return c.state == OciContainer::State::kRunning;
    });
    if (!any_running)
      FinishOciPod(rp);
    return;
  }
  Result<ObjectPtr> pod = store_.Get("pods", rp.ns, rp.name);
  if (!pod.ok() || GetString(**pod, "metadata.uid") != rp.uid)
    return;
  StepOciContainers(rp, **pod);
}

void Kubelet::StepOciContainers(RunningPod& rp, const rapidjson::Value& pod) {
  std::vector<PhaseInput> init, app;
  bool init_done = true;
  for (OciContainer& c : rp.oci) {
    if (!c.init)
      continue;
    if (init_done && c.state == OciContainer::State::kWaiting)
      TryStartOciContainer(rp, c, pod);
    if (c.state != OciContainer::State::kTerminated || c.exit_code != 0)
      init_done = false;
  }
  for (OciContainer& c : rp.oci) {
    if (!c.init && init_done && c.state == OciContainer::State::kWaiting)
      TryStartOciContainer(rp, c, pod);
    (c.init ? init : app).push_back(PhaseOf(c));
  }
  const std::string phase = kubelet_internal::ComputePodPhase(rp.restart_policy, init, app);
  if (phase == "Succeeded" || phase == "Failed")
    FinishOciPod(rp);
}

bool Kubelet::TryStartOciContainer(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod) {
  const auto now = Clock::now();
  if (now < c.next_try) {
    if (c.waiting_reason == "ErrImagePull" && now >= c.pull_backoff_at) {
      c.waiting_reason = "ImagePullBackOff";
      c.waiting_message = fmt::format("Back-off pulling image \"{}\"", c.image);
      ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Normal", "BackOff",
                     c.waiting_message);
    }
    return false;
  }
  const rapidjson::Value* spec = ContainerSpec(pod, c);
  if (spec == nullptr)
    return false;
  oci::StoredImage image;
  if (!ResolveOciImage(rp, c, *spec, image))
    return false;
  if (Status s = StartOciContainer(rp, c, pod, image); !s.ok()) {
    CleanOciContainer(c);
    const bool config =
        s.code() == Status::Code::kInvalidArgument || s.code() == Status::Code::kNotFound;
    c.state = OciContainer::State::kWaiting;
    c.waiting_reason = config ? "CreateContainerConfigError" : "CreateContainerError";
    if (s.code() == Status::Code::kUnavailable)
      c.waiting_reason = "ContainerCreating";  // a volume that cannot be set up (yet)
    c.waiting_message = s.message();
    c.next_try = now + options_.backoff_base;
    log_.Warning("kubelet: {}/{} container {}: {}: {}", rp.ns, rp.name, c.name, c.waiting_reason,
                 s.message());
    if (s.code() == Status::Code::kUnavailable) {
      RecordPodEvent(store_, rp.ns, rp.name, rp.uid, "Warning", "FailedMount", s.message(),
                     "kubelet", rp.node);
    } else {
      ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Warning", "Failed",
                     "Error: " + s.message());
    }
    return false;
  }
  return true;
}

bool Kubelet::ResolveOciImage(RunningPod& rp, OciContainer& c, const rapidjson::Value& spec,
                              oci::StoredImage& image) {
  const auto now = Clock::now();
  Result<oci::ImageReference> ref = oci::NormalizeReference(c.image);
  if (!ref.ok()) {
    c.waiting_reason = "InvalidImageName";
    c.waiting_message = fmt::format("Failed to apply default image tag \"{}\": {}", c.image,
                                    ref.status().message());
    c.next_try = now + options_.backoff_max;
    return false;
  }
  Result<oci::StoredImage> found = image_store_->Resolve(*ref);
  if (found.ok()) {
    image = *found;
    c.image_id = image.repository + "@" + image.manifest_digest;
    c.pull_failures = 0;
    ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Normal", "Pulled",
                   fmt::format("Container image \"{}\" already present on machine", c.image));
    return true;
  }
  if (Str(Member(&spec, "imagePullPolicy")) == "Never") {
    c.waiting_reason = "ErrImageNeverPull";
    c.waiting_message =
        fmt::format("Container image \"{}\" is not present with pull policy of Never", c.image);
    c.next_try = now + options_.backoff_base;
    ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Warning", "ErrImageNeverPull",
                   c.waiting_message);
    return false;
  }
  // As containerd answers a pull of an image the registry does not have; the kubelet
  // shows ErrImagePull, then ImagePullBackOff until the back-off lets it try again.
  const std::string name = ref->String();
  c.waiting_reason = "ErrImagePull";
  c.waiting_message = fmt::format(
      "rpc error: code = NotFound desc = failed to pull and unpack image \"{}\": failed to "
      "resolve reference \"{}\": {}: not found",
      name, name, name);
  if (found.status().code() != Status::Code::kNotFound)
    c.waiting_message =
        fmt::format("failed to pull and unpack image \"{}\": {}", name, found.status().message());
  ++c.pull_failures;
  const auto delay =
      kubelet_internal::RestartDelay(c.pull_failures, options_.backoff_base, options_.backoff_max);
  // ErrImagePull stays for half the back-off (at most a second, a kubelet sync),
  // then ImagePullBackOff for the rest.
  c.next_try = now + delay;
  c.pull_backoff_at = now + std::min<std::chrono::milliseconds>(delay / 2, std::chrono::seconds(1));
  log_.Warning("kubelet: {}/{} container {}: ErrImagePull: {}", rp.ns, rp.name, c.name,
               c.waiting_message);
  ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Warning", "Failed",
                 fmt::format("Failed to pull image \"{}\": {}", c.image, c.waiting_message));
  return false;
}

// ---- One container ----------------------------------------------------------------------

namespace {

struct SecurityInput {
  bool privileged = false, read_only_root = false;
  std::vector<std::string> add, drop;
  std::optional<int64_t> run_as_user, run_as_group;
};

// The container's securityContext over the pod's (runAsUser, runAsGroup).
SecurityInput Security(const rapidjson::Value& pod, const rapidjson::Value& spec) {
  SecurityInput out;
  const rapidjson::Value* psc = Find(pod, "spec.securityContext");
  const rapidjson::Value* sc = Member(&spec, "securityContext");
  out.run_as_user = Int(Member(sc, "runAsUser"));
  if (!out.run_as_user)
    out.run_as_user = Int(Member(psc, "runAsUser"));
  out.run_as_group = Int(Member(sc, "runAsGroup"));
  if (!out.run_as_group)
    out.run_as_group = Int(Member(psc, "runAsGroup"));
  out.privileged = Bool(Member(sc, "privileged"));
  out.read_only_root = Bool(Member(sc, "readOnlyRootFilesystem"));
  const rapidjson::Value* caps = Member(sc, "capabilities");
  out.add = StringList(Member(caps, "add")).value_or(std::vector<std::string>{});
  out.drop = StringList(Member(caps, "drop")).value_or(std::vector<std::string>{});
  return out;
}

}  // namespace

// config.json of one run of the container in `run` (oci_spec.h).
Status Kubelet::WriteOciSpec(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod,
                             const oci::StoredImage& image, const std::string& lower,
                             const std::string& run) {
  const rapidjson::Value& spec = *ContainerSpec(pod, c);
  const std::string pod_dir = PodDir(rp.uid);
  oci::SpecInput in;
  const std::string pod_ip = FormatIPv4(rp.ip);
  EnvList env = {{"HOSTNAME", rp.hostname}};
  if (Status s = ContainerEnv(pod, spec, pod_ip, HostIP(rp.node), env); !s.ok())
    return Status::InvalidArgument(s.message());
  const std::map<std::string, std::string> vars(env.begin(), env.end());
  auto expanded = [&](const char* field) -> std::optional<std::vector<std::string>> {
    std::optional<std::vector<std::string>> list = StringList(Member(&spec, field));
    if (list) {
      for (std::string& a : *list)
        a = kubelet_internal::ExpandVars(a, vars);
    }
    return list;
  };
  in.args = oci::MergeArgv(image.config, expanded("command"), expanded("args"));
  if (in.args.empty())
    return Status::Internal("failed to generate container spec: no command specified");
  in.env = oci::MergeEnv(image.config.env, env);
  in.cwd = Str(Member(&spec, "workingDir"));
  if (in.cwd.empty())
    in.cwd = image.config.working_dir;
  const SecurityInput sec = Security(pod, spec);
  Result<oci::UserIds> user =
      oci::ResolveUser(image.config.user, sec.run_as_user, sec.run_as_group, lower);
  if (!user.ok())
    return Status::InvalidArgument(user.status().message());
  in.user = *user;
  in.hostname = rp.hostname;
  in.rootfs = c.rootfs;
  in.read_only_root = sec.read_only_root;
  in.privileged = sec.privileged;
  const std::vector<std::string> all = oci::CurrentCapabilities();
  in.capabilities =
      sec.privileged ? all
                     : oci::ApplyCapabilities(oci::DefaultCapabilities(), sec.add, sec.drop, all);
  // Never more than this process holds: runc cannot grant what its bounding set lacks.
  in.capabilities.erase(std::remove_if(in.capabilities.begin(), in.capabilities.end(),
                                       [&](const std::string& cap) {
                                         return std::find(all.begin(), all.end(), cap) == all.end();
                                       }),
                        in.capabilities.end());
  if (sec.privileged)
    in.devices = oci::HostDevices();
  in.netns = fmt::format("/proc/{}/ns/net", rp.pid);
  in.utsns = fmt::format("/proc/{}/ns/uts", rp.pid);
  in.ipcns = fmt::format("/proc/{}/ns/ipc", rp.pid);
  if (Status s = VolumeMounts(pod, spec, pod_dir, in.mounts); !s.ok())
    return s;
  for (const oci::SpecMount& m : in.mounts) {
    if (m.propagation == "rshared" && !sec.privileged)
      return Status::InvalidArgument(fmt::format(
          "volume mount {}: Bidirectional mount propagation is available only to privileged "
          "containers",
          m.destination));
  }
  for (const char* file : {"hosts", "hostname", "resolv.conf"}) {
    oci::SpecMount m;
    m.source = pod_dir + "/" + file;
    m.destination = std::string("/etc/") + file;
    in.mounts.push_back(m);
  }
  c.termination_log = run + "/termination-log";
  std::ofstream(c.termination_log).flush();
  oci::SpecMount term;
  term.source = c.termination_log;
  term.destination = Str(Member(&spec, "terminationMessagePath"));
  if (term.destination.empty())
    term.destination = "/dev/termination-log";
  in.mounts.push_back(term);
  std::ofstream out(run + "/config.json");
  out << oci::BuildRuntimeSpec(in);
  out.close();
  if (!out)
    return Status::IoError(fmt::format("writing {}/config.json", run));
  return Status::Ok();
}

Status Kubelet::StartOciContainer(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod,
                                  const oci::StoredImage& image) {
  const fs::path state = fs::path(options_.state_dir) / options_.bridge;
  Result<std::string> lower = oci::UnpackImage(image, (state / "images").string());
  if (!lower.ok())
    return Status::Internal(lower.status().message());
  if (c.ran)
    ++c.restart_count;
  const std::string pod_dir = PodDir(rp.uid);
  const fs::path run =
      fs::path(pod_dir) / "containers" / fmt::format("{}-{}", c.name, c.restart_count);
  std::error_code ec;
  fs::remove_all(run, ec);
  for (const char* d : {"upper", "work", "rootfs"})
    fs::create_directories(run / d, ec);
  const std::string opts = fmt::format("lowerdir={},upperdir={},workdir={}", *lower,
                                       (run / "upper").string(), (run / "work").string());
  if (mount("overlay", (run / "rootfs").c_str(), "overlay", 0, opts.c_str()) != 0)
    return Status::Internal(fmt::format("overlay for {}: {}", c.name, std::strerror(errno)));
  c.rootfs = (run / "rootfs").string();

  if (Status s = WriteOciSpec(rp, c, pod, image, *lower, run.string()); !s.ok())
    return s;

  // The log contract of pods/log (docs/kubesim.md): logs/<container>/<restart>.log.
  const fs::path logs = fs::path(pod_dir) / "logs" / c.name;
  fs::create_directories(logs, ec);
  c.log_path = (logs / fmt::format("{}.log", c.restart_count)).string();
  const int log_fd = open(c.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return Status::IoError(fmt::format("opening {}: {}", c.log_path, std::strerror(errno)));
  c.runc_id = fmt::format("{}-{}-{}", rp.uid, c.name, c.restart_count);
  if (!image.config.stop_signal.empty())
    c.stop_signal = image.config.stop_signal;
  c.runc_pid = Spawn({kubelet_internal::ToolPath("runc"), "--root", runc_root_, "run", "--bundle",
                      run.string(), c.runc_id},
                     {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}}, log_fd, -1);
  close(log_fd);
  if (c.runc_pid < 0)
    return Status::Internal(fmt::format("fork: {}", std::strerror(errno)));
  // Running once runc says so (as containerd's StartContainer returns after runc start),
  // or once runc exited (the reaper then reports the run).
  for (int i = 0; i < 500; ++i) {
    siginfo_t info;
    info.si_pid = 0;
    if (waitid(P_PID, static_cast<id_t>(c.runc_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == c.runc_pid)
      break;
    Result<std::string> state = oci::RunTool({"runc", "--root", runc_root_, "state", c.runc_id});
    if (state.ok() && state->find("\"running\"") != std::string::npos)
      break;
    usleep(20 * 1000);
  }
  c.state = OciContainer::State::kRunning;
  c.started_at = store_.NowTimestamp();
  c.container_id = "runc://" + c.runc_id;
  c.kill_sent = false;
  c.waiting_reason.clear();
  c.waiting_message.clear();
  log_.Info("kubelet: {}/{} container {} started from {} (runc {})", rp.ns, rp.name, c.name,
            c.image_id, c.runc_id);
  ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Normal", "Created",
                 "Created container: " + c.name);
  ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Normal", "Started",
                 "Started container " + c.name);
  return Status::Ok();
}

void Kubelet::ReapOciContainers(RunningPod& rp) {
  const bool stopping = rp.term_sent || rp.object_gone;
  for (OciContainer& c : rp.oci) {
    if (c.state != OciContainer::State::kRunning || c.runc_pid <= 0)
      continue;
    int ws = 0;
    if (waitpid(c.runc_pid, &ws, WNOHANG) != c.runc_pid)
      continue;
    c.runc_pid = -1;
    c.finished_at = store_.NowTimestamp();
    // runc run exits with the container's status (128 + signal for a signal).
    kubelet_internal::ExitInfo info = kubelet_internal::DescribeExit(ws, true);
    c.exit_code = info.exit_code;
    c.reason = info.reason;
    if (c.exit_code == 128 + SIGKILL && !c.kill_sent && !rp.kill_sent)
      c.reason = "OOMKilled";  // as in the host mode: a SIGKILL the kubelet did not send
    c.message = ReadSmallFile(c.termination_log, 4096);
    if (const std::string err = RuncStartError(c.log_path); !err.empty() && c.exit_code != 0) {
      c.reason = "StartError";
      c.exit_code = 128;
      c.message = err;
    }
    if (c.message.empty() && c.fallback_to_logs && c.exit_code != 0)
      c.message = kubelet_internal::LogTail(c.log_path);
    c.state = OciContainer::State::kTerminated;
    c.ran = true;
    log_.Info("kubelet: {}/{} container {} exited with code {} ({})", rp.ns, rp.name, c.name,
              c.exit_code, c.reason);
    CleanOciContainer(c);
    if (stopping ||
        !kubelet_internal::ShouldRestart(
            c.init && rp.restart_policy == "Always" ? "OnFailure" : rp.restart_policy, c.exit_code))
      continue;
    OciContainer::Terminated last;
    last.exit_code = c.exit_code;
    last.reason = c.reason;
    last.message = c.message;
    last.started_at = c.started_at;
    last.finished_at = c.finished_at;
    last.container_id = c.container_id;
    c.last = last;
    c.state = OciContainer::State::kWaiting;
    const auto delay = kubelet_internal::RestartDelay(c.restart_count, options_.backoff_base,
                                                      options_.backoff_max);
    c.next_try = Clock::now() + delay;
    c.waiting_reason = delay.count() > 0 ? "CrashLoopBackOff" : "ContainerCreating";
    c.waiting_message = "";
    if (delay.count() > 0) {
      c.waiting_message = fmt::format("back-off {} restarting failed container={} pod={}_{}({})",
                                      GoDuration(delay), c.name, rp.name, rp.ns, rp.uid);
      ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Warning", "BackOff",
                     fmt::format("Back-off restarting failed container {} in pod {}_{}({})", c.name,
                                 rp.name, rp.ns, rp.uid));
    }
  }
}

void Kubelet::SignalOciContainers(RunningPod& rp, bool kill) {
  for (OciContainer& c : rp.oci) {
    if (c.state != OciContainer::State::kRunning || c.runc_id.empty())
      continue;
    if (kill)
      c.kill_sent = true;
    if (!kill)
      ContainerEvent(store_, rp.ns, rp.name, rp.uid, rp.node, c, "Normal", "Killing",
                     "Stopping container " + c.name);
    (void)oci::RunTool(
        {"runc", "--root", runc_root_, "kill", c.runc_id, kill ? "KILL" : c.stop_signal});
  }
}

void Kubelet::CleanOciContainer(OciContainer& c) {
  if (c.runc_pid > 0) {
    c.kill_sent = true;
    (void)oci::RunTool({"runc", "--root", runc_root_, "kill", c.runc_id, "KILL"});
    int ws = 0;
    (void)waitpid(c.runc_pid, &ws, 0);
    c.runc_pid = -1;
    if (c.state == OciContainer::State::kRunning) {
      c.state = OciContainer::State::kTerminated;
      c.exit_code = 137;
      c.reason = "Error";
      c.finished_at = store_.NowTimestamp();
    }
  }
  if (!c.runc_id.empty())
    (void)oci::RunTool({"runc", "--root", runc_root_, "delete", "--force", c.runc_id});
  if (!c.rootfs.empty()) {
    if (umount2(c.rootfs.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT)
      log_.Warning("kubelet: unmounting {}: {}", c.rootfs, std::strerror(errno));
    c.rootfs.clear();
  }
}

void Kubelet::FinishOciPod(RunningPod& rp) {
  KillEverything(rp);  // every container, then the sandbox and its namespaces
  rp.state = RunningPod::State::kExited;
  rp.finished_at = store_.NowTimestamp();
  ReleaseNetwork(rp);
  log_.Info("kubelet: {}/{} is done; its sandbox is gone", rp.ns, rp.name);
}

// ---- Status -----------------------------------------------------------------------------

namespace {

rapidjson::Value TerminatedJson(int exit_code, const std::string& reason,
                                const std::string& message, const std::string& started,
                                const std::string& finished, const std::string& id,
                                rapidjson::Document::AllocatorType& a) {
  rapidjson::Value t(rapidjson::kObjectType);
  t.AddMember("exitCode", exit_code, a);
  t.AddMember("reason", S(reason, a), a);
  if (!message.empty())
    t.AddMember("message", S(message, a), a);
  if (!started.empty())
    t.AddMember("startedAt", S(started, a), a);
  t.AddMember("finishedAt", S(finished, a), a);
  if (!id.empty())
    t.AddMember("containerID", S(id, a), a);
  return t;
}

rapidjson::Value ContainerStatusJson(const OciContainer& c, rapidjson::Document::AllocatorType& a) {
  const bool running = c.state == OciContainer::State::kRunning;
  rapidjson::Value cs(rapidjson::kObjectType);
  cs.AddMember("name", S(c.name, a), a);
  cs.AddMember("image", S(c.image, a), a);
  cs.AddMember("imageID", S(c.image_id, a), a);
  if (!c.container_id.empty())
    cs.AddMember("containerID", S(c.container_id, a), a);
  cs.AddMember("ready", running, a);
  cs.AddMember("started", running, a);
  cs.AddMember("restartCount", c.restart_count, a);
  rapidjson::Value state(rapidjson::kObjectType);
  if (running) {
    rapidjson::Value r(rapidjson::kObjectType);
    r.AddMember("startedAt", S(c.started_at, a), a);
    state.AddMember("running", r, a);
  } else if (c.state == OciContainer::State::kTerminated) {
    state.AddMember("terminated",
                    TerminatedJson(c.exit_code, c.reason, c.message, c.started_at, c.finished_at,
                                   c.container_id, a),
                    a);
  } else {
    state.AddMember("waiting",
                    kubelet_internal::WaitingJson(c.waiting_reason, c.waiting_message, a), a);
  }
  cs.AddMember("state", state, a);
  rapidjson::Value last(rapidjson::kObjectType);
  if (c.last) {
    last.AddMember("terminated",
                   TerminatedJson(c.last->exit_code, c.last->reason, c.last->message,
                                  c.last->started_at, c.last->finished_at, c.last->container_id, a),
                   a);
  }
  cs.AddMember("lastState", last, a);
  return cs;
}

}  // namespace

void Kubelet::ReportOciStatus(RunningPod& rp) {
  rapidjson::Document st(rapidjson::kObjectType);
  auto& a = st.GetAllocator();
  std::vector<PhaseInput> init, app;
  std::vector<std::string> unready, uninitialized;
  rapidjson::Value init_statuses(rapidjson::kArrayType), statuses(rapidjson::kArrayType);
  const bool failed_start = rp.state == RunningPod::State::kExited && !rp.reason.empty();
  for (OciContainer& c : rp.oci) {
    if (failed_start && c.state == OciContainer::State::kWaiting) {
      c.state = OciContainer::State::kTerminated;  // as the host mode reports a failed start
      c.exit_code = 128;
      c.reason = rp.reason;
      c.message = rp.message;
      c.finished_at = rp.finished_at;
    }
    (c.init ? init : app).push_back(PhaseOf(c));
    if (c.init && !(c.state == OciContainer::State::kTerminated && c.exit_code == 0))
      uninitialized.push_back(c.name);
    if (!c.init && c.state != OciContainer::State::kRunning)
      unready.push_back(c.name);
    (c.init ? init_statuses : statuses).PushBack(ContainerStatusJson(c, a), a);
  }
  const std::string phase =
      failed_start ? "Failed" : kubelet_internal::ComputePodPhase(rp.restart_policy, init, app);
  const bool sandbox_up = rp.state == RunningPod::State::kRunning;
  const std::string pod_ip = rp.ip != 0 && sandbox_up ? FormatIPv4(rp.ip) : "";
  st.AddMember("phase", S(phase, a), a);
  st.AddMember("podIP", S(pod_ip, a), a);
  st.AddMember("initContainerStatuses", init_statuses, a);
  st.AddMember("containerStatuses", statuses, a);
  const std::string signature = ToJson(st);
  if (signature == rp.reported)
    return;
  const std::string now = store_.NowTimestamp();
  const std::string host_ip = HostIP(rp.node);
  const std::string uid = rp.uid;
  const bool done = phase == "Succeeded" || phase == "Failed";
  Result<ObjectPtr> r = store_.Mutate("pods", rp.ns, rp.name, [&](rapidjson::Document& doc) {
    if (GetString(doc, "metadata.uid") != uid)
      return Status::Conflict("another pod");
    auto& da = doc.GetAllocator();
    kubelet_internal::SetPodStatusBasics(doc, phase, host_ip, pod_ip, rp.started_at);
    if (!st["initContainerStatuses"].Empty()) {
      kubelet_internal::SetStatusMember(doc, "initContainerStatuses",
                                        rapidjson::Value(st["initContainerStatuses"], da));
    }
    kubelet_internal::SetStatusMember(doc, "containerStatuses",
                                      rapidjson::Value(st["containerStatuses"], da));
    if (uninitialized.empty() || done) {
      SetCondition(doc, "Initialized", "True", "", "", now);
    } else {
      SetCondition(
          doc, "Initialized", "False", "ContainersNotInitialized",
          fmt::format("containers with incomplete status: [{}]", fmt::join(uninitialized, " ")),
          now);
    }
    if (unready.empty()) {
      SetCondition(doc, "ContainersReady", "True", "", "", now);
      SetCondition(doc, "Ready", "True", "", "", now);
    } else {
      const std::string reason = done ? "PodCompleted" : "ContainersNotReady";
      const std::string message =
          done ? "" : fmt::format("containers with unready status: [{}]", fmt::join(unready, " "));
      SetCondition(doc, "ContainersReady", "False", reason, message, now);
      SetCondition(doc, "Ready", "False", reason, message, now);
    }
    return Status::Ok();
  });
  if (r.ok())
    rp.reported = signature;
}

}  // namespace kubesim
