// FailPlanFor (port.h): what the port's Fail sends, decided on a live read of the node.
#include <boost/test/unit_test.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "k8sbridge/slurm/port.h"

namespace {

using k8sbridge::ReasonWrite;
using k8sbridge::Result;
using k8sbridge::Status;
using k8sbridge::slurm::FailPlanFor;
using k8sbridge::slurm::kUnreachableNodeAddr;
using k8sbridge::slurm::Node;

Node CloudNode(Node::Base base) {
  Node n;
  n.name = "w-3";
  n.base = base;
  n.cloud = true;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fail_plan)

// Its POWER_DOWN ends POWERING_UP while NodeAddr is still the node's name.
BOOST_AUTO_TEST_CASE(a_cloud_node_powering_up_gets_the_unreachable_address) {
  Node n = CloudNode(Node::Base::kIdle);
  n.powering_up = true;
  n.not_responding = true;
  BOOST_TEST(FailPlanFor(n).node_addr == kUnreachableNodeAddr);
  BOOST_TEST((FailPlanFor(n).reason == ReasonWrite::kWrite));
  n.base = Node::Base::kDown;  // an admin's DOWN keeps POWERING_UP (and the admin's reason)
  n.reason = "admin: bad rack";
  BOOST_TEST(FailPlanFor(n).node_addr == kUnreachableNodeAddr);
  BOOST_TEST((FailPlanFor(n).reason == ReasonWrite::kKeep));
}

// What slurmctld and a forwarding slurmd do with it: resolve it (a literal, no
// lookup) and connect, which fails at once, no packet sent.
BOOST_AUTO_TEST_CASE(the_address_resolves_and_a_connect_to_it_fails_at_once) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string host(kUnreachableNodeAddr);
  BOOST_REQUIRE_EQUAL(getaddrinfo(host.c_str(), "6818", &hints, &found), 0);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(fd >= 0);
  const int rc = connect(fd, found->ai_addr, found->ai_addrlen);
  const int err = errno;
  close(fd);
  freeaddrinfo(found);
  BOOST_TEST(rc == -1);
  BOOST_TEST(err == ENETUNREACH);
}

// A registered node has its slurmd's address; one powered down or powering down is
// in a state ping_nodes skips, and POWER_DOWN leaves it there.
BOOST_AUTO_TEST_CASE(a_node_not_powering_up_keeps_its_address) {
  Node registered = CloudNode(Node::Base::kAllocated);
  BOOST_TEST(FailPlanFor(registered).node_addr.empty());
  Node powered_down = CloudNode(Node::Base::kDown);
  powered_down.powered_down = true;
  BOOST_TEST(FailPlanFor(powered_down).node_addr.empty());
  Node powering_down = CloudNode(Node::Base::kIdle);
  powering_down.powering_down = true;
  BOOST_TEST(FailPlanFor(powering_down).node_addr.empty());
}

// slurmctld resets only a CLOUD node's NodeAddr (at POWERED_DOWN, and from its
// registration): on any other node the address would stay.
BOOST_AUTO_TEST_CASE(a_node_that_is_not_cloud_keeps_its_address) {
  Node n = CloudNode(Node::Base::kIdle);
  n.cloud = false;
  n.powering_up = true;
  BOOST_TEST(FailPlanFor(n).node_addr.empty());
}

BOOST_AUTO_TEST_CASE(an_unreadable_node_keeps_its_address_and_gets_our_reason) {
  const Result<Node> unread = Status::Unavailable("slurm_load_node_single: connect failure");
  BOOST_TEST(FailPlanFor(unread).node_addr.empty());
  BOOST_TEST((FailPlanFor(unread).reason == ReasonWrite::kWrite));
  const Result<Node> missing = Status::NotFound("Slurm has no node w-3");
  BOOST_TEST(FailPlanFor(missing).node_addr.empty());
}

BOOST_AUTO_TEST_SUITE_END()
