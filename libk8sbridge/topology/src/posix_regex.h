// The regular expressions of BuildOptions (host_regex, cpu_only_regex): POSIX
// extended, from libc. Used by builder.cpp only; not an installed header.
#pragma once

#include <regex.h>

#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "k8sbridge/status.h"

namespace k8sbridge::topology {

// POSIX extended regular expressions (libc), compiled once. (std::regex trips
// GCC 12's -Wmaybe-uninitialized under sanitizers, and is slow.)
class PosixRegex {
 public:
  // `whole`: the expression must match the whole text.
  static Result<std::shared_ptr<PosixRegex>> Compile(const std::string& pattern,
                                                     std::string_view what, bool whole) {
    auto re = std::shared_ptr<PosixRegex>(new PosixRegex());
    std::string full = whole ? "^(" + pattern + ")$" : pattern;
    int rc = regcomp(&re->re_, full.c_str(), REG_EXTENDED);
    if (rc != 0) {
      char buf[256];
      regerror(rc, &re->re_, buf, sizeof(buf));
      return Status::InvalidArgument(fmt::format(
          "{} \"{}\" is not a valid POSIX extended regular expression: {}", what, pattern, buf));
    }
    re->compiled_ = true;
    return re;
  }
  ~PosixRegex() {
    if (compiled_) {
      regfree(&re_);
    }
  }
  PosixRegex(const PosixRegex&) = delete;
  PosixRegex& operator=(const PosixRegex&) = delete;

  size_t groups() const { return re_.re_nsub; }
  bool Matches(const std::string& text) const {
    return regexec(&re_, text.c_str(), 0, nullptr, 0) == 0;
  }
  // The first capture group of the first match; "" if none.
  std::string Capture(const std::string& text) const {
    regmatch_t m[2];
    if (regexec(&re_, text.c_str(), 2, m, 0) != 0 || m[1].rm_so < 0) {
      return "";
    }
    return text.substr(m[1].rm_so, m[1].rm_eo - m[1].rm_so);
  }

 private:
  PosixRegex() = default;
  regex_t re_{};
  bool compiled_ = false;
};

}  // namespace k8sbridge::topology
