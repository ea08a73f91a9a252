#include <boost/test/unit_test.hpp>

#include <functional>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "fake_clock.h"
#include "fake_daemon_system.h"
#include "k8sbridge/container/daemon_system.h"
#include "k8sbridge/container/worker_entry.h"
#include "recording_logger.h"

namespace container = k8sbridge::container;
using k8sbridge::FakeClock;
using k8sbridge::LogLevel;
using k8sbridge::RecordingLogger;
using k8sbridge::Result;
using k8sbridge::Status;
using Verdict = container::MungeDecoded::Verdict;

namespace {

// Records what the worker did; the jail becomes mounted after `jail_after` polls.
class FakeWorkerSystem final : public k8sbridge::FakeDaemonSystemOf<container::WorkerSystem> {
 public:
  Result<bool> IsMountedRootfs(const std::string&) override { return ++polls > jail_after; }

  int jail_after = 0;
  int polls = 0;
};

// Decodes to a fixed verdict, and records what it was asked.
class FakeMunge final : public container::MungeCodec {
 public:
  Result<std::string> Encode(std::string_view payload) override {
    return "MUNGE:" + std::string(payload);
  }
  container::MungeDecoded Decode(std::string_view credential) override {
    decoded.emplace_back(credential);
    return {verdict, payload, detail};
  }
  Verdict verdict = Verdict::kValid;
  std::string payload = container::MungeCheckPayload("hpc1");
  std::string detail = "Success";
  std::vector<std::string> decoded;
};

container::WorkerSettings Settings(std::map<std::string, std::string> env,
                                   std::vector<std::string> args = {}) {
  env.emplace("K8SBRIDGE_NODE_NAME", "w-3");
  env.emplace("K8SBRIDGE_CLUSTER", "hpc1");
  auto s = container::WorkerSettingsFromEnv(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      std::move(args));
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().message());
  return *s;
}

