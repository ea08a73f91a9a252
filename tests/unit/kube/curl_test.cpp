// CurlTransport against real loopback sockets: connection reuse, timeouts,
// cancellation, streaming and TLS verification. The servers are minimal on
// purpose: a thread with a listening socket, and `openssl s_server` for TLS.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "k8sbridge/kube/client.h"
#include "testing.h"

extern char** environ;

namespace k8sbridge::kube {
namespace {
using namespace std::chrono_literals;

// Answers each request on a connection with respond(request_number) until the
// client closes; respond may return "" to stall (keep the socket silent).
class LoopbackServer {
 public:
  explicit LoopbackServer(std::function<std::string(int)> respond) : respond_(std::move(respond)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
    for (auto& t : conns_)
      t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_.load(); }

 private:
  void Serve() {
    for (;;) {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0)
        return;
      ++accepted_;
      conns_.emplace_back([this, c] { Connection(c); });
    }
  }
  void Connection(int c) {
    std::string buf;
    char tmp[4096];
    for (;;) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = read(c, tmp, sizeof tmp);
        if (n <= 0) {
          close(c);
          return;
        }
        buf.append(tmp, static_cast<size_t>(n));
      }
      size_t body_len = 0;
      if (auto cl = buf.find("Content-Length: "); cl != std::string::npos && cl < end) {
        body_len = std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
      }
      while (buf.size() < end + 4 + body_len) {
        ssize_t n = read(c, tmp, sizeof tmp);
        if (n <= 0) {
          close(c);
          return;
        }
        buf.append(tmp, static_cast<size_t>(n));
      }
      buf.erase(0, end + 4 + body_len);
      std::string answer = respond_(requests_++);
      if (answer.empty()) {  // stall until the client gives up
        while (!stop_ && read(c, tmp, sizeof tmp) > 0) {
        }
        close(c);
        return;
      }
      // Pieces separated by '|' are written separately, to split a stream; a last
      // piece "CLOSE" drops the connection there (a stream broken mid-body).
      const bool drop = answer.ends_with("|CLOSE");
      if (drop)
        answer.resize(answer.size() - 6);
      size_t start = 0;
      for (;;) {
        size_t bar = answer.find('|', start);
        std::string piece =
            answer.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
        if (write(c, piece.data(), piece.size()) < 0)
          break;
        if (bar == std::string::npos)
          break;
        std::this_thread::sleep_for(5ms);
        start = bar + 1;
      }
      if (drop) {
        close(c);
        return;
      }
    }
  }
  std::function<std::string(int)> respond_;
  int fd_;
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
  std::vector<std::thread> conns_;
};

std::string Ok(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A client of `server` over the real transport, with no rate limit.
std::unique_ptr<Client> UnthrottledClient(const LoopbackServer& server) {
  Config cfg;
  cfg.server = server.url();
  ClientOptions o;
  o.qps = 0;
  return std::make_unique<Client>(cfg, std::make_shared<CurlTransport>(TlsSettings{}), o);
}

HttpRequest Get(const std::string& url) {
  HttpRequest r;
  r.url = url;
  r.timeout = 5000ms;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(curl_transport)

BOOST_AUTO_TEST_CASE(reuses_one_connection) {
  LoopbackServer server([](int) { return Ok(R"({"kind":"Pod"})"); });
  CurlTransport t({});
  for (int i = 0; i < 5; ++i) {
    auto r = t.Do(Get(server.url() + "/api/v1/pods"));
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    BOOST_TEST(r->status == 200);
    BOOST_TEST(r->Header("content-type") == "application/json");
    BOOST_TEST(r->body == R"({"kind":"Pod"})");
  }
  BOOST_TEST(server.accepted() == 1);
}

BOOST_AUTO_TEST_CASE(total_timeout_on_a_stalled_server) {
  LoopbackServer server([](int) { return std::string(); });
  CurlTransport t({});
  HttpRequest r = Get(server.url() + "/api/v1/pods");
  r.timeout = 300ms;
  auto res = t.Do(r);
  BOOST_TEST(res.status().code() == Status::Code::kTimeout);
  BOOST_TEST(res.status().message().find("/api/v1/pods") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cancel_from_another_thread) {
  LoopbackServer server([](int) { return std::string(); });
  CurlTransport t({});
  CancelToken cancel;
  HttpRequest r = Get(server.url() + "/x");
  r.timeout = 60s;
  r.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cancel.Cancel();
  });
  auto res = t.Do(r);
  canceller.join();
  BOOST_TEST(res.status().code() == Status::Code::kCancelled);
}

BOOST_AUTO_TEST_CASE(refused_connection_is_unavailable) {
  int port;
  {
    LoopbackServer server([](int) { return Ok("{}"); });
    port = std::atoi(server.url().substr(server.url().rfind(':') + 1).c_str());
  }
  CurlTransport t({});
  auto res = t.Do(Get("http://127.0.0.1:" + std::to_string(port) + "/"));
  BOOST_TEST(res.status().code() == Status::Code::kUnavailable);
}

BOOST_AUTO_TEST_CASE(watch_stream_through_client_split_across_reads) {
  std::string l1 = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"}}})";
  std::string l2 = R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"3"}}})";
  std::string stream =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n|";
  auto chunk = [](const std::string& s) {
    char hex[16];
    snprintf(hex, sizeof hex, "%zx", s.size());
    return std::string(hex) + "\r\n" + s + "\r\n";
  };
  stream += chunk(l1.substr(0, 20)) + "|" + chunk(l1.substr(20) + "\n" + l2.substr(0, 5)) + "|" +
            chunk(l2.substr(5) + "\n") + "|0\r\n\r\n";
  LoopbackServer server([&](int) { return stream; });
  auto client_ptr = UnthrottledClient(server);
  Client& client = *client_ptr;
  std::vector<std::string> got;
  auto end = client.Watch(kPods, "", WatchOptions{}, [&](const WatchEvent& e) {
    got.push_back(std::string(EventTypeName(e.type)) + e.object.ResourceVersion());
    return true;
  });
  BOOST_REQUIRE_MESSAGE(end.ok(), end.status().ToString());
  BOOST_TEST(got == (std::vector<std::string>{"ADDED2", "BOOKMARK3"}));
  BOOST_TEST(end->last_resource_version == "3");
}

