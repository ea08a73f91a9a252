#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

#include "k8sbridge/contract.h"
#include "k8sbridge/slurm/node_reason.h"

using k8sbridge::BridgeReason;
using k8sbridge::IsK8sbridgeReason;
using k8sbridge::kMaxBridgeReason;
using k8sbridge::ReasonPolicy;
using k8sbridge::ReasonWrite;

BOOST_AUTO_TEST_SUITE(node_reasons)

BOOST_AUTO_TEST_CASE(every_component_prefix_is_k8sbridge_s) {
  BOOST_TEST(IsK8sbridgeReason("k8sbridge: pod w-0 failed"));
  BOOST_TEST(IsK8sbridgeReason("k8sbridge-health: GPU 3 XID 79"));
  BOOST_TEST(IsK8sbridgeReason("[hardware] k8sbridge-health: GPU 3 XID 79"));
  BOOST_TEST(IsK8sbridgeReason("spank_jail: jail /jail does not answer"));
}

BOOST_AUTO_TEST_CASE(admin_and_slurm_reasons_are_not) {
  BOOST_TEST(!IsK8sbridgeReason("maintenance: swap PSU"));
  BOOST_TEST(!IsK8sbridgeReason("Not responding"));
  BOOST_TEST(!IsK8sbridgeReason("Epilog error"));
  BOOST_TEST(!IsK8sbridgeReason("[hardware] bad DIMM, ticket 42"));
  BOOST_TEST(!IsK8sbridgeReason("my k8sbridge: note"));
  BOOST_TEST(!IsK8sbridgeReason(""));
}

BOOST_AUTO_TEST_CASE(a_foreign_reason_on_a_node_out_of_service_is_kept) {
  BOOST_TEST((ReasonPolicy(true, "maintenance") == ReasonWrite::kKeep));
  BOOST_TEST((ReasonPolicy(true, "Not responding") == ReasonWrite::kKeep));
}

BOOST_AUTO_TEST_CASE(our_reason_no_reason_or_a_node_in_service_is_written) {
  BOOST_TEST((ReasonPolicy(true, "k8sbridge: pod w-0 failed") == ReasonWrite::kWrite));
  BOOST_TEST((ReasonPolicy(true, "") == ReasonWrite::kWrite));
  BOOST_TEST((ReasonPolicy(false, "stale text from last week") == ReasonWrite::kWrite));
}

namespace {

// Every multi-byte sequence whole: a lead byte followed by as many continuation
// bytes as it announces.
bool WholeUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const size_t length = lead < 0x80    ? 1
                          : lead >= 0xF0 ? 4
                          : lead >= 0xE0 ? 3
                          : lead >= 0xC0 ? 2
                                         : 0;
    if (length == 0 || i + length > text.size())
      return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80)
        return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_bridge_reason_starts_with_the_contract_prefix) {
  const std::string reason = BridgeReason("pod w-0 failed");
  BOOST_TEST(reason == "k8sbridge: pod w-0 failed");
  BOOST_TEST(reason.starts_with(k8sbridge::contract::kBridgeReasonPrefix));
  BOOST_TEST(IsK8sbridgeReason(reason));
}

BOOST_AUTO_TEST_CASE(a_bridge_reason_is_one_line) {
  BOOST_TEST(BridgeReason("a\nb\r\tc") == "k8sbridge: a b  c");
}

BOOST_AUTO_TEST_CASE(a_long_bridge_reason_is_cut_and_says_so) {
  const std::string reason = BridgeReason(std::string(500, 'x'));
  BOOST_TEST(reason.size() == kMaxBridgeReason);
  BOOST_TEST(reason.ends_with("x..."));
  const std::string fits(kMaxBridgeReason - BridgeReason("").size(), 'x');
  BOOST_TEST(BridgeReason(fits).size() == kMaxBridgeReason);
  BOOST_TEST(BridgeReason(fits).ends_with("xxx"));
}

BOOST_AUTO_TEST_CASE(a_long_bridge_reason_is_cut_between_characters) {
  // "k8sbridge: " is 11 bytes and the cut falls at byte 197: with 185 ASCII bytes
  // first, the euro sign (3 bytes) takes bytes 196 to 198, and goes whole.
  std::string euros;
  for (int i = 0; i < 10; ++i)
    euros += "\u20ac";
  const std::string reason = BridgeReason(std::string(185, 'x') + euros);
  BOOST_TEST(reason == "k8sbridge: " + std::string(185, 'x') + "...");
  // Wherever a 2-, 3- or 4-byte character meets the cut, it stays whole.
  for (std::string_view wide : {"\u00e9", "\u20ac", "\U0001F600"}) {
    for (size_t pad = 180; pad < 190; ++pad) {
      std::string long_text(pad, 'x');
      for (int i = 0; i < 20; ++i)
        long_text += wide;
      const std::string cut = BridgeReason(long_text);
      BOOST_TEST(cut.size() <= kMaxBridgeReason);
      BOOST_TEST(cut.ends_with("..."));
      BOOST_TEST(WholeUtf8(cut), "pad " << pad << ": " << cut);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
