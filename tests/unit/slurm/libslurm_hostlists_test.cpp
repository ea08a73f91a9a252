#include <algorithm>
#include <set>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/slurm/libslurm_hostlists.h"

using k8sbridge::BuiltinHostlists;
using k8sbridge::slurm::SlurmHostlists;

BOOST_AUTO_TEST_SUITE(hostlist)

BOOST_AUTO_TEST_CASE(libslurm_expands_and_compresses) {
  SlurmHostlists slurm;
  auto names = slurm.Expand("w-[0-3,7],gpu[01-02],login");
  BOOST_REQUIRE_MESSAGE(names.ok(), names.status().ToString());
  BOOST_CHECK((*names == std::vector<std::string>{"w-0", "w-1", "w-2", "w-3", "w-7", "gpu01",
                                                  "gpu02", "login"}));
  BOOST_CHECK_EQUAL(slurm.Compress(*names), "gpu[01-02],login,w-[0-3,7]");
  BOOST_CHECK_EQUAL(slurm.Compress({"w-1", "w-0", "w-1"}), "w-[0-1]");
  BOOST_CHECK_EQUAL(slurm.Compress({}), "");
  auto empty = slurm.Expand("");
  BOOST_REQUIRE(empty.ok());
  BOOST_CHECK(empty->empty());
}

BOOST_AUTO_TEST_CASE(libslurm_rejects_bad_expressions_with_the_reason) {
  auto r = SlurmHostlists().Expand("w-[3-");
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK_MESSAGE(r.status().message().starts_with("'w-[3-' is not a valid Slurm hostlist: "),
                      r.status().message());
  BOOST_CHECK(!SlurmHostlists().Expand("w-[5-2]").ok());
}

BOOST_AUTO_TEST_CASE(large_lists_compress_into_one_range) {
  std::vector<std::string> names;
  for (int i = 0; i < 5000; ++i)
    names.push_back("w-" + std::to_string(i));
  BOOST_CHECK_EQUAL(SlurmHostlists().Compress(names), "w-[0-4999]");
  BOOST_CHECK_EQUAL(k8sbridge::BuiltinHostlists().Compress(names), "w-[0-4999]");
}

// Plugins use the builtin parser, programs libslurm's: they must read every
// expression Slurm prints or an admin writes in k8sbridge.conf the same way.
BOOST_AUTO_TEST_CASE(builtin_agrees_with_libslurm) {
  SlurmHostlists slurm;
  k8sbridge::BuiltinHostlists builtin;
  for (std::string_view expression :
       {"w-0", "w-[0-3,7]", "gpu[01-04]", "w-[0-1],x-[08-11]", "a,b,c", "n[1-2],n[01-02]",
        "rack1-n[0-3]", "w-[9-11],w-[100-101]", "w-[0-1023]"}) {
    auto a = slurm.Expand(expression);
    auto b = builtin.Expand(expression);
    BOOST_REQUIRE_MESSAGE(a.ok() && b.ok(), expression);
    BOOST_CHECK_MESSAGE(*a == *b, expression);
    // Each compresses to an expression the other expands to the same set.
    std::set<std::string> want(a->begin(), a->end());
    auto via_slurm = builtin.Expand(slurm.Compress(*a));
    auto via_builtin = slurm.Expand(builtin.Compress(*a));
    BOOST_REQUIRE(via_slurm.ok() && via_builtin.ok());
    BOOST_CHECK_MESSAGE(std::set<std::string>(via_slurm->begin(), via_slurm->end()) == want,
                        expression);
    BOOST_CHECK_MESSAGE(std::set<std::string>(via_builtin->begin(), via_builtin->end()) == want,
                        expression);
  }
  for (std::string_view bad : {"w-[3-", "w-[5-2]", "w-[0-1"}) {
    BOOST_CHECK_MESSAGE(!slurm.Expand(bad).ok() && !builtin.Expand(bad).ok(), bad);
  }
}

BOOST_AUTO_TEST_SUITE_END()
