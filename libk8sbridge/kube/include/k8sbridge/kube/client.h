// The Kubernetes client: typed-enough REST calls with client-go's behaviour.
//
// Thread-safety contract: a Client is safe to use from many threads at once once
// constructed (credentials, rate limiter, connection pool and metrics are guarded
// internally). It holds no process-global state of its own; two plugins in one
// process may each create clients. Callbacks given to Watch run on the calling
// thread. Objects returned are values.
//
// Retries (see docs/client.md): 429 and 5xx answers that carry Retry-After are
// retried after that delay (capped) for every verb; connection errors are retried
// only for reads (GET/LIST); a 401 drops cached credentials and retries once.
// Every request first takes a token from a QPS/burst bucket.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/clock.h"
#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/kube/config.h"
#include "k8sbridge/kube/credentials.h"
#include "k8sbridge/kube/object.h"
#include "k8sbridge/kube/transport.h"
#include "k8sbridge/kube/warnings.h"
#include "k8sbridge/log.h"
#include "k8sbridge/status.h"

namespace k8sbridge::kube {

// A kind of object and where it lives.
struct Resource {
  std::string_view api_path;  // "/api/v1" or "/apis/<group>/<version>"
  std::string_view plural;
  bool namespaced;
  std::string_view kind;
  std::string_view api_version;
};
inline constexpr Resource kPods{"/api/v1", "pods", true, "Pod", "v1"};
inline constexpr Resource kNodes{"/api/v1", "nodes", false, "Node", "v1"};
inline constexpr Resource kConfigMaps{"/api/v1", "configmaps", true, "ConfigMap", "v1"};
inline constexpr Resource kEvents{"/apis/events.k8s.io/v1", "events", true, "Event",
                                  "events.k8s.io/v1"};
inline constexpr Resource kLeases{"/apis/coordination.k8s.io/v1", "leases", true, "Lease",
                                  "coordination.k8s.io/v1"};

// Hooks for programs to export metrics. Called on the thread that made the call;
// implementations must be thread-safe.
class Metrics {
 public:
  virtual ~Metrics() = default;
  // verb: GET LIST WATCH POST PUT PATCH DELETE; code: HTTP status, 0 if none came.
  virtual void RequestDone(std::string_view verb, int code, Clock::Steady::duration latency) = 0;
  // reason: expired (410), too-large (504 ResourceVersionTooLarge), empty-stream, error,
  // closed.
  virtual void WatchRestarted(std::string_view resource, std::string_view reason) = 0;
};

// Counts in memory; also what tests assert on.
class CountingMetrics final : public Metrics {
 public:
  void RequestDone(std::string_view verb, int code, Clock::Steady::duration latency) override;
  void WatchRestarted(std::string_view resource, std::string_view reason) override;
  int64_t Requests(std::string_view verb, int code) const;
  Clock::Steady::duration Latency(std::string_view verb, int code) const;  // total
  int64_t WatchRestarts(std::string_view reason) const;
  std::map<std::pair<std::string, int>, int64_t> requests() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> count_;
  std::map<std::pair<std::string, int>, Clock::Steady::duration> latency_;
  std::map<std::string, int64_t> restarts_;
};

// Token bucket: `qps` tokens a second, at most `burst` saved. qps <= 0: no limit.
class RateLimiter {
 public:
  RateLimiter(double qps, int burst, Clock& clock);
  // Takes a token, returning how long the caller must wait before using it.
  Clock::Steady::duration Reserve();

 private:
  std::mutex mu_;
  double qps_;
  double burst_;
  double tokens_;
  Clock::Steady::time_point last_;
  Clock& clock_;
};

// When the server last answered a request, shared by every client made with the
// same options (the leader election's client too). A wait that began because the
// server did not answer (an outage) ends soon after any request gets through, so
// that caches refill when the server is back, not at the end of a 30 s back-off.
class ServerContact {
 public:
  // An HTTP answer that shows the server serves again: any status below 500 but 429.
  static bool Serves(int http_status) { return http_status < 500 && http_status != 429; }
  void Answered(Clock::Steady::time_point at) {
    last_.store(at.time_since_epoch().count(), std::memory_order_relaxed);
  }
  bool AnsweredAfter(Clock::Steady::time_point t) const {
    return last_.load(std::memory_order_relaxed) > t.time_since_epoch().count();
  }

