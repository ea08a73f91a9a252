// A pod's resolv.conf (tests/kubesim/kubelet_dns.cpp) as pkg/kubelet/network/dns/dns.go
// composes it: dnsPolicy, dnsConfig merged, the limits, the host file parsed.
#include <string>

#include <boost/test/unit_test.hpp>

#include "kubelet.h"
#include "store.h"

namespace kubesim {
namespace {

using kubelet_internal::ComposePodDns;
using kubelet_internal::FormatResolvConf;
using kubelet_internal::ParseResolvConf;
using kubelet_internal::PodDns;
using kubelet_internal::ResolvConfig;

rapidjson::Document Pod(const std::string& spec) {
  auto doc = ParseJson(R"({"metadata":{"name":"p","namespace":"slurm","uid":"u1"},"spec":{)" +
                       spec + "}}");
  BOOST_REQUIRE_MESSAGE(doc.ok(), doc.status().ToString());
  rapidjson::Document out;
  out.Swap(**doc);
  return out;
}

const ResolvConfig kHost = ParseResolvConf(
    "# the host's\nnameserver 192.0.2.53\nsearch old.example\nsearch corp.example. lab\n"
    "nameserver 192.0.2.54\noptions timeout:2\noptions edns0 rotate\n");
const std::vector<std::string> kClusterDns = {"10.232.0.1"};

std::string Compose(const std::string& spec, const std::vector<std::string>& cluster_dns,
                    PodDns* out = nullptr) {
  PodDns dns = ComposePodDns(Pod(spec), kHost, cluster_dns, "cluster.local");
  if (out != nullptr)
    *out = dns;
  return FormatResolvConf(dns.config);
}

BOOST_AUTO_TEST_SUITE(kubelet_dns)

BOOST_AUTO_TEST_CASE(parses_the_host_file_as_the_kubelet) {
  BOOST_TEST(kHost.nameservers == (std::vector<std::string>{"192.0.2.53", "192.0.2.54"}));
  BOOST_TEST(kHost.searches == (std::vector<std::string>{"corp.example", "lab"}));
  BOOST_TEST(kHost.options == (std::vector<std::string>{"edns0", "rotate"}));
}

BOOST_AUTO_TEST_CASE(cluster_first_is_the_default) {
  const std::string want =
      "search slurm.svc.cluster.local svc.cluster.local cluster.local corp.example lab\n"
      "nameserver 10.232.0.1\noptions ndots:5\n";
  BOOST_TEST(Compose(R"("dnsPolicy":"ClusterFirst")", kClusterDns) == want);
  BOOST_TEST(Compose(R"("containers":[])", kClusterDns) == want);
  BOOST_TEST(Compose(R"("dnsPolicy":"ClusterFirstWithHostNet","hostNetwork":true)", kClusterDns) ==
             want);
}

BOOST_AUTO_TEST_CASE(default_and_host_network_keep_the_host_file) {
  const std::string host =
      "search corp.example lab\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"
      "options edns0 rotate\n";
  BOOST_TEST(Compose(R"("dnsPolicy":"Default")", kClusterDns) == host);
  BOOST_TEST(Compose(R"("dnsPolicy":"ClusterFirst","hostNetwork":true)", kClusterDns) == host);
  // No cluster DNS: ClusterFirst falls back to Default with an event.
  PodDns dns;
  BOOST_TEST(Compose(R"("dnsPolicy":"ClusterFirst")", {}, &dns) == host);
  BOOST_REQUIRE(dns.events.size() == 1u);
  BOOST_TEST(dns.events[0].first == "MissingClusterDNS");
  BOOST_TEST(dns.events[0].second.starts_with("pod: \"p_slurm(u1)\". kubelet does not have"));
}

BOOST_AUTO_TEST_CASE(none_uses_dns_config_only_and_others_merge_it) {
  BOOST_TEST(Compose(R"("dnsPolicy":"None","dnsConfig":{"nameservers":["192.0.2.9"],)"
                     R"("searches":["a.example"],"options":[{"name":"ndots","value":"2"}]})",
                     kClusterDns) == "search a.example\nnameserver 192.0.2.9\noptions ndots:2\n");
  BOOST_TEST(Compose(R"("dnsConfig":{"nameservers":["10.232.0.1","192.0.2.9"],)"
                     R"("searches":["svc.cluster.local","x.example"],)"
                     R"("options":[{"name":"ndots","value":"1"},{"name":"edns0"}]})",
                     kClusterDns) ==
             "search slurm.svc.cluster.local svc.cluster.local cluster.local corp.example lab "
             "x.example\nnameserver 10.232.0.1\nnameserver 192.0.2.9\noptions ndots:1 edns0\n");
}

BOOST_AUTO_TEST_CASE(limits_cut_with_dns_config_forming_events) {
  PodDns dns;
  std::string searches;
  for (int i = 0; i < 40; ++i)
    searches += (i == 0 ? "\"" : ",\"") + std::to_string(i) + ".example\"";
  Compose(R"("dnsPolicy":"None","dnsConfig":{"nameservers":["1.1.1.1","2.2.2.2","3.3.3.3",)"
          R"("4.4.4.4"],"searches":[)" +
              searches + "]}",
          kClusterDns, &dns);
  BOOST_TEST(dns.config.nameservers.size() == 3u);
  BOOST_TEST(dns.config.searches.size() == 32u);
  BOOST_REQUIRE(dns.events.size() == 2u);
  BOOST_TEST(dns.events[0].second ==
             "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
             "nameserver line is: 1.1.1.1 2.2.2.2 3.3.3.3");
  BOOST_TEST(dns.events[1].second.starts_with("Search Line limits were exceeded"));
  PodDns long_line;
  long_line.config.searches = {std::string(254, 'a'), std::string(200, 'b')};
  for (int i = 0; i < 10; ++i)
    long_line.config.searches.push_back(std::string(250, static_cast<char>('c' + i)));
  kubelet_internal::FitLimits(long_line);
  size_t chars = 0;
  for (const std::string& s : long_line.config.searches)
    chars += s.size() + 1;
  BOOST_TEST(chars - 1 <= 2048u);
  BOOST_TEST(long_line.config.searches.front() == std::string(200, 'b'));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace kubesim
