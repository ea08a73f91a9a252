// A scripted HTTP transport (k8sbridge/kube/transport.h), for unit tests only.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "k8sbridge/kube/transport.h"

namespace k8sbridge::kube {

// Scripted answers, in order, for tests. Each request pops the next answer; when
// none is left, `fallback` answers, else the request fails with kCancelled and
// `on_exhausted` runs (tests use it to stop a loop).
class FakeTransport final : public Transport {
 public:
  struct Answer {
    Status error;  // if not OK, Do returns it
    int status = 200;
    std::map<std::string, std::string> headers;
    std::vector<std::string> chunks;  // body, delivered chunk by chunk
    std::function<void()> before;     // runs when this answer is taken
    // If not OK: the connection breaks after the chunks were delivered (a reset or
    // GOAWAY in the middle of a watch), and Do returns this error.
    Status break_after;
  };
  struct Recorded {
    std::string method, url, body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string Header(std::string_view name) const;
    std::chrono::milliseconds timeout, connect_timeout;
  };

  static Answer Json(int status, std::string body, std::map<std::string, std::string> headers = {});
  static Answer Stream(std::vector<std::string> chunks);
  static Answer Error(Status status);
  // A 200 stream whose connection breaks after `chunks` with `error`.
  static Answer BrokenStream(std::vector<std::string> chunks, Status error);
  // An answer whose head (`status`, headers) arrived and whose transfer then failed
  // with `error` after `partial_body`: a stream reset or GOAWAY right after the head.
  static Answer CutShort(int status, std::string partial_body, Status error);

  void Push(Answer answer);
  void SetFallback(std::function<Answer(const Recorded&)> fallback);
  void SetOnExhausted(std::function<void()> fn);
  std::vector<Recorded> requests() const;
  size_t pending() const;

  Result<HttpResponse> Do(const HttpRequest& request) override;

 private:
  mutable std::mutex mu_;
  std::deque<Answer> answers_;
  std::vector<Recorded> requests_;
  std::function<Answer(const Recorded&)> fallback_;
  std::function<void()> on_exhausted_;
};

}  // namespace k8sbridge::kube
