// The test double of container::DaemonSystem (k8sbridge/container/daemon_system.h), or
// of an interface derived from it: records what the entrypoint did and answers
// from fields the test sets. For unit tests only.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fake_clock.h"
#include "k8sbridge/container/daemon_system.h"
#include "k8sbridge/program.h"

namespace k8sbridge {

template <typename Interface>
class FakeDaemonSystemOf : public Interface {
 public:
  using FileFacts = container::FileFacts;

  Clock& clock() override { return clock_; }
  Status Run(const std::vector<std::string>& argv) override {
    ran.push_back(argv);
    return run_status;
  }
  Result<std::string> Output(const std::vector<std::string>& argv) override {
    asked.push_back(argv);
    return version_output;
  }
  // A path not in `files` exists as a readable 1 KiB file (a munge key, a config);
  // /etc/slurm, the default Slurm configuration directory, is a directory.
  FileFacts Inspect(const std::string& path) override {
    auto it = files.find(path);
    return it == files.end() ? Readable(1024) : it->second;
  }
  Status CopyPrivateFile(const std::string& from, const std::string& to) override {
    copies.emplace_back(from, to);
    return Status::Ok();
  }
  Status MakeDirectory(const std::string& path, unsigned mode) override {
    dirs.push_back(fmt::format("{} {:o}", path, mode));
    return Status::Ok();
  }
  Status WriteFile(const std::string& path, const std::string& content, unsigned mode) override {
    written[path] = fmt::format("{:o} {}", mode, content);
    return Status::Ok();
  }
  Result<container::UserIds> LookUpUser(const std::string& name) override {
    auto it = users.find(name);
    if (it == users.end())
      return Status::NotFound(fmt::format("no user {} in /etc/passwd", name));
    return it->second;
  }
  Status GiveTo(const std::string& path, const container::UserIds& owner) override {
    given.push_back(fmt::format("{} {}:{}", path, owner.uid, owner.gid));
    return Status::Ok();
  }
  void StopDaemon(const std::string& pid_file) override { stopped.push_back(pid_file); }
  Status Exec(const std::vector<std::string>& argv) override {
    exec = argv;
    return Status::Ok();
  }
  Result<int> Supervise(const std::vector<std::string>& argv,
                        const std::string& munged_pid_file) override {
    supervised = argv;
    supervised_munged = munged_pid_file;
    return supervised_exit;
  }

  static FileFacts Readable(std::uint64_t size) {
    FileFacts f;
    f.exists = f.readable = true;
    f.size = size;
    return f;
  }
  static FileFacts Missing() {
    FileFacts f;
    f.error = "No such file or directory";
    return f;
  }
  static FileFacts Directory() {
    FileFacts f = Readable(4096);
    f.is_directory = true;
    return f;
  }

  FakeClock clock_;
  Status run_status;
  Result<std::string> version_output = fmt::format("slurm {}\n", BuiltForSlurm());
  Result<int> supervised_exit = 0;
  std::map<std::string, FileFacts> files = {{"/etc/slurm", Directory()}};
  std::vector<std::vector<std::string>> ran;
  std::vector<std::vector<std::string>> asked;  // Output's
  std::vector<std::pair<std::string, std::string>> copies;
  std::vector<std::string> dirs;               // "path mode"
  std::map<std::string, std::string> written;  // path -> "mode content"
  std::map<std::string, container::UserIds> users = {{"munge", {100, 101}}};
  std::vector<std::string> given;  // GiveTo's "path uid:gid"
  std::vector<std::string> exec;
  std::vector<std::string> supervised;
  std::string supervised_munged;
  std::vector<std::string> stopped;
};

}  // namespace k8sbridge
