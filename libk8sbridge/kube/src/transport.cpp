#include "k8sbridge/kube/transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include <fmt/format.h>

#include "k8sbridge/text.h"

namespace k8sbridge::kube {

namespace {

constexpr size_t kMaxIdleHandles = 32;

// curl_global_init is thread-safe from libcurl 7.84 on; we call it once per
// process and never call curl_global_cleanup, because another plugin or the host
// program may be using libcurl in the same process.
void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  return std::string(s);
}

struct Transfer {
  const HttpRequest* request;
  HttpResponse response;
  bool stopped_by_caller = false;
};

// The blank line after the headers: a final answer (not 1xx) is complete.
void HeadersDone(Transfer& t) {
  if (t.response.status >= 200 && t.request->on_headers)
    t.request->on_headers(t.response);
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after 100 Continue or a redirect) starts over.
    t->response.headers.clear();
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      // An unreadable status line reads as 0, which no caller takes for success.
      auto code = text::ParseInt<int>(line.substr(sp + 1, 3), 100, 599);
      t->response.status = code.ok() ? *code : 0;
    }
    return size * n;
  }
  if (Trim(line).empty()) {
    HeadersDone(*t);
    return size * n;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string& value = t->response.headers[Lower(Trim(line.substr(0, colon)))];
    value += value.empty() ? "" : ", ";
    value += Trim(line.substr(colon + 1));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view chunk(data, size * n);
  const bool ok = t->response.status >= 200 && t->response.status < 300;
  if (t->request->on_body && ok) {
    if (!t->request->on_body(chunk)) {
      t->stopped_by_caller = true;
      return 0;  // makes curl stop with CURLE_WRITE_ERROR
    }
    return chunk.size();
  }
  constexpr size_t kMaxBody = 256u << 20;  // 256 MiB: a list of a big cluster fits
  if (t->response.body.size() + chunk.size() > kMaxBody)
    return 0;
  t->response.body.append(chunk);
  return chunk.size();
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  return (t->request->cancel && t->request->cancel->cancelled()) ? 1 : 0;
}

// Parses scheme://host:port from a URL for tls-server-name rewriting.
struct UrlParts {
  std::string scheme, host, port, rest;
};
bool SplitUrl(const std::string& url, UrlParts& out) {
  auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos)
    return false;
  out.scheme = url.substr(0, scheme_end);
  auto host_start = scheme_end + 3;
  auto path_start = url.find('/', host_start);
  if (path_start == std::string::npos)
    path_start = url.size();
  std::string hostport = url.substr(host_start, path_start - host_start);
  out.rest = url.substr(path_start);
  auto colon = hostport.rfind(':');
  if (colon != std::string::npos && hostport.find(']', colon) == std::string::npos) {
    out.host = hostport.substr(0, colon);
    out.port = hostport.substr(colon + 1);
  } else {
    out.host = hostport;
    out.port = out.scheme == "https" ? "443" : "80";
  }
  return true;
}

void SetBlob(CURL* h, CURLoption opt, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(h, opt, &blob);
}

}  // namespace

CurlTransport::CurlTransport(TlsSettings tls, std::string user_agent)
    : tls_(std::move(tls)), user_agent_(std::move(user_agent)) {
  GlobalInitOnce();
}

CurlTransport::~CurlTransport() {
  for (void* h : idle_)
    curl_easy_cleanup(static_cast<CURL*>(h));
}

void* CurlTransport::TakeHandle() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlTransport::ReturnHandle(void* handle) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdleHandles) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

namespace {

// With tls_server_name set and an https URL: points `url` at that name, so it
// is the one verified and sent as SNI, while curl connects to the URL's real
// host. Returns the CONNECT_TO list, to be freed after the transfer.
curl_slist* ConnectViaServerName(CURL* h, const std::string& tls_server_name, std::string& url) {
  UrlParts parts;
  if (tls_server_name.empty() || !SplitUrl(url, parts) || parts.scheme != "https")
    return nullptr;
  url = fmt::format("https://{}:{}{}", tls_server_name, parts.port, parts.rest);
  std::string host = parts.host;
  if (host.size() > 1 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  curl_slist* connect_to = curl_slist_append(
      nullptr, fmt::format("{}:{}:{}:{}", tls_server_name, parts.port, host, parts.port).c_str());
  curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
  return connect_to;
}

void SetTransferOptions(CURL* h, const HttpRequest& request, const std::string& url,
                        const std::string& user_agent, char* error_buffer, Transfer& transfer) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: we run in threads of daemons
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_USERAGENT, user_agent.c_str());
  curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &transfer);
}

