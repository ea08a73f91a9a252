// The client's request path: construction, the rate limiter, credentials on each
// request, retries and back-off, and the metrics hooks. The API's verbs are in
// verbs.cpp, watch streams in watch.cpp.
#include "k8sbridge/kube/client.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "client_internal.h"
#include "k8sbridge/text.h"

namespace k8sbridge::kube {

namespace {

// How long a wait for the server lasts once another request got an answer (see
// ServerContact), before its jitter: the server is back, so retry soon.
constexpr std::chrono::milliseconds kPauseAfterAnswer{200};

std::optional<std::chrono::seconds> ParseRetryAfter(const std::string& value) {
  if (value.empty())
    return std::nullopt;
  // Delay-seconds only: the HTTP-date form is not sent by Kubernetes.
  auto seconds = text::ParseInt<int64_t>(value, 0);
  if (!seconds.ok())
    return std::nullopt;
  return std::chrono::seconds(*seconds);
}

bool TooLargeResourceVersion(const HttpResponse& resp) {
  return resp.status == 504 &&
         IsResourceVersionTooLarge(ApiFailure("", "", ParseApiError(resp.status, resp.body)));
}

bool IsRead(std::string_view verb) {
  return verb == "GET" || verb == "LIST" || verb == "WATCH";
}

}  // namespace

// ---- metrics ----------------------------------------------------------------

void CountingMetrics::RequestDone(std::string_view verb, int code,
                                  Clock::Steady::duration latency) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(std::string(verb), code);
  ++count_[key];
  latency_[key] += latency;
}
void CountingMetrics::WatchRestarted(std::string_view, std::string_view reason) {
  std::lock_guard lock(mu_);
  ++restarts_[std::string(reason)];
}
int64_t CountingMetrics::Requests(std::string_view verb, int code) const {
  std::lock_guard lock(mu_);
  auto it = count_.find({std::string(verb), code});
  return it == count_.end() ? 0 : it->second;
}
Clock::Steady::duration CountingMetrics::Latency(std::string_view verb, int code) const {
  std::lock_guard lock(mu_);
  auto it = latency_.find({std::string(verb), code});
  return it == latency_.end() ? Clock::Steady::duration{} : it->second;
}
int64_t CountingMetrics::WatchRestarts(std::string_view reason) const {
  std::lock_guard lock(mu_);
  auto it = restarts_.find(std::string(reason));
  return it == restarts_.end() ? 0 : it->second;
}
std::map<std::pair<std::string, int>, int64_t> CountingMetrics::requests() const {
  std::lock_guard lock(mu_);
  return count_;
}

// ---- rate limiter -----------------------------------------------------------

