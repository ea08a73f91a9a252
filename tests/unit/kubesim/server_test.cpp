// The HTTP side of kubesim over real loopback sockets: auth, the admin API, faults,
// chunked watches and HTTPS with the generated CA and client certificates.
#include <utility>  // Boost 1.74 Asio uses std::exchange without including it

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/test/unit_test.hpp>

#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "nodes.h"
#include "recording_logger.h"
#include "server.h"
#include "test_util.h"
#include "tls.h"

using namespace kubesim;
using namespace kubesim::testing;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

struct Reply {
  int code = 0;
  std::string body;
  std::string retry_after;
  bool connection_error = false;
};

struct Fixture {
  k8sbridge::RealClock& clock = k8sbridge::RealClock::Instance();
  k8sbridge::RecordingLogger log;
  Store store{clock, 1000};
  std::unique_ptr<Server> server;
  uint16_t port = 0;

  void Start(std::optional<TlsMaterial> tls = std::nullopt) {
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    ServerOptions options;
    options.token = "secret";
    options.tls = tls;
    options.bookmark_interval = std::chrono::milliseconds(50);
    server = std::make_unique<Server>(store, options, log);
    BOOST_REQUIRE(server->Start().ok());
    port = server->endpoints().at(0).second;
    BOOST_REQUIRE(port != 0);
  }
  ~Fixture() {
    if (server)
      server->Stop();
  }

