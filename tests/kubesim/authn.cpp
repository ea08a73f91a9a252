#include "authn.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "k8sbridge/kube/config.h"

namespace kubesim {

namespace {

constexpr const char* kServiceAccountPrefix = "system:serviceaccount:";
// go-jose's jwt.DefaultLeeway, which the ServiceAccount token validator uses for exp
// and nbf.
constexpr int64_t kLeewaySeconds = 60;

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    // A test-only process: fall back to the clock rather than fail to start.
    auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<char>((t >> ((i % 8) * 8)) ^ static_cast<int64_t>(i * 131));
  }
  return out;
}

std::string HexOf(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes)
    out += fmt::format("{:02x}", c);
  return out;
}

// A random UUID (version 4) for jti.
std::string RandomUuid() {
  std::string h = HexOf(RandomBytes(16));
  h[12] = '4';
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

int64_t UnixNow(Store& store) {
  return std::chrono::duration_cast<std::chrono::seconds>(
             store.clock().WallNow().time_since_epoch())
      .count();
}

int64_t GetInt(const rapidjson::Value& v, const char* key) {
  auto it = v.FindMember(key);
  return it != v.MemberEnd() && it->value.IsInt64() ? it->value.GetInt64() : 0;
}

bool HasAudience(const rapidjson::Value& claims, const std::string& audience) {
  auto it = claims.FindMember("aud");
  if (it == claims.MemberEnd())
    return false;
  if (it->value.IsString())
    return audience == it->value.GetString();
  if (!it->value.IsArray())
    return false;
  for (const auto& a : it->value.GetArray()) {
    if (a.IsString() && audience == a.GetString())
      return true;
  }
  return false;
}

}  // namespace

bool UserInfo::InGroup(const std::string& group) const {
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

std::string ServiceAccountUsername(const std::string& ns, const std::string& name) {
  return kServiceAccountPrefix + ns + ":" + name;
}

bool SplitServiceAccountUsername(const std::string& username, std::string& ns, std::string& name) {
  std::string prefix = kServiceAccountPrefix;
  if (username.rfind(prefix, 0) != 0)
    return false;
  std::string rest = username.substr(prefix.size());
  size_t colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find(':', colon + 1) != std::string::npos) {
    return false;
  }
  ns = rest.substr(0, colon);
  name = rest.substr(colon + 1);
  return true;
}

std::vector<std::string> ServiceAccountGroups(const std::string& ns) {
  return {"system:serviceaccounts", "system:serviceaccounts:" + ns};
}

UserInfo UserFromCertificate(const std::string& common_name,
                             const std::vector<std::string>& organizations) {
  UserInfo user;
  user.name = common_name;
  user.groups = organizations;
  user.groups.push_back(kAllAuthenticated);
  return user;
}

UserInfo AdminUser() {
  UserInfo user;
  user.name = kAdminUser;
  user.groups = {kSystemMasters, kAllAuthenticated};
  return user;
}

UserInfo AnonymousUser() {
  UserInfo user;
  user.name = kAnonymousUser;
  user.groups = {kAllUnauthenticated};
  return user;
}

std::string Base64UrlEncode(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=')
    out.pop_back();
  for (char& c : out) {
    if (c == '+')
      c = '-';
    else if (c == '/')
      c = '_';
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(const std::string& text) {
  std::string standard = text;
  for (char& c : standard) {
    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
    else if (c == '+' || c == '/' || c == '=')
      return std::nullopt;
  }
  while (standard.size() % 4 != 0)
    standard += '=';
  auto decoded = k8sbridge::kube::DecodeBase64(standard, "token");
  if (!decoded.ok())
    return std::nullopt;
  return *decoded;
}

TokenIssuer::TokenIssuer(Store& store) : store_(store), key_(RandomBytes(32)) {}

std::string TokenIssuer::Sign(const std::string& signing_input) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(signing_input.data()), signing_input.size(), mac,
       &mac_len);
  return Base64UrlEncode(std::string(reinterpret_cast<const char*>(mac), mac_len));
}

