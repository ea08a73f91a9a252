// `Warning:` response headers (RFC 7234 section 5.5 as the apiserver sends them:
// `299 - "text"`), e.g. for unknown fields dropped under fieldValidation=Warn or a
// deprecated API. Like client-go, only code 299 is shown, each distinct text once.
#pragma once

#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/log.h"

namespace k8sbridge::kube {

// The texts of the 299 warnings in a Warning header value (several warnings are
// joined with ", "). Malformed parts are skipped.
std::vector<std::string> ParseWarningHeader(std::string_view value);

// Logs each distinct warning text once per client. Thread-safe. Memory is bounded:
// at most kMaxRemembered texts (each cut to kMaxText bytes) are remembered; the
// oldest is forgotten first, and then may be logged again.
class WarningLog {
 public:
  static constexpr size_t kMaxRemembered = 256;
  static constexpr size_t kMaxText = 512;
  explicit WarningLog(Logger& logger) : logger_(logger) {}
  void Note(std::string_view header_value, std::string_view method, std::string_view path);

 private:
  Logger& logger_;
  std::mutex mu_;
  std::set<std::string> seen_;
  std::deque<std::string> order_;
};

}  // namespace k8sbridge::kube
