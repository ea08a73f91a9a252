#include "k8sbridge/kube/credentials.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <rapidjson/document.h>

#include "k8sbridge/kube/object.h"
#include "k8sbridge/text.h"

extern char** environ;

namespace k8sbridge::kube {

std::optional<Clock::Wall::time_point> ParseRfc3339(std::string_view text) {
  int y, mo, d, h, mi, s;
  char rest[64] = {0};
  std::string str(text.substr(0, 60));
  int n = std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%63s", &y, &mo, &d, &h, &mi, &s, rest);
  if (n < 6)
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || y < 1970 || y > 9999 ||
      h < 0 || mi < 0 || s < 0) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  time_t t = timegm(&tm);
  std::string_view r(rest);
  long micros = 0;
  if (!r.empty() && r[0] == '.') {
    r.remove_prefix(1);
    long scale = 100000;
    while (!r.empty() && r[0] >= '0' && r[0] <= '9') {
      micros += (r[0] - '0') * scale;
      scale /= 10;
      r.remove_prefix(1);
    }
  }
  long offset = 0;
  if (r == "Z" || r == "z") {
  } else if (r.size() == 6 && (r[0] == '+' || r[0] == '-') && r[3] == ':') {
    auto oh = text::ParseInt<int>(r.substr(1, 2), 0, 23);
    auto om = text::ParseInt<int>(r.substr(4, 2), 0, 59);
    if (!oh.ok() || !om.ok())
      return std::nullopt;
    offset = (*oh * 3600 + *om * 60) * (r[0] == '+' ? 1 : -1);
  } else {
    return std::nullopt;
  }
  return Clock::Wall::time_point(std::chrono::seconds(t - offset)) +
         std::chrono::microseconds(micros);
}

std::string FormatRfc3339(Clock::Wall::time_point t, bool micros) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(us / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (micros)
    return fmt::format("{}.{:06d}Z", buf, us % 1'000'000);
  return std::string(buf) + "Z";
}

Result<ExecCredential> ParseExecCredential(std::string_view json, std::string_view source) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status::Unauthenticated(
        fmt::format("{}: plugin output is not a JSON ExecCredential", source));
  }
  if (StringMember(&doc, "kind") != "ExecCredential") {
    return Status::Unauthenticated(
        fmt::format("{}: plugin output: kind must be ExecCredential", source));
  }
  auto status = doc.FindMember("status");
  if (status == doc.MemberEnd() || !status->value.IsObject()) {
    return Status::Unauthenticated(fmt::format("{}: plugin output: status: missing", source));
  }
  ExecCredential out;
  out.token = StringMember(&status->value, "token");
  out.client_cert_pem = StringMember(&status->value, "clientCertificateData");
  out.client_key_pem = StringMember(&status->value, "clientKeyData");
  if (out.token.empty() && (out.client_cert_pem.empty() || out.client_key_pem.empty())) {
    return Status::Unauthenticated(fmt::format(
        "{}: plugin output: status: needs token or clientCertificateData and clientKeyData",
        source));
  }
  std::string exp = StringMember(&status->value, "expirationTimestamp");
  if (!exp.empty()) {
    out.expiration = ParseRfc3339(exp);
    if (!out.expiration) {
      return Status::Unauthenticated(fmt::format(
          "{}: plugin output: status.expirationTimestamp: {:?} is not RFC 3339", source, exp));
    }
  }
  return out;
}

RealCommandRunner& RealCommandRunner::Instance() {
  static RealCommandRunner runner;
  return runner;
}

namespace {

// Ours, less what exec.env sets, plus exec.env and the KUBERNETES_EXEC_INFO the
// client.authentication.k8s.io protocol hands the plugin.
std::vector<std::string> PluginEnvironment(const ExecConfig& exec) {
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    bool overridden = kv.rfind("KUBERNETES_EXEC_INFO=", 0) == 0;
    for (const auto& [k, v] : exec.env)
      overridden |= kv.rfind(k + "=", 0) == 0;
    if (!overridden)
      env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : exec.env)
    env_strings.push_back(k + "=" + v);
  env_strings.push_back(fmt::format(
      R"(KUBERNETES_EXEC_INFO={{"apiVersion":"{}","kind":"ExecCredential","spec":{{"interactive":false}}}})",
      exec.api_version));
  return env_strings;
}

struct PluginOutput {
  std::string text;
  bool timed_out = false;
};

