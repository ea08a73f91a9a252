// List+watch with client-go's reflector semantics, and an informer-style cache on
// top so that readers never wait for the network.
//
// The reflector lists (paging), then watches from the list's resourceVersion with
// bookmarks, resuming each new watch from the last resourceVersion seen. It
// relists (resourceVersion "") after 410 Gone (HTTP status or a mid-stream ERROR
// event), after 504 ResourceVersionTooLarge and after a stream that closed at once
// with no events. A stream that breaks after events is resumed from the last
// resourceVersion seen, never replayed. Failures back off from 0.8 s, doubling up
// to 30 s, each wait jittered; the delay resets after a watch that delivered events.
// A wait after the server did not answer ends early once any other request sharing
// the client's ServerContact gets an answer (client-go has no such shortcut; it
// would keep a cache stale for up to 30 s after an outage).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "k8sbridge/kube/client.h"

namespace k8sbridge::kube {

struct ReflectorOptions {
  std::string namespace_;  // "" all namespaces (or a cluster-scoped kind)
  std::string label_selector, field_selector;
  int64_t page_size = 500;
  int watch_timeout_seconds = 300;
  std::chrono::seconds watch_slack{30};  // a stream silent this long past its timeout is dropped
  std::chrono::milliseconds initial_backoff{800};
  std::chrono::milliseconds max_backoff{30'000};
  // Each wait is the back-off * (1 + jitter * random) (client-go's reflector: 1.0),
  // so that daemons that lost the server together do not come back in lockstep.
  double jitter = 1.0;
  // A watch that ends with no event within this time counts as "closed at once".
  std::chrono::milliseconds instant_close{1000};
};

// Receives what the reflector learns. Called from the reflector's thread.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  virtual void Replace(std::vector<Object> items, const std::string& resource_version) = 0;
  virtual void Apply(const WatchEvent& event) = 0;  // ADDED, MODIFIED, DELETED
  // false after a failed list or a watch that ended in an error; true again after
  // a list or a watch event. Lets a reader tell a live cache from a stale one.
  virtual void Healthy(bool) {}
};

class Reflector {
 public:
  Reflector(Client& client, const Resource& resource, ReflectorOptions options, ReflectorSink& sink,
            Metrics* metrics = nullptr);
  // Lists and watches until `cancel` fires.
  void Run(const CancelToken& cancel);
  std::string last_resource_version() const;

 private:
  // Lists afresh and hands the sink the items; `rv` becomes the list's version.
  Status ListAndReplace(std::string& rv, const CallOptions& call);
  // Watches from `rv` until the stream ends or `cancel` fires, keeping `rv`
  // at the last event's version; `opened` is set when the server took the watch.
  Result<WatchEnd> WatchFrom(std::string& rv, const CancelToken& cancel, const CallOptions& call,
                             bool& opened);
  void CountRestart(std::string_view reason);

  Client& client_;
  const Resource& resource_;
  ReflectorOptions options_;
  ReflectorSink& sink_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::string last_rv_;
};

struct EventHandlers {
  std::function<void(const Object&)> on_add;
  std::function<void(const Object& old_obj, const Object& new_obj)> on_update;
  std::function<void(const Object&)> on_delete;
};

// A cache of one kind of object, filled by a Reflector on its own thread.
// Get/List read the cache only and never block on the network. Handlers run on
// the informer's thread, one at a time, after the cache was updated; they must
// not block for long.
class Informer final : public ReflectorSink {
 public:
  Informer(Client& client, const Resource& resource, ReflectorOptions options = {},
           Metrics* metrics = nullptr);
  ~Informer() override;
  void AddHandlers(EventHandlers handlers);  // before Start
  void Start();
  void Stop();  // cancels the watch and joins the thread
  bool HasSynced() const { return synced_.load(); }
  // Synced, and the last list or watch did not fail (see ReflectorSink::Healthy).
  bool IsHealthy() const { return synced_.load() && healthy_.load(); }
  // Waits (real time) for the first list; false on timeout.
  bool WaitForSync(std::chrono::milliseconds timeout);

  std::optional<Object> Get(const std::string& key) const;  // "ns/name" or "name"
  std::vector<Object> List() const;
  size_t size() const;

  // ReflectorSink; public so tests can drive the cache without a thread.
  void Replace(std::vector<Object> items, const std::string& resource_version) override;
  void Apply(const WatchEvent& event) override;
  void Healthy(bool ok) override { healthy_.store(ok); }

 private:
  Reflector reflector_;
  CancelToken cancel_;
  std::thread thread_;
  std::vector<EventHandlers> handlers_;
  mutable std::shared_mutex mu_;
  std::map<std::string, Object> items_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> healthy_{true};
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;
};

}  // namespace k8sbridge::kube
