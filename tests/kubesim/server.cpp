#include "server.h"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "finalizers.h"
#include "rbac.h"
#include "serviceaccounts.h"
#include "websocket.h"

namespace kubesim {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

Result<Fault> ParseFault(const std::string& json) {
  auto doc = ParseJson(json);
  if (!doc.ok())
    return doc.status().WithContext("fault");
  const rapidjson::Value& d = **doc;
  if (!d.IsObject())
    return Status::InvalidArgument("a fault is a JSON object");
  Fault f;
  if (d.HasMember("resource"))
    f.resource = GetString(d, "resource");
  if (d.HasMember("verb"))
    f.verb = GetString(d, "verb");
  std::string type = GetString(d, "type");
  static const std::map<std::string, Fault::Type> types = {
      {"status", Fault::Type::kStatus},
      {"reset-before", Fault::Type::kResetBefore},
      {"reset-after", Fault::Type::kResetAfter},
      {"stall", Fault::Type::kStall},
      {"watch-expire", Fault::Type::kWatchExpire},
      {"latency", Fault::Type::kLatency},
      {"watch-reset", Fault::Type::kWatchReset}};
  auto it = types.find(type);
  if (it == types.end()) {
    return Status::InvalidArgument(
        fmt::format("fault type \"{}\" is unknown: use status, reset-before, reset-after, stall, "
                    "watch-expire, watch-reset or latency",
                    type));
  }
  f.type = it->second;
  auto get_int = [&](const char* key, int& out) {
    if (d.HasMember(key) && d[key].IsInt())
      out = d[key].GetInt();
  };
  get_int("code", f.code);
  get_int("retryAfterSeconds", f.retry_after_seconds);
  get_int("latencyMs", f.latency_ms);
  get_int("times", f.times);
  get_int("afterEvents", f.after_events);
  if (f.after_events < 0) {
    return Status::InvalidArgument(
        fmt::format("fault afterEvents {} is negative: give how many watch events to send "
                    "before the reset",
                    f.after_events));
  }
  if (f.type == Fault::Type::kStatus && (f.code < 400 || f.code > 599)) {
    return Status::InvalidArgument(fmt::format("fault code {} is not an HTTP error", f.code));
  }
  return f;
}

namespace {

// How long after its answer POST /kubesim/restart takes the server down.
constexpr auto kRestartDelay = std::chrono::milliseconds(500);

const char* ReasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return "";
  }
}

std::string FaultTypeName(Fault::Type t) {
  switch (t) {
    case Fault::Type::kStatus:
      return "status";
    case Fault::Type::kResetBefore:
      return "reset-before";
    case Fault::Type::kResetAfter:
      return "reset-after";
    case Fault::Type::kStall:
      return "stall";
    case Fault::Type::kWatchExpire:
      return "watch-expire";
    case Fault::Type::kLatency:
      return "latency";
    case Fault::Type::kWatchReset:
      return "watch-reset";
  }
  return "";
}

