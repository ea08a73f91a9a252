#include "k8sbridge/kube/warnings.h"

#include <cctype>

namespace k8sbridge::kube {

namespace {

// Reads a quoted-string at `at` (which must be '"'), unescaping backslashes; moves
// `at` past the closing quote. False if it is not closed.
bool ReadQuoted(std::string_view value, size_t& at, std::string& out) {
  if (at >= value.size() || value[at] != '"')
    return false;
  for (++at; at < value.size(); ++at) {
    if (value[at] == '\\' && at + 1 < value.size()) {
      out += value[++at];
    } else if (value[at] == '"') {
      ++at;
      return true;
    } else {
      out += value[at];
    }
  }
  return false;
}

void SkipSpaces(std::string_view value, size_t& at) {
  while (at < value.size() && value[at] == ' ')
    ++at;
}

// Skips to just after the next ',' outside a quoted-string (a malformed warning).
void SkipWarning(std::string_view value, size_t& at) {
  bool quoted = false;
  for (; at < value.size(); ++at) {
    if (value[at] == '\\' && quoted) {
      ++at;
    } else if (value[at] == '"') {
      quoted = !quoted;
    } else if (value[at] == ',' && !quoted) {
      ++at;
      return;
    }
  }
}

}  // namespace

std::vector<std::string> ParseWarningHeader(std::string_view value) {
  std::vector<std::string> texts;
  size_t at = 0;
  while (at < value.size()) {
    SkipSpaces(value, at);
    // warn-code SP warn-agent SP warn-text [SP warn-date]
    const size_t code_start = at;
    while (at < value.size() && std::isdigit(static_cast<unsigned char>(value[at])))
      ++at;
    const std::string_view code = value.substr(code_start, at - code_start);
    const bool spaced = at < value.size() && value[at] == ' ';
    if (spaced)
      at = value.find(' ', at + 1);  // past the agent
    std::string text;
    if (code.size() != 3 || !spaced || at == std::string_view::npos ||
        !ReadQuoted(value, ++at, text)) {
      if (at == std::string_view::npos)
        break;
      SkipWarning(value, at);
      continue;
    }
    if (code == "299" && !text.empty())
      texts.push_back(std::move(text));
    SkipWarning(value, at);  // an optional warn-date, then the next warning
  }
  return texts;
}

void WarningLog::Note(std::string_view header_value, std::string_view method,
                      std::string_view path) {
  if (header_value.empty())
    return;
  for (auto& text : ParseWarningHeader(header_value)) {
    if (text.size() > kMaxText)
      text.resize(kMaxText);
    {
      std::lock_guard lock(mu_);
      if (!seen_.insert(text).second)
        continue;
      order_.push_back(text);
      if (order_.size() > kMaxRemembered) {
        seen_.erase(order_.front());
        order_.pop_front();
      }
    }
    logger_.Warning("kube: {} {}: the server warns: {}", method, path, text);
  }
}

}  // namespace k8sbridge::kube