// Reads the plugin's stdout until EOF, past 1 MiB, or the deadline.
PluginOutput ReadPluginOutput(int fd, std::chrono::milliseconds timeout) {
  PluginOutput output;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      output.timed_out = true;
      break;
    }
    pollfd pfd{fd, POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0) {
      output.timed_out = pr == 0;
      break;
    }
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    output.text.append(buf, static_cast<size_t>(n));
    if (output.text.size() > (1u << 20))
      break;
  }
  return output;
}

}  // namespace

Result<std::string> RealCommandRunner::Run(const ExecConfig& exec,
                                           std::chrono::milliseconds timeout) {
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    return Status::IoError("pipe: " + std::string(strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);

  std::vector<std::string> env_strings = PluginEnvironment(exec);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string cmd = exec.command;
  argv.push_back(cmd.data());
  std::vector<std::string> args = exec.args;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  pid_t pid;
  int rc = posix_spawnp(&pid, cmd.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    return Status::Unauthenticated(
        fmt::format("{}.command: cannot run {:?}: {}", exec.source, exec.command, strerror(rc)));
  }
  PluginOutput output = ReadPluginOutput(out_pipe[0], timeout);
  close(out_pipe[0]);
  if (output.timed_out)
    kill(pid, SIGKILL);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (output.timed_out) {
    return Status::Unauthenticated(fmt::format("{}: plugin {:?} did not finish within {} ms",
                                               exec.source, exec.command, timeout.count()));
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Unauthenticated(
        fmt::format("{}: plugin {:?} failed (wait status {})", exec.source, exec.command, wstatus));
  }
  return std::move(output.text);
}

Credentials::Credentials(const Config& config, Clock& clock, Logger& logger, CommandRunner& runner,
                         std::chrono::seconds token_file_max_age)
    : config_(config),
      clock_(clock),
      logger_(logger),
      runner_(runner),
      max_age_(token_file_max_age) {}

Status Credentials::Refresh() {
  Auth auth;
  expiry_.reset();
  if (!config_.exec.empty()) {
    auto out = runner_.Run(config_.exec, std::chrono::seconds(30));
    if (!out.ok())
      return out.status();
    auto cred = ParseExecCredential(*out, config_.exec.source);
    if (!cred.ok())
      return cred.status();
    auth.bearer = cred->token;
    auth.client_cert_pem = cred->client_cert_pem;
    auth.client_key_pem = cred->client_key_pem;
    expiry_ = cred->expiration;
    logger_.Debug("kube: exec credential plugin {} ran; expires {}", config_.exec.command,
                  expiry_ ? FormatRfc3339(*expiry_) : "never");
  } else if (!config_.token_file.empty()) {
    std::ifstream in(config_.token_file);
    if (!in) {
      return Status::Unauthenticated(
          fmt::format("{}: tokenFile {}: cannot read", config_.source, config_.token_file));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    auth.bearer = ss.str();
    while (!auth.bearer.empty() && (auth.bearer.back() == '\n' || auth.bearer.back() == '\r' ||
                                    auth.bearer.back() == ' ')) {
      auth.bearer.pop_back();
    }
    if (auth.bearer.empty()) {
      return Status::Unauthenticated(
          fmt::format("{}: tokenFile {}: empty", config_.source, config_.token_file));
    }
  } else {
    auth.bearer = config_.token;
  }
  auth_ = std::move(auth);
  obtained_ = clock_.Now();
  valid_ = true;
  return Status::Ok();
}

Result<Credentials::Auth> Credentials::Get() {
  std::lock_guard lock(mu_);
  bool stale = !valid_;
  if (valid_ && !config_.exec.empty() && expiry_ && clock_.WallNow() >= *expiry_)
    stale = true;
  if (valid_ && config_.exec.empty() && !config_.token_file.empty() &&
      clock_.Now() - obtained_ >= max_age_) {
    stale = true;
  }
  if (stale) {
    Status s = Refresh();
    if (!s.ok()) {
      valid_ = false;
      return s;
    }
  }
  return auth_;
}

bool Credentials::OnUnauthorized(Clock::Steady::time_point sent) {
  std::lock_guard lock(mu_);
  if (config_.exec.empty() && config_.token_file.empty())
    return false;  // static: nothing to renew
  if (valid_ && obtained_ <= sent) {
    valid_ = false;
    logger_.Info("kube: 401 Unauthorized; dropping cached credentials from {}",
                 config_.exec.empty() ? config_.token_file : config_.exec.command);
    return true;
  }
  return true;  // someone refreshed after our request was sent: retrying may help
}

}  // namespace k8sbridge::kube