// Verification stays on unless the kubeconfig said insecure-skip-tls-verify.
// A request's own client certificate (from an exec plugin) wins over the config's.
void SetTlsOptions(CURL* h, const TlsSettings& tls, const HttpRequest& request) {
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, tls.insecure_skip_verify ? 0L : 1L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, tls.insecure_skip_verify ? 0L : 2L);
  if (!tls.ca_pem.empty()) {
    SetBlob(h, CURLOPT_CAINFO_BLOB, tls.ca_pem);
  } else if (!tls.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAINFO, tls.ca_file.c_str());
  }
  const std::string& cert_pem =
      request.client_cert_pem.empty() ? tls.client_cert_pem : request.client_cert_pem;
  const std::string& key_pem =
      request.client_key_pem.empty() ? tls.client_key_pem : request.client_key_pem;
  if (!cert_pem.empty()) {
    SetBlob(h, CURLOPT_SSLCERT_BLOB, cert_pem);
    curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!tls.client_cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, tls.client_cert_file.c_str());
  }
  if (!key_pem.empty()) {
    SetBlob(h, CURLOPT_SSLKEY_BLOB, key_pem);
    curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!tls.client_key_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLKEY, tls.client_key_file.c_str());
  }
}

// Returns the header list, to be freed after the transfer.
curl_slist* SetMethodAndHeaders(CURL* h, const HttpRequest& request) {
  curl_slist* headers = nullptr;
  for (const auto& [k, v] : request.headers) {
    headers = curl_slist_append(headers, fmt::format("{}: {}", k, v).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

  if (request.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (!request.body.empty() || request.method != "DELETE") {
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
  }
  return headers;
}

Status TransferError(CURLcode rc, const HttpRequest& request, const std::string& detail) {
  std::string msg = fmt::format("{} {}: {}", request.method, request.url, detail);
  switch (rc) {
    case CURLE_ABORTED_BY_CALLBACK:
      return Status::Cancelled(msg);
    case CURLE_OPERATION_TIMEDOUT:
      return Status::Timeout(msg);
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return Status::InvalidArgument(msg +
                                     " (check server, certificate-authority and tls-server-name)");
    default:
      return Status::Unavailable(msg);
  }
}

}  // namespace

Result<HttpResponse> CurlTransport::Do(const HttpRequest& request) {
  CURL* h = static_cast<CURL*>(TakeHandle());
  if (!h)
    return Status::Internal("curl_easy_init failed");
  // Reset keeps the handle's live connections, DNS and TLS session caches.
  curl_easy_reset(h);
  Transfer transfer{&request, {}, false};
  char error_buffer[CURL_ERROR_SIZE] = {0};

  std::string url = request.url;
  curl_slist* connect_to = ConnectViaServerName(h, tls_.tls_server_name, url);
  SetTransferOptions(h, request, url, user_agent_, error_buffer, transfer);
  SetTlsOptions(h, tls_, request);
  // Without proxy-url, libcurl follows https_proxy/no_proxy from the environment, as
  // client-go does (http.ProxyFromEnvironment).
  if (!tls_.proxy_url.empty())
    curl_easy_setopt(h, CURLOPT_PROXY, tls_.proxy_url.c_str());
  curl_slist* headers = SetMethodAndHeaders(h, request);

  CURLcode rc = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
  curl_easy_setopt(h, CURLOPT_CONNECT_TO, nullptr);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect_to);
  // Error buffer lives on our stack: detach it before the handle goes back.
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  std::string detail = error_buffer[0] ? error_buffer : curl_easy_strerror(rc);
  ReturnHandle(h);

  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && transfer.stopped_by_caller)) {
    return std::move(transfer.response);
  }
  return TransferError(rc, request, detail);
}

}  // namespace k8sbridge::kube
