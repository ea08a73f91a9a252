// The port's one implementation over Slurm's C API (k8sbridge/slurm/api.h), driven
// through a table of fake Slurm functions: what it reads from node_info_t, and what
// it sends in update_node_msg_t (the reason rule; no reason_uid; the NodeAddr of a
// failed node that never registered).
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/slurm/api.h"

namespace {

using k8sbridge::Status;
using k8sbridge::slurm::Node;

// What the fake slurmctld holds and what it was sent.
struct FakeController {
  struct Record {
    std::string name, reason, gres;
    uint32_t state = NODE_STATE_IDLE;
    uint32_t reason_uid = 0;
  };
  std::vector<Record> nodes;
  struct Update {
    std::string names;
    uint32_t state = 0;
    bool has_reason = false;
    std::string reason;
    uint32_t reason_uid = 0;
    std::string node_addr;  // "" when none was sent
  };
  std::vector<Update> updates;
  bool down = false;                   // every RPC fails, as when slurmctld does not answer
  size_t updates_answered = SIZE_MAX;  // updates after this many fail, as with `down`
  time_t last_update = 1000;
};
FakeController* ctl = nullptr;

char* Dup(const std::string& s) {
  return s.empty() ? nullptr : strdup(s.c_str());
}

node_info_msg_t* Message(const std::vector<FakeController::Record>& records) {
  auto* msg = static_cast<node_info_msg_t*>(calloc(1, sizeof(node_info_msg_t)));
  msg->record_count = static_cast<uint32_t>(records.size());
  msg->last_update = ctl->last_update;
  msg->node_array = static_cast<node_info_t*>(calloc(records.size() + 1, sizeof(node_info_t)));
  for (size_t i = 0; i < records.size(); ++i) {
    node_info_t& info = msg->node_array[i];
    info.name = Dup(records[i].name);
    info.reason = Dup(records[i].reason);
    info.gres = Dup(records[i].gres);
    info.node_state = records[i].state;
    info.reason_uid = records[i].reason_uid;
  }
  return msg;
}

int LoadNode(time_t since, node_info_msg_t** resp, uint16_t) {
  if (ctl->down || since == ctl->last_update) {
    errno = ctl->down ? SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR : SLURM_NO_CHANGE_IN_DATA;
    return SLURM_ERROR;
  }
  *resp = Message(ctl->nodes);
  return SLURM_SUCCESS;
}

int LoadNodeSingle(node_info_msg_t** resp, char* name, uint16_t) {
  if (ctl->down) {
    errno = SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR;
    return SLURM_ERROR;
  }
  std::vector<FakeController::Record> found;
  for (const auto& n : ctl->nodes) {
    if (n.name == name)
      found.push_back(n);
  }
  *resp = Message(found);
  return SLURM_SUCCESS;
}

void FreeNodeInfo(node_info_msg_t* msg) {
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    free(msg->node_array[i].name);
    free(msg->node_array[i].reason);
    free(msg->node_array[i].gres);
  }
  free(msg->node_array);
  free(msg);
}

int UpdateNode(update_node_msg_t* msg) {
  if (ctl->down || ctl->updates.size() >= ctl->updates_answered) {
    errno = SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR;
    return SLURM_ERROR;
  }
  FakeController::Update u;
  u.names = msg->node_names;
  u.state = msg->node_state;
  u.has_reason = msg->reason != nullptr;
  u.reason = msg->reason ? msg->reason : "";
  u.reason_uid = msg->reason_uid;
  u.node_addr = msg->node_addr ? msg->node_addr : "";
  ctl->updates.push_back(u);
  return SLURM_SUCCESS;
}

char* StrError(int) {
  static char text[] = "Unable to contact slurm controller (connect failure)";
  return text;
}

