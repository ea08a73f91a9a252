#include <boost/test/unit_test.hpp>

#include "k8sbridge/topology/fabric.h"
#include "synthetic_fabric.h"

namespace topo = k8sbridge::topology;

namespace {

// Shape of real `ibnetdiscover` output against ibsim (net.2sw2path4hca, shortened).
constexpr std::string_view kDump = R"(#
# Topology file: generated on Mon Nov 30 10:25:58 2026
#
# Initiated from node 0000000000200000 port 0000000000200000

vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch	8 "S-0000000000200001"		# "Switch2" base port 0 lid 0 lmc 0
[1]	"H-0000000000100003"[1](100004) 		# "w-1 mlx5_0" lid 0 4xSDR
[3]	"S-0000000000200000"[3]		# "Switch1" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch	8 "S-0000000000200000"		# "Switch1" base port 0 lid 0 lmc 0
[1]	"H-0000000000100000"[1](100001) 		# "w-0 mlx5_0" lid 0 4xSDR
[3]	"S-0000000000200001"[3]		# "Switch2" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100003
caguid=0x100003
Ca	2 "H-0000000000100003"		# "w-1 mlx5_0"
[1](100004) 	"S-0000000000200001"[1]		# lid 0 lmc 0 "Switch2" lid 0 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100000
caguid=0x100000
Ca	2 "H-0000000000100000"		# "w-0 mlx5_0"
[1](100001) 	"S-0000000000200000"[1]		# lid 0 lmc 0 "Switch1" lid 0 4xSDR
)";

std::string ErrorOf(std::string_view text) {
  auto parsed = topo::ParseIbnetdiscover(text, "f.txt");
  BOOST_REQUIRE_MESSAGE(!parsed.ok(), "expected a parse error for:\n" << text);
  BOOST_CHECK(parsed.status().code() == k8sbridge::Status::Code::kInvalidArgument);
  return parsed.status().message();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fabric)

BOOST_AUTO_TEST_CASE(parses_switches_cas_ports_and_descriptions) {
  auto parsed = topo::ParseIbnetdiscover(kDump, "dump");
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  const auto& nodes = parsed->nodes();
  BOOST_REQUIRE_EQUAL(nodes.size(), 4u);
  BOOST_CHECK(nodes.at(0x200001).kind == topo::NodeKind::kSwitch);
  BOOST_CHECK_EQUAL(nodes.at(0x200001).num_ports, 8);
  BOOST_CHECK_EQUAL(nodes.at(0x200001).description, "Switch2");
  BOOST_CHECK(nodes.at(0x100003).kind == topo::NodeKind::kCa);
  BOOST_CHECK_EQUAL(nodes.at(0x100003).description, "w-1 mlx5_0");
  auto links = parsed->links();
  BOOST_REQUIRE_EQUAL(links.size(), 3u);  // both ends of each cable collapse into one
  BOOST_CHECK((links[0] == topo::FabricLink{0x100000, 1, 0x200000, 1}));
  BOOST_CHECK((parsed->Neighbours(0x200000) == std::vector<uint64_t>{0x100000, 0x200001}));
}

BOOST_AUTO_TEST_CASE(crlf_and_ext_ports_are_accepted) {
  std::string text =
      "Switch\t36 \"S-0000000000000001\" # \"sw\" enhanced port 0 lid 1 lmc 0\r\n"
      "[1][ext 1]\t\"H-0000000000000002\"[1](3)\t# \"h\" lid 4 4xHDR\r\n"
      "\r\n"
      "Ca\t1 \"H-0000000000000002\"\t# \"h mlx5_0\"\r\n"
      "[1](3)\t\"S-0000000000000001\"[1][ext 1]\t# lid 4 lmc 0 \"sw\" lid 1 4xHDR\r\n";
  auto parsed = topo::ParseIbnetdiscover(text, "crlf");
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  BOOST_CHECK_EQUAL(parsed->links().size(), 1u);
}