 private:
  std::atomic<Clock::Steady::rep> last_{std::numeric_limits<Clock::Steady::rep>::min()};
};

// A failure that means the server did not answer: no HTTP answer (connection
// refused or reset, a timeout) or a 5xx. A 429 is an answer: the server asks us
// to wait, and nothing should end that wait early.
bool ServerDidNotAnswer(const Status& failure);

struct ClientOptions {
  Clock* clock = nullptr;           // default RealClock
  Logger* logger = nullptr;         // default NullLogger
  Metrics* metrics = nullptr;       // optional
  CommandRunner* runner = nullptr;  // exec plugins; default RealCommandRunner
  double qps = 5;                   // client-go defaults
  int burst = 10;
  int max_retries = 10;                      // for Retry-After answers and read connection errors
  std::chrono::seconds max_retry_after{30};  // a larger Retry-After is capped to this
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  std::chrono::seconds token_file_max_age{60};
  std::string user_agent = "k8sbridge/0.1";
  // Uniform in [0, 1): spreads back-off delays so that many daemons do not retry in
  // lockstep. Default: a generator per client seeded at random; tests fix it.
  std::function<double()> random;
  // Default: one per client. Options copied from a client's options() share it.
  std::shared_ptr<ServerContact> contact;
};

// Per call: cancellation, a different total timeout, and whether a successful
// answer's object is wanted.
struct CallOptions {
  const CancelToken* cancel = nullptr;
  std::optional<std::chrono::milliseconds> timeout;
  // false: a 2xx answer's body is not decoded and the call returns an empty
  // Object, for callers that need only the verdict (a resume's 1000 creates: the
  // decoding was a tenth of k8sbridge-power's CPU). Errors are decoded as always.
  bool decode_answer = true;
};

struct ListOptions {
  std::string label_selector, field_selector;
  int64_t page_size = 500;       // limit per page; 0: one unpaged request
  std::string resource_version;  // "" most recent
};
struct ObjectList {
  std::vector<Object> items;
  std::string resource_version;
  std::string continue_token;  // ListPage: the next page's; "" after the last page
};

enum class PatchType { kMerge, kJson, kStrategicMerge, kApply };
std::string_view ContentType(PatchType type);
struct PatchOptions {
  std::string field_manager = "k8sbridge";  // needed by server-side apply
  bool force = false;                       // apply: take over conflicting fields
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string propagation_policy;  // Foreground, Background, Orphan
  std::string precondition_uid, precondition_resource_version;
};

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };
std::string_view EventTypeName(EventType type);
struct WatchEvent {
  EventType type;
  Object object;  // for kError: a Status object
};

struct WatchOptions {
  std::string resource_version;
  // Called when the server answered 200 and the stream began, before any event:
  // a live watch (real servers send a bookmark only about once a minute).
  std::function<void()> on_open;
  std::string label_selector, field_selector;
  bool allow_bookmarks = true;
  int timeout_seconds = 300;       // server closes the stream after this...
  std::chrono::seconds slack{30};  // ...and we give up this much later (a stalled stream)
};
struct WatchEnd {
  int64_t events = 0;  // including bookmarks
  std::string last_resource_version;
};

// Splits a watch stream into events. Lines may arrive split across reads, several
// to a read. Used by Client::Watch and the fuzz target.
class WatchDecoder {
 public:
  static constexpr size_t kMaxLine = 64u << 20;
  // Calls `on_event` for each complete line; stops at the first bad line (returns
  // its error) or when on_event returns false.
  Status Feed(std::string_view data, const std::function<bool(WatchEvent&&)>& on_event);
  // After the stream ends: an incomplete last line is an error.
  Status Finish(const std::function<bool(WatchEvent&&)>& on_event);
  static Result<WatchEvent> ParseLine(std::string_view line);

