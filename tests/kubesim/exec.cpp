#include "exec.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "pod_log.h"
#include "websocket.h"

namespace kubesim {

namespace {

using Clock = std::chrono::steady_clock;

bool Truthy(const std::string& v) {
  static const std::set<std::string> yes = {"1", "t", "T", "true", "TRUE", "True"};
  return yes.count(v) != 0;
}

// A Status as the remote command protocol writes it: no kind or apiVersion.
std::string ChannelStatus(const char* status, const std::string& message, const char* reason,
                          rapidjson::Value details, std::optional<int> code) {
  rapidjson::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("metadata", rapidjson::Value(rapidjson::kObjectType), a);
  d.AddMember("status", rapidjson::Value(status, a), a);
  if (!message.empty())
    d.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  if (reason != nullptr)
    d.AddMember("reason", rapidjson::Value(reason, a), a);
  if (!details.IsNull())
    d.AddMember("details", details, a);
  if (code)
    d.AddMember("code", *code, a);
  return ToJson(d);
}

rapidjson::Value Causes(const char* reason, const std::string& message,
                        rapidjson::MemoryPoolAllocator<>& a) {
  rapidjson::Value cause(rapidjson::kObjectType);
  if (reason != nullptr)
    cause.AddMember("reason", rapidjson::Value(reason, a), a);
  cause.AddMember("message", rapidjson::Value(message.c_str(), a), a);
  rapidjson::Value causes(rapidjson::kArrayType);
  causes.PushBack(cause, a);
  rapidjson::Value details(rapidjson::kObjectType);
  details.AddMember("causes", causes, a);
  return details;
}

}  // namespace

ExecOptions ParseExecOptions(const std::string& raw_query) {
  ExecOptions o;
  size_t start = 0;
  while (start <= raw_query.size()) {
    size_t amp = raw_query.find('&', start);
    if (amp == std::string::npos)
      amp = raw_query.size();
    // One pair at a time: `command` repeats, which a map of the query would lose.
    for (const auto& [key, value] : ParseQuery(raw_query.substr(start, amp - start))) {
      if (key == "command")
        o.command.push_back(value);
      else if (key == "container")
        o.container = value;
      else if (key == "stdin")
        o.with_stdin = Truthy(value);
      else if (key == "stdout")
        o.with_stdout = Truthy(value);
      else if (key == "stderr")
        o.with_stderr = Truthy(value);
      else if (key == "tty")
        o.tty = Truthy(value);
    }
    start = amp + 1;
  }
  return o;
}

std::optional<ApiResponse> CheckExecTarget(const Store& store, const Route& route,
                                           const ExecOptions& options, ExecTarget& target) {
  Result<ObjectPtr> got = store.Get("pods", route.ns, route.name);
  if (!got.ok())
    return StatusResponse(404, "NotFound", fmt::format("pods \"{}\" not found", route.name), "pods",
                          route.name);
  const rapidjson::Value& pod = **got;
  target.container = options.container;
  if (auto bad = PickPodContainer(pod, route.name, target.container))
    return bad;
  target.node = GetString(pod, "spec.nodeName");
  if (target.node.empty()) {
    return StatusResponse(400, "BadRequest",
                          fmt::format("pod {} does not have a host assigned", route.name));
  }
  target.ns = route.ns;
  target.pod = route.name;
  target.uid = GetString(pod, "metadata.uid");
  target.command = options.command;
  target.with_stdin = options.with_stdin;
  target.with_stdout = options.with_stdout;
  target.with_stderr = options.with_stderr;
  return std::nullopt;
}

std::string ExecSuccessStatus() {
  return ChannelStatus("Success", "", nullptr, rapidjson::Value(), std::nullopt);
}

std::string ExecExitCodeStatus(int exit_code, const std::vector<std::string>& command) {
  rapidjson::MemoryPoolAllocator<> a;
  const std::string message = fmt::format(
      "command terminated with non-zero exit code: error executing command [{}], "
      "exit code {}",
      fmt::join(command, " "), exit_code);
  return ChannelStatus("Failure", message, "NonZeroExitCode",
                       Causes("ExitCode", std::to_string(exit_code), a), std::nullopt);
}

std::string ExecInternalErrorStatus(const std::string& message) {
  rapidjson::MemoryPoolAllocator<> a;
  return ChannelStatus("Failure", "Internal error occurred: " + message, "InternalError",
                       Causes(nullptr, message, a), 500);
}

namespace {

// The channel pump of one exec: a single thread polls the socket, the process's
// stdout and stderr and (while input waits) its stdin, so that no read blocks a write.
class ExecPump {
 public:
  ExecPump(ExecConnection& conn, ExecProcess process, bool v5)
      : conn_(conn), process_(process), v5_(v5) {
    // Never block on a pipe: the one thread also serves the socket.
    for (int fd : {process_.stdin_fd, process_.stdout_fd, process_.stderr_fd}) {
      if (fd >= 0)
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    }
  }
  ~ExecPump() {
    for (int* fd : {&process_.stdin_fd, &process_.stdout_fd, &process_.stderr_fd})
      CloseFd(*fd);
  }
  ExecPump(const ExecPump&) = delete;
  ExecPump& operator=(const ExecPump&) = delete;

