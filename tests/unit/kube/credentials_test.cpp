#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "fake_clock.h"
#include "k8sbridge/kube/credentials.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {

using namespace std::chrono_literals;

// An exec plugin that answers from a list and counts its runs.
class FakeRunner final : public CommandRunner {
 public:
  std::vector<std::string> outputs;
  int runs = 0;
  Result<std::string> Run(const ExecConfig&, std::chrono::milliseconds) override {
    if (outputs.empty())
      return Status::Unauthenticated("plugin failed");
    std::string out = outputs.size() > 1 ? outputs.front() : outputs.back();
    if (outputs.size() > 1)
      outputs.erase(outputs.begin());
    ++runs;
    return out;
  }
};

std::string Cred(const std::string& token, const std::string& expiry) {
  return R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":")" +
         token + R"(","expirationTimestamp":")" + expiry + R"("}})";
}

struct TokenFile {
  std::string path = "/tmp/kube-cred-test-" + std::to_string(getpid());
  ~TokenFile() { std::filesystem::remove(path); }
  void Set(const std::string& t) { std::ofstream(path) << t << "\n"; }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(credentials)

BOOST_AUTO_TEST_CASE(rfc3339_round_trip) {
  auto t = ParseRfc3339("2026-11-30T10:00:00Z");
  BOOST_REQUIRE(t.has_value());
  BOOST_TEST(FormatRfc3339(*t) == "2026-11-30T10:00:00Z");
  BOOST_TEST(FormatRfc3339(*ParseRfc3339("2026-11-30T10:00:00.5+01:00"), true) ==
             "2026-11-30T09:00:00.500000Z");
  BOOST_TEST(!ParseRfc3339("yesterday").has_value());
  BOOST_TEST(!ParseRfc3339("2026-13-30T10:00:00Z").has_value());
}

BOOST_AUTO_TEST_CASE(token_file_reread_every_minute_and_on_401) {
  TokenFile tf;
  tf.Set("one");
  Config cfg;
  cfg.token_file = tf.path;
  FakeClock clock;
  NullLogger log;
  FakeRunner runner;
  Credentials creds(cfg, clock, log, runner);
  BOOST_TEST(creds.Get()->bearer == "one");
  tf.Set("two");
  clock.Advance(59s);
  BOOST_TEST(creds.Get()->bearer == "one");  // cached within the minute
  clock.Advance(1s);
  BOOST_TEST(creds.Get()->bearer == "two");  // re-read after a minute
  tf.Set("three");
  BOOST_TEST(creds.OnUnauthorized(clock.Now()));
  BOOST_TEST(creds.Get()->bearer == "three");  // re-read at once after a 401
}

BOOST_AUTO_TEST_CASE(exec_cached_until_expiry_and_rerun_on_401) {
  Config cfg;
  cfg.exec.command = "plugin";
  cfg.exec.source = "kc: users[u].user.exec";
  FakeClock clock;  // wall clock starts at 2027-01-15T08:00:00Z
  NullLogger log;
  FakeRunner runner;
  runner.outputs = {Cred("a", "2027-01-15T08:10:00Z"), Cred("b", "2027-01-15T09:00:00Z"),
                    Cred("c", "2027-01-15T10:00:00Z")};
  Credentials creds(cfg, clock, log, runner);
  BOOST_TEST(FormatRfc3339(clock.WallNow()) == "2027-01-15T08:00:00Z");
  BOOST_TEST(creds.Get()->bearer == "a");
  clock.Advance(9min);
  BOOST_TEST(creds.Get()->bearer == "a");
  BOOST_TEST(runner.runs == 1);
  clock.Advance(1min);  // expired
  BOOST_TEST(creds.Get()->bearer == "b");
  BOOST_TEST(runner.runs == 2);
  creds.OnUnauthorized(clock.Now());
  BOOST_TEST(creds.Get()->bearer == "c");
  BOOST_TEST(runner.runs == 3);
}

BOOST_AUTO_TEST_CASE(exec_credential_errors_name_the_plugin) {
  BOOST_TEST(ParseExecCredential("nope", "p").status().message() ==
             "p: plugin output is not a JSON ExecCredential");
  BOOST_TEST(ParseExecCredential(R"({"kind":"ExecCredential","status":{}})", "p")
                 .status()
                 .message()
                 .find("needs token") != std::string::npos);
  BOOST_TEST(
      ParseExecCredential(
          R"({"kind":"ExecCredential","status":{"token":"x","expirationTimestamp":"soon"}})", "p")
          .status()
          .message()
          .find("expirationTimestamp") != std::string::npos);
  auto cert = ParseExecCredential(
      R"({"kind":"ExecCredential","status":{"clientCertificateData":"C","clientKeyData":"K"}})",
      "p");
  BOOST_REQUIRE(cert.ok());
  BOOST_TEST(cert->client_cert_pem == "C");
  BOOST_TEST(!cert->expiration.has_value());
}

BOOST_AUTO_TEST_CASE(real_runner_runs_a_plugin_with_exec_info) {
  ExecConfig exec;
  exec.command = "/bin/sh";
  exec.args = {"-c", "echo \"$KUBERNETES_EXEC_INFO|$FOO\""};
  exec.env = {{"FOO", "bar"}};
  exec.source = "test";
  auto out = RealCommandRunner::Instance().Run(exec, 5s);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  BOOST_TEST(out->find(R"("kind":"ExecCredential")") != std::string::npos);
  BOOST_TEST(out->find("|bar") != std::string::npos);
  exec.args = {"-c", "exit 3"};
  BOOST_TEST(RealCommandRunner::Instance().Run(exec, 5s).status().code() ==
             Status::Code::kUnauthenticated);
  exec.args = {"-c", "sleep 10"};
  auto slow = RealCommandRunner::Instance().Run(exec, 200ms);
  BOOST_TEST(slow.status().message().find("did not finish") != std::string::npos);
  exec.command = "/nonexistent/plugin";
  BOOST_TEST(!RealCommandRunner::Instance().Run(exec, 1s).ok());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