 private:
  std::string buffer_;
};

class Client {
 public:
  // Uses a CurlTransport configured from `config`. Logs a warning when TLS
  // verification is off.
  static Result<std::unique_ptr<Client>> Create(const Config& config, ClientOptions options = {});
  Client(const Config& config, std::shared_ptr<Transport> transport, ClientOptions options = {});

  const Config& config() const { return config_; }
  const ClientOptions& options() const { return options_; }
  // The connection pool, for a dedicated client to the same server (the leader
  // election's, with its own token bucket and retries).
  const std::shared_ptr<Transport>& transport() const { return transport_; }
  // `base` stretched by up to `factor` times itself, at random (client-go's
  // wait.Jitter): base * (1 + factor * Random()).
  Clock::Steady::duration Jitter(Clock::Steady::duration base, double factor);
  Clock& clock() { return *clock_; }
  Logger& logger() { return *logger_; }
  // Sleeps a back-off `d`, noticing cancellation; false when cancelled. When the
  // back-off began because the server did not answer (`outage`, see
  // ServerDidNotAnswer), it ends early, after a short jittered pause, once a
  // request of any client sharing this one's ServerContact got an answer.
  bool BackOff(Clock::Steady::duration d, const CallOptions& call, bool outage);

  Result<Object> Get(const Resource& r, std::string_view ns, std::string_view name,
                     const CallOptions& call = {});
  // Follows `continue` across pages; an expired continue token (410) restarts the
  // list once from the beginning.
  Result<ObjectList> List(const Resource& r, std::string_view ns, const ListOptions& options = {},
                          const CallOptions& call = {});
  // One page (options.page_size items at most), from `continue_token` ("": the
  // first page); the answer's continue_token names the next. For a reader that may
  // stop before the last page. An expired token is the caller's 410 (kExpired).
  Result<ObjectList> ListPage(const Resource& r, std::string_view ns, const ListOptions& options,
                              std::string_view continue_token, const CallOptions& call = {});
  Result<Object> Create(const Resource& r, std::string_view ns, const Object& object,
                        const CallOptions& call = {});
  // PUT; the object carries metadata.resourceVersion, so a stale one gets 409 Conflict.
  Result<Object> Replace(const Resource& r, std::string_view ns, const Object& object,
                         const CallOptions& call = {});
  Result<Object> Patch(const Resource& r, std::string_view ns, std::string_view name,
                       PatchType type, std::string_view body, const PatchOptions& options = {},
                       const CallOptions& call = {});
  // Returns the object (200/202 with the object) or an empty Object (a Status came).
  Result<Object> Delete(const Resource& r, std::string_view ns, std::string_view name,
                        const DeleteOptions& options = {}, const CallOptions& call = {});
  // Get, mutate, Replace; on 409 Conflict read again and re-apply, up to `attempts`.
  Result<Object> Update(const Resource& r, std::string_view ns, std::string_view name,
                        const std::function<Status(Object&)>& mutate, int attempts = 5,
                        const CallOptions& call = {});
  // One watch stream. Returns when the server closes it (OK), when on_event
  // returns false (OK), or with kExpired for 410 (HTTP or a mid-stream ERROR) and
  // the error for other failures or ERROR events.
  Result<WatchEnd> Watch(const Resource& r, std::string_view ns, const WatchOptions& options,
                         const std::function<bool(const WatchEvent&)>& on_event,
                         const CallOptions& call = {});

  // Any request: path below the server, e.g. "/version". Retries as above.
  Result<HttpResponse> Request(std::string_view method, std::string_view path_and_query,
                               std::string_view body = "", std::string_view content_type = "",
                               const CallOptions& call = {});

  static std::string Path(const Resource& r, std::string_view ns, std::string_view name = "");

