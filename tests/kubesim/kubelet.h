// The kubesim kubelet: runs the pods bound to the stand-in's fake nodes as real
// processes, each in its own network, UTS and mount namespace with an address on a
// bridge, and reports them back the way a kubelet does. It also keeps each node's
// Ready condition and heartbeat current, and offers the fault scenarios tests need.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
//
// Differences from a real kubelet (documented in docs/kubesim.md): images are recorded,
// never pulled, and the command runs from the host's filesystem; only the first
// container of a pod runs (init containers are not run); every pod behaves as with
// restartPolicy Never; there are no probes, cgroups or resource limits; OOMKilled is
// reported for a SIGKILL that the kubelet did not send.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <rapidjson/document.h>

#include "exec.h"
#include "k8sbridge/log.h"
#include "kubelet_net.h"
#include "kubelet_oci.h"
#include "lifecycle.h"
#include "oci_image.h"
#include "oci_spec.h"
#include "store.h"

namespace kubesim {

// Annotations through which a client (kubectl annotate) triggers the fault scenarios.
// On a node: "NotReady" makes the node stop reporting (as if its kubelet died).
inline constexpr const char* kFaultAnnotation = kNodeFaultAnnotation;
// On a pod: evict it (DisruptionTarget, then delete); the value is the grace period in
// seconds, or empty for the pod's own.
inline constexpr const char* kEvictAnnotation = "kubesim.k8sbridge.io/evict";
// On a pod, before it starts: its start fails with this message (reason StartError).
inline constexpr const char* kFailStartAnnotation = "kubesim.k8sbridge.io/fail-start";

struct KubeletOptions {
  std::vector<std::string> nodes;  // the fake nodes this kubelet runs
  // The bridge and network of this stand-in: pick different ones for stand-ins that run
  // side by side (the Slurm test rig uses 10.231.x.x).
  std::string bridge = "ksim0";
  std::string pod_network = "10.232.0.0/24";
  // The kubesim-podrun program; "" = next to the running executable.
  std::string podrun_path;
  // emptyDir, configMap and secret volumes and container logs live under
  // <state_dir>/<bridge>/pods/<uid>/.
  std::string state_dir = "/run/kubesim";
  // Given to every container as KUBERNETES_SERVICE_HOST/_PORT when not empty.
  std::string service_host;
  std::string service_port;
  // OCI mode (kubelet_oci.h, docs/kubesim.md "OCI mode"): the directory of OCI image
  // layouts pods' images come from; "" = run commands from the host's filesystem.
  std::string image_store;
  // runc's --root in OCI mode; "" = /run/kubesim-runc/<bridge>.
  std::string runc_root;
  // The container restart and image pull back-off: base, doubling up to max.
  std::chrono::milliseconds backoff_base{10000};
  std::chrono::milliseconds backoff_max{300000};
  // Issues a ServiceAccount token for a projected serviceAccountToken volume source;
  // unset = such a pod fails to start with a message saying so.
  std::function<Result<std::string>(const std::string& ns, const std::string& service_account,
                                    int64_t expiration_seconds)>
      issue_token;  // = kubelet_internal::TokenIssuer
  // Cluster DNS (kubelet_dns.cpp; the kubelet's --cluster-dns, --cluster-domain and
  // --resolv-conf): ClusterFirst pods' name servers (none: they fall back to Default,
  // with a MissingClusterDNS event), search domain and the host file Default copies.
  std::vector<std::string> cluster_dns;
  std::string cluster_domain = "cluster.local";
  std::string resolv_conf = "/etc/resolv.conf";
  std::chrono::milliseconds heartbeat{10000};
  std::chrono::milliseconds poll{100};
};

// Pure pieces of the kubelet, exposed for unit tests.
namespace kubelet_internal {
// Expands $(VAR) from `env` the way Kubernetes does: $$ is a literal $, unknown
// references stay as written.
std::string ExpandVars(const std::string& text, const std::map<std::string, std::string>& env);
// The value of a fieldRef ("metadata.name", "metadata.labels['k']", "status.podIP", ...),
// or kInvalidArgument naming the unsupported path.
Result<std::string> FieldRef(const rapidjson::Value& pod, const std::string& path,
                             const std::string& pod_ip, const std::string& host_ip);
// Container reason for a wait status: "Completed" (exit 0), "Error", "OOMKilled" (a
// SIGKILL the kubelet did not send); the exit code is 128+signal for a signal.
struct ExitInfo {
  int exit_code = 0;
  std::string reason;
};
ExitInfo DescribeExit(int wait_status, bool killed_by_kubelet);
// The termination message FallbackToLogsOnError gives: the log's last 80 lines,
// at most its last 2048 bytes (the kubelet's limits).
std::string LogTail(const std::string& path);
// A string member's value ("" when absent or not a string) and a member (nullptr).
std::string Str(const rapidjson::Value* v);
const rapidjson::Value* Member(const rapidjson::Value* v, const char* name);
// Base64 as in a Secret's data; kInvalidArgument when it is not.
Result<std::string> DecodeBase64(const std::string& text);
// A configMap/secret/downwardAPI/projected volume's files (path -> content, mode),
// written as pkg/volume/util/atomic_writer.go does: <dir>/..<timestamp>/ holds them,
// <dir>/..data links to it, and every top-level name links through ..data.
struct VolumeFile {
  std::string content;
  uint32_t mode = 0644;
};
using VolumePayload = std::map<std::string, VolumeFile>;
Status AtomicWrite(const std::string& dir, const VolumePayload& payload);
using TokenIssuer = std::function<Result<std::string>(
    const std::string& ns, const std::string& service_account, int64_t expiration_seconds)>;
// The host directory backing a volume of the pod (kubelet_volumes.cpp; docs/kubesim.md
// "Volumes"): `vol_dir` for the kubelet's own kinds, written there.
Result<std::string> PrepareVolume(const Store& store, const TokenIssuer& issue_token,
                                  const rapidjson::Value& pod, const rapidjson::Value& volume,
                                  const std::string& vol_dir);
// A projected volume's files; the serviceAccountToken source calls `issue_token`.
Status ProjectedFiles(const Store& store, const TokenIssuer& issue_token,
                      const rapidjson::Value& pod, const rapidjson::Value& projected,
                      VolumePayload& payload);
// A claim's directory: the claim must be Bound, its PersistentVolume a hostPath one.
Result<std::string> ClaimHostPath(const Store& store, const std::string& ns,
                                  const std::string& claim);
// A tool on PATH (runc, nsenter), for execve; /usr/sbin/<name> when PATH lacks it.
std::string ToolPath(const std::string& name);
// Replaces status.<key> (creating status when missing).
void SetStatusMember(rapidjson::Document& doc, const char* key, rapidjson::Value value);
// A container status's state.waiting: its reason, and its message unless empty (both modes).
rapidjson::Value WaitingJson(const std::string& reason, const std::string& message,
                             rapidjson::Document::AllocatorType& a);
// status.phase, hostIP(s), podIP(s) (when pod_ip is not empty) and startTime (once).
void SetPodStatusBasics(rapidjson::Document& doc, const std::string& phase,
                        const std::string& host_ip, const std::string& pod_ip,
                        const std::string& start_time);
// ---- A pod's resolv.conf (kubelet_dns.cpp), as pkg/kubelet/network/dns/dns.go ----
struct ResolvConfig {
  std::vector<std::string> nameservers, searches, options;
};
// parseResolvConf: nameserver lines add up, the last search and options lines win.
ResolvConfig ParseResolvConf(const std::string& text);
// As containerd writes it: search, nameserver and options lines.
std::string FormatResolvConf(const ResolvConfig& config);
struct PodDns {
  ResolvConfig config;
  std::string text;                                         // FormatResolvConf(config)
  std::vector<std::pair<std::string, std::string>> events;  // Warning reason, message
};
// GetPodDNS: dnsPolicy (ClusterFirst, ClusterFirstWithHostNet, Default, None) over
// `host`, then spec.dnsConfig merged, then the limits (FitLimits).
PodDns ComposePodDns(const rapidjson::Value& pod, const ResolvConfig& host,
                     const std::vector<std::string>& cluster_dns,
                     const std::string& cluster_domain);
// formDNSConfigFitsLimits: 3 name servers, 32 search paths of at most 253 characters
// and 2048 in all; what is cut gets a DNSConfigForming event.
void FitLimits(PodDns& dns);
// ComposePodDns over the host file `host_resolv_conf` ("" = none), with its text.
PodDns PodResolvConf(const rapidjson::Value& pod, const std::string& host_resolv_conf,
                     const std::vector<std::string>& cluster_dns,
                     const std::string& cluster_domain);
// Writes the pod's resolv.conf at `path` and records its events (both modes).
Status WriteResolvConf(Store& store, const KubeletOptions& options, const rapidjson::Value& pod,
                       const std::string& node, const std::string& path);
}  // namespace kubelet_internal

class Kubelet {
 public:
  Kubelet(Store& store, k8sbridge::Logger& log, KubeletOptions options);
  ~Kubelet();
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  // Creates the bridge, registers the nodes with the store (so terminating pods wait
  // for this kubelet), marks them Ready and starts the loop.
  Status Start();
  // Stops every pod (SIGTERM, 2 s, SIGKILL), removes their namespaces, veths and
  // volumes, the bridge, and unregisters the nodes.
  void Stop();