Result<TokenIssuer::Issued> TokenIssuer::IssueToken(const std::string& ns,
                                                    const std::string& service_account,
                                                    int64_t expiration_seconds,
                                                    const std::vector<std::string>& audiences) {
  if (expiration_seconds < 1) {
    return Status::InvalidArgument(
        fmt::format("token expiration {} s is not positive: give the seconds the token lives",
                    expiration_seconds));
  }
  auto sa = store_.Get("serviceaccounts", ns, service_account);
  if (!sa.ok())
    return sa.status();
  int64_t now = UnixNow(store_);
  rapidjson::Document claims(rapidjson::kObjectType);
  auto& a = claims.GetAllocator();
  rapidjson::Value aud(rapidjson::kArrayType);
  if (audiences.empty())
    aud.PushBack(rapidjson::Value(kIssuer, a), a);
  for (const auto& audience : audiences)
    aud.PushBack(rapidjson::Value(audience.c_str(), a), a);
  claims.AddMember("aud", aud, a);
  claims.AddMember("exp", now + expiration_seconds, a);
  claims.AddMember("iat", now, a);
  claims.AddMember("iss", rapidjson::Value(kIssuer, a), a);
  claims.AddMember("jti", rapidjson::Value(RandomUuid().c_str(), a), a);
  rapidjson::Value k8s(rapidjson::kObjectType);
  k8s.AddMember("namespace", rapidjson::Value(ns.c_str(), a), a);
  rapidjson::Value sa_claim(rapidjson::kObjectType);
  sa_claim.AddMember("name", rapidjson::Value(service_account.c_str(), a), a);
  sa_claim.AddMember("uid", rapidjson::Value(GetString(**sa, "metadata.uid").c_str(), a), a);
  k8s.AddMember("serviceaccount", sa_claim, a);
  claims.AddMember("kubernetes.io", k8s, a);
  claims.AddMember("nbf", now, a);
  claims.AddMember("sub", rapidjson::Value(ServiceAccountUsername(ns, service_account).c_str(), a),
                   a);
  std::string signing_input = Base64UrlEncode(R"({"alg":"HS256","kid":"kubesim","typ":"JWT"})") +
                              "." + Base64UrlEncode(ToJson(claims));
  Issued issued;
  issued.token = signing_input + "." + Sign(signing_input);
  issued.expiration_unix = now + expiration_seconds;
  return issued;
}

Result<std::string> TokenIssuer::Issue(const std::string& ns, const std::string& service_account,
                                       int64_t expiration_seconds) {
  auto issued = IssueToken(ns, service_account, expiration_seconds);
  if (!issued.ok())
    return issued.status();
  return issued->token;
}

Result<UserInfo> TokenIssuer::Authenticate(const std::string& token) const {
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string::npos)
    return Status::Unauthenticated("not a kubesim token");
  std::string expected = Sign(token.substr(0, dot2));
  std::string given = token.substr(dot2 + 1);
  if (expected.size() != given.size() ||
      CRYPTO_memcmp(expected.data(), given.data(), expected.size()) != 0) {
    return Status::Unauthenticated("the token's signature is not kubesim's");
  }
  auto payload = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto claims =
      payload
          ? ParseJson(*payload)
          : Result<std::unique_ptr<rapidjson::Document>>(Status::InvalidArgument("bad payload"));
  if (!claims.ok() || !(*claims)->IsObject())
    return Status::Unauthenticated("the token's claims are not JSON");
  const rapidjson::Value& c = **claims;
  if (GetString(c, "iss") != kIssuer || !HasAudience(c, kIssuer))
    return Status::Unauthenticated("the token is for another issuer or audience");
  int64_t now = UnixNow(store_);
  if (now > GetInt(c, "exp") + kLeewaySeconds)
    return Status::Unauthenticated("service account token has expired");
  if (now + kLeewaySeconds < GetInt(c, "nbf"))
    return Status::Unauthenticated("service account token is not valid yet");
  auto k8s = c.FindMember("kubernetes.io");
  if (k8s == c.MemberEnd() || !k8s->value.IsObject())
    return Status::Unauthenticated("the token has no kubernetes.io claim");
  std::string ns = GetString(k8s->value, "namespace");
  std::string name = GetString(k8s->value, "serviceaccount.name");
  std::string uid = GetString(k8s->value, "serviceaccount.uid");
  auto sa = store_.Get("serviceaccounts", ns, name);
  if (!sa.ok() || GetString(**sa, "metadata.uid") != uid ||
      Find(**sa, "metadata.deletionTimestamp") != nullptr) {
    return Status::Unauthenticated(
        fmt::format("service account {}/{} (uid {}) no longer exists", ns, name, uid));
  }
  UserInfo user;
  user.name = ServiceAccountUsername(ns, name);
  user.uid = uid;
  user.groups = ServiceAccountGroups(ns);
  user.groups.push_back(kAllAuthenticated);
  user.extra["authentication.kubernetes.io/credential-id"] = {"JTI=" + GetString(c, "jti")};
  return user;
}

}  // namespace kubesim