std::function<const char*(const char*)> GetenvOf(std::map<std::string, std::string> env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// Runs the worker with a munge key to copy, `env` and the munge check passing.
std::unique_ptr<FakeWorkerSystem> RunWithKey(std::map<std::string, std::string> env) {
  auto system = std::make_unique<FakeWorkerSystem>();
  FakeMunge munge;
  RecordingLogger log;
  env.emplace("K8SBRIDGE_MUNGE_CHECK", "cred");
  env.emplace("K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key");
  BOOST_REQUIRE(container::RunWorker(Settings(std::move(env)), *system, munge, log).ok());
  return system;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(worker_entry)

BOOST_AUTO_TEST_CASE(checks_the_munge_key_then_execs_slurmd_as_the_node) {
  FakeWorkerSystem system;
  FakeMunge munge;
  RecordingLogger log;
  auto s =
      Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"}, {"K8SBRIDGE_CONF_SERVER", "ctl:6817"}}, {"-vv"});
  BOOST_REQUIRE(container::RunWorker(s, system, munge, log).ok());
  BOOST_TEST(munge.decoded == std::vector<std::string>{"cred"});
  BOOST_TEST(system.exec == (std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-b", "-N", "w-3",
                                                      "--conf-server", "ctl:6817", "-vv"}),
             boost::test_tools::per_element());
  BOOST_TEST(log.Contains("munge key matches"));
}

BOOST_AUTO_TEST_CASE(a_key_mismatch_fails_before_slurmd_and_says_so) {
  FakeWorkerSystem system;
  FakeMunge munge;
  munge.verdict = Verdict::kKeyMismatch;
  munge.detail = "Invalid credential";
  RecordingLogger log;
  Status s = container::RunWorker(Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"}}), system, munge, log)
                 .status();
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.message().find("munge key mismatch") != std::string::npos, s.message());
  BOOST_TEST(s.message().find("Invalid credential") != std::string::npos);
  BOOST_TEST(system.exec.empty());
}

BOOST_AUTO_TEST_CASE(a_stale_credential_still_proves_the_key) {
  FakeWorkerSystem system;
  FakeMunge munge;
  munge.verdict = Verdict::kValidButStale;
  munge.detail = "Expired credential";
  RecordingLogger log;
  BOOST_REQUIRE(
      container::RunWorker(Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"}}), system, munge, log).ok());
  BOOST_TEST(!system.exec.empty());
}

BOOST_AUTO_TEST_CASE(a_credential_for_another_cluster_is_refused) {
  FakeWorkerSystem system;
  FakeMunge munge;
  munge.payload = container::MungeCheckPayload("hpc2");
  RecordingLogger log;
  Status s = container::RunWorker(Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"}}), system, munge, log)
                 .status();
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.message().find("cluster=hpc2") != std::string::npos, s.message());
  BOOST_TEST(system.exec.empty());
}

BOOST_AUTO_TEST_CASE(no_munged_is_an_error_that_names_the_socket) {
  FakeWorkerSystem system;
  FakeMunge munge;
  munge.verdict = Verdict::kUnavailable;
  munge.detail = "Failed to access \"/run/x/munge.socket\"";
  RecordingLogger log;
  Status s = container::RunWorker(Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"},
                                            {"K8SBRIDGE_MUNGE_SOCKET", "/run/x/munge.socket"}}),
                                  system, munge, log)
                 .status();
  BOOST_TEST(s.message().find("/run/x/munge.socket") != std::string::npos, s.message());
  BOOST_TEST(system.exec.empty());
}

BOOST_AUTO_TEST_CASE(starts_a_private_munged_with_a_copy_of_the_key) {
  auto system = RunWithKey({{"K8SBRIDGE_MUNGE_SOCKET", "/run/munge/munge.socket.2"}});
  // The socket directory is bound into every jail: it holds the socket only. The
  // key, and munged's seed, pid and log, stay in a root-only directory outside it.
  BOOST_TEST(
      system->dirs == (std::vector<std::string>{"/run/munge 755", "/run/k8sbridge-munge 700"}),
      boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(system->copies.size(), 1u);
  BOOST_TEST(system->copies[0].second == "/run/k8sbridge-munge/munge.key");
  BOOST_REQUIRE_EQUAL(system->ran.size(), 1u);
  BOOST_TEST(system->ran[0] == (std::vector<std::string>{
                                   "/usr/sbin/munged", "--key-file=/run/k8sbridge-munge/munge.key",
                                   "--socket=/run/munge/munge.socket.2",
                                   "--pid-file=/run/k8sbridge-munge/munged.pid",
                                   "--seed-file=/run/k8sbridge-munge/munged.seed",
                                   "--log-file=/run/k8sbridge-munge/munged.log"}),
             boost::test_tools::per_element());
  for (const std::string& arg : system->ran[0]) {
    BOOST_TEST(arg != "--force");  // munged's own checks of modes and owners hold
    if (arg.starts_with("--") && arg != "--socket=/run/munge/munge.socket.2")
      BOOST_TEST(arg.find("=/run/munge/") == std::string::npos, arg);
  }
  BOOST_TEST(!system->exec.empty());
  BOOST_TEST(system->stopped.empty());
}

BOOST_AUTO_TEST_CASE(a_munged_user_runs_the_pods_munged_and_owns_its_files) {
  // The shipped worker pods set munge: the key's copy, both directories and the
  // process are that user's, and slurmd still starts (as root) after it.
  auto system = RunWithKey({{"K8SBRIDGE_MUNGED_USER", "munge"}});
  BOOST_TEST(system->given ==
                 (std::vector<std::string>{"/run/munge 100:101", "/run/k8sbridge-munge 100:101",
                                           "/run/k8sbridge-munge/munge.key 100:101"}),
             boost::test_tools::per_element());
  BOOST_REQUIRE_EQUAL(system->ran.size(), 1u);
  const std::vector<std::string> prefix(system->ran[0].begin(), system->ran[0].begin() + 6);
  BOOST_TEST(prefix == (std::vector<std::string>{"setpriv", "--reuid=100", "--regid=101",
                                                 "--clear-groups", "--", "/usr/sbin/munged"}),
             boost::test_tools::per_element());
  BOOST_TEST(!system->exec.empty());
}

BOOST_AUTO_TEST_CASE(the_key_directory_is_set_and_kept_apart_from_the_socket) {
  auto system = RunWithKey({{"K8SBRIDGE_MUNGE_SOCKET", "/tmp/p/munge/munge.socket"},
                            {"K8SBRIDGE_MUNGED_DIR", "/tmp/p/munged/"}});
  BOOST_REQUIRE_EQUAL(system->copies.size(), 1u);
  BOOST_TEST(system->copies[0].second == "/tmp/p/munged/munge.key");

  for (const char* dir : {"/run/munge", "/run/munge/key", "/run", "/"}) {
    auto bad = container::WorkerSettingsFromEnv(
        GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"},
                  {"K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key"},
                  {"K8SBRIDGE_MUNGE_SOCKET", "/run/munge/munge.socket.2"},
                  {"K8SBRIDGE_MUNGED_DIR", dir}}),
        {});
    BOOST_REQUIRE(!bad.ok());
    BOOST_TEST(bad.status().message() ==
                   fmt::format("K8SBRIDGE_MUNGED_DIR={} and the munge socket's directory "
                               "/run/munge (K8SBRIDGE_MUNGE_SOCKET) must not contain one another: "
                               "the socket's directory is bound into every job's jail, and the "
                               "key must stay out of it; use a directory of its own such as "
                               "/run/k8sbridge-munge",
                               dir),
               bad.status().message());
  }
  auto relative = container::WorkerSettingsFromEnv(
      GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"}, {"K8SBRIDGE_MUNGED_DIR", "key"}}), {});
  BOOST_TEST(relative.status().message().find("K8SBRIDGE_MUNGED_DIR='key' is not an absolute") !=
                 std::string::npos,
             relative.status().message());
}

BOOST_AUTO_TEST_CASE(a_failing_worker_stops_the_munged_it_started) {
  FakeWorkerSystem system;
  FakeMunge munge;
  munge.verdict = Verdict::kKeyMismatch;
  RecordingLogger log;
  auto s = Settings({{"K8SBRIDGE_MUNGE_CHECK", "cred"},
                     {"K8SBRIDGE_MUNGE_SOCKET", "/run/munge/munge.socket.2"},
                     {"K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key"}});
  BOOST_TEST(!container::RunWorker(s, system, munge, log).ok());
  BOOST_TEST(system.stopped == std::vector<std::string>{"/run/k8sbridge-munge/munged.pid"});
}

BOOST_AUTO_TEST_CASE(waits_for_the_jail_then_prepares_it) {
  FakeWorkerSystem system;
  system.jail_after = 3;
  FakeMunge munge;
  RecordingLogger log;
  auto s = Settings(
      {{"K8SBRIDGE_JAIL", "/jail"},
       {"K8SBRIDGE_JAIL_PREPARE", "/usr/sbin/k8sbridge-jail-prepare --munge-dir /run/munge"}});
  BOOST_REQUIRE(container::RunWorker(s, system, munge, log).ok());
  BOOST_TEST(system.polls == 4);
  BOOST_REQUIRE_EQUAL(system.ran.size(), 1u);
  BOOST_TEST(
      system.ran[0] == (std::vector<std::string>{"/usr/sbin/k8sbridge-jail-prepare", "--jail",
                                                 "/jail", "--munge-dir", "/run/munge"}),
      boost::test_tools::per_element());
  BOOST_TEST(!system.exec.empty());
  BOOST_TEST(log.Contains("no munge key", LogLevel::kWarning) == false);
  BOOST_TEST(log.Contains("is not checked", LogLevel::kWarning));
}

BOOST_AUTO_TEST_CASE(gives_up_on_the_jail_at_the_deadline) {
  FakeWorkerSystem system;
  system.jail_after = 1'000'000;
  FakeMunge munge;
  RecordingLogger log;
  auto s = Settings({{"K8SBRIDGE_JAIL", "/jail"}, {"K8SBRIDGE_JAIL_WAIT", "30s"}});
  Status st = container::RunWorker(s, system, munge, log).status();
  BOOST_TEST(!st.ok());
  BOOST_TEST(st.message().find("jail /jail is not mounted after 30 s") != std::string::npos,
             st.message());
  BOOST_TEST(system.exec.empty());
  BOOST_TEST(system.clock_.total_slept() >= std::chrono::seconds(30));
}

BOOST_AUTO_TEST_CASE(bad_settings_name_the_variable) {
  auto none = container::WorkerSettingsFromEnv(GetenvOf({}), {});
  BOOST_TEST(none.status().message().find("K8SBRIDGE_NODE_NAME is not set") != std::string::npos);
  auto relative = container::WorkerSettingsFromEnv(
      GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"}, {"K8SBRIDGE_JAIL", "jail"}}), {});
  BOOST_TEST(relative.status().message().find("K8SBRIDGE_JAIL='jail' is not an absolute path") !=
                 std::string::npos,
             relative.status().message());
  auto wait = container::WorkerSettingsFromEnv(
      GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"}, {"K8SBRIDGE_JAIL_WAIT", "soon"}}), {});
  BOOST_TEST(wait.status().message().find("K8SBRIDGE_JAIL_WAIT") != std::string::npos);
  for (const char* blank : {" ", "\t \n"}) {
    auto prepare = container::WorkerSettingsFromEnv(GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"},
                                                              {"K8SBRIDGE_JAIL", "/jail"},
                                                              {"K8SBRIDGE_JAIL_PREPARE", blank}}),
                                                    {});
    BOOST_REQUIRE(!prepare.ok());
    BOOST_TEST(prepare.status().message() ==
               "K8SBRIDGE_JAIL_PREPARE holds only white space: give the jail-prepare command and "
               "its arguments (e.g. \"/usr/sbin/k8sbridge-jail-prepare --munge-dir /run/munge\"), "
               "or unset it to prepare no jail");
  }
}

BOOST_AUTO_TEST_CASE(another_slurm_is_refused_before_munged_starts) {
  FakeWorkerSystem system;
  system.version_output = std::string("slurm-wlm 23.02.7\n");
  FakeMunge munge;
  RecordingLogger log;
  auto s = Settings({{"K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key"},
                     {"K8SBRIDGE_SLURMD", "/opt/slurm/sbin/slurmd"}});
  Status st = container::RunWorker(s, system, munge, log).status();
  BOOST_TEST(st.message() ==
                 fmt::format("Slurm version mismatch: /opt/slurm/sbin/slurmd is Slurm 23.02.7, but "
                             "this k8sbridge was built for Slurm {}; use the k8sbridge image built "
                             "for Slurm 23.02.7 (or build k8sbridge against it)",
                             k8sbridge::BuiltForSlurm()),
             st.message());
  BOOST_TEST(system.asked ==
             (std::vector<std::vector<std::string>>{{"/opt/slurm/sbin/slurmd", "-V"}}));
  BOOST_TEST(system.ran.empty());
  BOOST_TEST(system.copies.empty());
  BOOST_TEST(system.exec.empty());
}

BOOST_AUTO_TEST_CASE(a_missing_munge_key_is_refused_naming_its_path) {
  FakeWorkerSystem system;
  system.files["/etc/munge-secret/munge.key"] = FakeWorkerSystem::Missing();
  FakeMunge munge;
  RecordingLogger log;
  auto s = Settings({{"K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key"}});
  Status st = container::RunWorker(s, system, munge, log).status();
  BOOST_TEST(st.message() ==
                 "munge key /etc/munge-secret/munge.key is missing (No such file or directory): "
                 "mount the Secret with the cluster's munge.key there, or set "
                 "K8SBRIDGE_MUNGED_KEY to where it is",
             st.message());
  BOOST_TEST(system.ran.empty());
  BOOST_TEST(system.exec.empty());
}

BOOST_AUTO_TEST_CASE(as_pid_1_slurmd_is_supervised_and_its_exit_code_returned) {
  FakeWorkerSystem system;
  system.supervised_exit = 143;
  FakeMunge munge;
  RecordingLogger log;
  auto s = Settings({{"K8SBRIDGE_MUNGED_KEY", "/etc/munge-secret/munge.key"},
                     {"K8SBRIDGE_MUNGE_CHECK", "cred"},
                     {"K8SBRIDGE_INIT", "1"}});
  BOOST_TEST(s.supervise);
  auto code = container::RunWorker(s, system, munge, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(*code == 143);
  BOOST_TEST(system.exec.empty());
  BOOST_TEST(
      system.supervised == (std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-b", "-N", "w-3"}),
      boost::test_tools::per_element());
  // The munged it started is stopped after slurmd, by the supervisor.
  BOOST_TEST(system.supervised_munged == "/run/k8sbridge-munge/munged.pid");
  BOOST_TEST(system.stopped.empty());
}

BOOST_AUTO_TEST_CASE(init_takes_only_0_or_1) {
  BOOST_TEST(!Settings({}).supervise);
  BOOST_TEST(!Settings({{"K8SBRIDGE_INIT", "0"}}).supervise);
  auto bad = container::WorkerSettingsFromEnv(
      GetenvOf({{"K8SBRIDGE_NODE_NAME", "w-1"}, {"K8SBRIDGE_INIT", "yes"}}), {});
  BOOST_REQUIRE(!bad.ok());
  BOOST_TEST(bad.status().message().starts_with("K8SBRIDGE_INIT='yes': give 1"),
             bad.status().message());
}

// The pod's termination message, and so the Slurm node's reason, says why a step
// of the worker's start failed: the failing program's last line on stderr.
BOOST_AUTO_TEST_CASE(a_failed_program_is_named_with_its_last_error_line) {
  Status st = container::real::Run(
      {"sh", "-c", "echo starting >&2; echo 'cannot create /x: read-only' >&2; echo >&2; exit 1"});
  BOOST_TEST(st.message() == "sh exited with status 1: cannot create /x: read-only", st.message());
  BOOST_TEST(container::real::Run({"sh", "-c", "exit 2"}).message() == "sh exited with status 2");
  BOOST_TEST(container::real::Run({"sh", "-c", "echo fine >&2"}).ok());
}

BOOST_AUTO_TEST_SUITE_END()