  void Feed(const std::string& bytes) { parser_.Feed(bytes); }
  // Until the command ended and its output went out; then the Status and the close.
  void Run(const std::vector<std::string>& command);

 private:
  enum class End { kNone, kDone, kClientGone, kStopping };
  End Step();
  bool OnSocket();
  bool HandleFrame(const ws::Frame& frame);
  bool ForwardOutput(int& fd, unsigned char channel);
  void FlushStdin();
  void CheckExited();
  void Terminate();
  void DrainUntilClosed();
  bool Send(unsigned char channel, const std::string& data) {
    std::string message(1, static_cast<char>(channel));
    message += data;
    return conn_.write(ws::EncodeFrame(ws::kOpBinary, message));
  }
  static void CloseFd(int& fd) {
    if (fd >= 0)
      close(fd);
    fd = -1;
  }

  ExecConnection& conn_;
  ExecProcess process_;
  bool v5_;
  ws::FrameParser parser_;
  std::string stdin_pending_;
  bool stdin_close_requested_ = false;
  bool client_closed_ = false;  // the client's close frame came
  bool close_sent_ = false;
  bool exited_ = false;
  int wait_status_ = 0;
  Clock::time_point exited_at_{};
};

void ExecPump::Run(const std::vector<std::string>& command) {
  End end = End::kNone;
  while (end == End::kNone)
    end = Step();
  if (end != End::kDone) {
    Terminate();
    if (end == End::kStopping)
      (void)conn_.write(ws::EncodeClose(1001, "server stopping"));
    return;
  }
  std::string status;
  if (WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0) {
    status = ExecSuccessStatus();
  } else {
    const int code =
        WIFEXITED(wait_status_) ? WEXITSTATUS(wait_status_) : 128 + WTERMSIG(wait_status_);
    status = ExecExitCodeStatus(code, command);
  }
  close_sent_ = true;
  if (Send(kChannelError, status) && conn_.write(ws::EncodeClose(ws::kCloseNormal)))
    DrainUntilClosed();
}

ExecPump::End ExecPump::Step() {
  if (conn_.stopping())
    return End::kStopping;
  std::vector<pollfd> fds;
  fds.push_back({conn_.fd, POLLIN, 0});
  if (process_.stdout_fd >= 0)
    fds.push_back({process_.stdout_fd, POLLIN, 0});
  if (process_.stderr_fd >= 0)
    fds.push_back({process_.stderr_fd, POLLIN, 0});
  if (process_.stdin_fd >= 0 && !stdin_pending_.empty())
    fds.push_back({process_.stdin_fd, POLLOUT, 0});
  // Input the process does not take yet stays in the socket: TCP slows the client.
  if (stdin_pending_.size() > (size_t{4} << 20))
    fds.front().events = 0;
  (void)::poll(fds.data(), fds.size(), exited_ ? 20 : 100);
  // The socket first: bytes already parsed or buffered count too.
  if (!OnSocket())
    return End::kClientGone;
  if (!ForwardOutput(process_.stdout_fd, kChannelStdout) ||
      !ForwardOutput(process_.stderr_fd, kChannelStderr))
    return End::kClientGone;
  FlushStdin();
  CheckExited();
  const bool outputs_done = process_.stdout_fd < 0 && process_.stderr_fd < 0;
  // A background child may hold the output open: the command's end is its exit,
  // and what it wrote within a moment after.
  if (exited_ && (outputs_done || Clock::now() - exited_at_ > std::chrono::seconds(2)))
    return End::kDone;
  return End::kNone;
}

bool ExecPump::OnSocket() {
  std::optional<std::string> bytes = conn_.read_available();
  if (!bytes)
    return false;
  parser_.Feed(*bytes);
  ws::Frame frame;
  while (true) {
    const ws::FrameParser::Result r = parser_.Next(frame);
    if (r == ws::FrameParser::Result::kNeedMore)
      return true;
    if (r == ws::FrameParser::Result::kError) {
      (void)conn_.write(ws::EncodeClose(parser_.close_code(), parser_.error()));
      return false;
    }
    if (!HandleFrame(frame))
      return false;
  }
}

bool ExecPump::HandleFrame(const ws::Frame& frame) {
  switch (frame.opcode) {
    case ws::kOpPing:
      return conn_.write(ws::EncodeFrame(ws::kOpPong, frame.payload));
    case ws::kOpPong:
      return true;
    case ws::kOpClose:
      client_closed_ = true;
      if (!close_sent_)
        (void)conn_.write(ws::EncodeClose(ws::kCloseNormal));
      return false;
    default:
      break;
  }
  if (frame.payload.empty())
    return true;
  const auto channel = static_cast<unsigned char>(frame.payload[0]);
  if (v5_ && channel == kChannelClose) {
    // [255, N]: the client is done with stream N; only stdin matters here.
    if (frame.payload.size() == 2 && static_cast<unsigned char>(frame.payload[1]) == kChannelStdin)
      stdin_close_requested_ = true;
  } else if (channel == kChannelStdin && process_.stdin_fd >= 0) {
    stdin_pending_.append(frame.payload, 1);
  }
  // Resize (4) needs a TTY; data on other channels is not the client's to send.
  FlushStdin();
  return true;
}

bool ExecPump::ForwardOutput(int& fd, unsigned char channel) {
  if (fd < 0)
    return true;
  char buf[32 * 1024];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0)
    return Send(channel, std::string(buf, static_cast<size_t>(n)));
  if (n == 0 || (errno != EAGAIN && errno != EINTR))
    CloseFd(fd);
  return true;
}

void ExecPump::FlushStdin() {
  while (process_.stdin_fd >= 0 && !stdin_pending_.empty()) {
    const ssize_t n = write(process_.stdin_fd, stdin_pending_.data(), stdin_pending_.size());
    if (n > 0) {
      stdin_pending_.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      stdin_pending_.clear();  // the process closed its input (EPIPE): drop the rest
      CloseFd(process_.stdin_fd);
    }
  }
  if (stdin_close_requested_ && stdin_pending_.empty())
    CloseFd(process_.stdin_fd);
}

void ExecPump::CheckExited() {
  if (exited_)
    return;
  int ws = 0;
  if (waitpid(process_.pid, &ws, WNOHANG) == process_.pid) {
    exited_ = true;
    wait_status_ = ws;
    exited_at_ = Clock::now();
    CloseFd(process_.stdin_fd);
  }
}

// The client left or the server stops: the command ends as its session did. runc
// exec passes SIGTERM on to the process; SIGKILL stops runc itself.
void ExecPump::Terminate() {
  if (exited_)
    return;
  (void)kill(process_.pid, SIGTERM);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  while (!exited_ && Clock::now() < deadline) {
    CheckExited();
    if (!exited_)
      usleep(10 * 1000);
  }
  if (!exited_) {
    (void)kill(process_.pid, SIGKILL);
    (void)waitpid(process_.pid, &wait_status_, 0);
    exited_ = true;
  }
}

// After our close frame: read until the client's close (or its end), so that closing
// the socket does not reset a connection with unread bytes in it.
void ExecPump::DrainUntilClosed() {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(2);
  while (!client_closed_ && Clock::now() < deadline && !conn_.stopping()) {
    pollfd p{conn_.fd, POLLIN, 0};
    (void)::poll(&p, 1, 50);
    if (!OnSocket())
      return;
  }
}

}  // namespace

void PumpExec(ExecConnection& connection, const std::string& pending, ExecProcess process, bool v5,
              const std::vector<std::string>& command) {
  ExecPump pump(connection, process, v5);
  pump.Feed(pending);
  pump.Run(command);
}

}  // namespace kubesim
