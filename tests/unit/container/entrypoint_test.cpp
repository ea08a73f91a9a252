#include <boost/test/unit_test.hpp>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fake_daemon_system.h"
#include "k8sbridge/container/container_start.h"
#include "k8sbridge/container/entrypoint.h"
#include "recording_logger.h"

namespace container = k8sbridge::container;
using k8sbridge::RecordingLogger;
using k8sbridge::Result;
using k8sbridge::Status;

namespace {

using FakeSystem = k8sbridge::FakeDaemonSystemOf<container::DaemonSystem>;

Result<container::EntrypointSettings> SettingsOf(std::vector<std::string> args,
                                                 std::map<std::string, std::string> env = {}) {
  return container::EntrypointSettingsFromEnv(
      [env](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      std::move(args));
}

container::EntrypointSettings Settings(std::vector<std::string> args,
                                       std::map<std::string, std::string> env = {}) {
  auto s = SettingsOf(std::move(args), std::move(env));
  BOOST_REQUIRE_MESSAGE(s.ok(), s.status().message());
  return *s;
}

std::string FailureOf(const container::EntrypointSettings& s, FakeSystem& system) {
  RecordingLogger log;
  auto code = container::RunEntrypoint(s, system, log);
  BOOST_REQUIRE(!code.ok());
  // Nothing was started: no munged to stop, no daemon.
  BOOST_TEST(system.ran.empty());
  BOOST_TEST(system.supervised.empty());
  BOOST_TEST(system.exec.empty());
  return code.status().message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(entrypoint)

BOOST_AUTO_TEST_CASE(controller_checks_then_supervises_slurmctld_with_the_mounted_config) {
  FakeSystem system;
  system.files["/etc/slurm-cm"] = FakeSystem::Directory();
  system.supervised_exit = 7;
  RecordingLogger log;
  auto s = Settings({"controller", "-vv"},
                    {{"K8SBRIDGE_SLURM_CONF_DIR", "/etc/slurm-cm/"}, {"K8SBRIDGE_INIT", "1"}});
  auto code = container::RunEntrypoint(s, system, log);
  BOOST_REQUIRE_MESSAGE(code.ok(), code.status().message());
  BOOST_TEST(*code == 7);
  BOOST_TEST(system.asked ==
             (std::vector<std::vector<std::string>>{{"/usr/sbin/slurmctld", "-V"}}));
  BOOST_TEST(system.copies == (std::vector<std::pair<std::string, std::string>>{
                                  {"/etc/munge/munge.key", "/run/k8sbridge-munge/munge.key"}}));
  BOOST_REQUIRE_EQUAL(system.ran.size(), 1u);
  BOOST_TEST(system.ran[0][0] == "/usr/sbin/munged");
  BOOST_TEST(system.supervised == (std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-f",
                                                            "/etc/slurm-cm/slurm.conf", "-vv"}),
             boost::test_tools::per_element());
  BOOST_TEST(system.supervised_munged == "/run/k8sbridge-munge/munged.pid");
}

// slurmctld's power programs run with SLURM_CONF alone: the controller leaves the
// pod's API server address where InCluster=yes looks for it.
BOOST_AUTO_TEST_CASE(controller_writes_the_in_cluster_service_file_for_the_power_programs) {
  FakeSystem system;
  RecordingLogger log;
  auto s = Settings({"controller"},
                    {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  auto code = container::RunEntrypoint(s, system, log);
  BOOST_REQUIRE_MESSAGE(code.ok(), code.status().message());
  BOOST_REQUIRE_EQUAL(system.written.size(), 1u);
  BOOST_TEST(system.written.at("/run/k8sbridge/kubernetes-service") ==
             "644 KUBERNETES_SERVICE_HOST=10.96.0.1\nKUBERNETES_SERVICE_PORT=443\n");
  BOOST_TEST(system.dirs.front() == "/run/k8sbridge 755");

  FakeSystem outside;  // not in a pod: nothing written, the log says what to use
  RecordingLogger outside_log;
  BOOST_REQUIRE(container::RunEntrypoint(Settings({"controller"}), outside, outside_log).ok());
  BOOST_TEST(outside.written.empty());
  BOOST_TEST(outside_log.Contains("Kubeconfig="));

  FakeSystem login;  // a login pod runs no power program
  RecordingLogger login_log;
  BOOST_REQUIRE(container::RunEntrypoint(Settings({"login"}, {{"KUBERNETES_SERVICE_HOST", "h"},
                                                              {"KUBERNETES_SERVICE_PORT", "1"}}),
                                         login, login_log)
                    .ok());
  BOOST_TEST(login.written.empty());
}

BOOST_AUTO_TEST_CASE(not_as_pid_1_the_command_is_execd) {
  FakeSystem system;
  RecordingLogger log;
  auto code = container::RunEntrypoint(Settings({"login"}), system, log);
  BOOST_REQUIRE(code.ok());
  BOOST_TEST(system.asked == (std::vector<std::vector<std::string>>{{"/usr/bin/srun", "-V"}}));
  BOOST_TEST(system.exec == (std::vector<std::string>{"sleep", "infinity"}),
             boost::test_tools::per_element());
  BOOST_TEST(system.supervised.empty());
}

BOOST_AUTO_TEST_CASE(login_runs_the_command_it_is_given) {
  auto s = Settings({"login", "/bin/bash", "-l"}, {{"K8SBRIDGE_SRUN", "/opt/slurm/bin/srun"}});
  BOOST_TEST(container::EntrypointCommand(s) == (std::vector<std::string>{"/bin/bash", "-l"}),
             boost::test_tools::per_element());
  BOOST_TEST(s.srun == "/opt/slurm/bin/srun");
}

BOOST_AUTO_TEST_CASE(a_missing_munge_key_is_refused_before_anything_starts) {
  FakeSystem system;
  system.files["/secret/munge.key"] = FakeSystem::Missing();
  BOOST_TEST(FailureOf(Settings({"controller"}, {{"K8SBRIDGE_MUNGED_KEY", "/secret/munge.key"}}),
                       system) ==
             "munge key /secret/munge.key is missing (No such file or directory): mount the "
             "Secret with the cluster's munge.key there, or set K8SBRIDGE_MUNGED_KEY to where it "
             "is");
}

BOOST_AUTO_TEST_CASE(an_unusable_munge_key_says_why) {
  FakeSystem system;
  system.files["/etc/munge/munge.key"] = FakeSystem::Readable(16);
  BOOST_TEST(FailureOf(Settings({"login"}), system) ==
             "munge key /etc/munge/munge.key is 16 bytes, munged needs at least 32: make the "
             "Secret from a key that `mungekey --create` wrote (the controller's "
             "/etc/munge/munge.key)");
  system.files["/etc/munge/munge.key"] = FakeSystem::Directory();
  BOOST_TEST(FailureOf(Settings({"login"}), system)
                 .starts_with("munge key /etc/munge/munge.key is a directory, not the key"));
  container::FileFacts unreadable = FakeSystem::Readable(1024);
  unreadable.readable = false;
  unreadable.error = "Permission denied";
  system.files["/etc/munge/munge.key"] = unreadable;
  BOOST_TEST(FailureOf(Settings({"login"}), system)
                 .starts_with("munge key /etc/munge/munge.key cannot be read (Permission denied)"));
}

BOOST_AUTO_TEST_CASE(a_config_directory_without_slurm_conf_is_refused) {
  FakeSystem system;
  system.files["/etc/slurm/slurm.conf"] = FakeSystem::Missing();
  BOOST_TEST(FailureOf(Settings({"controller"}), system) ==
             "no slurm.conf in the Slurm configuration directory /etc/slurm (No such file or "
             "directory): give the ConfigMap mounted there a slurm.conf key, or set "
             "K8SBRIDGE_SLURM_CONF_DIR to the directory that has it");
  system.files["/etc/slurm"] = FakeSystem::Missing();
  BOOST_TEST(FailureOf(Settings({"controller"}), system) ==
             "Slurm configuration directory /etc/slurm is missing (No such file or directory): "
             "mount the ConfigMap with slurm.conf there, or set K8SBRIDGE_SLURM_CONF_DIR to "
             "where it is");
}

BOOST_AUTO_TEST_CASE(another_slurm_is_refused_naming_both_versions) {
  FakeSystem system;
  system.version_output = std::string("slurm 24.05.4\n");
  BOOST_TEST(FailureOf(Settings({"controller"}), system) ==
             fmt::format("Slurm version mismatch: /usr/sbin/slurmctld is Slurm 24.05.4, but this "
                         "k8sbridge was built for Slurm {}; use the k8sbridge image built for "
                         "Slurm 24.05.4 (or build k8sbridge against it)",
                         k8sbridge::BuiltForSlurm()));
  system.version_output = Status::NotFound("/usr/bin/srun could not be run (is it in the image?)");
  BOOST_TEST(
      FailureOf(Settings({"login"}), system)
          .starts_with(
              "cannot learn the Slurm version of /usr/bin/srun (/usr/bin/srun could not be run"));
}

BOOST_AUTO_TEST_CASE(bad_arguments_and_settings_name_the_fix) {
  BOOST_TEST(SettingsOf({}).status().message().starts_with(
      "no role given: say which container this is: k8sbridge-entrypoint controller"));
  BOOST_TEST(SettingsOf({"worker"}).status().message().starts_with("unknown role 'worker'"));
  BOOST_TEST(
      SettingsOf({"controller"}, {{"K8SBRIDGE_SLURM_CONF_DIR", "slurm"}}).status().message() ==
      "K8SBRIDGE_SLURM_CONF_DIR='slurm' is not an absolute path: give the path of the "
      "Slurm configuration directory");
  BOOST_TEST(!SettingsOf({"login"}, {{"K8SBRIDGE_INIT", "true"}}).ok());
}

BOOST_AUTO_TEST_CASE(a_munged_user_owns_the_key_copy_and_directories_and_runs_munged) {
  FakeSystem system;
  RecordingLogger log;
  auto s = Settings({"login"}, {{"K8SBRIDGE_MUNGED_USER", "munge"}});
  BOOST_REQUIRE(container::RunEntrypoint(s, system, log).ok());
  BOOST_TEST(system.given ==
             (std::vector<std::string>{"/run/munge 100:101", "/run/k8sbridge-munge 100:101",
                                       "/run/k8sbridge-munge/munge.key 100:101"}));
  BOOST_REQUIRE(system.ran.size() == 1u);
  const std::vector<std::string> prefix(system.ran[0].begin(), system.ran[0].begin() + 6);
  BOOST_TEST(prefix == (std::vector<std::string>{"setpriv", "--reuid=100", "--regid=101",
                                                 "--clear-groups", "--", "/usr/sbin/munged"}));
  BOOST_TEST(log.Contains("as munge"));
  // Unset, munged stays root's, as before.
  FakeSystem as_root;
  BOOST_REQUIRE(container::RunEntrypoint(Settings({"login"}), as_root, log).ok());
  BOOST_TEST(as_root.given.empty());
  BOOST_TEST(as_root.ran[0][0] == "/usr/sbin/munged");
}

BOOST_AUTO_TEST_CASE(an_unknown_munged_user_stops_before_munged_starts) {
  FakeSystem system;
  RecordingLogger log;
  auto code = container::RunEntrypoint(Settings({"login"}, {{"K8SBRIDGE_MUNGED_USER", "mung"}}),
                                       system, log);
  BOOST_REQUIRE(!code.ok());
  BOOST_TEST(code.status().message() ==
             "K8SBRIDGE_MUNGED_USER=mung: no user mung in /etc/passwd: name a user of the image "
             "(Debian's munge package makes munge), or unset it to run munged as root");
  BOOST_TEST(system.ran.empty());
  BOOST_TEST(system.given.empty());
}

BOOST_AUTO_TEST_CASE(the_slurm_version_is_the_last_word_of_the_first_line) {
  BOOST_TEST(container::SlurmVersionIn("slurm 24.11.5\n") == "24.11.5");
  BOOST_TEST(container::SlurmVersionIn("slurm-wlm 24.11.5  \nmore\n") == "24.11.5");
  BOOST_TEST(container::SlurmVersionIn("24.11.5") == "24.11.5");
  BOOST_TEST(container::SlurmVersionIn("usage: sleep NUMBER\n") == "");
  BOOST_TEST(container::SlurmVersionIn("") == "");
}

BOOST_AUTO_TEST_SUITE_END()