  // ---- Fault scenarios (also reachable through the annotations above) -------------
  // The node's kubelet "stops": no heartbeat, no pod status, no starts or deletions.
  // The node gets what the node lifecycle controller writes: Ready=Unknown (reason
  // NodeStatusUnknown) and the node.kubernetes.io/unreachable NoSchedule and NoExecute
  // taints; its pods get Ready=False. Pods keep running.
  Status SetNodeNotReady(const std::string& node);
  // Undoes SetNodeNotReady: Ready=True, taints removed, pods reported again.
  Status SetNodeReady(const std::string& node);
  // Eviction: DisruptionTarget=True (reason EvictionByEvictionAPI), then a delete with
  // `grace_seconds` (or the pod's own grace period).
  Status EvictPod(const std::string& ns, const std::string& name,
                  std::optional<int64_t> grace_seconds);
  // Cordon (spec.unschedulable) and taints, as kubectl cordon/taint would write them.
  Status CordonNode(const std::string& node, bool unschedulable);
  Status AddTaint(const std::string& node, const std::string& key, const std::string& value,
                  const std::string& effect);
  Status RemoveTaint(const std::string& node, const std::string& key);

  // Drives one iteration of the loop (tests that do not Start() the thread).
  void Tick();

  // pods/exec (exec.h), as CRI's Exec: starts the command in the pod's running
  // container and hands over its pipes; the caller waits for it. OCI mode: `runc exec`
  // into the container (its environment, working directory, user and capabilities
  // from the container's config.json, as containerd takes them from the container's
  // spec). Host mode: nsenter into the pod process's network, UTS and mount namespaces
  // with its environment and working directory (kubelet_exec.cpp). A container that
  // does not run: `container not found ("c")`, the kubelet's words.
  Result<ExecProcess> Exec(const ExecTarget& target);