  Reply Call(const std::string& method, const std::string& target, const std::string& body = "",
             const std::string& token = "secret",
             const std::string& content_type = "application/json") {
    net::io_context io;
    tcp::socket socket(io);
    beast::error_code ec;
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    BOOST_REQUIRE(!ec);
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!token.empty())
      req.set(http::field::authorization, "Bearer " + token);
    if (!body.empty())
      req.set(http::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
    Reply reply;
    http::write(socket, req, ec);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    if (!ec)
      http::read(socket, buffer, res, ec);
    if (ec) {
      reply.connection_error = true;
      return reply;
    }
    reply.code = res.result_int();
    reply.body = res.body();
    reply.retry_after = std::string(res[http::field::retry_after]);
    return reply;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(server, Fixture)

BOOST_AUTO_TEST_CASE(token_auth_and_rotation) {
  Start();
  BOOST_TEST(Call("GET", "/api/v1/namespaces").code == 200);
  Reply denied = Call("GET", "/api/v1/namespaces", "", "wrong");
  BOOST_TEST(denied.code == 401);
  BOOST_TEST(GetString(Json(denied.body), "reason") == "Unauthorized");
  BOOST_TEST(Call("GET", "/version", "", "").code == 200);  // anonymous, as in Kubernetes
  BOOST_TEST(Call("POST", "/kubesim/token", R"({"token":"fresh"})").code == 200);
  BOOST_TEST(Call("GET", "/api/v1/namespaces").code == 401);
  BOOST_TEST(Call("GET", "/api/v1/namespaces", "", "fresh").code == 200);
}

BOOST_AUTO_TEST_CASE(status_faults_are_scoped_and_counted) {
  Start();
  Reply added = Call(
      "POST", "/kubesim/faults",
      R"({"resource":"namespaces","verb":"list","type":"status","code":429,"retryAfterSeconds":3,"times":1})");
  BOOST_REQUIRE(added.code == 200);
  BOOST_TEST(Call("GET", "/api/v1/namespaces/default").code == 200);  // get: not this fault
  Reply limited = Call("GET", "/api/v1/namespaces");
  BOOST_TEST(limited.code == 429);
  BOOST_TEST(limited.retry_after == "3");
  BOOST_TEST(GetString(Json(limited.body), "reason") == "TooManyRequests");
  BOOST_TEST(Call("GET", "/api/v1/namespaces").code == 200);  // used up
  BOOST_TEST(server->faults().empty());
  Fault f;
  f.resource = "*";
  f.type = Fault::Type::kStatus;
  f.code = 503;
  int id = server->AddFault(f);
  BOOST_TEST(Call("GET", "/api/v1/nodes").code == 503);
  BOOST_TEST(server->faults().at(0).hits == 1);
  server->RemoveFault(id);
  BOOST_TEST(Call("GET", "/api/v1/nodes").code == 200);
  BOOST_TEST(Call("POST", "/kubesim/faults", R"({"type":"status","code":200})").code == 400);
}

BOOST_AUTO_TEST_CASE(resets_before_and_after_commit) {
  Start();
  Fault before;
  before.resource = "configmaps";
  before.verb = "create";
  before.type = Fault::Type::kResetBefore;
  before.times = 1;
  server->AddFault(before);
  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"a"}})")
                 .connection_error);
  BOOST_TEST(!store.Get("configmaps", "default", "a").ok());
  Fault after = before;
  after.type = Fault::Type::kResetAfter;
  server->AddFault(after);
  BOOST_TEST(Call("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"a"}})")
                 .connection_error);
  BOOST_TEST(store.Get("configmaps", "default", "a").ok());
  auto log_reply = Call("GET", "/kubesim/requests");
  BOOST_TEST(log_reply.body.find(R"("fault":"reset-after")") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(watch_is_chunked_newline_delimited_json) {
  Start();
  Reply r = Call("GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1");
  BOOST_TEST(r.code == 200);
  // Four synthetic ADDED events, one per line, then the stream ends at its timeout.
  size_t lines = 0;
  for (char c : r.body)
    lines += c == '\n';
  BOOST_TEST(lines == 4u);
  BOOST_TEST(r.body.find(R"({"type":"ADDED","object":{)") == 0u);
  Reply bad = Call("GET", "/api/v1/namespaces?watch=true&resourceVersion=abc");
  BOOST_TEST(bad.code == 400);
}

BOOST_AUTO_TEST_CASE(watch_reset_fault_breaks_the_stream_after_n_events) {
  Start();
  Reply added = Call("POST", "/kubesim/faults",
                     R"({"resource":"namespaces","verb":"watch","type":"watch-reset",)"
                     R"("afterEvents":2,"times":1})");
  BOOST_REQUIRE_MESSAGE(added.code == 200, added.body);
  BOOST_TEST(Call("POST", "/kubesim/faults", R"({"type":"watch-reset","afterEvents":-1})").code ==
             400);
  // Read the stream as it comes: the reset ends it mid-body, after two of the four
  // synthetic ADDED events and without the terminating chunk.
  net::io_context io;
  tcp::socket socket(io);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
  BOOST_REQUIRE(!ec);
  http::request<http::string_body> req{http::verb::get,
                                       "/api/v1/namespaces?watch=true&timeoutSeconds=30", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::authorization, "Bearer secret");
  http::write(socket, req, ec);
  BOOST_REQUIRE(!ec);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  while (!ec && !parser.is_done())
    http::read_some(socket, buffer, parser, ec);
  BOOST_TEST(!parser.is_done());
  BOOST_TEST(parser.get().result_int() == 200);
  const std::string& body = parser.get().body();
  BOOST_TEST(std::count(body.begin(), body.end(), '\n') == 2);
  // The fault was used up: the next watch streams to its end.
  Reply whole = Call("GET", "/api/v1/namespaces?watch=true&timeoutSeconds=1");
  BOOST_TEST(std::count(whole.body.begin(), whole.body.end(), '\n') == 4);
}

BOOST_AUTO_TEST_CASE(https_with_generated_ca_and_client_certificates) {
  auto tls = GenerateTlsMaterial({"10.0.0.1"});
  BOOST_REQUIRE(tls.ok());
  Start(*tls);
  auto get = [&](bool with_cert, const std::string& token) {
    net::io_context io;
    net::ssl::context ctx(net::ssl::context::tls_client);
    ctx.add_certificate_authority(net::buffer(tls->ca_cert_pem));
    ctx.set_verify_mode(net::ssl::verify_peer);
    if (with_cert) {
      ctx.use_certificate(net::buffer(tls->client_cert_pem), net::ssl::context::pem);
      ctx.use_private_key(net::buffer(tls->client_key_pem), net::ssl::context::pem);
    }
    beast::ssl_stream<tcp::socket> stream(io, ctx);
    SSL_set_tlsext_host_name(stream.native_handle(), "localhost");
    stream.set_verify_callback(net::ssl::host_name_verification("localhost"));
    beast::error_code ec;
    beast::get_lowest_layer(stream).connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port),
                                            ec);
    BOOST_REQUIRE(!ec);
    stream.handshake(net::ssl::stream_base::client, ec);
    BOOST_REQUIRE_MESSAGE(!ec, ec.message());
    http::request<http::string_body> req{http::verb::get, "/api/v1/namespaces", 11};
    req.set(http::field::host, "localhost");
    if (!token.empty())
      req.set(http::field::authorization, "Bearer " + token);
    http::write(stream, req, ec);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res, ec);
    BOOST_REQUIRE(!ec);
    return res.result_int();
  };
  BOOST_TEST(get(false, "secret") == 200);
  BOOST_TEST(get(false, "") == 401);
  BOOST_TEST(get(true, "") == 200);  // the client certificate authenticates
}

BOOST_AUTO_TEST_SUITE_END()
