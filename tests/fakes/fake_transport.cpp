#include "fake_transport.h"

#include <algorithm>
#include <cctype>

namespace k8sbridge::kube {

namespace {

// Header names are case-insensitive; HttpResponse keeps them in lower case.
std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::string FakeTransport::Recorded::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (Lower(k) == Lower(name))
      return v;
  }
  return "";
}

FakeTransport::Answer FakeTransport::Json(int status, std::string body,
                                          std::map<std::string, std::string> headers) {
  Answer a;
  a.status = status;
  a.headers = std::move(headers);
  a.headers.emplace("content-type", "application/json");
  a.chunks.push_back(std::move(body));
  return a;
}

FakeTransport::Answer FakeTransport::Stream(std::vector<std::string> chunks) {
  Answer a;
  a.chunks = std::move(chunks);
  return a;
}

FakeTransport::Answer FakeTransport::BrokenStream(std::vector<std::string> chunks, Status error) {
  Answer a = Stream(std::move(chunks));
  a.break_after = std::move(error);
  return a;
}

FakeTransport::Answer FakeTransport::CutShort(int status, std::string partial_body, Status error) {
  Answer a = Json(status, std::move(partial_body));
  a.break_after = std::move(error);
  return a;
}

FakeTransport::Answer FakeTransport::Error(Status status) {
  Answer a;
  a.error = std::move(status);
  return a;
}

void FakeTransport::Push(Answer answer) {
  std::lock_guard lock(mu_);
  answers_.push_back(std::move(answer));
}

void FakeTransport::SetFallback(std::function<Answer(const Recorded&)> fallback) {
  std::lock_guard lock(mu_);
  fallback_ = std::move(fallback);
}

void FakeTransport::SetOnExhausted(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_exhausted_ = std::move(fn);
}

std::vector<FakeTransport::Recorded> FakeTransport::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t FakeTransport::pending() const {
  std::lock_guard lock(mu_);
  return answers_.size();
}

Result<HttpResponse> FakeTransport::Do(const HttpRequest& request) {
  Recorded rec{request.method,  request.url,     request.body,
               request.headers, request.timeout, request.connect_timeout};
  Answer answer;
  std::function<void()> exhausted;
  {
    std::lock_guard lock(mu_);
    requests_.push_back(rec);
    if (!answers_.empty()) {
      answer = std::move(answers_.front());
      answers_.pop_front();
    } else if (fallback_) {
      auto fb = fallback_;
      mu_.unlock();
      answer = fb(rec);
      mu_.lock();
    } else {
      exhausted = on_exhausted_;
      answer.error = Status::Cancelled("FakeTransport: no scripted answer for " + request.method +
                                       " " + request.url);
    }
  }
  if (exhausted)
    exhausted();
  if (answer.before)
    answer.before();
  if (request.cancel && request.cancel->cancelled())
    return Status::Cancelled("cancelled");
  if (!answer.error.ok())
    return answer.error;
  HttpResponse response;
  response.status = answer.status;
  for (const auto& [k, v] : answer.headers)
    response.headers[Lower(k)] = v;
  const bool ok = answer.status >= 200 && answer.status < 300;
  if (request.on_headers)
    request.on_headers(response);
  for (const auto& chunk : answer.chunks) {
    if (request.on_body && ok) {
      if (!request.on_body(chunk))
        break;
    } else {
      response.body += chunk;
    }
  }
  if (!answer.break_after.ok())
    return answer.break_after;
  return response;
}

}  // namespace k8sbridge::kube