 private:
  // A streamed answer: the body is handed over as it arrives.
  struct StreamHooks {
    std::function<bool(std::string_view)> on_body;
    std::function<void(const HttpResponse&)> on_headers;  // a 2xx answer began
    std::chrono::milliseconds timeout{};                  // 0: the call's timeout
  };
  HttpRequest NewRequest(std::string_view method, const std::string& path, std::string_view body,
                         std::string_view content_type, const CallOptions& call,
                         const Credentials::Auth& auth, const StreamHooks* stream) const;
  // One try of `req`: the transport's answer, counted in the metrics. `head` gets
  // the status of the answer's head once it arrived (0 before), even when the
  // transfer then failed.
  Result<HttpResponse> Attempt(std::string_view verb, HttpRequest req, const StreamHooks* stream,
                               int& head);
  Result<HttpResponse> Send(std::string_view verb, std::string_view method, const std::string& path,
                            std::string_view body, std::string_view content_type,
                            const CallOptions& call, const StreamHooks* stream = nullptr);
  // Sleeps the answer's Retry-After (capped); false when it has none.
  Result<bool> WaitRetryAfter(const HttpResponse& resp, std::string_view method,
                              const std::string& path, const CallOptions& call);
  Result<Object> ObjectCall(std::string_view verb, std::string_view method, const std::string& path,
                            std::string_view body, std::string_view content_type,
                            const CallOptions& call);
  // `until_answer`: see BackOff's `outage`.
  bool SleepCancellable(Clock::Steady::duration d, const CallOptions& call,
                        bool until_answer = false);
  void NoteAnswer(int http_status, Clock::Steady::time_point at);

  Config config_;
  std::shared_ptr<Transport> transport_;
  ClientOptions options_;
  Clock* clock_;
  Logger* logger_;
  NullLogger null_logger_;
  std::unique_ptr<Credentials> credentials_;
  RateLimiter limiter_;
  WarningLog warnings_;
  std::mutex random_mu_;
  std::mt19937_64 generator_;
};

// Typed helpers for the kinds k8sbridge uses: Pods(c, "ns").Get("name"), ...
class ResourceClient {
 public:
  ResourceClient(Client& client, const Resource& resource, std::string ns)
      : client_(client), resource_(resource), ns_(std::move(ns)) {}
  Result<Object> Get(std::string_view name) { return client_.Get(resource_, ns_, name); }
  Result<ObjectList> List(const ListOptions& o = {}) { return client_.List(resource_, ns_, o); }
  Result<Object> Create(const Object& o) { return client_.Create(resource_, ns_, o); }
  Result<Object> Replace(const Object& o) { return client_.Replace(resource_, ns_, o); }
  Result<Object> Patch(std::string_view name, PatchType t, std::string_view body,
                       const PatchOptions& o = {}) {
    return client_.Patch(resource_, ns_, name, t, body, o);
  }
  Result<Object> Delete(std::string_view name, const DeleteOptions& o = {}) {
    return client_.Delete(resource_, ns_, name, o);
  }
  Result<Object> Update(std::string_view name, const std::function<Status(Object&)>& mutate) {
    return client_.Update(resource_, ns_, name, mutate);
  }

 private:
  Client& client_;
  const Resource& resource_;
  std::string ns_;
};
inline ResourceClient Pods(Client& c, std::string ns) {
  return {c, kPods, std::move(ns)};
}
inline ResourceClient Nodes(Client& c) {
  return {c, kNodes, ""};
}
inline ResourceClient ConfigMaps(Client& c, std::string ns) {
  return {c, kConfigMaps, std::move(ns)};
}
inline ResourceClient Events(Client& c, std::string ns) {
  return {c, kEvents, std::move(ns)};
}
inline ResourceClient Leases(Client& c, std::string ns) {
  return {c, kLeases, std::move(ns)};
}
// spec.unschedulable by merge patch.
Result<Object> SetNodeUnschedulable(Client& c, std::string_view node, bool unschedulable);

// Runs fn(0..n-1) on at most `concurrency` threads; returns each call's Status.
std::vector<Status> ForEachBounded(size_t n, size_t concurrency,
                                   const std::function<Status(size_t)>& fn);

}  // namespace k8sbridge::kube
