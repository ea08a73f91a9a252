// pods/exec over a WebSocket (websocket.h, exec.h): the RFC 6455 handshake and frames,
// the remote command protocol's Status messages and options, and the server's exec
// end to end over a loopback socket with a process the test starts in place of the
// kubelet's runc exec.
#include <utility>  // Boost 1.74 Asio uses std::exchange without including it

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <atomic>
#include <optional>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/test/unit_test.hpp>

#include "exec.h"
#include "k8sbridge/clock.h"
#include "nodes.h"
#include "recording_logger.h"
#include "server.h"
#include "test_util.h"
#include "websocket.h"

extern char** environ;

using namespace kubesim;
using namespace kubesim::testing;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// A client frame: masked, as RFC 6455 section 5.3 asks of every client.
std::string ClientFrame(uint8_t opcode, const std::string& payload, bool fin = true) {
  std::string out;
  out.push_back(static_cast<char>((fin ? 0x80 : 0) | opcode));
  const size_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(0x80 | n));
  } else {
    out.push_back(static_cast<char>(0x80 | 126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xFF));
  }
  const char mask[4] = {0x12, 0x34, 0x56, 0x78};
  out.append(mask, 4);
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return out;
}

std::string Channel(unsigned char channel, const std::string& data) {
  return std::string(1, static_cast<char>(channel)) + data;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(websocket)

BOOST_AUTO_TEST_CASE(accept_key_is_rfc_6455s_example) {
  // RFC 6455 section 1.3.
  BOOST_TEST(ws::AcceptKey("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  const std::string r = ws::HandshakeResponse("dGhlIHNhbXBsZSBub25jZQ==", kExecProtocolV5);
  BOOST_TEST(r.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0) == 0);
  BOOST_TEST(r.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") != std::string::npos);
  BOOST_TEST(r.find("Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n") != std::string::npos);
  BOOST_TEST(r.substr(r.size() - 4) == "\r\n\r\n");
}

BOOST_AUTO_TEST_CASE(protocol_negotiation_and_upgrade_header) {
  const std::vector<std::string> ours = {kExecProtocolV5, kExecProtocolV4};
  BOOST_TEST(ws::NegotiateProtocol("v5.channel.k8s.io", ours) == "v5.channel.k8s.io");
  BOOST_TEST(ws::NegotiateProtocol("base64.channel.k8s.io, v4.channel.k8s.io", ours) ==
             "v4.channel.k8s.io");
  BOOST_TEST(ws::NegotiateProtocol("channel.k8s.io", ours) == "");
  BOOST_TEST(ws::IsWebSocketUpgrade("WebSocket"));
  BOOST_TEST(ws::IsWebSocketUpgrade("h2c, websocket"));
  BOOST_TEST(!ws::IsWebSocketUpgrade("SPDY/3.1"));
  BOOST_TEST(!ws::IsWebSocketUpgrade(""));
}

BOOST_AUTO_TEST_CASE(server_frames_are_unmasked_with_the_three_length_forms) {
  const std::string small = ws::EncodeFrame(ws::kOpBinary, "\x01hi");
  BOOST_TEST(small == std::string("\x82\x03\x01hi", 5));
  const std::string mid = ws::EncodeFrame(ws::kOpBinary, std::string(200, 'x'));
  BOOST_TEST(mid.size() == 4u + 200u);
  BOOST_TEST(static_cast<uint8_t>(mid[1]) == 126);
  BOOST_TEST((static_cast<uint8_t>(mid[2]) << 8 | static_cast<uint8_t>(mid[3])) == 200);
  const std::string big = ws::EncodeFrame(ws::kOpBinary, std::string(70000, 'x'));
  BOOST_TEST(big.size() == 10u + 70000u);
  BOOST_TEST(static_cast<uint8_t>(big[1]) == 127);
  BOOST_TEST(static_cast<uint8_t>(big[7]) == 0x01);  // 70000 = 0x011170
  BOOST_TEST(static_cast<uint8_t>(big[8]) == 0x11);
  BOOST_TEST(static_cast<uint8_t>(big[9]) == 0x70);
  const std::string close = ws::EncodeClose(ws::kCloseNormal);
  BOOST_TEST(close == std::string("\x88\x02\x03\xe8", 4));
}

BOOST_AUTO_TEST_CASE(parser_unmasks_and_waits_for_whole_frames) {
  ws::FrameParser parser;
  ws::Frame f;
  const std::string frame = ClientFrame(ws::kOpBinary, Channel(kChannelStdin, "input"));
  parser.Feed(frame.substr(0, 3));
  BOOST_TEST((parser.Next(f) == ws::FrameParser::Result::kNeedMore));
  parser.Feed(frame.substr(3));
  BOOST_REQUIRE((parser.Next(f) == ws::FrameParser::Result::kFrame));
  BOOST_TEST(f.opcode == ws::kOpBinary);
  BOOST_TEST(f.payload == Channel(kChannelStdin, "input"));
  BOOST_TEST((parser.Next(f) == ws::FrameParser::Result::kNeedMore));
  const std::string long_one = ClientFrame(ws::kOpBinary, std::string(300, 'y'));
  parser.Feed(long_one);
  BOOST_REQUIRE((parser.Next(f) == ws::FrameParser::Result::kFrame));
  BOOST_TEST(f.payload == std::string(300, 'y'));
}

BOOST_AUTO_TEST_CASE(parser_reassembles_fragments_around_a_ping) {
  ws::FrameParser parser;
  parser.Feed(ClientFrame(ws::kOpBinary, Channel(kChannelStdin, "ab"), false) +
              ClientFrame(ws::kOpPing, "p") + ClientFrame(ws::kOpContinuation, "cd"));
  ws::Frame f;
  BOOST_REQUIRE((parser.Next(f) == ws::FrameParser::Result::kFrame));
  BOOST_TEST(f.opcode == ws::kOpPing);
  BOOST_TEST(f.payload == "p");
  BOOST_REQUIRE((parser.Next(f) == ws::FrameParser::Result::kFrame));
  BOOST_TEST(f.opcode == ws::kOpBinary);
  BOOST_TEST(f.payload == Channel(kChannelStdin, "abcd"));
}

BOOST_AUTO_TEST_CASE(parser_refuses_protocol_violations) {
  struct Case {
    std::string bytes;
    uint16_t code;
  };
  std::string unmasked = ws::EncodeFrame(ws::kOpBinary, "x");  // a server's frame
  std::string reserved = ClientFrame(ws::kOpBinary, "x");
  reserved[0] = static_cast<char>(reserved[0] | 0x40);
  const std::vector<Case> cases = {
      {unmasked, ws::kCloseProtocolError},
      {reserved, ws::kCloseProtocolError},
      {ClientFrame(ws::kOpPing, "x", false), ws::kCloseProtocolError},
      {ClientFrame(ws::kOpPing, std::string(126, 'x')), ws::kCloseProtocolError},
      {ClientFrame(ws::kOpContinuation, "x"), ws::kCloseProtocolError},
      {ClientFrame(ws::kOpBinary, std::string(20, 'x')), ws::kCloseTooBig},
  };
  for (const Case& c : cases) {
    ws::FrameParser parser(16);
    parser.Feed(c.bytes);
    ws::Frame f;
    BOOST_TEST((parser.Next(f) == ws::FrameParser::Result::kError));
    BOOST_TEST(parser.close_code() == c.code);
    BOOST_TEST(!parser.error().empty());
  }
}

BOOST_AUTO_TEST_CASE(error_channel_statuses_follow_the_kubelets) {
  BOOST_TEST(ExecSuccessStatus() == R"({"metadata":{},"status":"Success"})");
  const auto failed = Json(ExecExitCodeStatus(3, {"sh", "-c", "exit 3"}));
  BOOST_TEST(GetString(failed, "status") == "Failure");
  BOOST_TEST(GetString(failed, "reason") == "NonZeroExitCode");
  BOOST_TEST(!failed.HasMember("kind"));  // the protocol's Status has no type meta
  const auto& causes = failed["details"]["causes"];
  BOOST_REQUIRE(causes.Size() == 1u);
  BOOST_TEST(GetString(causes[0], "reason") == "ExitCode");
  BOOST_TEST(GetString(causes[0], "message") == "3");
  BOOST_TEST(GetString(failed, "message") ==
             "command terminated with non-zero exit code: error executing command [sh -c exit 3], "
             "exit code 3");
  const auto internal = Json(ExecInternalErrorStatus("runc died"));
  BOOST_TEST(GetString(internal, "reason") == "InternalError");
  BOOST_TEST(GetString(internal, "message") == "Internal error occurred: runc died");
  BOOST_TEST(internal["code"].GetInt() == 500);
}

BOOST_AUTO_TEST_CASE(exec_options_keep_every_command_argument) {
  const ExecOptions o = ParseExecOptions(
      "command=sh&command=-c&command=echo+%22a%26b%22&container=main&stdout=true&stderr=1"
      "&stdin=false");
  BOOST_TEST((o.command == std::vector<std::string>{"sh", "-c", "echo \"a&b\""}));
  BOOST_TEST(o.container == "main");
  BOOST_TEST(o.with_stdout);
  BOOST_TEST(o.with_stderr);
  BOOST_TEST(!o.with_stdin);
  BOOST_TEST(!o.tty);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// Starts the command as the kubelet would hand it over: pipes for the streams asked for.
Result<ExecProcess> SpawnLocal(const ExecTarget& t) {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    return Status::Internal("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<std::string> args = t.command;
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  for (int fd : {in[0], out[1], err[1]})
    close(fd);
  if (rc != 0)
    return Status::Internal("posix_spawnp");
  ExecProcess p;
  p.pid = pid;
  p.stdin_fd = in[1];
  p.stdout_fd = out[0];
  p.stderr_fd = err[0];
  return p;
}

// A WebSocket client over plain TCP, enough for the server's side of the protocol.
struct WsClient {
  net::io_context io;
  tcp::socket socket{io};
  std::string buffered;
  int code = 0;
  std::string body;

  // Sends the upgrade request; answers the HTTP status (and body when not 101).
  int Open(uint16_t port, const std::string& target, const std::string& token,
           const std::string& headers) {
    boost::system::error_code ec;
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port), ec);
    BOOST_REQUIRE(!ec);
    const std::string method = headers.find("SPDY") != std::string::npos ? "POST" : "GET";
    Write(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
          "\r\n" + headers + "\r\n");
    size_t end;
    while ((end = buffered.find("\r\n\r\n")) == std::string::npos)
      BOOST_REQUIRE(ReadMore());
    const std::string head = buffered.substr(0, end);
    buffered.erase(0, end + 4);
    code = std::atoi(head.substr(9, 3).c_str());
    if (code != 101) {
      const size_t at = head.find("Content-Length: ");
      const size_t length =
          at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 16, nullptr, 10);
      while (buffered.size() < length)
        BOOST_REQUIRE(ReadMore());
      body = buffered.substr(0, length);
    }
    return code;
  }
  int OpenExec(uint16_t port, const std::string& query, const std::string& token = "secret") {
    return Open(port, "/api/v1/namespaces/default/pods/p/exec?" + query, token,
                "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n");
  }
  void Write(const std::string& bytes) {
    boost::system::error_code ec;
    net::write(socket, net::buffer(bytes), ec);
    BOOST_REQUIRE(!ec);
  }
  bool ReadMore() {
    char buf[4096];
    boost::system::error_code ec;
    const size_t n = socket.read_some(net::buffer(buf), ec);
    buffered.append(buf, n);
    return !ec || n > 0;
  }
  // The next server frame (opcode, payload); nullopt when the connection ended first.
  std::optional<std::pair<uint8_t, std::string>> Next() {
    while (true) {
      if (buffered.size() >= 2) {
        BOOST_REQUIRE((static_cast<uint8_t>(buffered[1]) & 0x80) == 0);  // never masked
        size_t length = static_cast<uint8_t>(buffered[1]) & 0x7F, header = 2;
        BOOST_REQUIRE(length <= 126);  // the test's messages stay under 64 KiB
        if (length == 126) {
          length =
              buffered.size() >= 4
                  ? (static_cast<uint8_t>(buffered[2]) << 8 | static_cast<uint8_t>(buffered[3]))
                  : SIZE_MAX - 4;
          header = 4;
        }
        if (buffered.size() >= header + length) {
          auto frame = std::make_pair(static_cast<uint8_t>(buffered[0] & 0x0F),
                                      buffered.substr(header, length));
          buffered.erase(0, header + length);
          return frame;
        }
      }
      if (!ReadMore())
        return std::nullopt;
    }
  }
};

// Everything one exec sent, until the server's close.
struct Transcript {
  std::string out, err, status;
  std::vector<uint8_t> controls;  // opcodes of the control frames
  uint16_t close_code = 0;
};

Transcript ReadAll(WsClient& client) {
  Transcript t;
  while (auto frame = client.Next()) {
    const auto& [opcode, payload] = *frame;
    if (opcode == ws::kOpClose) {
      t.close_code = static_cast<uint16_t>(static_cast<uint8_t>(payload[0]) << 8 |
                                           static_cast<uint8_t>(payload[1]));
      client.Write(ClientFrame(ws::kOpClose, payload));
      break;
    }
    if (opcode != ws::kOpBinary) {
      t.controls.push_back(opcode);
      continue;
    }
    BOOST_REQUIRE(!payload.empty());
    const auto channel = static_cast<unsigned char>(payload[0]);
    (channel == kChannelStdout   ? t.out
     : channel == kChannelStderr ? t.err
                                 : t.status) += payload.substr(1);
  }
  return t;
}

struct ExecFixture {
  k8sbridge::RealClock& clock = k8sbridge::RealClock::Instance();
  k8sbridge::RecordingLogger log;
  Store store{clock, 1000};
  std::unique_ptr<Server> server;
  uint16_t port = 0;
  std::atomic<bool> running{true};

  ExecFixture() {
    signal(SIGPIPE, SIG_IGN);  // as kubesim's main: a closed stdin is EPIPE, not a signal
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    BOOST_REQUIRE(store.Create("pods", "default", PodJson("p", "", "node-0")).ok());
    BOOST_REQUIRE(store.Create("pods", "default", PodJson("unbound")).ok());
    ServerOptions options;
    options.token = "secret";
    options.exec = [this](const ExecTarget& t) -> Result<ExecProcess> {
      if (!running)
        return Status::NotFound("container not found (\"" + t.container + "\")");
      if (t.probe)
        return ExecProcess{};
      return SpawnLocal(t);
    };
    server = std::make_unique<Server>(store, options, log);
    BOOST_REQUIRE(server->Start().ok());
    port = server->endpoints().at(0).second;
  }
  ~ExecFixture() { server->Stop(); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(exec_server, ExecFixture)

BOOST_AUTO_TEST_CASE(stdout_and_stderr_stay_apart_and_the_exit_code_comes_back) {
  WsClient client;
  BOOST_REQUIRE(client.OpenExec(port,
                                "command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+"
                                "exit+3&stdout=true&stderr=true") == 101);
  const Transcript t = ReadAll(client);
  BOOST_TEST(t.out == "out\n");
  BOOST_TEST(t.err == "err\n");
  const auto status = Json(t.status);
  BOOST_TEST(GetString(status, "reason") == "NonZeroExitCode");
  BOOST_TEST(GetString(status["details"]["causes"][0], "message") == "3");
  BOOST_TEST(t.close_code == ws::kCloseNormal);
}

BOOST_AUTO_TEST_CASE(stdin_flows_until_the_clients_close_signal) {
  WsClient client;
  BOOST_REQUIRE(client.OpenExec(port, "command=cat&stdin=true&stdout=true&stderr=true") == 101);
  client.Write(ClientFrame(ws::kOpPing, "beat"));
  auto pong = client.Next();  // cat says nothing before its input: the pong comes first
  BOOST_REQUIRE(pong.has_value());
  BOOST_TEST(pong->first == ws::kOpPong);
  BOOST_TEST(pong->second == "beat");
  client.Write(ClientFrame(ws::kOpBinary, Channel(kChannelStdin, "line one\n")));
  client.Write(ClientFrame(ws::kOpBinary, Channel(kChannelStdin, "line two\n")));
  client.Write(ClientFrame(ws::kOpBinary, std::string("\xff\x00", 2)));  // [CLOSE, stdin]
  const Transcript t = ReadAll(client);
  BOOST_TEST(t.out == "line one\nline two\n");
  BOOST_TEST(t.status == ExecSuccessStatus());
}

BOOST_AUTO_TEST_CASE(refusals_before_the_upgrade_are_upstreams) {
  WsClient missing;
  missing.Open(port, "/api/v1/namespaces/default/pods/nope/exec?command=true&stdout=true", "secret",
               "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  BOOST_TEST(missing.code == 404);
  BOOST_TEST(GetString(Json(missing.body), "message") == "pods \"nope\" not found");
  WsClient container;
  BOOST_TEST(container.OpenExec(port, "command=true&stdout=true&container=other") == 400);
  BOOST_TEST(GetString(Json(container.body), "message") ==
             "container other is not valid for pod p");
  WsClient unbound;
  unbound.Open(port, "/api/v1/namespaces/default/pods/unbound/exec?command=true&stdout=true",
               "secret", "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  BOOST_TEST(unbound.code == 400);
  BOOST_TEST(GetString(Json(unbound.body), "message") ==
             "pod unbound does not have a host assigned");
  running = false;
  WsClient stopped;
  BOOST_TEST(stopped.OpenExec(port, "command=true&stdout=true") == 500);
  BOOST_TEST(stopped.body == "container not found (\"c\")");  // the kubelet's text
  running = true;
  WsClient spdy;
  spdy.Open(port, "/api/v1/namespaces/default/pods/p/exec?command=true&stdout=true", "secret",
            "Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n");
  BOOST_TEST(spdy.code == 400);
  BOOST_TEST(GetString(Json(spdy.body), "message").find("WebSocket") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_websocket_exec_needs_get_and_create_on_pods_exec) {
  BOOST_REQUIRE(
      store.Create("serviceaccounts", "default", Json(R"({"metadata":{"name":"sa"}})")).ok());
  BOOST_REQUIRE(store
                    .Create("roles", "default",
                            Json(R"({"metadata":{"name":"exec"},"rules":[{"apiGroups":[""],)"
                                 R"("resources":["pods/exec"],"verbs":["get"]}]})"))
                    .ok());
  BOOST_REQUIRE(store
                    .Create("rolebindings", "default",
                            Json(R"({"metadata":{"name":"exec"},"roleRef":{"apiGroup":)"
                                 R"("rbac.authorization.k8s.io","kind":"Role","name":"exec"},)"
                                 R"("subjects":[{"kind":"ServiceAccount","name":"sa",)"
                                 R"("namespace":"default"}]})"))
                    .ok());
  Result<std::string> token = server->token_issuer().Issue("default", "sa", 3600);
  BOOST_REQUIRE(token.ok());
  WsClient get_only;
  BOOST_TEST(get_only.OpenExec(port, "command=true&stdout=true", *token) == 403);
  BOOST_TEST(GetString(Json(get_only.body), "message") ==
             "pods \"p\" is forbidden: User \"system:serviceaccount:default:sa\" cannot create "
             "resource \"pods/exec\" in API group \"\" in the namespace \"default\"");
  auto role = store.Get("roles", "default", "exec");
  BOOST_REQUIRE(role.ok());
  rapidjson::Document both;
  both.CopyFrom(**role, both.GetAllocator());
  both["rules"][0]["verbs"].PushBack("create", both.GetAllocator());
  BOOST_REQUIRE(store.Update("roles", "default", "exec", std::move(both)).ok());
  WsClient allowed;
  BOOST_REQUIRE(allowed.OpenExec(port, "command=true&stdout=true", *token) == 101);
  BOOST_TEST(ReadAll(allowed).status == ExecSuccessStatus());
}

BOOST_AUTO_TEST_SUITE_END()
