#include <boost/test/unit_test.hpp>

#include "k8sbridge/hostlist.h"

namespace core = k8sbridge;

BOOST_AUTO_TEST_SUITE(hostlist)

BOOST_AUTO_TEST_CASE(compresses_ranges_keeping_padding) {
  BOOST_CHECK_EQUAL(core::CompressHostlist({"w-3", "w-0", "w-1", "w-2", "w-7"}), "w-[0-3,7]");
  BOOST_CHECK_EQUAL(core::CompressHostlist({"n01", "n02", "n03", "n1"}), "n1,n[01-03]");
  BOOST_CHECK_EQUAL(core::CompressHostlist({"login", "w-1", "w-1"}), "login,w-1");
  BOOST_CHECK_EQUAL(core::CompressHostlist({"a9", "a10", "a11"}), "a[9-11]");
  BOOST_CHECK_EQUAL(core::CompressHostlist({}), "");
}

BOOST_AUTO_TEST_CASE(expands_and_round_trips) {
  auto names = core::ExpandHostlist("w-[0-2,5],login,n[08-10]");
  BOOST_REQUIRE(names.ok());
  BOOST_CHECK_EQUAL(names->size(), 8u);
  BOOST_CHECK_EQUAL((*names)[5], "n08");
  BOOST_CHECK_EQUAL((*names)[7], "n10");
  BOOST_CHECK_EQUAL(core::CompressHostlist(*names), "login,n[08-10],w-[0-2,5]");
}

BOOST_AUTO_TEST_CASE(rejects_bad_expressions) {
  for (std::string_view bad : {"w-[0-", "w-[3-1]", "w-[a]", "w-]", ",x", "x,", "w-[1]x[2]"}) {
    auto r = core::ExpandHostlist(bad);
    BOOST_CHECK_MESSAGE(!r.ok(), bad);
  }
  BOOST_CHECK(!core::ExpandHostlist("w-[0-999999]", 1000).ok());
}

// Reproduced with fuzz/fuzz_resume_file: the limit on the number of names did not bound
// memory, since a long prefix made each name long (3 GB for 3000 characters before
// "[0-999999]"; fuzz/corpus/hostlist/long-prefix.txt).
BOOST_AUTO_TEST_CASE(rejects_names_longer_than_host_names) {
  std::string long_prefix(3000, 'w');
  auto r = core::ExpandHostlist(long_prefix + "[0-999999]");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_EQUAL(r.status().message(), "hostlist \"" + long_prefix +
                                              "[0-999999]\" at character 3002: expected names "
                                              "of at most 255 characters");
  BOOST_CHECK(!core::ExpandHostlist(std::string(256, 'w')).ok());
  BOOST_CHECK(!core::ExpandHostlist("w[0-1]" + std::string(254, 's')).ok());
  auto longest = core::ExpandHostlist(std::string(252, 'w') + "[098-100]");
  BOOST_REQUIRE_MESSAGE(longest.ok(), longest.status().ToString());
  BOOST_CHECK_EQUAL(longest->back().size(), 255u);
}

BOOST_AUTO_TEST_SUITE_END()