// Waits (up to a second) until the kernel has sent everything written to `fd`, so that
// a reset that follows cuts the stream after those bytes, not before them.
void WaitUntilSent(int fd) {
  for (int i = 0; i < 100; ++i) {
    int unsent = 0;
    if (ioctl(fd, SIOCOUTQ, &unsent) != 0 || unsent == 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// True when the peer has closed its side (so an idle watch can end).
bool PeerClosed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// The x509 authenticator's user: CN the name, each O a group.
UserInfo CertificateUser(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  char cn[256] = "";
  X509_NAME_get_text_by_NID(subject, NID_commonName, cn, sizeof cn);
  std::vector<std::string> organizations;
  for (int i = X509_NAME_get_index_by_NID(subject, NID_organizationName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_organizationName, i)) {
    ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    unsigned char* utf8 = nullptr;
    int n = ASN1_STRING_to_UTF8(&utf8, value);
    if (n >= 0) {
      organizations.emplace_back(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
    }
  }
  return UserFromCertificate(cn, organizations);
}

}  // namespace

struct Server::Impl {
  Impl(Store& s, ServerOptions o, k8sbridge::Logger& l)
      : store(s), api(s), issuer(s), options(std::move(o)), log(l), token(options.token) {
    if (options.tls)
      options.admission.root_ca_pem = options.tls->ca_cert_pem;
    api.set_admission(options.admission);
    api.set_token_issuer(&issuer);
    api.set_pod_log_root(options.pod_log_root);
  }

  Store& store;
  Api api;
  TokenIssuer issuer;
  ServerOptions options;
  k8sbridge::Logger& log;

  net::io_context io;  // only for sockets; every socket is used synchronously
  std::unique_ptr<ssl::context> tls_context;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<std::pair<std::string, uint16_t>> endpoints;
  std::vector<std::thread> threads;  // acceptors and the reaper
  std::atomic<bool> stopping{false};

  mutable std::mutex mu;
  std::condition_variable sessions_done;
  int active_sessions = 0;
  // Session threads are joined (not detached) so that none outlives Stop; finished
  // ones are reaped at the next accept.
  struct SessionThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<SessionThread> session_threads;
  std::set<int> session_fds;
  std::string token;
  std::vector<Fault> faults;
  int next_fault_id = 1;
  std::map<std::string, AdminHandler> admin_handlers;
  std::deque<std::string> request_log;  // JSON lines
  // Counts of every request since start or the last DELETE /kubesim/stats, keyed by
  // (verb, resource, code): request_log keeps only the last 2000, too few for a bulk
  // benchmark. connections counts accepted TCP connections (TLS handshakes).
  struct RequestCount {
    uint64_t count = 0;
    // When the first and the last of them were answered (a client's rate, as the
    // server saw it, without the client's own start).
    std::chrono::steady_clock::time_point first, last;
  };
  std::map<std::tuple<std::string, std::string, int>, RequestCount> request_counts;
  uint64_t connections = 0;
  // POST /kubesim/restart: the API server part is down (listeners closed, every
  // connection cut) while the store, the controllers and the kubelet go on, as etcd,
  // kube-controller-manager and the kubelets do while a kube-apiserver restarts.
  bool restarting = false;
  size_t accepts_paused = 0;  // accept loops waiting for the restart to end
  std::thread restart_thread;

  // Opens `acceptor` on `where` and listens (Bind's, and a restart's reopening).
  static void ListenOn(tcp::acceptor& acceptor, const tcp::endpoint& where, beast::error_code& ec) {
    acceptor.open(where.protocol(), ec);
    if (!ec)
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec)
      acceptor.bind(where, ec);
    if (!ec)
      acceptor.listen(net::socket_base::max_listen_connections, ec);
  }

  // Binds and listens on "HOST:PORT"; the caller starts the accept thread.
  Result<uint16_t> Bind(const std::string& spec) {
    size_t colon = spec.rfind(':');
    if (colon == std::string::npos) {
      return Status::InvalidArgument(fmt::format(
          "listen address \"{}\" needs a port: use HOST:PORT (port 0 picks one)", spec));
    }
    std::string host = spec.substr(0, colon);
    if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) {
      return Status::InvalidArgument(
          fmt::format("listen address \"{}\": \"{}\" is not an IP address", spec, host));
    }
    int port = std::atoi(spec.substr(colon + 1).c_str());
    auto acceptor = std::make_unique<tcp::acceptor>(io);
    ListenOn(*acceptor, tcp::endpoint(address, static_cast<uint16_t>(port)), ec);
    if (ec) {
      return Status::Unavailable(fmt::format("cannot listen on {}: {}", spec, ec.message()));
    }
    endpoints.emplace_back(host, acceptor->local_endpoint().port());
    acceptors.push_back(std::move(acceptor));
    return endpoints.back().second;
  }

  // ---- faults ------------------------------------------------------------------------
  // Sleeps for every matching latency fault, then takes (and counts) the first other
  // matching fault.
  std::optional<Fault> TakeFault(const Route& route) {
    int latency = 0;
    std::optional<Fault> taken;
    {
      std::lock_guard lock(mu);
      std::string resource = route.resource;
      std::string full = route.subresource.empty() ? resource : resource + "/" + route.subresource;
      for (auto it = faults.begin(); it != faults.end();) {
        bool match = (it->resource == "*" || it->resource == full ||
                      (it->resource == resource && route.subresource.empty())) &&
                     (it->verb == "*" || it->verb == route.verb);
        bool applies = match;
        if (it->type == Fault::Type::kWatchExpire || it->type == Fault::Type::kStall ||
            it->type == Fault::Type::kWatchReset) {
          applies = match && (route.verb == "watch" || it->type == Fault::Type::kStall);
        }
        if (applies && it->type == Fault::Type::kLatency) {
          latency += it->latency_ms;
          ++it->hits;
        } else if (applies && !taken) {
          ++it->hits;
          taken = *it;
        }
        if (applies && it->times != 0 && it->hits >= it->times) {
          it = faults.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (latency > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(latency));
    return taken;
  }

  bool FaultActive(int id) {
    std::lock_guard lock(mu);
    for (const auto& f : faults) {
      if (f.id == id)
        return true;
    }
    return false;
  }

  void LogRequest(const ApiRequest& req, const Route& route, int code, const std::string& fault) {
    rapidjson::Document d(rapidjson::kObjectType);
    auto& a = d.GetAllocator();
    d.AddMember("method", rapidjson::Value(req.method.c_str(), a), a);
    d.AddMember("path", rapidjson::Value(req.path.c_str(), a), a);
    d.AddMember("verb", rapidjson::Value(route.verb.c_str(), a), a);
    d.AddMember("resource", rapidjson::Value(route.resource.c_str(), a), a);
    d.AddMember("code", code, a);
    d.AddMember("fault", rapidjson::Value(fault.c_str(), a), a);
    std::lock_guard lock(mu);
    RequestCount& counted = request_counts[{route.verb, route.resource, code}];
    counted.last = std::chrono::steady_clock::now();
    if (counted.count++ == 0)
      counted.first = counted.last;
    request_log.push_back(ToJson(d));
    while (request_log.size() > 2000)
      request_log.pop_front();
  }

  // ---- admin API -----------------------------------------------------------------------
  ApiResponse Admin(const ApiRequest& req) {
    std::string sub = req.path.substr(std::string("/kubesim/").size());
    auto ok_json = [](std::string body) {
      ApiResponse r;
      r.body = std::move(body);
      return r;
    };
    if (sub == "faults" && req.method == "GET") {
      std::string items;
      std::lock_guard lock(mu);
      for (const auto& f : faults) {
        if (!items.empty())
          items += ",";
        items += fmt::format(
            R"({{"id":{},"resource":"{}","verb":"{}","type":"{}","code":{},"retryAfterSeconds":{},"latencyMs":{},"afterEvents":{},"times":{},"hits":{}}})",
            f.id, f.resource, f.verb, FaultTypeName(f.type), f.code, f.retry_after_seconds,
            f.latency_ms, f.after_events, f.times, f.hits);
      }
      return ok_json("{\"faults\":[" + items + "]}");
    }
    if (sub == "faults" && req.method == "POST") {
      auto f = ParseFault(req.body);
      if (!f.ok())
        return StatusResponse(400, "BadRequest", f.status().message());
      std::lock_guard lock(mu);
      f->id = next_fault_id++;
      faults.push_back(*f);
      log.Info("fault {} added: {} {} {}", f->id, f->resource, f->verb, FaultTypeName(f->type));
      return ok_json(fmt::format(R"({{"id":{}}})", f->id));
    }
    if (sub == "faults" && req.method == "DELETE") {
      std::lock_guard lock(mu);
      faults.clear();
      return ok_json("{}");
    }
    if (sub.rfind("faults/", 0) == 0 && req.method == "DELETE") {
      int id = std::atoi(sub.substr(7).c_str());
      std::lock_guard lock(mu);
      std::erase_if(faults, [&](const Fault& f) { return f.id == id; });
      return ok_json("{}");
    }
    if (sub == "token" && req.method == "POST") {
      auto d = ParseJson(req.body);
      std::string t = d.ok() ? GetString(**d, "token") : "";
      if (t.empty())
        return StatusResponse(400, "BadRequest", "body must be {\"token\":\"...\"}");
      std::lock_guard lock(mu);
      token = t;
      log.Info("bearer token rotated");
      return ok_json("{}");
    }
    if (sub == "restart" && req.method == "POST")
      return AdminRestart(req);
    if (sub == "compact" && req.method == "POST") {
      store.CompactHistory();
      return ok_json(fmt::format(R"({{"resourceVersion":"{}"}})", store.CurrentResourceVersion()));
    }
    if (sub == "requests" && req.method == "GET") {
      std::lock_guard lock(mu);
      std::string items;
      for (const auto& line : request_log) {
        if (!items.empty())
          items += ",";
        items += line;
      }
      return ok_json("{\"requests\":[" + items + "]}");
    }
    if (sub == "requests" && req.method == "DELETE") {
      std::lock_guard lock(mu);
      request_log.clear();
      return ok_json("{}");
    }
    if (sub == "stats" && req.method == "GET") {
      rapidjson::Document d(rapidjson::kObjectType);
      auto& a = d.GetAllocator();
      rapidjson::Value counts(rapidjson::kArrayType);
      std::lock_guard lock(mu);
      uint64_t total = 0;
      for (const auto& [key, n] : request_counts) {
        const auto& [verb, resource, code] = key;
        rapidjson::Value item(rapidjson::kObjectType);
        item.AddMember("verb", rapidjson::Value(verb.c_str(), a), a);
        item.AddMember("resource", rapidjson::Value(resource.c_str(), a), a);
        item.AddMember("code", code, a);
        item.AddMember("count", n.count, a);
        item.AddMember("seconds", std::chrono::duration<double>(n.last - n.first).count(), a);
        counts.PushBack(item, a);
        total += n.count;
      }
      d.AddMember("requests", counts, a);
      d.AddMember("total", total, a);
      d.AddMember("connections", connections, a);
      return ok_json(ToJson(d));
    }
    if (sub == "serviceaccount-token" && req.method == "POST")
      return AdminServiceAccountToken(req);
    if (sub == "stats" && req.method == "DELETE") {
      std::lock_guard lock(mu);
      request_counts.clear();
      connections = 0;
      return ok_json("{}");
    }
    AdminHandler handler;
    {
      std::lock_guard lock(mu);
      for (const auto& [prefix, h] : admin_handlers) {
        if (sub.rfind(prefix, 0) == 0)
          handler = h;
      }
    }
    if (handler)
      return handler(req);
    return StatusResponse(404, "NotFound", fmt::format("no admin endpoint {}", req.path));
  }

  // POST /kubesim/restart {"downSeconds": N}: 202 at once; the server goes down kRestartDelay later
  // (so that this answer gets out) and comes back N seconds after that.
  ApiResponse AdminRestart(const ApiRequest& req) {
    auto d = ParseJson(req.body);
    const rapidjson::Value* down = d.ok() ? Find(**d, "downSeconds") : nullptr;
    if (down == nullptr || !down->IsInt() || down->GetInt() < 0 || down->GetInt() > 600) {
      return StatusResponse(400, "BadRequest",
                            "body must be {\"downSeconds\": N} with N whole seconds, 0 to 600");
    }
    std::lock_guard lock(mu);
    if (restarting || stopping)
      return StatusResponse(409, "Conflict", "the API server is already restarting or stopping");
    restarting = true;
    if (restart_thread.joinable())
      restart_thread.join();  // the last restart's, finished
    restart_thread = std::thread(&Impl::Restart, this, std::chrono::seconds(down->GetInt()));
    ApiResponse r;
    r.code = 202;
    r.body = fmt::format(R"({{"downSeconds":{}}})", down->GetInt());
    return r;
  }

  // Waits (under `lock`) for `ready`, or until Stop; false when stopping.
  bool WaitForRestartStep(std::unique_lock<std::mutex>& lock, const std::function<bool()>& ready,
                          std::chrono::steady_clock::duration limit) {
    return sessions_done.wait_for(lock, limit, [&] { return stopping || ready(); }) && !stopping;
  }

  void Restart(std::chrono::seconds down) {
    std::this_thread::sleep_for(kRestartDelay);
    log.Info("restart: the API server goes down for {} s (the store is kept, as etcd's)",
             down.count());
    for (auto& a : acceptors)
      ::shutdown(a->native_handle(), SHUT_RDWR);
    std::unique_lock lock(mu);
    if (!WaitForRestartStep(
            lock, [&] { return accepts_paused == acceptors.size(); }, std::chrono::hours(1)))
      return;
    std::vector<tcp::endpoint> where;
    for (auto& a : acceptors) {
      beast::error_code ec;
      where.push_back(a->local_endpoint(ec));
      a->close(ec);  // connections are refused now
    }
    for (int fd : session_fds)
      ::shutdown(fd, SHUT_RDWR);  // every request in flight and every watch ends
    if (WaitForRestartStep(
            lock, [] { return false; }, down))
      return;
    // A new API server's watch cache starts at etcd's current revision: a watch from
    // an older resourceVersion answers 410 (the cacher's "too old resource version").
    store.CompactHistory();
    for (size_t i = 0; i < acceptors.size(); ++i)
      Reopen(*acceptors[i], where[i]);
    restarting = false;
    sessions_done.notify_all();
    log.Info("restart: the API server is back");
  }

  void Reopen(tcp::acceptor& acceptor, const tcp::endpoint& where) {
    for (;;) {
      beast::error_code ec;
      ListenOn(acceptor, where, ec);
      if (!ec || stopping)
        return;
      log.Warning("restart: cannot listen on port {} again ({}); retrying", where.port(),
                  ec.message());
      beast::error_code ignored;
      acceptor.close(ignored);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // An accept loop whose listener a restart shut down waits here until it is open
  // again; false when no restart is going on.
  bool WaitOutRestart() {
    std::unique_lock lock(mu);
    if (!restarting)
      return false;
    ++accepts_paused;
    sessions_done.notify_all();
    sessions_done.wait(lock, [&] { return !restarting || stopping; });
    --accepts_paused;
    return true;
  }

  // POST /kubesim/serviceaccount-token {"namespace","name","expirationSeconds"}: a token
  // for test harnesses, of any lifetime (>= 1 s; the TokenRequest API's 10-minute
  // minimum does not apply).
  ApiResponse AdminServiceAccountToken(const ApiRequest& req) {
    auto doc = ParseJson(req.body);
    if (!doc.ok() || !(*doc)->IsObject()) {
      return StatusResponse(400, "BadRequest",
                            "serviceaccount-token takes a JSON object {\"namespace\": NS, "
                            "\"name\": SERVICEACCOUNT, \"expirationSeconds\": N}");
    }
    std::string ns = GetString(**doc, "namespace");
    std::string name = GetString(**doc, "name");
    const rapidjson::Value* seconds = Find(**doc, "expirationSeconds");
    int64_t expiration = seconds != nullptr && seconds->IsInt64() ? seconds->GetInt64() : 3600;
    if (ns.empty() || name.empty()) {
      return StatusResponse(400, "BadRequest",
                            "serviceaccount-token needs \"namespace\" and \"name\" of the "
                            "ServiceAccount");
    }
    auto issued = issuer.IssueToken(ns, name, expiration);
    if (!issued.ok()) {
      int code = issued.status().code() == Status::Code::kNotFound ? 404 : 400;
      return StatusResponse(
          code, code == 404 ? "NotFound" : "BadRequest",
          fmt::format("serviceaccount {}/{}: {}", ns, name, issued.status().message()));
    }
    rapidjson::Document out(rapidjson::kObjectType);
    out.AddMember("token", rapidjson::Value(issued->token.c_str(), out.GetAllocator()),
                  out.GetAllocator());
    out.AddMember("expirationTimestamp", issued->expiration_unix, out.GetAllocator());
    ApiResponse r;
    r.body = ToJson(out);
    return r;
  }

  // ---- authentication and authorization (authn.h, rbac.h) ----------------------------
  // Who sent the request: a verified client certificate, else the admin token or a
  // ServiceAccount token, or nobody (anonymous, only for the health and version
  // paths). nullopt: 401.
  std::optional<UserInfo> Authenticate(const http::request<http::string_body>& hreq,
                                       const std::string& path,
                                       const std::optional<UserInfo>& cert_user) {
    std::string auth(hreq[http::field::authorization]);
    std::string current_token;
    {
      std::lock_guard lock(mu);
      current_token = token;
    }
    // The x509 authenticator comes before the token ones in kube-apiserver's union.
    if (cert_user)
      return cert_user;
    const std::string bearer = "Bearer ";
    if (auth.rfind(bearer, 0) == 0) {
      std::string presented = auth.substr(bearer.size());
      if (!current_token.empty() && presented == current_token)
        return AdminUser();
      auto user = issuer.Authenticate(presented);
      if (user.ok())
        return *user;
      log.Debug("401 for {}: {}", path, user.status().message());
      return std::nullopt;  // a bad token is refused even where anonymous would pass
    }
    if (current_token.empty())
      return AdminUser();  // no authentication configured
    if (path == "/version" || path == "/healthz" || path == "/livez" || path == "/readyz")
      return AnonymousUser();
    return std::nullopt;
  }

  // Impersonation, then the authorization of the request (before routing, so an
  // unknown resource of an unauthorized user is 403, as in the real filter chain).
  // nullopt: go on with `user` as the identity; else the refusal, with the verb and
  // resource it was about in `logged` (for the request log).
  std::optional<ApiResponse> Authorize(const http::request<http::string_body>& hreq,
                                       const ApiRequest& req, UserInfo& user, Route& logged) {
    std::multimap<std::string, std::string> impersonation;
    for (const auto& field : hreq) {
      std::string name(field.name_string());
      for (char& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name.rfind("impersonate-", 0) == 0)
        impersonation.emplace(name, std::string(field.value()));
    }
    ApiResponse error;
    auto acting = Impersonate(store, user, impersonation, error);
    if (!acting)
      return error;
    user = *acting;
    if (req.path.rfind("/kubesim/", 0) == 0) {
      if (user.Privileged())
        return std::nullopt;
      RequestAttributes admin;
      admin.user = user;
      admin.verb = req.method;
      for (char& c : admin.verb)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      admin.path = req.path;
      return ForbiddenResponse(admin, "");
    }
    auto attributes = AttributesOfRequest(req.method, req.path, req.query);
    if (!attributes) {
      return StatusResponse(
          400, "BadRequest",
          fmt::format("unable to determine kind and namespace from url {}", req.path));
    }
    attributes->user = user;
    logged.verb = attributes->verb;
    logged.resource = attributes->resource;
    logged.subresource = attributes->subresource;
    Decision decision = kubesim::Authorize(store, *attributes);
    if (!decision.allowed)
      return ForbiddenResponse(*attributes, decision.reason);
    // A WebSocket exec is a GET, authorized as "get" (1.32's RequestInfo); 1.35's
    // AuthorizePodWebsocketUpgradeCreatePermission (on by default) also asks for
    // "create", as SPDY's POST always did. kubesim asks for both (docs/kubesim.md).
    if (attributes->verb == "get" && attributes->resource == "pods" &&
        attributes->subresource == "exec" &&
        ws::IsWebSocketUpgrade(std::string(hreq[http::field::upgrade]))) {
      RequestAttributes create = *attributes;
      create.verb = "create";
      logged.verb = "create";
      Decision created = kubesim::Authorize(store, create);
      if (!created.allowed)
        return ForbiddenResponse(create, created.reason);
      logged.verb = attributes->verb;
    }
    return std::nullopt;
  }

  // ---- one connection -----------------------------------------------------------------
  template <class Stream>
  void Session(Stream& stream, tcp::socket& raw, const std::optional<UserInfo>& cert_user) {
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      beast::error_code ec;
      http::read(stream, buffer, parser, ec);
      if (ec)
        return;
      if (!HandleOne(stream, raw, parser.get(), cert_user, buffer))
        return;
    }
  }

  template <class Stream>
  bool Reply(Stream& stream, const http::request<http::string_body>& req, const ApiResponse& r) {
    http::response<http::string_body> res{static_cast<http::status>(r.code), req.version()};
    res.set(http::field::content_type, r.content_type);
    for (const auto& [k, v] : r.headers)
      res.set(k, v);
    res.keep_alive(req.keep_alive());
    res.body() = r.body;
    res.prepare_payload();
    beast::error_code ec;
    http::write(stream, res, ec);
    return !ec && req.keep_alive();
  }

  // ---- pods/exec (exec.h) ---------------------------------------------------------------
  // The API server's checks, then the kubelet's start of the command, then the upgrade:
  // this connection carries the exec until it ends (other requests have their own).
  template <class Stream>
  bool ServeExec(Stream& stream, tcp::socket& raw, const http::request<http::string_body>& hreq,
                 const ApiRequest& req, const Route& route, const std::string& raw_query,
                 beast::flat_buffer& buffer) {
    auto answer = [&](const ApiResponse& r) {
      LogRequest(req, route, r.code, "");
      return Reply(stream, hreq, r);
    };
    const ExecOptions options = ParseExecOptions(raw_query);
    ExecTarget target;
    if (auto refused = CheckExecTarget(store, route, options, target))
      return answer(*refused);
    std::string protocol;
    if (auto refused = CheckExecUpgrade(hreq, options, target, protocol))
      return answer(*refused);
    Result<ExecProcess> process = this->options.exec(target);
    if (!process.ok())
      return answer(KubeletError(process.status()));
    LogRequest(req, route, 101, "");
    beast::error_code ec;
    net::write(stream,
               net::buffer(ws::HandshakeResponse(std::string(hreq["Sec-WebSocket-Key"]), protocol)),
               ec);
    const auto leftover = buffer.data();
    std::string pending(static_cast<const char*>(leftover.data()), leftover.size());
    buffer.consume(buffer.size());
    ExecConnection connection = ExecConnectionOf(stream, raw);
    if (ec)
      connection.write = [](const std::string&) { return false; };
    PumpExec(connection, pending, *process, protocol == kExecProtocolV5, target.command);
    return false;  // the connection was the exec's
  }

  // The kubelet's own refusal: HTTP 500 with the error as text (streaming.WriteError).
  static ApiResponse KubeletError(const Status& status) {
    ApiResponse r;
    r.code = 500;
    r.content_type = "text/plain; charset=utf-8";
    r.body = status.message();
    return r;
  }

  // What must hold before the upgrade, in upstream's order: the options, the
  // container (the kubelet's lookup), then the protocol. `protocol` gets the
  // negotiated subprotocol.
  std::optional<ApiResponse> CheckExecUpgrade(const http::request<http::string_body>& hreq,
                                              const ExecOptions& options, ExecTarget& target,
                                              std::string& protocol) {
    if (options.command.empty())
      return StatusResponse(400, "BadRequest", "you must specify at least 1 command");
    if (!options.with_stdin && !options.with_stdout && !options.with_stderr)
      return StatusResponse(400, "BadRequest",
                            "you must specify at least 1 of stdin, stdout, stderr");
    if (!this->options.exec) {
      return StatusResponse(
          500, "InternalError",
          fmt::format("error dialing backend: no kubelet runs node {} (kubesim without --kubelet)",
                      target.node));
    }
    target.probe = true;
    Result<ExecProcess> probe = this->options.exec(target);
    target.probe = false;
    if (!probe.ok())
      return KubeletError(probe.status());
    if (!ws::IsWebSocketUpgrade(std::string(hreq[http::field::upgrade]))) {
      return StatusResponse(
          400, "BadRequest",
          "kubesim serves pods/exec over WebSocket (v5.channel.k8s.io) only: this request is "
          "not a WebSocket upgrade (SPDY/3.1 is not implemented; docs/kubesim.md)");
    }
    protocol = ws::NegotiateProtocol(std::string(hreq["Sec-WebSocket-Protocol"]),
                                     {kExecProtocolV5, kExecProtocolV4});
    if (protocol.empty()) {
      return StatusResponse(
          400, "BadRequest",
          fmt::format("unable to upgrade: unable to negotiate protocol: client supports [{}], "
                      "server supports [{} {}]",
                      std::string(hreq["Sec-WebSocket-Protocol"]), kExecProtocolV5,
                      kExecProtocolV4));
    }
    if (options.tty) {
      return StatusResponse(400, "BadRequest",
                            "kubesim runs exec without a TTY only: leave out -t (tty=true)");
    }
    return std::nullopt;
  }

  // The upgraded connection for the pump: reads never block (the socket is switched to
  // non-blocking for them and back, so that TLS writes stay whole), writes do.
  template <class Stream>
  ExecConnection ExecConnectionOf(Stream& stream, tcp::socket& raw) {
    ExecConnection c;
    c.fd = raw.native_handle();
    auto closed = std::make_shared<bool>(false);
    c.read_available = [&stream, &raw, closed]() -> std::optional<std::string> {
      if (*closed)
        return std::nullopt;
      std::string out;
      char buf[16 * 1024];
      beast::error_code ec;
      raw.non_blocking(true, ec);
      while (!ec) {
        const size_t n = stream.read_some(net::buffer(buf), ec);
        out.append(buf, n);
      }
      if (ec != net::error::would_block && ec != net::error::try_again)
        *closed = true;
      beast::error_code ignored;
      raw.non_blocking(false, ignored);
      if (*closed && out.empty())
        return std::nullopt;
      return out;
    };
    c.write = [&stream](const std::string& data) {
      beast::error_code ec;
      net::write(stream, net::buffer(data), ec);
      return !ec;
    };
    c.stopping = [this]() { return stopping.load(); };
    return c;
  }

  static void Reset(tcp::socket& raw) {
    beast::error_code ec;
    raw.set_option(net::socket_base::linger(true, 0), ec);
    ::shutdown(raw.native_handle(), SHUT_RDWR);
    raw.close(ec);
  }

  template <class Stream>
  bool HandleOne(Stream& stream, tcp::socket& raw, const http::request<http::string_body>& hreq,
                 const std::optional<UserInfo>& cert_user, beast::flat_buffer& buffer) {
    ApiRequest req;
    req.method = std::string(hreq.method_string());
    std::string target(hreq.target());
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos)
      req.query = ParseQuery(target.substr(q + 1));
    req.content_type = std::string(hreq[http::field::content_type]);
    req.accept = std::string(hreq[http::field::accept]);
    req.user_agent = std::string(hreq[http::field::user_agent]);
    req.body = hreq.body();

    std::optional<UserInfo> user = Authenticate(hreq, req.path, cert_user);
    if (!user) {
      LogRequest(req, Route{}, 401, "");
      return Reply(stream, hreq, StatusResponse(401, "Unauthorized", "Unauthorized"));
    }
    Route refused_route;
    if (auto refused = Authorize(hreq, req, *user, refused_route)) {
      LogRequest(req, refused_route, refused->code, "");
      return Reply(stream, hreq, *refused);
    }
    req.user = user->name;
    req.uid = user->uid;
    req.groups = user->groups;
    req.extra = user->extra;
    if (req.path.rfind("/kubesim/", 0) == 0)
      return Reply(stream, hreq, Admin(req));

    Route route;
    ApiResponse error;
    if (!api.ResolveRoute(req, route, error)) {
      LogRequest(req, route, error.code, "");
      return Reply(stream, hreq, error);
    }
    std::optional<Fault> fault;
    if (!route.resource.empty())
      fault = TakeFault(route);
    std::string fault_name = fault ? FaultTypeName(fault->type) : "";
    if (fault && fault->type == Fault::Type::kStatus) {
      ApiResponse r = StatusResponse(fault->code, ReasonFor(fault->code),
                                     fmt::format("kubesim injected fault: HTTP {}", fault->code));
      if (fault->retry_after_seconds > 0 && (fault->code == 429 || fault->code >= 500)) {
        r.headers.emplace_back("Retry-After", std::to_string(fault->retry_after_seconds));
        auto d = ParseJson(r.body);
        if (d.ok()) {
          SetMember(**d, "details.retryAfterSeconds", rapidjson::Value(fault->retry_after_seconds));
          r.body = ToJson(**d);
        }
      }
      LogRequest(req, route, fault->code, fault_name);
      return Reply(stream, hreq, r);
    }
    if (fault && fault->type == Fault::Type::kResetBefore) {
      LogRequest(req, route, 0, fault_name);
      Reset(raw);
      return false;
    }
    if (route.subresource == "exec") {
      std::string raw_query = q == std::string::npos ? "" : target.substr(q + 1);
      return ServeExec(stream, raw, hreq, req, route, raw_query, buffer);
    }
    if (fault && fault->type == Fault::Type::kStall && route.verb != "watch") {
      int id = fault->id;
      while (!stopping && FaultActive(id)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (route.verb == "watch") {
      int stall_id = (fault && fault->type == Fault::Type::kStall) ? fault->id : 0;
      if (fault && fault->type == Fault::Type::kResetAfter) {
        LogRequest(req, route, 0, fault_name);
        Reset(raw);
        return false;
      }
      bool streamed = false;
      bool alive = true;
      Api::WatchHooks hooks;
      hooks.expire_after_backlog = fault && fault->type == Fault::Type::kWatchExpire;
      hooks.bookmark_interval = options.bookmark_interval;
      hooks.fail = [&](const ApiResponse& r) {
        LogRequest(req, route, r.code, fault_name);
        alive = Reply(stream, hreq, r);
      };
      http::response<http::empty_body> res{http::status::ok, hreq.version()};
      http::response_serializer<http::empty_body> serializer{res};
      hooks.begin = [&]() {
        streamed = true;
        LogRequest(req, route, 200, fault_name);
        res.set(http::field::content_type, "application/json");
        res.set(http::field::transfer_encoding, "chunked");
        res.chunked(true);
        res.keep_alive(hreq.keep_alive());
        beast::error_code ec;
        http::write_header(stream, serializer, ec);
        if (ec)
          alive = false;
        if (alive && fault && fault->type == Fault::Type::kWatchReset && fault->after_events == 0) {
          Reset(raw);
          alive = false;
        }
      };
      // watch-reset: the connection dies mid-body after that many events.
      const int reset_after =
          fault && fault->type == Fault::Type::kWatchReset ? fault->after_events : -1;
      int events_sent = 0;
      hooks.write = [&](const std::string& chunk) {
        if (!alive)
          return false;
        beast::error_code ec;
        net::write(stream, http::make_chunk(net::buffer(chunk)), ec);
        if (ec)
          alive = false;
        if (alive && reset_after > 0 && chunk.rfind(R"({"type":"BOOKMARK")", 0) != 0 &&
            ++events_sent >= reset_after) {
          WaitUntilSent(raw.native_handle());
          Reset(raw);
          alive = false;
        }
        return alive;
      };
      int fd = raw.native_handle();
      hooks.stopping = [&]() { return stopping.load() || !alive || PeerClosed(fd); };
      hooks.stalled = [&]() { return stall_id != 0 && FaultActive(stall_id); };
      api.Watch(req, route, hooks);
      if (!streamed)
        return alive;
      if (!alive || stopping)
        return false;
      beast::error_code ec;
      net::write(stream, http::make_chunk_last(), ec);
      return !ec && hreq.keep_alive();
    }
    ApiResponse r = api.Handle(req, route);
    if (fault && fault->type == Fault::Type::kResetAfter) {
      LogRequest(req, route, r.code, fault_name);
      Reset(raw);
      return false;
    }
    LogRequest(req, route, r.code, fault_name);
    return Reply(stream, hreq, r);
  }

  void RunSession(tcp::socket socket) {
    int fd = socket.native_handle();
    {
      std::lock_guard lock(mu);
      session_fds.insert(fd);
    }
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    if (tls_context) {
      beast::ssl_stream<tcp::socket&> stream(socket, *tls_context);
      stream.handshake(ssl::stream_base::server, ec);
      if (!ec) {
        std::optional<UserInfo> cert_user;
        X509* peer = SSL_get1_peer_certificate(stream.native_handle());
        if (peer != nullptr) {
          if (SSL_get_verify_result(stream.native_handle()) == X509_V_OK)
            cert_user = CertificateUser(peer);
          X509_free(peer);
        }
        Session(stream, socket, cert_user);
      }
    } else {
      Session(socket, socket, std::nullopt);
    }
    {
      // Forget the descriptor before closing it: its number may be reused at once.
      std::lock_guard lock(mu);
      session_fds.erase(fd);
    }
    socket.close(ec);
    std::lock_guard lock(mu);
    --active_sessions;
    sessions_done.notify_all();
  }

  void AcceptLoop(tcp::acceptor* acceptor) {
    while (!stopping) {
      beast::error_code ec;
      tcp::socket socket(io);
      acceptor->accept(socket, ec);
      if (ec) {
        if (stopping)
          return;
        if (WaitOutRestart())
          continue;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      std::vector<std::thread> finished;
      {
        std::lock_guard lock(mu);
        ++active_sessions;
        ++connections;
        for (auto it = session_threads.begin(); it != session_threads.end();) {
          if (it->done->load()) {
            finished.push_back(std::move(it->thread));
            it = session_threads.erase(it);
          } else {
            ++it;
          }
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        session_threads.push_back(
            SessionThread{std::thread([this, done, socket = std::move(socket)]() mutable {
                            RunSession(std::move(socket));
                            done->store(true);
                          }),
                          done});
      }
      for (auto& t : finished)
        t.join();
    }
  }
};

Server::Server(Store& store, ServerOptions options, k8sbridge::Logger& log)
    : impl_(std::make_unique<Impl>(store, std::move(options), log)), store_(store) {}

Server::~Server() {
  Stop();
}

Status Server::Start() {
  Impl& s = *impl_;
  if (s.options.tls) {
    s.tls_context = std::make_unique<ssl::context>(ssl::context::tls_server);
    beast::error_code ec;
    s.tls_context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                               ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                               ssl::context::no_tlsv1_1);
    s.tls_context->use_certificate_chain(net::buffer(s.options.tls->server_cert_pem), ec);
    if (!ec) {
      s.tls_context->use_private_key(net::buffer(s.options.tls->server_key_pem), ssl::context::pem,
                                     ec);
    }
    if (!ec)
      s.tls_context->add_certificate_authority(net::buffer(s.options.tls->ca_cert_pem), ec);
    if (ec)
      return Status::Internal(fmt::format("TLS setup: {}", ec.message()));
    // Ask for a client certificate but do not require one (bearer tokens also work).
    s.tls_context->set_verify_mode(ssl::verify_peer);
    s.tls_context->set_verify_callback([](bool, ssl::verify_context&) { return true; });
    // With client certificates requested, OpenSSL refuses to resume a TLS session
    // unless the server names a session-id context, and real clients (libcurl) resume.
    static const unsigned char kSessionContext[] = "kubesim";
    SSL_CTX_set_session_id_context(s.tls_context->native_handle(), kSessionContext,
                                   sizeof kSessionContext - 1);
  }
  for (const auto& spec : s.options.listen) {
    auto bound = s.Bind(spec);
    if (!bound.ok())
      return bound.status();
  }
  for (auto& a : s.acceptors)
    s.threads.emplace_back(&Impl::AcceptLoop, &s, a.get());
  // The API server's post-start hook rbac/bootstrap-roles, and a first pass of the
  // ServiceAccount and root-CA controllers before anyone can connect.
  if (Status policy = CreateBootstrapPolicy(s.store); !policy.ok())
    return policy;
  SyncNamespaceDefaults(s.store, s.options.admission.root_ca_pem);
  s.threads.emplace_back([&s]() {
    while (!s.stopping) {
      const auto start = std::chrono::steady_clock::now();
      s.store.ReapExpired();
      CollectGarbage(s.store);  // reads every object: spaced as controller passes are
      SyncNamespaceDefaults(s.store, s.options.admission.root_ca_pem);
      AggregateClusterRoles(s.store);
      const auto took = std::chrono::steady_clock::now() - start;
      std::unique_lock lock(s.mu);
      s.sessions_done.wait_for(lock,
                               std::max<std::chrono::steady_clock::duration>(
                                   s.options.reap_interval, took * kPassSpacing),
                               [&] { return s.stopping.load(); });
    }
  });
  return Status::Ok();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true))
    return;
  for (auto& a : s.acceptors)
    ::shutdown(a->native_handle(), SHUT_RDWR);
  {
    std::lock_guard lock(s.mu);
    for (int fd : s.session_fds)
      ::shutdown(fd, SHUT_RDWR);
    s.sessions_done.notify_all();
  }
  for (auto& t : s.threads)
    t.join();
  s.threads.clear();
  std::thread restart;
  {
    std::lock_guard lock(s.mu);
    restart = std::move(s.restart_thread);
  }
  if (restart.joinable())
    restart.join();
  std::unique_lock lock(s.mu);
  // Sessions accepted while stopping may register late: shut those down too.
  while (!s.sessions_done.wait_for(lock, std::chrono::milliseconds(50), [&] {
    for (int fd : s.session_fds)
      ::shutdown(fd, SHUT_RDWR);
    return s.active_sessions == 0;
  })) {
  }
  std::vector<Impl::SessionThread> sessions = std::move(s.session_threads);
  lock.unlock();
  for (auto& session : sessions)
    session.thread.join();
  for (auto& a : s.acceptors) {
    beast::error_code ec;
    a->close(ec);
  }
}

Result<uint16_t> Server::Listen(const std::string& spec) {
  Impl& s = *impl_;
  if (s.stopping)
    return Status::Unavailable("the server is stopping");
  auto port = s.Bind(spec);
  if (!port.ok())
    return port;
  s.threads.emplace_back(&Impl::AcceptLoop, &s, s.acceptors.back().get());
  return port;
}

std::vector<std::pair<std::string, uint16_t>> Server::endpoints() const {
  return impl_->endpoints;
}

int Server::AddFault(Fault fault) {
  std::lock_guard lock(impl_->mu);
  fault.id = impl_->next_fault_id++;
  fault.hits = 0;
  impl_->faults.push_back(fault);
  return fault.id;
}

void Server::RemoveFault(int id) {
  std::lock_guard lock(impl_->mu);
  std::erase_if(impl_->faults, [&](const Fault& f) { return f.id == id; });
}

void Server::ClearFaults() {
  std::lock_guard lock(impl_->mu);
  impl_->faults.clear();
}

std::vector<Fault> Server::faults() const {
  std::lock_guard lock(impl_->mu);
  return impl_->faults;
}

void Server::SetToken(const std::string& token) {
  std::lock_guard lock(impl_->mu);
  impl_->token = token;
}

std::string Server::token() const {
  std::lock_guard lock(impl_->mu);
  return impl_->token;
}

TokenIssuer& Server::token_issuer() {
  return impl_->issuer;
}

void Server::AddAdminHandler(const std::string& prefix, AdminHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->admin_handlers[prefix] = std::move(handler);
}

}  // namespace kubesim
