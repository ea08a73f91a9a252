#include "k8sbridge/jail/identity.h"

#include <vector>

#include <fmt/format.h>

#include "k8sbridge/jail/paths.h"
#include "k8sbridge/text.h"

namespace k8sbridge::jail {
namespace {

// A uid or gid field; one that does not fit the id type is not an id.
template <typename T>
bool ParseId(std::string_view digits, T* out) {
  auto id = text::ParseInt<T>(digits);
  if (!id.ok())
    return false;
  *out = *id;
  return true;
}

}  // namespace

std::optional<PasswdEntry> FindUid(std::string_view text, uid_t uid) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#' || line.front() == '+' || line.front() == '-') {
      continue;
    }
    std::vector<std::string_view> f;
    size_t start = 0;
    while (true) {
      size_t pos = line.find(':', start);
      f.push_back(line.substr(start, pos == std::string_view::npos ? pos : pos - start));
      if (pos == std::string_view::npos)
        break;
      start = pos + 1;
    }
    if (f.size() != 7)
      continue;
    PasswdEntry e;
    if (!ParseId(f[2], &e.uid) || !ParseId(f[3], &e.gid))
      continue;
    if (e.uid != uid)
      continue;
    e.name = std::string(f[0]);
    e.home = std::string(f[5]);
    e.shell = std::string(f[6]);
    return e;
  }
  return std::nullopt;
}

Status CheckUserInJail(const std::string& passwd_path, uid_t uid, std::string_view user_name,
                       std::string_view jail) {
  auto text = ReadFile(passwd_path);
  if (!text.ok()) {
    return Status::NotFound(fmt::format(
        "user {} (uid {}) cannot be looked up in jail {}: {}: the jail needs an /etc/passwd",
        user_name, uid, jail, text.status().message()));
  }
  if (!FindUid(*text, uid)) {
    return Status::NotFound(
        fmt::format("user {} (uid {}) does not exist in jail {}: add the user to {}/etc/passwd and "
                    "/etc/group (or set identity=none if the jail resolves users through NSS)",
                    user_name, uid, jail, jail));
  }
  return Status::Ok();
}

}  // namespace k8sbridge::jail
