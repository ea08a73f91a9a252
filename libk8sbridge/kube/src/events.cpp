#include "k8sbridge/kube/events.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace k8sbridge::kube {

namespace {

// Bytes in the UTF-8 sequence starting at text[at], 0 if it is not a valid one
// (a stray continuation byte, a cut sequence, an overlong form or a surrogate).
size_t Utf8SequenceLength(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80)
    return 1;
  size_t length = lead >= 0xC2 && lead <= 0xDF   ? 2
                  : lead >= 0xE0 && lead <= 0xEF ? 3
                  : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                 : 0;
  if (length == 0 || at + length > text.size())
    return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xC0) != 0x80)
      return 0;
  }
  const unsigned char second = byte(at + 1);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) ||
      (lead == 0xF0 && second < 0x90) || (lead == 0xF4 && second > 0x8F))
    return 0;
  return length;
}

}  // namespace

std::string EventNote(std::string_view note) {
  // The server replaces invalid UTF-8 with U+FFFD (3 bytes) before it checks the
  // 1 kB limit, so do the same first, then cut between characters, never inside one.
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  for (size_t at = 0; at < note.size();) {
    const size_t length = Utf8SequenceLength(note, at);
    const std::string_view character =
        length ? note.substr(at, length) : std::string_view(kReplacement);
    if (out.size() + character.size() > kMaxEventNote)
      break;
    out.append(character);
    at += length ? length : 1;
  }
  return out;
}

ObjectReference ObjectReference::Of(const Object& o) {
  return {o.ApiVersion(), o.Kind(), o.Namespace(), o.Name(), o.Uid()};
}

EventRecorder::EventRecorder(Client& client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)) {
  if (options_.start_thread)
    thread_ = std::thread([this] { Loop(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void EventRecorder::Record(const ObjectReference& regarding, std::string_view type,
                           std::string_view reason, std::string_view action,
                           std::string_view note) {
  Pending p{regarding,           std::string(type), std::string(reason),
            std::string(action), EventNote(note),   client_.clock().WallNow()};
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= options_.queue_capacity) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
}

uint64_t EventRecorder::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}
uint64_t EventRecorder::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

void EventRecorder::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() && stopping_)
      return;
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Send(p);
    lock.lock();
    busy_ = false;
    if (queue_.empty())
      idle_cv_.notify_all();
  }
}

size_t EventRecorder::ProcessPending() {
  size_t n = 0;
  for (;;) {
    Pending p;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty())
        return n;
      p = std::move(queue_.front());
      queue_.pop_front();
    }
    Send(p);
    ++n;
  }
}

void EventRecorder::Flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  idle_cv_.wait_for(lock, timeout, [this] { return queue_.empty() && !busy_; });
}

bool EventRecorder::ContinueSeries(const std::string& key, const std::string& when,
                                   Clock::Steady::time_point now) {
  auto it = series_.find(key);
  if (it == series_.end() || now - it->second.last >= options_.series_window)
    return false;
  Series& s = it->second;
  s.count += 1;
  s.last = now;
  std::string patch =
      fmt::format(R"({{"series":{{"count":{},"lastObservedTime":"{}"}}}})", s.count, when);
  auto r = client_.Patch(kEvents, s.namespace_, s.name, PatchType::kMerge, patch);
  if (r.ok())
    return true;
  if (r.status().code() != Status::Code::kNotFound) {
    std::lock_guard lock(mu_);
    ++failed_;
    client_.logger().Debug("kube: event {} not updated: {}", s.name, r.status().ToString());
    return true;
  }
  series_.erase(it);  // someone deleted it: start a new one
  return false;
}

std::string EventRecorder::EventJson(const Pending& p, const std::string& name,
                                     const std::string& ns, const std::string& when) const {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto str = [&](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
  };
  w.StartObject();
  str("apiVersion", "events.k8s.io/v1");
  str("kind", "Event");
  w.Key("metadata");
  w.StartObject();
  str("name", name);
  str("namespace", ns);
  w.EndObject();
  str("eventTime", when);
  str("reportingController", options_.reporting_controller);
  str("reportingInstance", options_.reporting_instance);
  str("action", p.action);
  str("reason", p.reason);
  str("type", p.type);
  str("note", p.note);
  w.Key("regarding");
  w.StartObject();
  if (!p.regarding.api_version.empty())
    str("apiVersion", p.regarding.api_version);
  str("kind", p.regarding.kind);
  if (!p.regarding.namespace_.empty())
    str("namespace", p.regarding.namespace_);
  str("name", p.regarding.name);
  if (!p.regarding.uid.empty())
    str("uid", p.regarding.uid);
  w.EndObject();
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

void EventRecorder::Send(const Pending& p) {
  // A real apiserver accepts an event about a cluster-scoped object (a Node) only in
  // "default" (or "kube-system"), whatever namespace the daemon works in.
  const std::string ns = p.regarding.namespace_.empty() ? std::string(kClusterScopedEventNamespace)
                                                        : p.regarding.namespace_;
  const std::string key =
      fmt::format("{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", p.regarding.kind, ns,
                  p.regarding.name, p.regarding.uid, p.type, p.reason, p.action, p.note);
  const auto now = client_.clock().Now();
  const std::string when = FormatRfc3339(p.when, /*micros=*/true);
  if (ContinueSeries(key, when, now))
    return;

  // Drop series that ended long ago so the map stays small.
  for (auto s = series_.begin(); s != series_.end();) {
    s = (now - s->second.last >= options_.series_window) ? series_.erase(s) : std::next(s);
  }

  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    seq = ++sequence_;
  }
  const std::string name = fmt::format(
      "{}.{:x}{:04x}", p.regarding.name.empty() ? "k8sbridge" : p.regarding.name,
      std::chrono::duration_cast<std::chrono::microseconds>(p.when.time_since_epoch()).count(),
      seq & 0xffff);
  auto obj = Object::Parse(EventJson(p, name, ns, when));
  auto r = client_.Create(kEvents, ns, *obj);
  if (!r.ok()) {
    std::lock_guard lock(mu_);
    ++failed_;
    client_.logger().Debug("kube: event {} not recorded: {}", name, r.status().ToString());
    return;
  }
  series_[key] = Series{name, ns, 1, now};
}

}  // namespace k8sbridge::kube
