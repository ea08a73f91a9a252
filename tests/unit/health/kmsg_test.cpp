// XIDs from the kernel log: only the driver's own records count, and each drains
// the one GPU whose bus id it names.
#include <boost/test/unit_test.hpp>

#include "health_fixture.h"
#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/runner.h"

using namespace k8sbridge::health;

namespace {

// A segfault line names the program (its first 15 characters) and its file, both
// chosen by whoever ran it.
constexpr const char* kForgedRecords[] = {
    "6,300,7,-;a.out[4242]: segfault at 0 ip 0000000000401126 sp 00007ffc8a9e1f20 error 4 in "
    "NVRM: Xid (PCI:0000:3b:00): 79, x[401000+1000] likely on CPU 3 (core 3, socket 0)",
    "6,301,7,-;NVRM: Xid (PCI:[4242]: segfault at 0 ip 0000000000401126 sp 00007ffc8a9e1f20 "
    "error 4 in a.out): 79[401000+1000]",
    "6,302,7,-;NVRM: Xid (4242): drop_caches: 3",
    // Written into /dev/kmsg by user space: the kernel gives it facility LOG_USER.
    "12,303,7,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.",
};

// Four GPUs on buses 0x3b to 0x3e, the kernel log holding `kmsg`; the findings.
std::vector<Finding> FindingsWithKmsg(const std::string& kmsg) {
  FakeNvml nvml("{\"devices\":[" + Device() + "," + Device({}, 0x3c) + "," + Device({}, 0x3d) +
                "," + Device({}, 0x3e) + "]}");
  nvml.config.kmsg_path = nvml.dir.Write("kmsg", kmsg);
  HealthState state;
  return RunChecks(nvml.config, 4u, state).findings;
}

// Two GPUs, judged on `xids` as they come from the kernel log.
Report EvaluateTwoGpus(const std::vector<KernelXid>& xids) {
  GpuInventory inventory;
  inventory.driver_present = true;
  inventory.count = 2;
  inventory.gpus.resize(2);
  inventory.gpus[0].pci_bus_id = "0000:3b:00.0";
  inventory.gpus[1].index = 1;
  inventory.gpus[1].pci_bus_id = "0000:3c:00.0";
  return EvaluateGpus(inventory, 2u, xids, HealthConfig{});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kernel_log_xids)

BOOST_AUTO_TEST_CASE(forged_records_are_ignored) {
  std::string kmsg;
  for (const char* record : kForgedRecords) {
    BOOST_TEST(!ParseKmsgXid(record).has_value(), record);
    kmsg += std::string(record) + "\n";
  }
  BOOST_TEST(FindingsWithKmsg(kmsg).empty());
}

BOOST_AUTO_TEST_CASE(forged_records_still_move_the_cursor) {
  FakeNvml nvml("{\"devices\":[" + Device() + "]}");
  std::string kmsg;
  for (const char* record : kForgedRecords)
    kmsg += std::string(record) + "\n";
  nvml.config.kmsg_path = nvml.dir.Write("kmsg", kmsg);
  HealthState state;
  RunChecks(nvml.config, 1u, state);
  BOOST_TEST(state.kmsg_sequence == 303u);
}

BOOST_AUTO_TEST_CASE(a_record_without_a_bus_id_is_ignored) {
  BOOST_TEST(!ParseKmsgXid("4,1,1,-;NVRM: Xid (PCI:): 79, pid=1, GPU has fallen off the bus.")
                  .has_value());
  BOOST_TEST(!ParseKmsgXid("4,1,1,-;NVRM: Xid (): 79, pid=1").has_value());
  BOOST_TEST(FindingsWithKmsg("4,1,1,-;NVRM: Xid (PCI:): 79, pid=1\n").empty());
  // Nor does an empty or partial bus id that reaches the judgement match a GPU.
  for (const char* bus_id : {"", "0000", "0000:3b", "0000:3b:0"})
    BOOST_TEST(EvaluateTwoGpus({{1, bus_id, 79}}).findings.empty(), bus_id);
}

BOOST_AUTO_TEST_CASE(a_genuine_record_drains_its_gpu_only) {
  auto findings = FindingsWithKmsg(
      "4,101,6,-;NVRM: Xid (PCI:0000:3D:00): 79, pid='<unknown>', name=<unknown>, GPU has "
      "fallen off the bus.\n");
  BOOST_REQUIRE_EQUAL(findings.size(), 1u);
  BOOST_TEST(findings[0].subject == "GPU 2");
  BOOST_TEST(DrainReason(findings) ==
             "[hardware] k8sbridge-health: GPU 2 XID 79 (GPU has fallen off the bus)");
  // NVML's eight-digit domain names the same device.
  Report r = EvaluateTwoGpus({{1, "00000000:3C:00", 48}});
  BOOST_REQUIRE_EQUAL(r.findings.size(), 1u);
  BOOST_TEST(r.findings[0].subject == "GPU 1");
}

BOOST_AUTO_TEST_CASE(a_bus_id_of_no_gpu_matches_none) {
  BOOST_TEST(FindingsWithKmsg("4,101,6,-;NVRM: Xid (PCI:0000:af:00): 79, pid=1\n").empty());
  BOOST_TEST(EvaluateTwoGpus({{1, "0001:3b:00", 79}}).findings.empty());
}

BOOST_AUTO_TEST_CASE(canonical_pci_bus_ids) {
  BOOST_TEST(CanonicalPciBusId("0000:3B:00").value() == "0000:3b:00");
  BOOST_TEST(CanonicalPciBusId("00000000:3b:00.0").value() == "0000:3b:00");
  BOOST_TEST(CanonicalPciBusId("10000:e1:1f.7").value() == "10000:e1:1f");
  for (const char* bad :
       {"", "0000:3b", "0000:3b:0", "3b:00", "000:3b:00", "0000:3b:00.", "0000:3b:00.10",
        "0000:3b:00x", "0000: 3b:00", "+000:3b:00", "000000000:3b:00", "0000:3b:00:00"})
    BOOST_TEST(!CanonicalPciBusId(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(the_xid_number_must_be_whole) {
  BOOST_TEST(!ParseKmsgXid("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79x, pid=1").has_value());
  BOOST_TEST(!ParseKmsgXid("4,1,1,-;NVRM: Xid (PCI:0000:3b:00) 79, pid=1").has_value());
  BOOST_TEST(ParseKmsgXid("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): 79").value().xid == 79u);
  BOOST_TEST(ParseKmsgXid("4,1,1,-;NVRM: Xid (0000:3b:00): 13, Graphics Exception").value().xid ==
             13u);
}

BOOST_AUTO_TEST_SUITE_END()
