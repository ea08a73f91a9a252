// Shared set-up for the kube client tests: a Client over a FakeTransport and a
// FakeClock, so retries, back-off and relists are asserted exactly.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "fake_clock.h"
#include "fake_transport.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/log.h"
#include "recording_logger.h"

namespace k8sbridge {
// So that BOOST_TEST can print a Status code.
inline std::ostream& operator<<(std::ostream& os, Status::Code code) {
  return os << CodeName(code);
}
}  // namespace k8sbridge

namespace k8sbridge::kube::testing {

struct Env {
  FakeClock clock;
  RecordingLogger logger;
  CountingMetrics metrics;
  std::shared_ptr<FakeTransport> transport = std::make_shared<FakeTransport>();
  Config config;
  std::unique_ptr<Client> client;

  explicit Env(ClientOptions options = {}, Config cfg = {}) {
    config = std::move(cfg);
    if (config.server.empty())
      config.server = "https://k8s.test:6443";
    if (config.token.empty() && config.token_file.empty() && config.exec.empty())
      config.token = "t0";
    options.clock = &clock;
    options.logger = &logger;
    options.metrics = &metrics;
    options.qps = options.qps == 5 ? 0 : options.qps;  // unlimited unless a test sets it
    if (!options.random)
      options.random = [] { return 0.0; };  // no jitter: back-off is asserted exactly
    client = std::make_unique<Client>(config, transport, options);
  }
  std::vector<FakeTransport::Recorded> requests() const { return transport->requests(); }
};

// A client over `transport` that neither retries nor throttles: for code that does
// its own retries (power, sync, the label reader), so each answer is asserted once.
inline std::unique_ptr<Client> NoRetryClient(std::shared_ptr<FakeTransport> transport, Clock& clock,
                                             Logger& logger, std::string token = "t") {
  Config config;
  config.server = "https://k8s.test:6443";
  config.token = std::move(token);
  ClientOptions options;
  options.clock = &clock;
  options.logger = &logger;
  options.max_retries = 0;
  options.qps = 0;
  options.random = [] { return 0.0; };
  return std::make_unique<Client>(config, std::move(transport), options);
}

inline std::string PodJson(const std::string& name, const std::string& rv,
                           const std::string& ns = "default") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name + R"(","namespace":")" +
         ns + R"(","resourceVersion":")" + rv + R"(","uid":"uid-)" + name +
         R"("},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}})";
}

inline std::string StatusJson(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","details":{"name":"x","kind":"pods"},"code":)" +
         std::to_string(code) + "}";
}

inline std::string WatchLine(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

}  // namespace k8sbridge::kube::testing