std::string Chunk(const std::string& s) {
  char hex[16];
  snprintf(hex, sizeof hex, "%zx", s.size());
  return std::string(hex) + "\r\n" + s + "\r\n";
}

// The headers are handed over (on_headers) before any of the body, and a header
// sent twice (Warning) is joined as RFC 9110 says.
BOOST_AUTO_TEST_CASE(headers_arrive_before_the_body_and_repeats_are_joined) {
  std::string answer =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nWarning: 299 - \"a\"\r\n"
      "Warning: 299 - \"b\"\r\nTransfer-Encoding: chunked\r\n\r\n|" +
      Chunk("{}\n") + "|0\r\n\r\n";
  LoopbackServer server([&](int) { return answer; });
  CurlTransport transport(TlsSettings{});
  HttpRequest request = Get(server.url() + "/x");
  std::vector<std::string> order;
  request.on_headers = [&](const HttpResponse& head) {
    order.push_back("headers " + std::to_string(head.status) + " " + head.Header("warning"));
  };
  request.on_body = [&](std::string_view) {
    order.push_back("body");
    return true;
  };
  auto response = transport.Do(request);
  BOOST_REQUIRE_MESSAGE(response.ok(), response.status().ToString());
  BOOST_TEST(order == (std::vector<std::string>{R"(headers 200 299 - "a", 299 - "b")", "body"}));
}

// A watch whose connection breaks after an event is not sent again by the client
// (that would replay the stream from its first resourceVersion): it ends, and the
// caller resumes from the last resourceVersion it saw.
BOOST_AUTO_TEST_CASE(watch_broken_mid_body_is_not_sent_again) {
  std::string l1 = R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}})";
  std::string broken =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n|" +
      Chunk(l1 + "\n") + "|CLOSE";
  LoopbackServer server([&](int) { return broken; });
  auto client_ptr = UnthrottledClient(server);
  Client& client = *client_ptr;
  int events = 0;
  WatchOptions wo;
  wo.resource_version = "5";
  auto end = client.Watch(kPods, "", wo, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  BOOST_REQUIRE_MESSAGE(end.ok(), end.status().ToString());
  BOOST_TEST(events == 1);
  BOOST_TEST(end->last_resource_version == "7");
  BOOST_TEST(server.accepted() == 1);  // one connection, one request: no replay
}

