// The Kubernetes REST API of kubesim, independent of sockets: a request in, a response
// (or a stream of watch events) out. The network side lives in server.cpp.
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "admission.h"
#include "authn.h"
#include "store.h"

namespace kubesim {

struct ApiRequest {
  std::string method;                        // GET, POST, PUT, PATCH, DELETE
  std::string path;                          // without the query
  std::map<std::string, std::string> query;  // decoded
  std::string content_type;
  std::string accept;  // "application/json;as=Table;v=v1;g=meta.k8s.io,..." asks for a Table
  std::string body;
  std::string user;  // authenticated user, for managedFields
  // The rest of the authenticated identity (authn.h), for access reviews.
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  std::string user_agent;  // names the field manager when the request gives none
};

struct ApiResponse {
  int code = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// What a request is about, after routing.
struct Route {
  std::string group;     // "" for core
  std::string version;   // "v1"
  std::string resource;  // "pods"
  std::string ns;
  std::string name;
  std::string subresource;  // "status", "binding", ""
  std::string verb;         // get list watch create update patch delete deletecollection
};

// Splits "a=b&c=d" with percent- and plus-decoding.
std::map<std::string, std::string> ParseQuery(const std::string& query);

// A Status body with the real reason for `code` (404 NotFound, 409 AlreadyExists or
// Conflict, 410 Expired, 422 Invalid, 429 TooManyRequests, ...).
ApiResponse StatusResponse(int code, const std::string& reason, const std::string& message,
                           const std::string& kind = "", const std::string& name = "",
                           const std::string& group = "");
std::string StatusJson(int code, const std::string& reason, const std::string& message);

class Api {
 public:
  explicit Api(Store& store) : store_(store) {}
  // The admission plugins' settings (admission.h).
  void set_admission(const AdmissionOptions& options) { admission_ = options; }
  // Mints the tokens of serviceaccounts/NAME/token (authn.h); none: that subresource
  // answers 503.
  void set_token_issuer(TokenIssuer* issuer) { token_issuer_ = issuer; }
  // Where pods/log reads the kubelet's container logs (pod_log.h); "" = no logs.
  void set_pod_log_root(const std::string& root) { pod_log_root_ = root; }

  // Routes the request. Returns false (with `error` set) for unknown paths or methods;
  // discovery and health paths give a Route with an empty resource.
  bool ResolveRoute(const ApiRequest& request, Route& route, ApiResponse& error) const;

  // Everything except watches.
  ApiResponse Handle(const ApiRequest& request, const Route& route);

  // Streams a watch. `write` sends one chunk (false when the client is gone) and
  // `headers` is called once before the first chunk with the HTTP status (200 for a
  // stream; any other code with a Status body means no stream: the caller answers it
  // as a plain response). `stop` ends the stream early (server shutdown). When
  // `expire_after_backlog` is set, the stream sends the events already available, then
  // an ERROR event with a 410 Status, and ends (fault injection). `stall` stops sending
  // after the headers until `stop` or the stall is lifted.
  struct WatchHooks {
    std::function<void(const ApiResponse& error)> fail;  // non-200: no stream
    std::function<void()> begin;                         // 200 stream starts
    std::function<bool(const std::string& chunk)> write;
    std::function<bool()> stopping;
    std::function<bool()> stalled;
    bool expire_after_backlog = false;
    std::chrono::milliseconds bookmark_interval{60000};
  };
  void Watch(const ApiRequest& request, const Route& route, const WatchHooks& hooks);

  Store& store() { return store_; }

 private:
  ApiResponse Discovery(const std::string& path) const;
  ApiResponse Get(const Route& route, bool table);
  ApiResponse List(const ApiRequest& request, const Route& route);
  ApiResponse Create(const ApiRequest& request, const Route& route);
  ApiResponse Update(const ApiRequest& request, const Route& route);
  ApiResponse Patch(const ApiRequest& request, const Route& route);
  ApiResponse Delete(const ApiRequest& request, const Route& route);
  ApiResponse DeleteCollection(const ApiRequest& request, const Route& route);
  ApiResponse ErrorFromStatus(const Status& status, const Route& route) const;

  Store& store_;
  AdmissionOptions admission_;
  TokenIssuer* token_issuer_ = nullptr;
  std::string pod_log_root_;
};

// True when the Accept header asks for a meta.k8s.io Table (kubectl get does).
bool WantsTable(const std::string& accept);

// A meta.k8s.io/v1 Table of `objects` with the columns kubectl shows for the resource
// (pods: Name Ready Status Restarts Age IP Node; nodes: Name Status Roles Age Version;
// events: Last Seen Type Reason Object Message; others Name Age). `now` is for ages.
std::string RenderTable(const std::string& resource, const std::string& group,
                        const std::vector<const rapidjson::Value*>& objects,
                        const std::string& resource_version, const std::string& continue_token,
                        bool with_columns, std::chrono::system_clock::time_point now);

// The object as a client of `group` sees it (events.k8s.io/v1 events are converted
// from the stored core/v1 form).
std::string RenderObject(const rapidjson::Value& stored, const std::string& group);

}  // namespace kubesim