struct Fixture {
  Fixture() {
    ctl = &controller;
    k8sbridge::slurm::SlurmApi api;
    api.load_node = &LoadNode;
    api.load_node_single = &LoadNodeSingle;
    api.free_node_info_msg = &FreeNodeInfo;
    api.init_update_node_msg = &slurm_init_update_node_msg;  // Slurm's own defaults
    api.update_node = &UpdateNode;
    api.strerror = &StrError;
    slurm = k8sbridge::slurm::NewApiSlurm(api);
  }
  ~Fixture() { ctl = nullptr; }
  void Has(std::string name, uint32_t state, std::string reason = "", std::string gres = "") {
    controller.nodes.push_back({std::move(name), std::move(reason), std::move(gres), state, 0});
  }
  FakeController controller;
  std::unique_ptr<k8sbridge::slurm::Slurm> slurm;
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(api_slurm, Fixture)

BOOST_AUTO_TEST_CASE(reads_the_state_flags_reason_and_gres) {
  Has("w-0", NODE_STATE_DOWN | NODE_STATE_DRAIN | NODE_STATE_CLOUD | NODE_STATE_POWERED_DOWN,
      "admin: cable", "gpu:h100:8");
  auto node = slurm->LoadNode("w-0");
  BOOST_REQUIRE(node.ok());
  BOOST_TEST(node->name == "w-0");
  BOOST_TEST((node->base == Node::Base::kDown));
  BOOST_TEST(node->drain);
  BOOST_TEST(node->cloud);
  BOOST_TEST(node->powered_down);
  BOOST_TEST(!node->fail);
  BOOST_TEST(node->OutOfService());
  BOOST_TEST(node->reason == "admin: cable");
  BOOST_TEST(node->gres == "gpu:h100:8");
  BOOST_TEST((slurm->LoadNode("w-9").status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(load_nodes_keeps_its_copy_when_nothing_changed) {
  Has("w-0", NODE_STATE_IDLE);
  Has("w-1", NODE_STATE_ALLOCATED);
  auto first = slurm->LoadNodes();
  BOOST_REQUIRE(first.ok());
  BOOST_TEST(first->size() == 2u);
  auto again = slurm->LoadNodes();  // SLURM_NO_CHANGE_IN_DATA: the same copy
  BOOST_REQUIRE(again.ok());
  BOOST_TEST((*again == *first));
  controller.down = true;
  auto unreadable = slurm->LoadNodes();
  BOOST_TEST((unreadable.status().code() == Status::Code::kUnavailable));
  BOOST_TEST(unreadable.status().message().find("Unable to contact") != std::string::npos);
}

// The poller's read: no copy when slurmctld says nothing changed, the nodes when
// something did (a later update time), and LoadNodes still answers its copy.
BOOST_AUTO_TEST_CASE(load_changed_nodes_answers_nothing_when_nothing_changed) {
  Has("w-0", NODE_STATE_IDLE);
  auto first = slurm->LoadChangedNodes();
  BOOST_REQUIRE(first.ok());
  BOOST_REQUIRE(first->has_value());
  BOOST_TEST((*first)->size() == 1u);
  auto quiet = slurm->LoadChangedNodes();
  BOOST_REQUIRE(quiet.ok());
  BOOST_TEST(!quiet->has_value());
  auto copy = slurm->LoadNodes();
  BOOST_REQUIRE(copy.ok());
  BOOST_TEST(copy->size() == 1u);
  Has("w-1", NODE_STATE_ALLOCATED);
  controller.last_update += 1;
  auto changed = slurm->LoadChangedNodes();
  BOOST_REQUIRE(changed.ok());
  BOOST_REQUIRE(changed->has_value());
  BOOST_TEST((*changed)->size() == 2u);
  controller.down = true;
  BOOST_TEST((slurm->LoadChangedNodes().status().code() == Status::Code::kUnavailable));
}

BOOST_AUTO_TEST_CASE(drain_sends_our_reason_and_no_reason_uid) {
  Has("w-0", NODE_STATE_IDLE);
  BOOST_REQUIRE(slurm->Drain("w-0", "k8sbridge: cordoned").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 1u);
  BOOST_TEST(controller.updates[0].state == static_cast<uint32_t>(NODE_STATE_DRAIN));
  BOOST_TEST(controller.updates[0].reason == "k8sbridge: cordoned");
  // slurmctld records the RPC's authenticated user (24.11 does not even send the
  // field): it stays as slurm_init_update_node_msg left it.
  BOOST_TEST(controller.updates[0].reason_uid == 0u);
}

BOOST_AUTO_TEST_CASE(drain_leaves_a_foreign_reason_on_a_node_out_of_service) {
  Has("w-0", NODE_STATE_DOWN, "Not responding");
  Status s = slurm->Drain("w-0", "spank_jail: broken jail");
  BOOST_TEST((s.code() == Status::Code::kAlreadyExists));
  BOOST_TEST(s.message().find("left as it is") != std::string::npos);
  BOOST_TEST(controller.updates.empty());
}

BOOST_AUTO_TEST_CASE(fail_sends_down_then_power_down_keeping_a_foreign_reason) {
  Has("w-0", NODE_STATE_IDLE | NODE_STATE_DRAIN, "admin: maintenance");
  BOOST_REQUIRE(slurm->Fail("w-0", "k8sbridge: pod failed").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 2u);
  BOOST_TEST(controller.updates[0].state == static_cast<uint32_t>(NODE_STATE_DOWN));
  BOOST_TEST(controller.updates[1].state == static_cast<uint32_t>(NODE_STATE_POWER_DOWN));
  BOOST_TEST(!controller.updates[0].has_reason);
  BOOST_TEST(!controller.updates[1].has_reason);
}

BOOST_AUTO_TEST_CASE(fail_of_an_unreadable_node_still_sends_our_reason) {
  Has("w-0", NODE_STATE_IDLE);
  BOOST_REQUIRE(slurm->Fail("w-0", "k8sbridge: pod failed").ok());
  BOOST_TEST(controller.updates[0].reason == "k8sbridge: pod failed");
  controller.updates.clear();
  controller.nodes.clear();  // read answers "no such node": ours is written
  BOOST_REQUIRE(slurm->Fail("w-0", "k8sbridge: pod failed").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 2u);
  BOOST_TEST(controller.updates[1].reason == "k8sbridge: pod failed");
}

// A resume that failed before slurmd registered: the POWER_DOWN that ends
// POWERING_UP carries an address that resolves (port.h, kUnreachableNodeAddr).
BOOST_AUTO_TEST_CASE(fail_of_a_node_powering_up_sends_an_unreachable_node_addr_with_power_down) {
  Has("w-0", NODE_STATE_IDLE | NODE_STATE_CLOUD | NODE_STATE_POWERING_UP | NODE_STATE_NO_RESPOND);
  BOOST_REQUIRE(slurm->Fail("w-0", "k8sbridge: pod refused").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 2u);
  BOOST_TEST(controller.updates[0].state == static_cast<uint32_t>(NODE_STATE_DOWN));
  BOOST_TEST(controller.updates[0].node_addr == "");
  BOOST_TEST(controller.updates[1].state == static_cast<uint32_t>(NODE_STATE_POWER_DOWN));
  BOOST_TEST(controller.updates[1].node_addr == "255.255.255.255");
  BOOST_TEST(controller.updates[1].reason == "k8sbridge: pod refused");
}

BOOST_AUTO_TEST_CASE(fail_of_a_registered_node_leaves_its_node_addr) {
  Has("w-0", NODE_STATE_ALLOCATED | NODE_STATE_CLOUD);
  BOOST_REQUIRE(slurm->Fail("w-0", "").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 2u);
  BOOST_TEST(controller.updates[0].node_addr == "");
  BOOST_TEST(controller.updates[1].node_addr == "");
}

BOOST_AUTO_TEST_CASE(a_failed_update_names_the_node_addr_it_sent) {
  Has("w-0", NODE_STATE_IDLE | NODE_STATE_CLOUD | NODE_STATE_POWERING_UP);
  controller.updates_answered = 1;  // the DOWN; slurmctld is gone before the POWER_DOWN
  Status s = slurm->Fail("w-0", "k8sbridge: pod refused");
  BOOST_TEST((s.code() == Status::Code::kUnavailable));
  BOOST_TEST(s.message().find("State=POWER_DOWN NodeAddr=255.255.255.255)") != std::string::npos,
             s.message());
}

BOOST_AUTO_TEST_CASE(an_error_names_the_call_and_the_node) {
  controller.down = true;
  Status s = slurm->ReturnToService("w-3");
  BOOST_TEST((s.code() == Status::Code::kUnavailable));
  BOOST_TEST(s.message().find("slurm_update_node(NodeName=w-3 State=IDLE)") != std::string::npos);
}

// The return to service is IDLE, not RESUME (which leaves a powered-down node
// NOT_RESPONDING, port.h); the renewed power-down is POWER_DOWN. Neither sends a reason.
BOOST_AUTO_TEST_CASE(return_to_service_is_idle_and_power_down_is_power_down) {
  Has("w-0", NODE_STATE_DOWN | NODE_STATE_POWERED_DOWN);
  BOOST_REQUIRE(slurm->ReturnToService("w-0").ok());
  BOOST_REQUIRE(slurm->PowerDown("w-0").ok());
  BOOST_REQUIRE_EQUAL(controller.updates.size(), 2u);
  BOOST_TEST(controller.updates[0].state == static_cast<uint32_t>(NODE_STATE_IDLE));
  BOOST_TEST(controller.updates[1].state == static_cast<uint32_t>(NODE_STATE_POWER_DOWN));
  BOOST_TEST(!controller.updates[0].has_reason);
  BOOST_TEST(!controller.updates[1].has_reason);
}

#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(25, 5, 0)
// 25.05 added update_node_msg_t.topology_str: before it, a node's topology update is
// refused here, with nothing sent to slurmctld.
BOOST_AUTO_TEST_CASE(a_topology_update_is_refused_before_slurm_25_05) {
  Has("w-0", NODE_STATE_IDLE);
  BOOST_TEST(!slurm->SupportsTopologyUpdate());
  Status s = slurm->SetTopology("w-0", "default:k8s1-leaf-0");
  BOOST_TEST(!s.ok());
  BOOST_TEST(s.message().find("NodeName=w-0 Topology=default:k8s1-leaf-0") != std::string::npos);
  BOOST_TEST(controller.updates.empty());
}
#endif

BOOST_AUTO_TEST_SUITE_END()
