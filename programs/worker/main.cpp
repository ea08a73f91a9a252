// k8sbridge-worker: the command of a worker pod (docs/power.md, "The worker
// entrypoint"). A thin main over power::RunWorker: the real outside world here,
// the logic and its tests in libk8sbridge.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/jail/prepare.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/munge_check.h"
#include "k8sbridge/power/worker_entry.h"
#include "k8sbridge/program.h"

namespace k8sbridge {
namespace {

// Where Kubernetes reads a container's termination message by default
// (terminationMessagePath). It exists in every real container; written only if
// it is there, never created.
constexpr const char* kTerminationLog = "/dev/termination-log";

std::vector<char*> Argv(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

class RealWorkerSystem final : public power::WorkerSystem {
 public:
  Clock& clock() override { return RealClock::Instance(); }

  Status Run(const std::vector<std::string>& args) override {
    const pid_t pid = fork();
    if (pid < 0)
      return Status::IoError(fmt::format("fork for {}: {}", args[0], std::strerror(errno)));
    if (pid == 0) {
      auto argv = Argv(args);
      execv(argv[0], argv.data());
      fmt::print(stderr, "k8sbridge-worker: cannot run {}: {}\n", args[0], std::strerror(errno));
      _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0) {
      if (errno != EINTR)
        return Status::IoError(fmt::format("waiting for {}: {}", args[0], std::strerror(errno)));
    }
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
      return Status::Ok();
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
      return Status::NotFound(fmt::format("{} could not be run (is it in the image?)", args[0]));
    return Status::IoError(WIFEXITED(ws)
                               ? fmt::format("{} exited with status {}", args[0], WEXITSTATUS(ws))
                               : fmt::format("{} was killed by signal {}", args[0], WTERMSIG(ws)));
  }

  Status CopyPrivateFile(const std::string& from, const std::string& to) override {
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
    const bool written =
        write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    const int err = errno;
    close(fd);
    if (!written)
      return Status::IoError(fmt::format("cannot write {}: {}", to, std::strerror(err)));
    return Status::Ok();
  }

  Status MakeDirectory(const std::string& path, unsigned mode) override {
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

  Result<bool> IsMountedRootfs(const std::string& path) override {
    char real[PATH_MAX];
    if (realpath(path.c_str(), real) == nullptr)
      return false;
    auto mounts = jail::MountPoints();
    if (!mounts.ok())
      return mounts.status();
    if (std::find(mounts->begin(), mounts->end(), std::string(real)) == mounts->end())
      return false;
    struct stat st {};
    return stat((std::string(real) + "/usr").c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  void StopDaemon(const std::string& pid_file) override {
    std::ifstream in(pid_file);
    pid_t pid = 0;
    if (in >> pid && pid > 1)
      (void)kill(pid, SIGTERM);
  }

  Status Exec(const std::vector<std::string>& args) override {
    auto argv = Argv(args);
    execv(argv[0], argv.data());
    return Status::IoError(fmt::format("cannot exec {}: {}", args[0], std::strerror(errno)));
  }
};

void WriteTerminationMessage(const std::string& message) {
  const int fd = open(kTerminationLog, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0)
    return;
  (void)!write(fd, message.data(), message.size());
  close(fd);
}

constexpr std::string_view kUsage =
    "usage: k8sbridge-worker [SLURMD-ARGS...]\n"
    "       k8sbridge-worker --help | --version\n"
    "The worker pod's command: checks the munge key, prepares the jail, then execs\n"
    "slurmd -D -b with SLURMD-ARGS. Its settings come from the K8SBRIDGE_* environment\n"
    "that k8sbridge-power sets (docs/power.md).\n";

int Run(int argc, char** argv) {
  // Only the first argument: the rest are slurmd's.
  if (argc > 1) {
    if (auto answered = AnswerHelpOrVersion(2, argv, "k8sbridge-worker", kUsage))
      return *answered;
  }
  StderrLogger log("k8sbridge-worker");
  std::vector<std::string> args(argv + 1, argv + argc);
  auto settings = power::WorkerSettingsFromEnv(std::getenv, std::move(args));
  if (!settings.ok()) {
    log.Error("{}", settings.status().message());
    WriteTerminationMessage(settings.status().message());
    return 2;
  }
  RealWorkerSystem system;
  power::LibMungeCodec munge(settings->munge_socket);
  Status s = power::RunWorker(*settings, system, munge, log);
  // Only a failure returns: success execs slurmd.
  log.Error("{}", s.message());
  WriteTerminationMessage(s.message());
  return 1;
}

}  // namespace
}  // namespace k8sbridge

int main(int argc, char** argv) {
  return k8sbridge::Run(argc, argv);
}
