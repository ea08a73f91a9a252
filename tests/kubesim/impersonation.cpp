// Impersonation (staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go):
// declared in rbac.h.
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "rbac.h"

namespace kubesim {

namespace {

constexpr const char* kUserHeader = "impersonate-user";
constexpr const char* kGroupHeader = "impersonate-group";
constexpr const char* kUidHeader = "impersonate-uid";
constexpr const char* kExtraPrefix = "impersonate-extra-";

// One thing the requestor asks to act as, and the attributes its `impersonate` check
// is authorized with.
struct ImpersonationRequest {
  std::string kind;  // ServiceAccount User Group UserExtra UID
  std::string ns;
  std::string name;
  std::string extra_key;
};

// unescapeExtraKey: extra keys travel percent-encoded in header names.
std::string UnescapeExtraKey(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '%' && i + 2 < key.size() &&
        std::isxdigit(static_cast<unsigned char>(key[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(key[i + 2]))) {
      out += static_cast<char>(std::stoi(key.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += key[i];
    }
  }
  return out;
}

std::vector<ImpersonationRequest> BuildRequests(
    const std::multimap<std::string, std::string>& headers, bool& has_user) {
  std::vector<ImpersonationRequest> out;
  auto user = headers.find(kUserHeader);
  has_user = user != headers.end() && !user->second.empty();
  if (has_user) {
    ImpersonationRequest r;
    if (SplitServiceAccountUsername(user->second, r.ns, r.name)) {
      r.kind = "ServiceAccount";
    } else {
      r.kind = "User";
      r.name = user->second;
    }
    out.push_back(r);
  }
  auto [first, last] = headers.equal_range(kGroupHeader);
  for (auto it = first; it != last; ++it)
    out.push_back(ImpersonationRequest{"Group", "", it->second, ""});
  for (const auto& [header, value] : headers) {
    if (header.rfind(kExtraPrefix, 0) == 0) {
      out.push_back(
          ImpersonationRequest{"UserExtra", "", value,
                               UnescapeExtraKey(header.substr(std::string(kExtraPrefix).size()))});
    }
  }
  auto uid = headers.find(kUidHeader);
  if (uid != headers.end() && !uid->second.empty())
    out.push_back(ImpersonationRequest{"UID", "", uid->second, ""});
  return out;
}

RequestAttributes ImpersonateAttributes(const UserInfo& requestor, const ImpersonationRequest& r) {
  RequestAttributes a;
  a.user = requestor;
  a.verb = "impersonate";
  a.resource_request = true;
  a.ns = r.ns;
  a.name = r.name;
  if (r.kind == "ServiceAccount") {
    a.resource = "serviceaccounts";
  } else if (r.kind == "User") {
    a.resource = "users";
  } else if (r.kind == "Group") {
    a.resource = "groups";
  } else if (r.kind == "UserExtra") {
    a.api_group = "authentication.k8s.io";
    a.resource = "userextras";
    a.subresource = r.extra_key;
  } else {
    a.api_group = "authentication.k8s.io";
    a.resource = "uids";
  }
  a.api_version = "v1";
  return a;
}

}  // namespace

std::optional<UserInfo> Impersonate(const Store& store, const UserInfo& requestor,
                                    const std::multimap<std::string, std::string>& headers,
                                    ApiResponse& error) {
  bool has_user = false;
  std::vector<ImpersonationRequest> requests = BuildRequests(headers, has_user);
  if (requests.empty())
    return requestor;
  if (!has_user) {
    error = StatusResponse(500, "InternalError",
                           fmt::format("requested {} impersonation without impersonating a user",
                                       requests.front().kind));
    return std::nullopt;
  }
  bool groups_specified = headers.count(kGroupHeader) != 0;
  UserInfo acting;
  for (const auto& r : requests) {
    RequestAttributes check = ImpersonateAttributes(requestor, r);
    Decision decision = Authorize(store, check);
    if (!decision.allowed) {
      error = ForbiddenResponse(check, decision.reason);
      return std::nullopt;
    }
    if (r.kind == "ServiceAccount") {
      acting.name = ServiceAccountUsername(r.ns, r.name);
      if (!groups_specified)
        acting.groups = ServiceAccountGroups(r.ns);
    } else if (r.kind == "User") {
      acting.name = r.name;
    } else if (r.kind == "Group") {
      acting.groups.push_back(r.name);
    } else if (r.kind == "UserExtra") {
      acting.extra[r.extra_key].push_back(r.name);
    } else {
      acting.uid = r.name;
    }
  }
  if (acting.name != kAnonymousUser) {
    if (!acting.InGroup(kAllAuthenticated) && !acting.InGroup(kAllUnauthenticated))
      acting.groups.push_back(kAllAuthenticated);
  } else if (!acting.InGroup(kAllUnauthenticated)) {
    acting.groups.push_back(kAllUnauthenticated);
  }
  return acting;
}

}  // namespace kubesim
