// The kubesim API server: HTTP/1.1 (or HTTPS with a generated test CA) in front of the
// Store, with bearer-token and client-certificate auth, and fault injection that tests
// drive through a small admin API under /kubesim/ on the same port:
//
//   GET    /kubesim/faults            the faults, with how often each fired ("hits")
//   POST   /kubesim/faults            add one: {"resource":"pods","verb":"list",
//                                     "type":"status","code":429,"retryAfterSeconds":1,
//                                     "times":1}; answers {"id":N}
//   DELETE /kubesim/faults[/ID]       remove all faults, or one
//   POST   /kubesim/token             {"token":"new"}: rotate; the old token gets 401
//   POST   /kubesim/serviceaccount-token  {"namespace":NS,"name":SA,"expirationSeconds":N}:
//                                     a ServiceAccount token {"token":...} (tests)
//   POST   /kubesim/compact           forget the watch history: older RVs get 410
//   GET    /kubesim/requests          the last 2000 requests: method, path, verb,
//                                     resource, code, fault
//   DELETE /kubesim/requests          clear that log
//
// Fault types: "status" (code 429 with Retry-After, 500, 503, 410, any other),
// "reset-before" (TCP reset before the server acts), "reset-after" (the write commits,
// then the connection is reset instead of answered), "stall" (a watch sends its headers
// and then nothing; another request waits) until the fault is removed, "watch-expire"
// (a watch sends what it has, then an ERROR event with a 410 Status), "watch-reset"
// (a watch sends afterEvents events, then the TCP connection is reset mid-body), "latency"
// (latencyMs before handling). resource and verb default to "*"; times 0 = until
// removed.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api.h"
#include "authn.h"
#include "exec.h"
#include "k8sbridge/log.h"
#include "store.h"
#include "tls.h"

namespace kubesim {

struct Fault {
  enum class Type {
    kStatus,
    kResetBefore,
    kResetAfter,
    kStall,
    kWatchExpire,
    kLatency,
    kWatchReset
  };
  int id = 0;
  std::string resource = "*";  // "pods", "pods/status", ... or "*"
  std::string verb = "*";      // get list watch create update patch delete deletecollection
  Type type = Type::kStatus;
  int code = 500;
  int retry_after_seconds = 0;
  int latency_ms = 0;
  int after_events = 0;  // watch-reset: events sent before the reset
  int times = 0;         // 0: until removed
  int hits = 0;
};

// Parses the admin API's JSON form of a Fault.
Result<Fault> ParseFault(const std::string& json);

struct ServerOptions {
  std::vector<std::string> listen{"127.0.0.1:0"};  // host:port; port 0 picks one
  std::optional<TlsMaterial> tls;                  // HTTPS on every listener when set
  std::string token;                               // required bearer token
  // A real API server's watch cache sends a bookmark about once a minute.
  std::chrono::milliseconds bookmark_interval{60000};
  std::chrono::milliseconds reap_interval{100};  // Store::ReapExpired cadence
  AdmissionOptions admission;
  std::string pod_log_root;  // pods/log (pod_log.h): <kubelet state dir>/<bridge>
  // pods/exec (exec.h): the kubelet starts the command; unset, an exec gets the 500 of
  // a node whose kubelet cannot be reached.
  ExecStarter exec;
};

class Server {
 public:
  Server(Store& store, ServerOptions options, k8sbridge::Logger& log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds every listener and starts serving. kUnavailable names an address that could
  // not be bound.
  Status Start();
  // One more listener after Start (for example on a bridge that exists only once the
  // kubelet made it). Not concurrently with Stop. Answers the bound port.
  Result<uint16_t> Listen(const std::string& spec);
  // Stops accepting, closes every connection (watches end), joins all threads.
  void Stop();

  // The bound addresses, in --listen order ("127.0.0.1", port).
  std::vector<std::pair<std::string, uint16_t>> endpoints() const;

  int AddFault(Fault fault);
  void RemoveFault(int id);
  void ClearFaults();
  std::vector<Fault> faults() const;

  void SetToken(const std::string& token);
  std::string token() const;

  // Extra admin endpoints under /kubesim/<prefix>... (for example node scenarios from
  // the kubelet side). Called with the request (path without the /kubesim/ prefix
  // removed); authenticated like everything else.
  using AdminHandler = std::function<ApiResponse(const ApiRequest&)>;
  void AddAdminHandler(const std::string& prefix, AdminHandler handler);

  Store& store() { return store_; }

  // The ServiceAccount token issuer (authn.h); the kubelet's projected
  // serviceAccountToken volumes call its Issue.
  TokenIssuer& token_issuer();

 private:
  struct Listener;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Store& store_;
};

}  // namespace kubesim
