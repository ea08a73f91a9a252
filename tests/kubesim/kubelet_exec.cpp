// The kubelet's side of pods/exec (kubelet.h Kubelet::Exec; the protocol is exec.h's).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "kubelet.h"

namespace kubesim {

namespace kubelet_internal {

std::string ToolPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::stringstream s(path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
  std::string dir;
  while (std::getline(s, dir, ':')) {
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "/usr/sbin/" + name;
}

}  // namespace kubelet_internal

namespace {

// The environment of a running process (/proc/PID/environ): in host mode, the
// container's own.
std::vector<std::string> ProcessEnvironment(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  std::vector<std::string> env;
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (!entry.empty())
      env.push_back(entry);
  }
  return env;
}

struct Pipes {
  std::array<int, 2> in{-1, -1}, out{-1, -1}, err{-1, -1};
  ~Pipes() {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0)
        close(fd);
    }
  }
};

// Forks `argv` with stdin, stdout and stderr from pipes (or /dev/null for a stream not
// asked for) and hands the parent's ends over.
Result<ExecProcess> SpawnExec(std::vector<std::string> argv, std::vector<std::string> env,
                              const ExecTarget& target) {
  Pipes p;
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0 || (target.with_stdin && pipe2(p.in.data(), O_CLOEXEC) != 0) ||
      (target.with_stdout && pipe2(p.out.data(), O_CLOEXEC) != 0) ||
      (target.with_stderr && pipe2(p.err.data(), O_CLOEXEC) != 0)) {
    const std::string error = std::strerror(errno);
    if (null_fd >= 0)
      close(null_fd);
    return Status::Internal(fmt::format("creating the exec's pipes: {}", error));
  }
  std::vector<char*> args, envp;
  for (std::string& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  for (std::string& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const int in = p.in[0] >= 0 ? p.in[0] : null_fd;
  const int out = p.out[1] >= 0 ? p.out[1] : null_fd;
  const int err = p.err[1] >= 0 ? p.err[1] : null_fd;
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: kubesim is multi-threaded.
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    close_range(3, ~0U, 0);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(null_fd);
  if (pid < 0)
    return Status::Internal(fmt::format("fork: {}", std::strerror(fork_errno)));
  ExecProcess process;
  process.pid = pid;
  std::swap(process.stdin_fd, p.in[1]);
  std::swap(process.stdout_fd, p.out[0]);
  std::swap(process.stderr_fd, p.err[0]);
  return process;
}

}  // namespace

Result<ExecProcess> Kubelet::Exec(const ExecTarget& target) {
  std::lock_guard lock(mu_);
  const Status not_found =
      Status::NotFound(fmt::format("container not found (\"{}\")", target.container));
  auto it = pods_.find(target.uid);
  if (it == pods_.end() || it->second.object_gone)
    return not_found;
  RunningPod& rp = it->second;
  if (!OciMode()) {
    if (rp.container != target.container || rp.state != RunningPod::State::kRunning || rp.pid <= 0)
      return not_found;
    if (target.probe)
      return ExecProcess{};
    std::vector<std::string> argv = {kubelet_internal::ToolPath("nsenter"),
                                     "--target",
                                     std::to_string(rp.pid),
                                     "--net",
                                     "--uts",
                                     "--mount",
                                     "--wd"};
    argv.push_back("--");
    argv.insert(argv.end(), target.command.begin(), target.command.end());
    return SpawnExec(argv, ProcessEnvironment(rp.pid), target);
  }
  auto c = std::find_if(rp.oci.begin(), rp.oci.end(), [&](const OciContainer& oc) {
    return oc.name == target.container && oc.state == OciContainer::State::kRunning &&
           !oc.runc_id.empty();
  });
  if (c == rp.oci.end())
    return not_found;
  if (target.probe)
    return ExecProcess{};
  std::vector<std::string> argv = {kubelet_internal::ToolPath("runc"), "--root", runc_root_, "exec",
                                   c->runc_id};
  argv.insert(argv.end(), target.command.begin(), target.command.end());
  log_.Info("kubelet: exec in {}/{} container {}: {}", rp.ns, rp.name, c->name,
            fmt::join(target.command, " "));
  return SpawnExec(argv, {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, target);
}

}  // namespace kubesim
