// The lexical layer of Slurm-style configuration files (k8sbridge.conf): lines of
// whitespace-separated Key=Value pairs, '#' comments, quoted values, and a
// trailing '\' that continues a line. Keys compare case-insensitively, as in
// slurm.conf. What the keys mean is up to the caller (see bridge_conf.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::conf {

struct ConfPair {
  std::string key;    // as written
  std::string value;  // quotes removed
  int column = 0;     // 1-based column of the key
};

struct ConfLine {
  int line = 0;  // 1-based line where the (possibly continued) line starts
  std::vector<ConfPair> pairs;
};

// Splits `text` into lines of pairs; blank and comment-only lines are skipped.
// Errors name "<file>:<line>:<column>" and the fix.
Result<std::vector<ConfLine>> LexConf(std::string_view text, std::string_view file);

// Numbers and durations are read with k8sbridge/text.h. The message says what is
// wrong with the value; callers add "<file>:<line>:<column>: Key".
// yes/no, true/false, on/off, 1/0, in any case.
Result<bool> ParseBool(const std::string& value);

// Case-insensitive ASCII comparison of keys.
bool KeyEquals(std::string_view a, std::string_view b);

// The candidate closest to `word` (case-insensitive edit distance at most 1/3 of its
// length, at least 2), or "" when none is close: for "did you mean" hints.
std::string ClosestMatch(std::string_view word, const std::vector<std::string_view>& candidates);

// Empty if `name` is a valid DNS-1123 label (what a pod name, and so a Slurm node
// name, must be: 1-63 of [a-z0-9-], starting and ending alphanumeric); otherwise
// what is wrong with it.
std::string Dns1123LabelError(std::string_view name);

// Empty if `name` is a valid DNS-1123 subdomain (what names most Kubernetes
// objects, a RuntimeClass among them, and a label key's prefix: at most 253
// characters, DNS-1123 labels joined by '.'); otherwise what is wrong with it.
std::string Dns1123SubdomainError(std::string_view name);

// Empty if `value` is a valid Kubernetes label value (0-63 of [A-Za-z0-9-_.],
// starting and ending alphanumeric), otherwise what is wrong.
std::string LabelValueError(std::string_view value);

// Empty if `key` is a valid Kubernetes label key ([prefix/]name: prefix a DNS-1123
// subdomain of at most 253 characters, name 1-63 of [A-Za-z0-9-_.] starting and
// ending alphanumeric), otherwise what is wrong.
std::string LabelKeyError(std::string_view key);

}  // namespace k8sbridge::conf