RateLimiter::RateLimiter(double qps, int burst, Clock& clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      tokens_(std::max(1, burst)),
      last_(clock.Now()),
      clock_(clock) {}

Clock::Steady::duration RateLimiter::Reserve() {
  if (qps_ <= 0)
    return {};
  std::lock_guard lock(mu_);
  auto now = clock_.Now();
  double elapsed = std::chrono::duration<double>(now - last_).count();
  if (elapsed > 0) {
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
  tokens_ -= 1;  // may go negative: a reservation of a future token
  if (tokens_ >= 0)
    return {};
  return std::chrono::duration_cast<Clock::Steady::duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

// ---- client -----------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::Create(const Config& config, ClientOptions options) {
  if (config.server.empty())
    return Status::InvalidArgument(config.source + ": no server");
  TlsSettings tls;
  tls.insecure_skip_verify = config.insecure_skip_tls_verify;
  tls.ca_file = config.ca_file;
  tls.ca_pem = config.ca_pem;
  tls.client_cert_file = config.client_cert_file;
  tls.client_cert_pem = config.client_cert_pem;
  tls.client_key_file = config.client_key_file;
  tls.client_key_pem = config.client_key_pem;
  tls.tls_server_name = config.tls_server_name;
  tls.proxy_url = config.proxy_url;
  auto transport = std::make_shared<CurlTransport>(tls, options.user_agent);
  auto client = std::make_unique<Client>(config, std::move(transport), options);
  if (config.insecure_skip_tls_verify) {
    client->logger().Warning(
        "kube: {}: insecure-skip-tls-verify is set: the server's certificate is NOT checked, so "
        "anyone on the path can impersonate it; set certificate-authority instead",
        config.source);
  }
  return client;
}

Client::Client(const Config& config, std::shared_ptr<Transport> transport, ClientOptions options)
    : config_(config),
      transport_(std::move(transport)),
      options_(options),
      clock_(options.clock ? options.clock : &RealClock::Instance()),
      logger_(options.logger ? options.logger : &null_logger_),
      credentials_(std::make_unique<Credentials>(
          config, *clock_, *logger_,
          options.runner ? *options.runner : RealCommandRunner::Instance(),
          options.token_file_max_age)),
      limiter_(options.qps, options.burst, *clock_),
      warnings_(*logger_),
      generator_(std::random_device{}()) {
  if (!options_.contact)
    options_.contact = std::make_shared<ServerContact>();
}

Clock::Steady::duration Client::Jitter(Clock::Steady::duration base, double factor) {
  double r;
  if (options_.random) {
    r = options_.random();
  } else {
    std::lock_guard lock(random_mu_);
    r = std::uniform_real_distribution<double>(0.0, 1.0)(generator_);
  }
  const double extra = static_cast<double>(base.count()) * factor * std::clamp(r, 0.0, 1.0);
  return base + Clock::Steady::duration(std::llround(extra));
}

bool ServerDidNotAnswer(const Status& failure) {
  const auto code = failure.code();
  return (code == Status::Code::kUnavailable || code == Status::Code::kTimeout) &&
         HttpCode(failure) != 429;
}

bool Client::BackOff(Clock::Steady::duration d, const CallOptions& call, bool outage) {
  return SleepCancellable(d, call, /*until_answer=*/outage);
}

bool Client::SleepCancellable(Clock::Steady::duration d, const CallOptions& call,
                              bool until_answer) {
  // Sleep in slices so that a cancellation (or an answer) is noticed within 100 ms.
  const auto slice = std::chrono::milliseconds(100);
  const auto began = clock_->Now();
  while (d > Clock::Steady::duration::zero()) {
    if (call.cancel && call.cancel->cancelled())
      return false;
    if (until_answer && options_.contact->AnsweredAfter(began)) {
      // The pause spreads the clients that waited on the same outage.
      d = std::min(d, Jitter(kPauseAfterAnswer, 1.0));
      until_answer = false;
    }
    auto step = std::min<Clock::Steady::duration>(d, slice);
    clock_->SleepFor(step);
    d -= step;
  }
  return !(call.cancel && call.cancel->cancelled());
}

void Client::NoteAnswer(int http_status, Clock::Steady::time_point at) {
  if (ServerContact::Serves(http_status))
    options_.contact->Answered(at);
}

HttpRequest Client::NewRequest(std::string_view method, const std::string& path,
                               std::string_view body, std::string_view content_type,
                               const CallOptions& call, const Credentials::Auth& auth,
                               const StreamHooks* stream) const {
  HttpRequest req;
  req.method = std::string(method);
  req.url = config_.server + path;
  req.body = std::string(body);
  req.connect_timeout = options_.connect_timeout;
  req.timeout = call.timeout.value_or(options_.request_timeout);
  if (stream) {
    if (stream->timeout.count() > 0)
      req.timeout = stream->timeout;
    req.on_body = stream->on_body;
    req.on_headers = stream->on_headers;
  }
  req.cancel = call.cancel;
  req.headers.emplace_back("Accept", "application/json");
  if (!content_type.empty())
    req.headers.emplace_back("Content-Type", std::string(content_type));
  if (!auth.bearer.empty())
    req.headers.emplace_back("Authorization", "Bearer " + auth.bearer);
  req.client_cert_pem = auth.client_cert_pem;
  req.client_key_pem = auth.client_key_pem;
  return req;
}

Result<HttpResponse> Client::Attempt(std::string_view verb, HttpRequest req,
                                     const StreamHooks* stream, int& head) {
  head = 0;
  if (req.on_headers) {
    req.on_headers = [this, &head, stream](const HttpResponse& answer) {
      head = answer.status;
      NoteAnswer(answer.status, clock_->Now());  // a watch's answer lasts minutes
      stream->on_headers(answer);
    };
  } else {
    req.on_headers = [&head](const HttpResponse& answer) { head = answer.status; };
  }
  const auto began = clock_->Now();
  auto resp = transport_->Do(req);
  if (!resp.ok() && head == 401) {
    // The API server refuses a credential over HTTP/2 by ending the connection
    // (GOAWAY) and resetting the stream right after the 401's head, so libcurl may
    // fail the transfer although the answer's status arrived. Authentication comes
    // before anything else: the server did not act on the request, and the 401 is
    // what it said (its body, cut short, is not needed to act on it).
    logger_->Debug("kube: {} {}: HTTP 401, then: {}", req.method, req.url, resp.status().message());
    HttpResponse refused;
    refused.status = 401;
    resp = std::move(refused);
  }
  if (options_.metrics)
    options_.metrics->RequestDone(verb, resp.ok() ? resp->status : 0, clock_->Now() - began);
  if (resp.ok())
    NoteAnswer(resp->status, clock_->Now());
  return resp;
}

Result<HttpResponse> Client::Send(std::string_view verb, std::string_view method,
                                  const std::string& path, std::string_view body,
                                  std::string_view content_type, const CallOptions& call,
                                  const StreamHooks* stream) {
  bool retried_unauthorized = false;
  std::chrono::milliseconds conn_backoff{800};
  for (int attempt = 0;; ++attempt) {
    if (call.cancel && call.cancel->cancelled()) {
      return Status::Cancelled(fmt::format("{} {}: cancelled", method, path));
    }
    if (!SleepCancellable(limiter_.Reserve(), call)) {
      return Status::Cancelled(fmt::format("{} {}: cancelled", method, path));
    }
    auto auth = credentials_->Get();
    if (!auth.ok())
      return auth.status().WithContext(fmt::format("{} {}", method, path));

    int head = 0;
    const auto sent = clock_->Now();
    auto resp = Attempt(verb, NewRequest(method, path, body, content_type, call, *auth, stream),
                        stream, head);
    // A stream whose answer began was handed to the caller: it is never sent again
    // (a watch resumes from the last resourceVersion it saw, not from its start).
    const bool answered = head != 0;

    const bool more = attempt < options_.max_retries;
    if (!resp.ok()) {
      // A write may have reached the server before the connection broke: only reads
      // are safe to send again, and a watch only before its answer began.
      const bool resend = IsRead(verb) && !(verb == "WATCH" && answered);
      if (resp.status().code() == Status::Code::kUnavailable && resend && more) {
        logger_->Info("kube: {} {}: {}; retrying in {} ms", method, path, resp.status().message(),
                      conn_backoff.count());
        if (!BackOff(conn_backoff, call, /*outage=*/true)) {
          return Status::Cancelled(fmt::format("{} {}: cancelled while waiting to retry after: {}",
                                               method, path, resp.status().message()));
        }
        conn_backoff = std::min(conn_backoff * 2, std::chrono::milliseconds(30'000));
        continue;
      }
      return resp.status().WithApiError(std::make_shared<const ApiError>());
    }
    warnings_.Note(resp->Header("warning"), method, path);
    const int code = resp->status;
    if (code == 401 && !retried_unauthorized) {
      retried_unauthorized = true;
      if (credentials_->OnUnauthorized(sent)) {
        logger_->Info("kube: {} {}: 401 Unauthorized; retrying with fresh credentials", method,
                      path);
        continue;
      }
    }
    // A 504 ResourceVersionTooLarge asked again for the same version only waits on
    // the same lagging cache: the caller (the reflector) relists instead.
    if ((code == 429 || code >= 500) && more && !TooLargeResourceVersion(*resp)) {
      auto waited = WaitRetryAfter(*resp, method, path, call);
      if (!waited.ok())
        return waited.status();
      if (*waited)
        continue;
    }
    return resp;
  }
}

Result<bool> Client::WaitRetryAfter(const HttpResponse& resp, std::string_view method,
                                    const std::string& path, const CallOptions& call) {
  auto retry_after = ParseRetryAfter(resp.Header("retry-after"));
  if (!retry_after)
    return false;
  auto delay = std::min(*retry_after, options_.max_retry_after);
  logger_->Info("kube: {} {}: HTTP {}; retrying after {} s (Retry-After)", method, path,
                resp.status, delay.count());
  if (!SleepCancellable(delay, call)) {
    return Status::Cancelled(fmt::format("{} {}: cancelled while waiting to retry after HTTP {}",
                                         method, path, resp.status));
  }
  return true;
}

namespace internal {

Status FailureOf(std::string_view method, const std::string& path, const HttpResponse& resp) {
  ApiError error = ParseApiError(resp.status, resp.body);
  error.retry_after = ParseRetryAfter(resp.Header("retry-after"));
  return ApiFailure(method, path, std::move(error));
}

}  // namespace internal

Result<HttpResponse> Client::Request(std::string_view method, std::string_view path,
                                     std::string_view body, std::string_view content_type,
                                     const CallOptions& call) {
  return Send(method, method, std::string(path), body, content_type, call);
}

std::vector<Status> ForEachBounded(size_t n, size_t concurrency,
                                   const std::function<Status(size_t)>& fn) {
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++)
      results[i] = fn(i);
  };
  size_t threads = std::min(n, std::max<size_t>(1, concurrency));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (auto& t : pool)
    t.join();
  return results;
}

}  // namespace k8sbridge::kube