BOOST_AUTO_TEST_CASE(stalled_watch_is_dropped_after_timeout_plus_slack) {
  // Headers, then silence: the server never ends the stream itself.
  LoopbackServer server([](int) {
    return std::string(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  });
  auto client_ptr = UnthrottledClient(server);
  Client& client = *client_ptr;
  WatchOptions wo;
  wo.timeout_seconds = 0;
  wo.slack = 1s;
  auto end = client.Watch(kPods, "", wo, [](const WatchEvent&) { return true; });
  BOOST_TEST(end.status().code() == Status::Code::kTimeout);
}

BOOST_AUTO_TEST_CASE(retry_after_with_real_transport) {
  LoopbackServer server([](int n) {
    if (n == 0) {
      return std::string(
          "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 2\r\n\r\n{}");
    }
    return Ok(R"({"metadata":{"name":"p"}})");
  });
  Config cfg;
  cfg.server = server.url();
  CountingMetrics m;
  ClientOptions o;
  o.metrics = &m;
  Client client(cfg, std::make_shared<CurlTransport>(TlsSettings{}), o);
  auto r = client.Get(kPods, "default", "p");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  BOOST_TEST(m.Requests("GET", 429) == 1);
  BOOST_TEST(m.Requests("GET", 200) == 1);
  BOOST_TEST(server.accepted() == 1);
}

// A 401 whose connection drops before its body ends (as the API server's GOAWAY and
// RST_STREAM after a 401 over HTTP/2 make libcurl fail the transfer): the client
// acts on the 401, reads the token file again and sends the create once more.
BOOST_AUTO_TEST_CASE(unauthorized_cut_short_by_the_server_is_retried_with_a_new_token) {
  LoopbackServer server([](int n) {
    if (n == 0) {
      return std::string(
          "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
          "Content-Length: 129\r\n\r\n{\"kind\":\"Status\"|CLOSE");
    }
    return std::string(
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        "\r\n{}");
  });
  std::string token = "/tmp/kube-curl-token-" + std::to_string(getpid());
  std::ofstream(token) << "t";
  Config cfg;
  cfg.server = server.url();
  cfg.token_file = token;
  CountingMetrics m;
  ClientOptions o;
  o.metrics = &m;
  o.qps = 0;
  Client client(cfg, std::make_shared<CurlTransport>(TlsSettings{}), o);
  auto r = client.Create(kConfigMaps, "default", *Object::Parse(R"({"metadata":{"name":"c"}})"));
  BOOST_TEST(r.ok(), r.status().ToString());
  BOOST_TEST(m.Requests("POST", 401) == 1);
  BOOST_TEST(m.Requests("POST", 201) == 1);
  BOOST_TEST(server.accepted() == 2);
  std::filesystem::remove(token);
}

// TLS: verification is on by default; a CA or insecure-skip-tls-verify makes the
// handshake pass; tls-server-name verifies against another name than the URL's.
BOOST_AUTO_TEST_CASE(tls_verification) {
  namespace fs = std::filesystem;
  if (!fs::exists("/usr/bin/openssl")) {
    BOOST_TEST_MESSAGE("no /usr/bin/openssl: TLS test skipped");
    return;
  }
  char tmpl[] = "/tmp/kube-tls-XXXXXX";
  fs::path dir = mkdtemp(tmpl);
  std::string key = (dir / "key.pem").string(), cert = (dir / "cert.pem").string();
  std::string gen =
      "/usr/bin/openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=kube.test "
      "-addext subjectAltName=DNS:kube.test -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  BOOST_REQUIRE(std::system(gen.c_str()) == 0);
  // Pick a free port, then let s_server take it.
  int port;
  {
    LoopbackServer probe([](int) { return Ok("{}"); });
    port = std::atoi(probe.url().substr(probe.url().rfind(':') + 1).c_str());
  }
  std::string port_s = std::to_string(port);
  std::vector<std::string> args = {"/usr/bin/openssl",    "s_server", "-quiet", "-www", "-accept",
                                   "127.0.0.1:" + port_s, "-cert",    cert,     "-key", key};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  BOOST_REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  struct Cleanup {
    pid_t pid;
    fs::path dir;
    ~Cleanup() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
      fs::remove_all(dir);
    }
  } cleanup{pid, dir};

  const std::string url = "https://127.0.0.1:" + port_s + "/";
  // Wait (with a deadline) until the server accepts connections.
  TlsSettings insecure;
  insecure.insecure_skip_verify = true;
  CurlTransport probe(insecure);
  bool up = false;
  for (int i = 0; i < 100 && !up; ++i) {
    up = probe.Do(Get(url)).ok();
    if (!up)
      std::this_thread::sleep_for(50ms);
  }
  BOOST_REQUIRE(up);

  auto by_default = CurlTransport({}).Do(Get(url));
  BOOST_TEST(by_default.status().code() == Status::Code::kInvalidArgument);
  BOOST_TEST_INFO(by_default.status().message());

  TlsSettings with_ca;
  with_ca.ca_file = cert;
  // The certificate is for kube.test, not 127.0.0.1: still refused...
  BOOST_TEST(!CurlTransport(with_ca).Do(Get(url)).ok());
  // ...unless tls-server-name says which name to verify.
  with_ca.tls_server_name = "kube.test";
  auto named = CurlTransport(with_ca).Do(Get(url));
  BOOST_TEST(named.ok(), named.status().ToString());
  BOOST_TEST(named->status == 200);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
