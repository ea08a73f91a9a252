// The pods/{name}/exec subresource (kubectl exec) over a WebSocket, as kube-apiserver
// 1.32 serves it to kubectl 1.32: the API server's checks of
// pkg/registry/core/pod/strategy.go (ExecLocation, streamLocation), the kubelet's
// "container not found", then the v5.channel.k8s.io (or v4) channel protocol of
// k8s.io/apimachinery/pkg/util/remotecommand: every binary message starts with its
// channel, 0 stdin, 1 stdout, 2 stderr, 3 error (a metav1.Status when the command
// ended), 4 resize; v5 adds 255 CLOSE (the client half-closes a stream: [255, 0] is the
// end of stdin). The kubelet (kubelet.h) starts the process; this file moves the bytes.
// SPDY (the client's fallback) is answered as a server without it (docs/kubesim.md).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api.h"
#include "k8sbridge/status.h"
#include "store.h"

namespace kubesim {

inline constexpr const char* kExecProtocolV5 = "v5.channel.k8s.io";
inline constexpr const char* kExecProtocolV4 = "v4.channel.k8s.io";

// The channels of the remote command protocol.
inline constexpr unsigned char kChannelStdin = 0;
inline constexpr unsigned char kChannelStdout = 1;
inline constexpr unsigned char kChannelStderr = 2;
inline constexpr unsigned char kChannelError = 3;
inline constexpr unsigned char kChannelResize = 4;
inline constexpr unsigned char kChannelClose = 255;

// PodExecOptions from the query (command may repeat; stdin, stdout, stderr, tty are
// "true" or "1").
struct ExecOptions {
  std::vector<std::string> command;
  std::string container;
  bool with_stdin = false, with_stdout = false, with_stderr = false, tty = false;
};
ExecOptions ParseExecOptions(const std::string& raw_query);

// What the kubelet is asked to run.
struct ExecTarget {
  std::string ns, pod, uid, node, container;
  std::vector<std::string> command;
  bool with_stdin = false, with_stdout = false, with_stderr = false;  // streams asked for
  // Only whether the container runs (the kubelet's answer to a request it will not
  // stream): no process is started.
  bool probe = false;
};
// The started process: the kubelet's child; its pipes (stdin_fd -1 without stdin). The
// server waits for it.
struct ExecProcess {
  pid_t pid = -1;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
};
// The kubelet's side: kNotFound (or any error) is the kubelet's answer, sent as its
// HTTP 500 text (`container not found ("c")`).
using ExecStarter = std::function<Result<ExecProcess>(const ExecTarget&)>;

// The API server's checks before it connects to the kubelet: the pod (404), the
// container (400: upstream's messages; one container needs no name), a node (400 "does
// not have a host assigned"); nullopt with `target` filled when the exec may go on.
std::optional<ApiResponse> CheckExecTarget(const Store& store, const Route& route,
                                           const ExecOptions& options, ExecTarget& target);

// The error channel's metav1.Status, as pkg/kubelet/cri/streaming/remotecommand
// writes it: Success; Failure, reason NonZeroExitCode with the cause
// {reason: ExitCode, message: "N"}; or an InternalError with `message`.
std::string ExecSuccessStatus();
std::string ExecExitCodeStatus(int exit_code, const std::vector<std::string>& command);
std::string ExecInternalErrorStatus(const std::string& message);

// The upgraded connection, as the channel pump sees it.
struct ExecConnection {
  int fd = -1;  // the socket, polled for input
  // What can be read now without blocking: bytes (maybe none yet), or nullopt once the
  // peer has closed or the connection failed.
  std::function<std::optional<std::string>()> read_available;
  std::function<bool(const std::string&)> write;  // the whole buffer; false: gone
  std::function<bool()> stopping;                 // the server shuts down
};

// Runs the channel protocol between `connection` (after the 101; `pending` holds bytes
// already read from it) and `process` until the command has ended and its output is
// sent: then the Status on the error channel and a normal close. A client that leaves
// or a server that stops ends the command (SIGTERM, then SIGKILL). Closes the
// process's pipes and reaps it.
void PumpExec(ExecConnection& connection, const std::string& pending, ExecProcess process, bool v5,
              const std::vector<std::string>& command);

}  // namespace kubesim
