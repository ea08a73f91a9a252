// kubesim's cluster DNS (tests/kubesim/dns.h; docs/kubesim.md, "Cluster DNS"): the
// wire format parsed defensively and built back, the records looked up from a Store
// the endpoints controller fills, and the server over real sockets on loopback.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include "dns.h"
#include "fake_clock.h"
#include "k8sbridge/log.h"
#include "nodes.h"
#include "store.h"
#include "test_util.h"
#include "workload_controllers.h"
#include "workloads.h"

using namespace kubesim;
using namespace kubesim::testing;
using kubesim::dns::Rcode;

namespace {

using Bytes = std::vector<uint8_t>;

void Put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v & 0xff));
}

void PutName(Bytes& b, const std::string& name) {
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos)
      dot = name.size();
    b.push_back(static_cast<uint8_t>(dot - start));
    b.insert(b.end(), name.begin() + static_cast<long>(start),
             name.begin() + static_cast<long>(dot));
    start = dot + 1;
  }
  b.push_back(0);
}

// A query as a stub resolver sends it: RD set, one question, an OPT record if `edns`.
Bytes MakeQuery(const std::string& name, uint16_t type, uint16_t edns = 0, uint16_t id = 0x1234) {
  Bytes b;
  Put16(b, id);
  Put16(b, 0x0100);
  for (uint16_t count : {1, 0, 0, edns != 0 ? 1 : 0})
    Put16(b, count);
  PutName(b, name);
  Put16(b, type);
  Put16(b, dns::kClassIN);
  if (edns != 0) {
    b.push_back(0);
    Put16(b, dns::kTypeOPT);
    Put16(b, edns);
    for (int i = 0; i < 3; ++i)
      Put16(b, 0);
  }
  return b;
}

uint16_t At16(const Bytes& b, size_t at) {
  return static_cast<uint16_t>((b[at] << 8) | b[at + 1]);
}

// The A records' addresses of a response (answers only; names compressed or not).
std::vector<std::string> Addresses(const Bytes& r) {
  std::vector<std::string> out;
  size_t pos = 12;
  while (r[pos] != 0)
    pos += r[pos] + 1;
  pos += 5;
  for (int i = 0; i < At16(r, 6); ++i) {
    if ((r[pos] & 0xc0) == 0xc0) {
      pos += 2;
    } else {
      while (r[pos] != 0)
        pos += r[pos] + 1;
      ++pos;
    }
    const uint16_t type = At16(r, pos);
    const uint16_t len = At16(r, pos + 8);
    if (type == dns::kTypeA)
      out.push_back(fmt::format("{}.{}.{}.{}", r[pos + 10], r[pos + 11], r[pos + 12], r[pos + 13]));
    pos += 10 + len;
  }
  return out;
}

struct Cluster {
  k8sbridge::FakeClock clock;
  Store store{clock, 1000};
  k8sbridge::NullLogger log;
  WorkloadControllers controllers{store, log, Options()};
  static WorkloadControllerOptions Options() {
    WorkloadControllerOptions o;
    o.state_dir = "/tmp/kubesim-unit-dns";
    return o;
  }

