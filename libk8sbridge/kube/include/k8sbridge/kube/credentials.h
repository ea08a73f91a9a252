// Bearer tokens and client certificates for each request, kept fresh:
// - a token file (in-cluster bound tokens rotate hourly) is re-read at least every
//   minute, and at once after a 401 for a token older than the failed request;
// - an exec plugin (client.authentication.k8s.io/v1) is run once and its answer
//   cached until its expirationTimestamp, and run again after a 401.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/config.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::kube {

// Runs an exec credential plugin and returns its standard output.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual Result<std::string> Run(const ExecConfig& exec, std::chrono::milliseconds timeout) = 0;
};

// posix_spawn with KUBERNETES_EXEC_INFO set; kills the plugin at the timeout.
class RealCommandRunner final : public CommandRunner {
 public:
  Result<std::string> Run(const ExecConfig& exec, std::chrono::milliseconds timeout) override;
  static RealCommandRunner& Instance();
};

struct ExecCredential {
  std::string token;
  std::string client_cert_pem, client_key_pem;
  std::optional<Clock::Wall::time_point> expiration;
};
// Parses an ExecCredential's JSON; `source` names the plugin in errors.
Result<ExecCredential> ParseExecCredential(std::string_view json, std::string_view source);

// RFC 3339 ("2026-11-30T10:00:00Z", fractions and offsets allowed).
std::optional<Clock::Wall::time_point> ParseRfc3339(std::string_view text);
// "2026-11-30T10:00:00.123456Z" (MicroTime) or without fraction.
std::string FormatRfc3339(Clock::Wall::time_point t, bool micros = false);

class Credentials {
 public:
  struct Auth {
    std::string bearer;                           // "" if none
    std::string client_cert_pem, client_key_pem;  // from an exec plugin
  };
  Credentials(const Config& config, Clock& clock, Logger& logger, CommandRunner& runner,
              std::chrono::seconds token_file_max_age = std::chrono::seconds(60));

  Result<Auth> Get();
  // A request sent at `sent` got 401: drop cached credentials obtained before then.
  // Returns true if something was dropped (so a retry can help).
  bool OnUnauthorized(Clock::Steady::time_point sent);

 private:
  Status Refresh();
  Config config_;
  Clock& clock_;
  Logger& logger_;
  CommandRunner& runner_;
  std::chrono::seconds max_age_;
  std::mutex mu_;
  bool valid_ = false;
  Auth auth_;
  Clock::Steady::time_point obtained_{};
  std::optional<Clock::Wall::time_point> expiry_;
};

}  // namespace k8sbridge::kube