 private:
  struct RunningPod {
    std::string ns, name, uid, node, container, image;
    bool fallback_to_logs = false;  // terminationMessagePolicy: FallbackToLogsOnError
    pid_t pid = -1;
    int status_fd = -1;  // read end of kubesim-podrun's status pipe; -1 once read
    std::string status_text;
    uint32_t ip = 0;
    std::string veth;
    uint64_t netns_inode = 0;
    enum class State { kStarting, kRunning, kExited } state = State::kStarting;
    std::string started_at, finished_at;
    int exit_code = 0;
    std::string reason, message;
    bool term_sent = false, kill_sent = false;
    std::chrono::steady_clock::time_point kill_at;
    bool object_gone = false;
    std::string reported;  // signature of the last status written
    // OCI mode: pid is the sandbox (kubesim-podrun --sandbox) holding the namespaces.
    std::vector<OciContainer> oci;
    std::string restart_policy = "Always";
    std::string hostname;
  };
  using EnvList = std::vector<std::pair<std::string, std::string>>;

  void Loop();
  void TickLocked();
  void StopAllPodsLocked();
  void StartPod(const rapidjson::Value& pod);
  // The ImagePullError node fault: the pod's container waits, ErrImagePull then
  // ImagePullBackOff with containerd's message, and is not started.
  void ReportPullFailure(const rapidjson::Value& pod);
  void FailStart(RunningPod& rp, const std::string& reason, const std::string& message);
  void PollPod(RunningPod& rp);
  void BeginTermination(RunningPod& rp, int64_t grace_seconds);
  void KillEverything(RunningPod& rp);
  void ReleaseNetwork(RunningPod& rp);
  void ReportStatus(RunningPod& rp);
  void Heartbeat(const std::string& node);
  // Shared by both modes: the container's environment (after `env`'s entries) and the
  // mounts of its volumeMounts; errors are CreateContainerConfigError messages.
  Status ContainerEnv(const rapidjson::Value& pod, const rapidjson::Value& c,
                      const std::string& pod_ip, const std::string& host_ip, EnvList& env);
  Status VolumeMounts(const rapidjson::Value& pod, const rapidjson::Value& c,
                      const std::string& pod_dir, std::vector<oci::SpecMount>& mounts);
  // kubelet_volumes.cpp: the host directory that backs a volume (`vol_dir` for the
  // kubelet's own: emptyDir, configMap ...).
  Result<std::string> PrepareVolume(const rapidjson::Value& pod, const rapidjson::Value& volume,
                                    const std::string& vol_dir);
  pid_t Spawn(std::vector<std::string> args, const EnvList& env, int out_fd, int status_fd);
  void ForceKill(RunningPod& rp);
  void RemovePodDir(const std::string& uid);
  // ---- OCI mode (kubelet_oci.cpp) ----
  bool OciMode() const { return image_store_.has_value(); }
  Status StartOci();
  void StartOciPod(RunningPod& p, const rapidjson::Value& pod, const std::string& pod_ip);
  void PollOciPod(RunningPod& rp);
  void StepOciContainers(RunningPod& rp, const rapidjson::Value& pod);
  bool TryStartOciContainer(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod);
  Status StartOciContainer(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod,
                           const oci::StoredImage& image);
  Status WriteOciSpec(RunningPod& rp, OciContainer& c, const rapidjson::Value& pod,
                      const oci::StoredImage& image, const std::string& lower,
                      const std::string& run);
  bool ResolveOciImage(RunningPod& rp, OciContainer& c, const rapidjson::Value& spec,
                       oci::StoredImage& image);
  void ReapOciContainers(RunningPod& rp);
  void SignalOciContainers(RunningPod& rp, bool kill);
  void CleanOciContainer(OciContainer& c);
  void FinishOciPod(RunningPod& rp);
  void ReportOciStatus(RunningPod& rp);
  void StopOciPods();
  void CleanOciLeftovers();
  Status WritePodFiles(const RunningPod& p, const rapidjson::Value& pod, const std::string& ip);
  std::string HostIP(const std::string& node) const;
  std::string PodDir(const std::string& uid) const;
  bool NodeReady(const std::string& node) const { return not_ready_.count(node) == 0; }
  Status SetNodeNotReadyLocked(const std::string& node);
  Status SetNodeReadyLocked(const std::string& node);

  Store& store_;
  k8sbridge::Logger& log_;
  KubeletOptions options_;
  PodNetwork network_;
  Status options_status_;
  std::optional<IpAllocator> ips_;
  std::string podrun_path_;
  uint64_t host_netns_inode_ = 0;
  std::optional<oci::ImageStore> image_store_;
  std::string runc_root_;

  std::recursive_mutex mu_;
  std::map<std::string, RunningPod> pods_;  // by uid
  std::set<std::string> not_ready_;
  std::set<std::string> evicting_;  // uids
  // Pods not started because their node's image pulls fail (the ImagePullError
  // fault): uid -> when the first pull failed. Started once the fault is gone.
  std::map<std::string, std::chrono::steady_clock::time_point> pull_failing_;
  std::map<std::string, std::chrono::steady_clock::time_point> last_heartbeat_;
  bool started_ = false;

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kubesim
