// kubesim's cluster DNS: what CoreDNS's kubernetes plugin serves in a real cluster,
// answered from the store (docs/kubesim.md, "Cluster DNS"). The kubelet names it in
// every ClusterFirst pod's resolv.conf; it listens on the pod network's gateway.
//
// Records follow the Kubernetes DNS-based service discovery specification
// (kubernetes/dns docs/specification.md) and CoreDNS's kubernetes plugin:
//   <svc>.<ns>.svc.<zone>          A: the ClusterIP, or a headless service's ready
//                                  endpoint addresses; CNAME for ExternalName
//   <ep>.<svc>.<ns>.svc.<zone>     A: a headless service's endpoint whose hostname (or
//                                  dashed address, 10-232-0-5) is <ep>
//   _<port>._<proto>.<svc>.<ns>.svc.<zone>  SRV for the service's named ports
//   <d>.<c>.<b>.<a>.in-addr.arpa   PTR for ClusterIPs and endpoint addresses
// Names outside the zone are NXDOMAIN: there is no upstream to forward to, so none
// exists here (a resolver then fails at once, as on a cluster).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "k8sbridge/log.h"
#include "k8sbridge/status.h"
#include "store.h"

namespace kubesim::dns {

using k8sbridge::Result;
using k8sbridge::Status;

enum class Rcode : uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeNS = 2;
inline constexpr uint16_t kTypeCNAME = 5;
inline constexpr uint16_t kTypeSOA = 6;
inline constexpr uint16_t kTypePTR = 12;
inline constexpr uint16_t kTypeAAAA = 28;
inline constexpr uint16_t kTypeSRV = 33;
inline constexpr uint16_t kTypeOPT = 41;
inline constexpr uint16_t kTypeANY = 255;
inline constexpr uint16_t kClassIN = 1;

// What CoreDNS's kubernetes plugin gives its records (its `ttl` default).
inline constexpr uint32_t kTtl = 5;
// A plain UDP answer's limit (RFC 1035) and the most an EDNS client may ask for here.
inline constexpr size_t kUdpLimit = 512;
inline constexpr size_t kEdnsLimit = 1232;

struct Question {
  std::string name;  // as sent (case kept), without the trailing dot; "" for the root
  uint16_t type = 0;
  uint16_t klass = 0;
};

struct Query {
  uint16_t id = 0;
  bool recursion_desired = false;
  uint8_t opcode = 0;
  Question question;
  std::vector<uint8_t> question_wire;  // the name as sent, uncompressed (echoed back)
  bool edns = false;                   // an OPT record came with it
  uint8_t edns_version = 0;
  uint16_t edns_size = 0;  // the requestor's UDP payload size
};

// A request that could not be parsed: whether it deserves an answer (FORMERR or
// NOTIMP with the request's id) or is dropped (too short for a header, a response).
struct ParseError {
  bool answer = false;
  uint16_t id = 0;
  bool recursion_desired = false;
  uint8_t opcode = 0;
  Rcode rcode = Rcode::kFormErr;
  std::string reason;
};

// Parses a request defensively: every read bounds-checked, compression pointers only
// backwards and at most 64 of them, names at most 255 octets and labels 63.
std::optional<ParseError> ParseQuery(std::span<const uint8_t> packet, Query& query);

struct Record {
  std::string name;  // owner, without the trailing dot
  uint16_t type = 0;
  uint32_t ttl = kTtl;
  std::vector<uint8_t> rdata;  // names in it are written uncompressed
};
Record ARecord(const std::string& name, uint32_t ipv4);  // host byte order
Record NameRecord(const std::string& name, uint16_t type, const std::string& target);
Record SrvRecord(const std::string& name, uint16_t port, const std::string& target);
Record SoaRecord(const std::string& zone);

struct Answer {
  Rcode rcode = Rcode::kNoError;
  bool authoritative = false;
  std::vector<Record> answers;
  std::vector<Record> authority;  // the zone's SOA in a negative answer
  uint8_t extended_rcode = 0;     // EDNS's upper 8 bits (1 with kNoError: BADVERS)
};

// The answer to `q` from the store; `zone` is the cluster domain ("cluster.local").
Answer Lookup(const Store& store, const Question& q, const std::string& zone);

// The response message: the question echoed, the records, an OPT record when the
// request had one. Over `limit` octets: TC set and the records left out (UDP).
std::vector<uint8_t> BuildResponse(const Query& query, const Answer& answer, size_t limit);
std::vector<uint8_t> BuildError(const ParseError& error);

// One request in, the response out (empty: drop it). `udp` sets the size limit.
std::vector<uint8_t> Respond(const Store& store, std::span<const uint8_t> packet,
                             const std::string& zone, bool udp);

// ASCII lowercase: DNS names compare case-insensitively.
std::string Lower(std::string s);
// "1.2.3.4" -> host byte order; nullopt when it is not a dotted quad.
std::optional<uint32_t> ParseIPv4(const std::string& text);

struct ServerOptions {
  std::string address;  // IPv4 to bind ("10.232.0.1")
  uint16_t port = 53;
  std::string zone = "cluster.local";
};

// UDP and TCP on one address, each served by its own thread.
class Server {
 public:
  Server(const Store& store, k8sbridge::Logger& log, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Status Start();
  void Stop();
  uint16_t port() const { return port_; }

 private:
  void ServeUdp();
  void ServeTcp();
  void ServeTcpConnection(int fd);

  const Store& store_;
  k8sbridge::Logger& log_;
  ServerOptions options_;
  int udp_fd_ = -1;
  int tcp_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread udp_thread_;
  std::thread tcp_thread_;
};

}  // namespace kubesim::dns
