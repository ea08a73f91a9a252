#include "k8sbridge/kube/informer.h"

#include <algorithm>

namespace k8sbridge::kube {

namespace {
// How many outage back-offs in a row may end early (see Reflector::Run).
constexpr int kMaxEarlyEnds = 3;

// The reflector's wait before it lists or watches again after a failure: doubled
// each time up to max_backoff, jittered, noticing cancellation. After a failure
// that means the server did not answer (a connection error, a timeout, a 5xx), the
// wait ends soon after any request gets an answer again: a lease renewal shows that
// the outage is over long before a 30 s back-off would. A server that answers
// others but keeps failing this stream gets that shortcut only kMaxEarlyEnds times
// before the back-off is whole again.
class Pacing {
 public:
  Pacing(Client& client, const ReflectorOptions& options, const CallOptions& call)
      : client_(client), options_(options), call_(call), backoff_(options.initial_backoff) {}

  void BackOff(const Status& failure) {
    in_outage_ = ServerDidNotAnswer(failure);
    const auto wait = client_.Jitter(backoff_, options_.jitter);
    const auto began = client_.clock().Now();
    client_.BackOff(wait, call_, in_outage_ && early_ends_ < kMaxEarlyEnds);
    if (client_.clock().Now() - began < wait)
      ++early_ends_;
    backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  }
  // Progress: the next failure starts the back-off afresh.
  void Progressed() {
    backoff_ = options_.initial_backoff;
    early_ends_ = 0;
  }
  void Listed() { early_ends_ = 0; }
  // The server answered after an outage (an API server that restarted answers the
  // first watch with a 410: its new watch cache starts at the current revision):
  // the outage is over, and the back-off it grew (up to 30 s) would keep the cache
  // stale.
  void AnsweredAfterOutage() {
    if (in_outage_)
      backoff_ = options_.initial_backoff;
  }
  std::chrono::milliseconds current() const { return backoff_; }