BOOST_AUTO_TEST_CASE(malformed_lines_give_line_numbers_and_expectations) {
  BOOST_CHECK_EQUAL(ErrorOf("# c\nSwitch x \"S-01\"\n"),
                    "f.txt:2:8: expected the number of ports (1-255) after the node type");
  BOOST_CHECK_EQUAL(ErrorOf("Switch 8 S-01\n"),
                    "f.txt:1:10: expected a quoted node id such as \"S-0002c90200400b1c\" or "
                    "\"H-...\"");
  BOOST_CHECK(ErrorOf("[1] \"S-01\"[1]\n").starts_with("f.txt:1:1: expected a node header"));
  BOOST_CHECK(ErrorOf("Switch 8 \"S-01\"\n[9] \"S-02\"[1]\n")
                  .starts_with("f.txt:2:4: expected a port number at most 8"));
  BOOST_CHECK(ErrorOf("Switch 8 \"S-01\"\n[1] \"S-02\"\n")
                  .starts_with("f.txt:2:11: expected the remote port number"));
  BOOST_CHECK(ErrorOf("Switch 8 \"S-01\"\n[1] \"S-02\"[1] junk\n")
                  .starts_with("f.txt:2:15: expected end of line or a # comment"));
  BOOST_CHECK(
      ErrorOf("Ca 2 \"S-01\"\n").starts_with("f.txt:1:12: expected a node id whose letter"));
  BOOST_CHECK(ErrorOf("Ca 2 \"H-01\" # \"unterminated\n")
                  .starts_with("f.txt:1:14: expected a closing quote"));
  BOOST_CHECK(ErrorOf("garbage here\n").starts_with("f.txt:1:1: expected a node header"));
  BOOST_CHECK(ErrorOf("Switch 999 \"S-01\"\n").starts_with("f.txt:1:8: expected the number"));
  BOOST_CHECK(ErrorOf("Switch 8 \"S-11112222333344445\"\n").starts_with("f.txt:1:10:"));
  BOOST_CHECK(ErrorOf("").find("no Switch or Ca records") != std::string::npos);
  // A link names a node as a CA that its own record calls a switch.
  BOOST_CHECK(ErrorOf("Switch 2 \"S-01\"\n[1] \"H-02\"[1]\n\nSwitch 2 \"S-02\"\n[1] \"S-01\"[1]\n")
                  .find("f.txt:2:") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(truncated_dumps_fail_with_a_line_number_never_crash) {
  std::string full = topo::testing::SyntheticIbnetdiscover({});
  BOOST_REQUIRE(topo::ParseIbnetdiscover(full, "full").ok());
  std::string expected = topo::ParseIbnetdiscover(full, "full")->CanonicalDump();
  for (size_t cut = 0; cut < full.size(); ++cut) {
    auto parsed = topo::ParseIbnetdiscover(std::string_view(full).substr(0, cut), "cut");
    // Either a line-numbered error, or the cut only took comments/whitespace off the
    // end and nothing was lost.
    if (!parsed.ok()) {
      BOOST_CHECK_MESSAGE(parsed.status().message().starts_with("cut:"), parsed.status().message());
    } else {
      BOOST_CHECK_MESSAGE(parsed->CanonicalDump() == expected, "cut at " << cut);
    }
  }
  // Cut at a record boundary: the cables into the missing records are reported.
  size_t boundary = full.rfind("\n\nvendid");
  std::string msg = ErrorOf(full.substr(0, boundary + 1));
  BOOST_CHECK_MESSAGE(msg.find("never describes") != std::string::npos, msg);
  BOOST_CHECK_MESSAGE(msg.find("truncated") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(merge_is_by_guid_and_rejects_kind_clashes) {
  auto a = topo::ParseIbnetdiscover(kDump, "a");
  auto b = topo::ParseIbnetdiscover(kDump, "b");
  BOOST_REQUIRE(a.ok() && b.ok());
  topo::FabricGraph merged = *a;
  BOOST_REQUIRE(merged.Merge(*b).ok());
  BOOST_CHECK(merged == *a);
  BOOST_CHECK_EQUAL(merged.CanonicalDump(), a->CanonicalDump());
  topo::FabricGraph clash;
  BOOST_REQUIRE(clash.AddNode({0x200001, topo::NodeKind::kCa, 1, "x"}).ok());
  BOOST_CHECK(!clash.Merge(*a).ok());
}

BOOST_AUTO_TEST_SUITE_END()
