// The kubesim kubelet's OCI mode (kubesim --kubelet --image-store DIR): every container
// of a pod runs from its image with runc, in the pod's sandbox namespaces, the way a
// kubelet + containerd + runc run it (docs/kubesim.md, "OCI mode"). This header holds
// the per-container state and the pure rules, exposed for unit tests.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kubesim {

// One container (init or app) of a pod in OCI mode.
struct OciContainer {
  std::string name, image;
  bool init = false;
  enum class State { kWaiting, kRunning, kTerminated } state = State::kWaiting;
  std::string waiting_reason = "ContainerCreating", waiting_message;
  std::string image_id;  // repository@sha256:..., once resolved
  std::string stop_signal = "SIGTERM";
  std::string runc_id;
  pid_t runc_pid = -1;          // `runc run`, the container's shim: its exit is the container's
  std::string rootfs;           // the overlay mounted for the current run; "" when none
  std::string log_path;         // the current run's log
  std::string termination_log;  // host side of terminationMessagePath
  bool fallback_to_logs = false;
  int restart_count = 0;
  std::string started_at, finished_at;
  int exit_code = 0;
  std::string reason, message, container_id;
  bool ran = false;  // has terminated at least once (a restart has lastState)
  struct Terminated {
    int exit_code = 0;
    std::string reason, message, started_at, finished_at, container_id;
  };
  std::optional<Terminated> last;
  bool kill_sent = false;                            // SIGKILL by the kubelet (not OOMKilled)
  std::chrono::steady_clock::time_point next_try{};  // restart or pull back-off
  int pull_failures = 0;
  std::chrono::steady_clock::time_point pull_backoff_at{};  // ErrImagePull -> ImagePullBackOff
};

namespace kubelet_internal {

// A container's state as the kubelet's phase computation sees it.
struct PhaseInput {
  OciContainer::State state = OciContainer::State::kWaiting;
  bool has_last_termination = false;
  int exit_code = 0;  // of the terminated state, or of the last one while waiting
};
// The pod phase from its containers, as pkg/kubelet/kubelet_pods.go's getPhase.
std::string ComputePodPhase(const std::string& restart_policy, const std::vector<PhaseInput>& init,
                            const std::vector<PhaseInput>& app);
// The kubelet's container restart back-off: none before the first restart, then
// `base` doubling per restart up to `max` (10 s and 5 min in the kubelet).
std::chrono::milliseconds RestartDelay(int restart_count, std::chrono::milliseconds base,
                                       std::chrono::milliseconds max);
// Whether a container that exited with `exit_code` restarts under the pod's policy.
bool ShouldRestart(const std::string& restart_policy, int exit_code);

}  // namespace kubelet_internal

}  // namespace kubesim