 private:
  Client& client_;
  const ReflectorOptions& options_;
  const CallOptions& call_;
  std::chrono::milliseconds backoff_;
  int early_ends_ = 0;
  bool in_outage_ = false;  // the last back-off was for a server that did not answer
};
}  // namespace

Reflector::Reflector(Client& client, const Resource& resource, ReflectorOptions options,
                     ReflectorSink& sink, Metrics* metrics)
    : client_(client),
      resource_(resource),
      options_(std::move(options)),
      sink_(sink),
      metrics_(metrics) {}

std::string Reflector::last_resource_version() const {
  std::lock_guard lock(mu_);
  return last_rv_;
}

Status Reflector::ListAndReplace(std::string& rv, const CallOptions& call) {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.page_size = options_.page_size;
  auto list = client_.List(resource_, options_.namespace_, lo, call);
  if (!list.ok())
    return list.status();
  rv = list->resource_version;
  sink_.Replace(std::move(list->items), rv);
  sink_.Healthy(true);
  {
    std::lock_guard lock(mu_);
    last_rv_ = rv;
  }
  return Status::Ok();
}

Result<WatchEnd> Reflector::WatchFrom(std::string& rv, const CancelToken& cancel,
                                      const CallOptions& call, bool& opened) {
  WatchOptions wo;
  wo.resource_version = rv;
  wo.label_selector = options_.label_selector;
  wo.field_selector = options_.field_selector;
  wo.timeout_seconds = options_.watch_timeout_seconds;
  wo.slack = options_.watch_slack;
  // The server's 200 proves the watch is live: a quiet stream may carry its first
  // event (or bookmark) only a minute later.
  wo.on_open = [this, &opened] {
    opened = true;
    sink_.Healthy(true);
  };
  return client_.Watch(
      resource_, options_.namespace_, wo,
      [&](const WatchEvent& ev) {
        if (ev.type != EventType::kBookmark)
          sink_.Apply(ev);
        sink_.Healthy(true);
        std::string new_rv = ev.object.ResourceVersion();
        if (!new_rv.empty()) {
          rv = new_rv;
          std::lock_guard lock(mu_);
          last_rv_ = rv;
        }
        return !cancel.cancelled();
      },
      call);
}

void Reflector::CountRestart(std::string_view reason) {
  if (metrics_)
    metrics_->WatchRestarted(resource_.plural, reason);
}

void Reflector::Run(const CancelToken& cancel) {
  Logger& log = client_.logger();
  CallOptions call{&cancel, std::nullopt};
  Pacing pacing(client_, options_, call);
  bool need_list = true;
  std::string rv;
  const std::string what(resource_.plural);

  while (!cancel.cancelled()) {
    if (need_list) {
      Status listed = ListAndReplace(rv, call);
      if (!listed.ok()) {
        if (cancel.cancelled())
          break;
        log.Warning("kube: list {}: {}; retrying in {} ms", what, listed.ToString(),
                    pacing.current().count());
        sink_.Healthy(false);
        pacing.BackOff(listed);
        continue;
      }
      need_list = false;
      pacing.Listed();
    }

    const auto started = client_.clock().Now();
    bool opened = false;
    auto end = WatchFrom(rv, cancel, call, opened);
    if (cancel.cancelled())
      break;
    // A stream the server took and kept open is progress, events or not: a quiet
    // watch (nodes) would otherwise carry the back-off and the used-up outage
    // shortcuts of faults long past into the next outage, and stay stale for up to
    // a minute after it (the chaos long run: an orphan kept 50 s after an
    // api-restart that followed a watch-reset).
    if (opened && client_.clock().Now() - started >= options_.instant_close)
      pacing.Progressed();
    if (end.ok()) {
      if (end->events > 0) {
        pacing.Progressed();
        CountRestart("closed");
        continue;  // resume from the last resourceVersion
      }
      if (client_.clock().Now() - started < options_.instant_close) {
        // A stream that closes at once with nothing in it: the server may have lost
        // our resourceVersion without saying 410. Relist.
        log.Info("kube: watch {} closed at once with no events; relisting in {} ms", what,
                 pacing.current().count());
        CountRestart("empty-stream");
        need_list = true;
        pacing.BackOff(Status::Ok());
        continue;
      }
      CountRestart("closed");
      continue;  // a quiet stream timed out: watch again from the same version
    }
    const Status& s = end.status();
    if (s.code() == Status::Code::kExpired || IsResourceVersionTooLarge(s)) {
      // 410: our version is gone; 504 ResourceVersionTooLarge: the server's cache has
      // not reached it. Either way client-go relists with resourceVersion "".
      log.Info("kube: watch {} from resourceVersion {}: {}; relisting", what, rv, s.message());
      CountRestart(s.code() == Status::Code::kExpired ? "expired" : "too-large");
      need_list = true;
      pacing.AnsweredAfterOutage();
      pacing.BackOff(s);
      continue;
    }
    log.Warning("kube: watch {}: {}; watching again in {} ms", what, s.ToString(),
                pacing.current().count());
    sink_.Healthy(false);
    CountRestart("error");
    pacing.BackOff(s);
  }
}

Informer::Informer(Client& client, const Resource& resource, ReflectorOptions options,
                   Metrics* metrics)
    : reflector_(client, resource, std::move(options), *this, metrics) {}

Informer::~Informer() {
  Stop();
}

void Informer::AddHandlers(EventHandlers handlers) {
  handlers_.push_back(std::move(handlers));
}

void Informer::Start() {
  if (thread_.joinable())
    return;
  thread_ = std::thread([this] { reflector_.Run(cancel_); });
}

void Informer::Stop() {
  cancel_.Cancel();
  if (thread_.joinable())
    thread_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(sync_mu_);
  return sync_cv_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

std::optional<Object> Informer::Get(const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = items_.find(key);
  if (it == items_.end())
    return std::nullopt;
  return it->second;
}

std::vector<Object> Informer::List() const {
  std::shared_lock lock(mu_);
  std::vector<Object> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_)
    out.push_back(v);
  return out;
}

size_t Informer::size() const {
  std::shared_lock lock(mu_);
  return items_.size();
}

void Informer::Replace(std::vector<Object> items, const std::string&) {
  std::map<std::string, Object> fresh;
  for (auto& o : items)
    fresh.emplace(o.Key(), std::move(o));
  std::map<std::string, Object> old;
  {
    std::unique_lock lock(mu_);
    old.swap(items_);
    items_ = fresh;
  }
  // Tell handlers what changed while we were not watching.
  for (const auto& [key, obj] : fresh) {
    auto it = old.find(key);
    for (const auto& h : handlers_) {
      if (it == old.end()) {
        if (h.on_add)
          h.on_add(obj);
      } else if (it->second.ResourceVersion() != obj.ResourceVersion()) {
        if (h.on_update)
          h.on_update(it->second, obj);
      }
    }
  }
  for (const auto& [key, obj] : old) {
    if (fresh.count(key))
      continue;
    for (const auto& h : handlers_) {
      if (h.on_delete)
        h.on_delete(obj);
    }
  }
  if (!synced_.exchange(true)) {
    std::lock_guard lock(sync_mu_);
    sync_cv_.notify_all();
  }
}

void Informer::Apply(const WatchEvent& event) {
  const std::string key = event.object.Key();
  std::optional<Object> old;
  {
    std::unique_lock lock(mu_);
    auto it = items_.find(key);
    if (it != items_.end())
      old = it->second;
    if (event.type == EventType::kDeleted) {
      if (it != items_.end())
        items_.erase(it);
    } else {
      items_.insert_or_assign(key, event.object);
    }
  }
  for (const auto& h : handlers_) {
    if (event.type == EventType::kDeleted) {
      if (h.on_delete)
        h.on_delete(old ? *old : event.object);
    } else if (old) {
      if (h.on_update)
        h.on_update(*old, event.object);
    } else if (h.on_add) {
      h.on_add(event.object);
    }
  }
}

}  // namespace k8sbridge::kube
