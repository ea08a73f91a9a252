// HTTP for the Kubernetes client, behind an interface: CurlTransport talks to a
// real server, FakeTransport answers from a script and records every request, so
// retry, back-off and relist logic is tested deterministically without a server.
//
// Thread safety: Transport::Do may be called from many threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/status.h"

namespace k8sbridge::kube {

// Cancels calls in flight and the sleeps between retries. Cheap to copy; all
// copies share the flag.
class CancelToken {
 public:
  CancelToken() : flag_(std::make_shared<std::atomic<bool>>(false)) {}
  void Cancel() const { flag_->store(true); }
  bool cancelled() const { return flag_->load(); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

struct TlsSettings {
  bool insecure_skip_verify = false;
  std::string ca_file, ca_pem;
  std::string client_cert_file, client_cert_pem;
  std::string client_key_file, client_key_pem;
  std::string tls_server_name;  // verify the server certificate against this name
  // Not TLS, but per connection all the same: the kubeconfig's proxy-url
  // (CURLOPT_PROXY; http://, https:// or socks5://). "": libcurl's https_proxy and
  // no_proxy environment variables apply, as client-go's ProxyFromEnvironment.
  std::string proxy_url;
};

struct HttpResponse;

struct HttpRequest {
  std::string method = "GET";
  std::string url;  // absolute: https://host:port/path?query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds timeout{30'000};  // whole request, including a watch stream
  const CancelToken* cancel = nullptr;
  // Per-request client certificate (from an exec plugin); overrides TlsSettings.
  std::string client_cert_pem, client_key_pem;
  // When set and the answer is 2xx, the body is handed over as it arrives instead of
  // being kept; return false to stop reading. Non-2xx bodies are always kept.
  std::function<bool(std::string_view)> on_body;
  // When set: called once, when the final answer's status line and headers have
  // arrived and before any of its body (a watch learns it got its 200 at once).
  std::function<void(const HttpResponse&)> on_headers;
};

struct HttpResponse {
  int status = 0;
  // Names in lower case; a header sent more than once is joined with ", " (RFC 9110).
  std::map<std::string, std::string> headers;
  std::string body;
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;
  // A failed Status means no complete answer: kUnavailable (connection refused,
  // reset, TLS handshake), kTimeout, kCancelled, kInvalidArgument (bad TLS files).
  virtual Result<HttpResponse> Do(const HttpRequest& request) = 0;
};

// libcurl. Connection reuse: easy handles (each with its connection cache) are
// pooled and reused. HTTP/2 is negotiated by ALPN on https. No global state
// besides curl_global_init, done once and never undone (see docs/client.md).
class CurlTransport final : public Transport {
 public:
  explicit CurlTransport(TlsSettings tls, std::string user_agent = "k8sbridge/0.1");
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;
  Result<HttpResponse> Do(const HttpRequest& request) override;

 private:
  void* TakeHandle();
  void ReturnHandle(void* handle);
  TlsSettings tls_;
  std::string user_agent_;
  std::mutex mu_;
  std::vector<void*> idle_;
};

}  // namespace k8sbridge::kube