  Cluster() {
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    CreateNamespace(store, "slurm");
    // The controller: headless, publishing not-ready pods, as deploy/ has it.
    Service("slurm", "slurmctld",
            R"("clusterIP":"None","publishNotReadyAddresses":true,"selector":{"app":"ctld"},)"
            R"("ports":[{"name":"slurmctld","port":6817,"protocol":"TCP"}])");
    Pod("slurm", "slurmctld-0", "10.232.0.7", false, R"("app":"ctld")", "slurmctld");
    Service("slurm", "web", R"("clusterIP":"None","selector":{"app":"web"})");
    Pod("slurm", "web-0", "10.232.0.8", true, R"("app":"web")", "web");
    Pod("slurm", "web-1", "10.232.0.9", false, R"("app":"web")", "web");
    Service("slurm", "api",
            R"("clusterIP":"10.96.0.10","selector":{"app":"none"},)"
            R"("ports":[{"name":"https","port":443,"protocol":"TCP"}])");
    Service("slurm", "ext", R"("type":"ExternalName","externalName":"example.org")");
    controllers.RunOnce();
  }
  void Service(const std::string& ns, const std::string& name, const std::string& spec) {
    BOOST_REQUIRE(store
                      .Create("services", ns,
                              Json(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")" +
                                   name + R"("},"spec":{)" + spec + "}}"))
                      .ok());
  }
  void Pod(const std::string& ns, const std::string& name, const std::string& ip, bool ready,
           const std::string& labels, const std::string& subdomain) {
    const std::string status = fmt::format(
        R"({{"phase":"Running","podIP":"{}","conditions":[{{"type":"Ready","status":"{}"}}]}})", ip,
        ready ? "True" : "False");
    BOOST_REQUIRE(
        store
            .Create("pods", ns,
                    Json(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
                         R"(","labels":{)" + labels + R"(}},"spec":{"hostname":")" + name +
                         R"(","subdomain":")" + subdomain +
                         R"(","containers":[{"name":"c","image":"x"}]},"status":)" + status + "}"))
            .ok());
  }
  dns::Answer Ask(const std::string& name, uint16_t type) {
    return dns::Lookup(store, dns::Question{name, type, dns::kClassIN}, "cluster.local");
  }
  std::vector<std::string> A(const std::string& name) {
    Bytes r = dns::Respond(store, MakeQuery(name, dns::kTypeA), "cluster.local", true);
    BOOST_REQUIRE(r.size() >= 12);
    return Addresses(r);
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(cluster_dns)

BOOST_AUTO_TEST_CASE(parses_a_query_and_echoes_its_question) {
  Bytes q = MakeQuery("Web-0.Web.slurm.svc.cluster.local", dns::kTypeA, 1232);
  dns::Query query;
  BOOST_REQUIRE(!dns::ParseQuery(q, query).has_value());
  BOOST_TEST(query.id == 0x1234);
  BOOST_TEST(query.recursion_desired);
  BOOST_TEST(query.question.name == "Web-0.Web.slurm.svc.cluster.local");
  BOOST_TEST(query.question.type == dns::kTypeA);
  BOOST_TEST(query.edns);
  BOOST_TEST(query.edns_size == 1232);
}

BOOST_AUTO_TEST_CASE(malformed_requests_get_formerr_or_nothing) {
  dns::Query query;
  // Too short for a header, or a response: dropped.
  BOOST_TEST(!dns::ParseQuery(Bytes{1, 2, 3}, query)->answer);
  Bytes response = MakeQuery("a.cluster.local", dns::kTypeA);
  response[2] |= 0x80;
  BOOST_TEST(!dns::ParseQuery(response, query)->answer);
  // A pointer to itself, a pointer forwards, a truncated label: FORMERR with the id.
  Bytes loop = MakeQuery("", dns::kTypeA);
  loop.resize(12);
  loop.insert(loop.end(), {0xc0, 12, 0, 1, 0, 1});
  auto e = dns::ParseQuery(loop, query);
  BOOST_REQUIRE(e.has_value());
  BOOST_TEST(e->answer);
  BOOST_TEST(e->id == 0x1234);
  BOOST_TEST((e->rcode == Rcode::kFormErr));
  Bytes forward = loop;
  forward[13] = 14;
  BOOST_TEST((dns::ParseQuery(forward, query)->rcode == Rcode::kFormErr));
  Bytes cut = MakeQuery("abc.cluster.local", dns::kTypeA);
  cut.resize(15);
  BOOST_TEST((dns::ParseQuery(cut, query)->rcode == Rcode::kFormErr));
  // A name of 300 octets, two questions, an update (opcode 5).
  BOOST_TEST(dns::ParseQuery(MakeQuery(std::string(60, 'a') + "." + std::string(60, 'b') + "." +
                                           std::string(60, 'c') + "." + std::string(60, 'd') + "." +
                                           std::string(60, 'e'),
                                       dns::kTypeA),
                             query)
                 ->answer);
  Bytes two = MakeQuery("a.b", dns::kTypeA);
  two[5] = 2;
  BOOST_TEST((dns::ParseQuery(two, query)->rcode == Rcode::kFormErr));
  Bytes update = MakeQuery("a.b", dns::kTypeA);
  update[2] = 5 << 3;
  BOOST_TEST((dns::ParseQuery(update, query)->rcode == Rcode::kNotImp));
  Bytes r = dns::BuildError(*dns::ParseQuery(update, query));
  BOOST_TEST(r.size() == 12u);
  BOOST_TEST((r[3] & 0xf) == 4);  // NOTIMP
}

BOOST_AUTO_TEST_CASE(headless_service_publishing_not_ready_pods) {
  Cluster c;
  // The endpoints controller put the not-ready controller pod in `addresses`.
  auto ep = c.store.Get("endpoints", "slurm", "slurmctld");
  BOOST_REQUIRE(ep.ok());
  BOOST_TEST(ToJson(*Find(**ep, "subsets")).find("\"addresses\"") != std::string::npos);
  BOOST_TEST(c.A("slurmctld.slurm.svc.cluster.local") == std::vector<std::string>{"10.232.0.7"});
  BOOST_TEST(c.A("slurmctld-0.slurmctld.slurm.svc.cluster.local") ==
             std::vector<std::string>{"10.232.0.7"});
  BOOST_TEST(c.A("SLURMCTLD-0.SlurmCtld.Slurm.SVC.cluster.local.") ==
             std::vector<std::string>{"10.232.0.7"});
}

BOOST_AUTO_TEST_CASE(headless_service_answers_its_ready_endpoints_only) {
  Cluster c;
  BOOST_TEST(c.A("web.slurm.svc.cluster.local") == std::vector<std::string>{"10.232.0.8"});
  BOOST_TEST(c.A("web-0.web.slurm.svc.cluster.local") == std::vector<std::string>{"10.232.0.8"});
  BOOST_TEST((c.Ask("web-1.web.slurm.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
  // The dashed address names an endpoint as CoreDNS does.
  BOOST_TEST(c.A("10-232-0-7.slurmctld.slurm.svc.cluster.local").empty());  // has a hostname
}

BOOST_AUTO_TEST_CASE(cluster_ip_external_name_srv_and_ptr) {
  Cluster c;
  BOOST_TEST(c.A("api.slurm.svc.cluster.local") == std::vector<std::string>{"10.96.0.10"});
  dns::Answer ext = c.Ask("ext.slurm.svc.cluster.local", dns::kTypeA);
  BOOST_REQUIRE(ext.answers.size() == 1u);
  BOOST_TEST(ext.answers[0].type == dns::kTypeCNAME);
  BOOST_TEST(ext.answers[0].rdata ==
             (Bytes{7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'o', 'r', 'g', 0}));
  c.Service("slurm", "fqdn", R"("type":"ExternalName","externalName":"Example.ORG.")");
  BOOST_TEST(c.Ask("fqdn.slurm.svc.cluster.local", dns::kTypeA).answers[0].rdata ==
             ext.answers[0].rdata);
  dns::Answer srv = c.Ask("_slurmctld._tcp.slurmctld.slurm.svc.cluster.local", dns::kTypeSRV);
  BOOST_REQUIRE(srv.answers.size() == 1u);
  const Bytes& rd = srv.answers[0].rdata;
  BOOST_TEST(((rd[4] << 8) | rd[5]) == 6817);
  BOOST_TEST(rd[6] == 11);  // "slurmctld-0"
  BOOST_TEST(
      (c.Ask("_tcp.slurmctld.slurm.svc.cluster.local", dns::kTypeSRV).rcode == Rcode::kNoError));
  dns::Answer ptr = c.Ask("7.0.232.10.in-addr.arpa", dns::kTypePTR);
  BOOST_REQUIRE(ptr.answers.size() == 1u);
  BOOST_TEST(ptr.answers[0].rdata[0] == 11);
  BOOST_TEST((c.Ask("99.0.232.10.in-addr.arpa", dns::kTypePTR).rcode == Rcode::kNxDomain));
}

BOOST_AUTO_TEST_CASE(nodata_nxdomain_and_refused) {
  Cluster c;
  dns::Answer aaaa = c.Ask("web.slurm.svc.cluster.local", dns::kTypeAAAA);
  BOOST_TEST((aaaa.rcode == Rcode::kNoError));
  BOOST_TEST(aaaa.answers.empty());
  BOOST_REQUIRE(aaaa.authority.size() == 1u);
  BOOST_TEST(aaaa.authority[0].type == dns::kTypeSOA);
  BOOST_TEST(aaaa.authoritative);
  BOOST_TEST((c.Ask("nothing.slurm.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
  BOOST_TEST((c.Ask("slurm.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNoError));
  BOOST_TEST((c.Ask("svc.cluster.local", dns::kTypeA).rcode == Rcode::kNoError));
  BOOST_TEST((c.Ask("nons.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
  BOOST_TEST((c.Ask("a.b.web.slurm.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
  BOOST_TEST((c.Ask("10-1-2-3.slurm.pod.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
  BOOST_TEST((c.Ask("cluster.local", dns::kTypeSOA).answers.size() == 1u));
  dns::Answer outside = c.Ask("example.com", dns::kTypeA);
  BOOST_TEST((outside.rcode == Rcode::kNxDomain));
  BOOST_TEST(!outside.authoritative);
  // A headless service without ready endpoints: NXDOMAIN (kubernetes/dns#245).
  c.Service("slurm", "empty", R"("clusterIP":"None","selector":{"app":"nobody"})");
  c.controllers.RunOnce();
  BOOST_TEST((c.Ask("empty.slurm.svc.cluster.local", dns::kTypeA).rcode == Rcode::kNxDomain));
}

BOOST_AUTO_TEST_CASE(big_answers_truncate_over_udp_not_tcp) {
  Cluster c;
  for (int i = 0; i < 40; ++i)
    c.Pod("slurm", fmt::format("big-{}", i), fmt::format("10.232.1.{}", i + 1), true,
          R"("app":"big")", "");
  c.Service("slurm", "big", R"("clusterIP":"None","selector":{"app":"big"})");
  c.controllers.RunOnce();
  const Bytes q = MakeQuery("big.slurm.svc.cluster.local", dns::kTypeA);
  Bytes udp = dns::Respond(c.store, q, "cluster.local", true);
  BOOST_TEST((udp[2] & 0x02) != 0);  // TC
  BOOST_TEST(At16(udp, 6) == 0);
  BOOST_TEST(udp.size() <= 512u);
  // An endpoint without hostname is named by its dashed address (CoreDNS).
  BOOST_TEST(c.A("10-232-1-1.big.slurm.svc.cluster.local") ==
             std::vector<std::string>{"10.232.1.1"});
  Bytes tcp = dns::Respond(c.store, q, "cluster.local", false);
  BOOST_TEST((tcp[2] & 0x02) == 0);
  BOOST_TEST(At16(tcp, 6) == 40);
  Bytes edns = dns::Respond(c.store, MakeQuery("big.slurm.svc.cluster.local", dns::kTypeA, 4096),
                            "cluster.local", true);
  BOOST_TEST(At16(edns, 6) == 40);  // 40 * 16 octets fit EDNS's 1232
  BOOST_TEST(At16(edns, 10) == 1);  // our OPT record
  // Header flags: QR, AA, RD echoed, no RA.
  BOOST_TEST(edns[2] == 0x85);
  BOOST_TEST(edns[3] == 0x00);
}

BOOST_AUTO_TEST_CASE(server_answers_over_udp_and_tcp) {
  Cluster c;
  dns::Server server(c.store, c.log, dns::ServerOptions{"127.0.0.1", 0, "cluster.local"});
  BOOST_REQUIRE(server.Start().ok());
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(server.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  const Bytes q = MakeQuery("web-0.web.slurm.svc.cluster.local", dns::kTypeA);
  const int u = socket(AF_INET, SOCK_DGRAM, 0);
  setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  BOOST_REQUIRE(sendto(u, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to) > 0);
  Bytes r(512);
  const ssize_t n = recv(u, r.data(), r.size(), 0);
  close(u);
  BOOST_REQUIRE(n > 12);
  r.resize(static_cast<size_t>(n));
  BOOST_TEST(Addresses(r) == std::vector<std::string>{"10.232.0.8"});
  const int t = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(t, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  BOOST_REQUIRE(connect(t, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  Bytes framed;
  Put16(framed, static_cast<uint16_t>(q.size()));
  framed.insert(framed.end(), q.begin(), q.end());
  BOOST_REQUIRE(write(t, framed.data(), framed.size()) == static_cast<ssize_t>(framed.size()));
  Bytes tr(1024);
  size_t got = 0;
  while (got < 2 || got < 2u + At16(tr, 0)) {
    const ssize_t m = read(t, tr.data() + got, tr.size() - got);
    BOOST_REQUIRE(m > 0);
    got += static_cast<size_t>(m);
  }
  close(t);
  tr.erase(tr.begin(), tr.begin() + 2);
  BOOST_TEST(Addresses(tr) == std::vector<std::string>{"10.232.0.8"});
  server.Stop();
}

BOOST_AUTO_TEST_SUITE_END()
