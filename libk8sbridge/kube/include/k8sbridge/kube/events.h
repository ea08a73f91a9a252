// events.k8s.io/v1 Event recorder. Best effort: Record() only queues (dropping
// when the queue is full) and never waits for the network; a background thread
// sends. A repeat of the same event (same object, type, reason, action, note)
// within the series window is folded into the first one's series
// {count, lastObservedTime} instead of creating another Event.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "k8sbridge/kube/client.h"

namespace k8sbridge::kube {

struct ObjectReference {
  std::string api_version, kind, namespace_, name, uid;
  static ObjectReference Of(const Object& o);
};

// Where events about cluster-scoped objects (Nodes) go: the only namespaces a real
// apiserver accepts them in are "default" and "kube-system" (core/v1 event
// validation); anywhere else is a 422.
inline constexpr std::string_view kClusterScopedEventNamespace = "default";
// An event's note is at most 1 kB.
inline constexpr size_t kMaxEventNote = 1024;
// `note` as valid UTF-8 (invalid bytes become U+FFFD, as the server would make
// them) cut to kMaxEventNote bytes between two characters.
std::string EventNote(std::string_view note);

struct EventRecorderOptions {
  std::string reporting_controller = "k8sbridge";  // e.g. k8sbridge.io/reconciler
  std::string reporting_instance;                  // e.g. host name
  size_t queue_capacity = 1000;
  std::chrono::seconds series_window{360};  // client-go folds repeats within 6 minutes
  bool start_thread = true;                 // false: tests call ProcessPending()
};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions options);
  ~EventRecorder();
  // type: "Normal" or "Warning". Never blocks on the network; the note is cut to 1 kB.
  void Record(const ObjectReference& regarding, std::string_view type, std::string_view reason,
              std::string_view action, std::string_view note);
  // Sends everything queued (on the caller's thread); returns how many were sent.
  size_t ProcessPending();
  // Waits (real time, bounded) until the queue is empty; for orderly shutdown.
  void Flush(std::chrono::milliseconds timeout);
  uint64_t dropped() const;
  uint64_t failed() const;

 private:
  struct Pending {
    ObjectReference regarding;
    std::string type, reason, action, note;
    Clock::Wall::time_point when;
  };
  struct Series {
    std::string name, namespace_;
    int64_t count = 1;
    Clock::Steady::time_point last;
  };
  void Send(const Pending& p);
  // Counts the event into its open series (key as Send makes it); false when
  // there is none, or it was deleted, and a new Event must be created.
  bool ContinueSeries(const std::string& key, const std::string& when,
                      Clock::Steady::time_point now);
  // The events.k8s.io/v1 Event for `p`, named `name`, in `ns`.
  std::string EventJson(const Pending& p, const std::string& name, const std::string& ns,
                        const std::string& when) const;
  void Loop();

  Client& client_;
  EventRecorderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  bool busy_ = false;
  uint64_t dropped_ = 0, failed_ = 0, sequence_ = 0;
  std::map<std::string, Series> series_;  // only touched by the sending thread
  std::thread thread_;
};

}  // namespace k8sbridge::kube
