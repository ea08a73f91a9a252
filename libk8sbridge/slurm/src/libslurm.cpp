#include "k8sbridge/slurm/libslurm.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/slurm/api.h"

extern char** environ;

namespace k8sbridge::slurm {

namespace {

// Runs argv (argv[0] from PATH) with stdout and stderr into one pipe; returns the
// exit status (-1 for a signal) and what it printed.
Result<std::pair<int, std::string>> RunCapturing(std::vector<std::string> args) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::IoError(
        fmt::format("cannot run {}: {}; is it on PATH?", args[0], std::strerror(rc)));
  }
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n > 0)
      output.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR)
      break;
  }
  close(fds[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  return std::make_pair(WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1, output);
}

// scontrol's message on one line, for a log line or an error.
std::string OneLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  for (char& c : text) {
    if (c == '\n')
      c = ' ';
  }
  return text;
}

Status ScontrolRebootAsap(std::string_view node, std::string_view reason) {
  std::vector<std::string> args = {
      "scontrol",       "reboot", "asap", "nextstate=resume", fmt::format("reason={}", reason),
      std::string(node)};
  auto ran = RunCapturing(args);
  if (!ran.ok())
    return ran.status();
  if (ran->first != 0) {
    return Status::Unavailable(
        fmt::format("scontrol reboot asap nextstate=resume {}: exit status {}: {}", node,
                    ran->first, OneLine(ran->second)));
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Slurm> NewLibslurm() {
  SlurmApi api;
  api.init = &slurm_init;
  api.load_node = &slurm_load_node;
  api.load_node_single = &slurm_load_node_single;
  api.free_node_info_msg = &slurm_free_node_info_msg;
  api.init_update_node_msg = &slurm_init_update_node_msg;
  api.update_node = &slurm_update_node;
  api.load_ctl_conf = &slurm_load_ctl_conf;
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(26, 5, 0)
  api.free_ctl_conf = &slurm_free_conf;  // 26.05 renamed slurm_free_ctl_conf()
#else
  api.free_ctl_conf = &slurm_free_ctl_conf;
#endif
  api.strerror = &slurm_strerror;
  api.reboot_asap = &ScontrolRebootAsap;
  return NewApiSlurm(api);
}

}  // namespace k8sbridge::slurm
