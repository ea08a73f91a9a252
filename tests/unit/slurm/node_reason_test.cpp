#include <boost/test/unit_test.hpp>

#include "k8sbridge/slurm/node_reason.h"

using k8sbridge::IsK8sbridgeReason;
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

BOOST_AUTO_TEST_SUITE_END()
