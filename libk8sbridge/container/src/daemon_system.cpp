#include "k8sbridge/container/daemon_system.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/file.h"
#include "k8sbridge/supervise.h"

namespace k8sbridge::container::real {
namespace {

// Waits for `pid`; Ok when it exited 0, else an error naming `program`.
Status WaitFor(int pid, const std::string& program) {
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0) {
    if (errno != EINTR)
      return Status::IoError(fmt::format("waiting for {}: {}", program, std::strerror(errno)));
  }
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
    return Status::Ok();
  if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
    return Status::NotFound(fmt::format("{} could not be run (is it in the image?)", program));
  return Status::IoError(fmt::format("{} {}", program, DescribeWaitStatus(ws)));
}

// As long as a stopping munged gets before SIGKILL (it saves its seed first).
constexpr std::chrono::milliseconds kStopGrace{5000};

std::string BaseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int PidIn(const std::string& pid_file) {
  std::ifstream in(pid_file);
  int pid = 0;
  return in >> pid && pid > 1 ? pid : 0;
}

// "munged" for /run/k8sbridge-munge/munged.pid.
std::string DaemonOf(const std::string& pid_file) {
  std::string name = BaseName(pid_file);
  if (name.ends_with(".pid"))
    name.resize(name.size() - 4);
  return name;
}

// Copies what the child writes on `fd` to our stderr (the container's log keeps
// it) until the child closes it, and returns the last line that is not blank.
std::string RelayKeepingLastLine(int fd) {
  std::string pending, last;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    (void)!write(STDERR_FILENO, buf, static_cast<size_t>(n));
    pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
      if (pending.find_first_not_of(" \t\r", 0) < eol)
        last = pending.substr(0, eol);
      pending.erase(0, eol + 1);
    }
  }
  if (pending.find_first_not_of(" \t\r\n") != std::string::npos)
    last = pending;
  return last;
}

}  // namespace

Status Run(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("pipe for {}: {}", argv[0], std::strerror(errno)));
  auto pid = SpawnProcess(argv, -1, fds[1]);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  // The program's own last words say why it failed: the pod's termination
  // message, and so the Slurm node's reason, quotes them.
  const std::string last = RelayKeepingLastLine(fds[0]);
  close(fds[0]);
  Status st = WaitFor(*pid, argv[0]);
  if (st.ok() || st.code() == Status::Code::kNotFound || last.empty())
    return st;
  return Status::IoError(fmt::format("{}: {}", st.message(), last));
}

Result<std::string> Output(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("pipe for {}: {}", argv[0], std::strerror(errno)));
  auto pid = SpawnProcess(argv, fds[1]);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  if (Status st = WaitFor(*pid, argv[0]); !st.ok())
    return st;
  return out;
}

FileFacts Inspect(const std::string& path) {
  FileFacts f;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    f.error = std::strerror(errno);
    return f;
  }
  f.exists = true;
  f.is_directory = S_ISDIR(st.st_mode);
  f.size = static_cast<std::uint64_t>(st.st_size);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    f.error = std::strerror(errno);
  } else {
    f.readable = true;
    close(fd);
  }
  return f;
}

Status CopyPrivateFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in)
    return Status::IoError(fmt::format("cannot read {}: {}", from, std::strerror(errno)));
  std::stringstream data;
  data << in.rdbuf();
  (void)unlink(to.c_str());
  const int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400);
  if (fd < 0)
    return Status::IoError(fmt::format("cannot create {}: {}", to, std::strerror(errno)));
  const std::string bytes = data.str();
  const bool written = write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  const int err = errno;
  close(fd);
  if (!written)
    return Status::IoError(fmt::format("cannot write {}: {}", to, std::strerror(err)));
  return Status::Ok();
}

Status MakeDirectory(const std::string& path, unsigned mode) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec)
    return Status::IoError(fmt::format("cannot create {}: {}", path, ec.message()));
  // munged checks owner and mode (an emptyDir is 0777, and may belong to another
  // uid): the directory must be ours and writable by us alone.
  if (chown(path.c_str(), geteuid(), getegid()) != 0)
    return Status::IoError(fmt::format("cannot chown {}: {}", path, std::strerror(errno)));
  if (chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
    return Status::IoError(fmt::format("cannot chmod {}: {}", path, std::strerror(errno)));
  return Status::Ok();
}

Status WriteFile(const std::string& path, const std::string& content, unsigned mode) {
  return WriteFileAtomic(path, content, static_cast<mode_t>(mode));
}

Result<UserIds> LookUpUser(const std::string& name) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  const int err = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (found == nullptr) {
    return Status::NotFound(err != 0 ? std::strerror(err)
                                     : fmt::format("no user {} in /etc/passwd", name));
  }
  return UserIds{pw.pw_uid, pw.pw_gid};
}

Status GiveTo(const std::string& path, const UserIds& owner) {
  if (lchown(path.c_str(), owner.uid, owner.gid) != 0) {
    return Status::IoError(fmt::format("cannot give {} to uid {} gid {}: {}", path, owner.uid,
                                       owner.gid, std::strerror(errno)));
  }
  return Status::Ok();
}

void StopDaemon(const std::string& pid_file, Logger& log) {
  Companion daemon;
  daemon.pid = PidIn(pid_file);
  daemon.name = DaemonOf(pid_file);
  if (daemon.pid <= 0)
    return;
  // Waited for, not just signalled: as PID 1 our exit would SIGKILL it.
  RealInitSystem system;
  StopCompanions({daemon}, kStopGrace, system, log);
}

Status Exec(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  return Status::IoError(fmt::format("cannot exec {}: {}", args[0], std::strerror(errno)));
}

Result<int> Supervise(const std::vector<std::string>& argv, const std::string& munged_pid_file,
                      Logger& log) {
  SuperviseRequest request;
  request.argv = argv;
  request.name = BaseName(argv.at(0));
  if (!munged_pid_file.empty()) {
    Companion munged;
    munged.pid = PidIn(munged_pid_file);
    munged.name = DaemonOf(munged_pid_file);
    request.companions.push_back(munged);
    request.companion_grace = kStopGrace;
  }
  RealInitSystem system;
  return k8sbridge::Supervise(request, system, log);
}

}  // namespace k8sbridge::container::real
