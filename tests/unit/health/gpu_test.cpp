#include <boost/test/unit_test.hpp>

#include "health_fixture.h"
#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/runner.h"

using namespace k8sbridge::health;

namespace {

// Runs the whole GPU path (fake driver under the watchdog, then evaluation) on
// four devices where GPU 3 carries `bad` and returns the drain reason.
std::string ReasonWithGpu3(const Overrides& bad, unsigned expected = 4) {
  std::string script = "{\"devices\":[" + Device() + "," + Device({}, 0x3c) + "," +
                       Device({}, 0x3d) + "," + Device(bad, 0x3e) + "]}";
  FakeNvml nvml(script);
  nvml.config.xid_event_wait = std::chrono::milliseconds(50);
  HealthState state;
  Report r = RunChecks(nvml.config, expected, state);
  return DrainReason(r.findings);
}

// The findings of a run whose NVML is the fake scripted with `script`, or
// `library` when one is named, on a node that expects `expected` GPUs.
std::vector<Finding> NvmlFindings(const std::string& script, const std::string& library,
                                  std::optional<unsigned> expected) {
  FakeNvml nvml(script);
  if (!library.empty())
    nvml.config.nvml_library = library;
  HealthState state;
  return RunChecks(nvml.config, expected, state).findings;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_checks)

BOOST_AUTO_TEST_CASE(clean_devices_pass_and_every_check_is_observed) {
  FakeNvml nvml("{\"devices\":[" + Device() + "," + Device({}, 0x3c) + "]}");
  HealthState state;
  Report r = RunChecks(nvml.config, 2u, state);
  BOOST_TEST(r.findings.empty());
  std::set<std::string> checks;
  for (const auto& o : r.observations)
    checks.insert(o.check);
  for (const char* c : {"gpu.count", "gpu.bus", "gpu.xid", "gpu.ecc", "gpu.retired_pages",
                        "gpu.row_remap", "gpu.nvlink", "gpu.throttle", "gpu.pcie"})
    BOOST_TEST(checks.contains(c), c);
}

BOOST_AUTO_TEST_CASE(xid_event_becomes_the_exact_reason) {
  BOOST_TEST(ReasonWithGpu3({{"xid_events", "[79]"}}) ==
             "[hardware] k8sbridge-health: GPU 3 XID 79 (GPU has fallen off the bus)");
}

BOOST_AUTO_TEST_CASE(non_draining_xid_is_reported_but_passes) {
  BOOST_TEST(ReasonWithGpu3({{"xid_events", "[13]"}}) == "");
}

BOOST_AUTO_TEST_CASE(gpu_count_below_gres) {
  FakeNvml nvml("{\"devices\":[" + Device() + "]}");
  HealthState state;
  Report r = RunChecks(nvml.config, 8u, state);
  BOOST_TEST(DrainReason(r.findings) == "[hardware] k8sbridge-health: 1 of 8 GPUs visible");
}

BOOST_AUTO_TEST_CASE(gpu_fallen_off_the_bus) {
  BOOST_TEST(ReasonWithGpu3({{"lost", "true"}}) ==
             "[hardware] k8sbridge-health: GPU 3 GPU has fallen off the bus (NVML: GPU is lost)");
  BOOST_TEST(ReasonWithGpu3({{"lost_in", "\"nvmlDeviceGetTotalEccErrors\""}}) ==
             "[hardware] k8sbridge-health: GPU 3 GPU has fallen off the bus (NVML: GPU is lost)");
}

BOOST_AUTO_TEST_CASE(uncorrectable_ecc) {
  BOOST_TEST(ReasonWithGpu3({{"ecc_uncorrected", "2"}}) ==
             "[hardware] k8sbridge-health: GPU 3 2 uncorrectable ECC errors");
}

BOOST_AUTO_TEST_CASE(retired_pages_and_row_remapping) {
  BOOST_TEST(ReasonWithGpu3({{"retired_pending", "true"}}) ==
             "[hardware] k8sbridge-health: GPU 3 retired pages pending (reset the GPU)");
  BOOST_TEST(ReasonWithGpu3({{"remap", "{\"failure\":true}"}}) ==
             "[hardware] k8sbridge-health: GPU 3 row remapping failure");
  BOOST_TEST(ReasonWithGpu3({{"remap", "{\"pending\":true}"}}) ==
             "[hardware] k8sbridge-health: GPU 3 row remapping pending (reset the GPU)");
}

BOOST_AUTO_TEST_CASE(nvlink_down) {
  BOOST_TEST(ReasonWithGpu3({{"nvlink", "[true,false,true,true]"}}) ==
             "[hardware] k8sbridge-health: GPU 3 NVLink link 1 down");
}

BOOST_AUTO_TEST_CASE(throttling) {
  BOOST_TEST(ReasonWithGpu3({{"throttle", "72"}}) ==  // 0x48: HW slowdown + HW thermal
             "[hardware] k8sbridge-health: GPU 3 clocks throttled: hardware slowdown, hardware "
             "thermal slowdown");
  BOOST_TEST(ReasonWithGpu3({{"throttle", "4"}}) == "");  // software power cap: normal under load
}

BOOST_AUTO_TEST_CASE(pcie_degraded) {
  BOOST_TEST(ReasonWithGpu3({{"pcie", "{\"width\":8,\"max_width\":16,\"gen\":5,\"max_gen\":5}"}}) ==
             "[hardware] k8sbridge-health: GPU 3 PCIe link x8, expected x16");
}

BOOST_AUTO_TEST_CASE(hanging_nvml_call_is_a_finding_and_the_run_ends) {
  std::string script = "{\"devices\":[" + Device() + "," +
                       Device({{"hang_in", "\"nvmlDeviceGetRemappedRows\""}}, 0x3c) + "]}";
  FakeNvml nvml(script);
  nvml.config.check_timeout = std::chrono::seconds(1);
  HealthState state;
  Report r = RunChecks(nvml.config, 2u, state);
  BOOST_TEST(DrainReason(r.findings) ==
             "[hardware] k8sbridge-health: NVML call hung: nvmlDeviceGetRemappedRows on GPU 1 "
             "did not return within 1s");
}

BOOST_AUTO_TEST_CASE(missing_driver_with_gpus_expected) {
  FakeNvml nvml("{}");
  nvml.config.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  HealthState state;
  Report r = RunChecks(nvml.config, 8u, state);
  BOOST_REQUIRE_EQUAL(r.findings.size(), 1u);
  BOOST_TEST(r.findings[0].message.starts_with("expected 8 GPUs, but NVML is not available"));
  // And a CPU-only node without a driver is healthy.
  Report cpu = RunChecks(nvml.config, std::nullopt, state);
  BOOST_TEST(cpu.findings.empty());
}

BOOST_AUTO_TEST_CASE(missing_nvml_names_the_library_and_the_fix_and_is_not_hardware) {
  auto findings = NvmlFindings("{}", "/nonexistent/libnvidia-ml.so.1", 8u);
  BOOST_REQUIRE_EQUAL(findings.size(), 1u);
  BOOST_TEST(findings[0].check == "gpu.nvml");
  BOOST_TEST((findings[0].severity == Severity::kNode));
  const std::string reason = DrainReason(findings);
  BOOST_TEST(reason ==
             "k8sbridge-health: expected 8 GPUs, but NVML is not available (cannot load "
             "/nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or "
             "directory); not a hardware fault: the NVIDIA driver must be loaded and, in a pod, "
             "injected by the container runtime (the NVIDIA container toolkit, e.g. through a "
             "RuntimeClass)");
  BOOST_TEST(IsOwnReason(reason));
}

BOOST_AUTO_TEST_CASE(a_library_that_is_not_nvml_is_not_hardware) {
  auto findings = NvmlFindings("{}", "libc.so.6", 8u);
  BOOST_REQUIRE_EQUAL(findings.size(), 1u);
  BOOST_TEST((findings[0].severity == Severity::kNode));
  BOOST_TEST(findings[0].message.find("lacks basic symbols") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(nvml_init_refused_is_not_hardware_but_a_lost_gpu_is) {
  auto findings = NvmlFindings("{\"init_error\":9}", "", 2u);
  BOOST_REQUIRE_EQUAL(findings.size(), 1u);
  BOOST_TEST((findings[0].severity == Severity::kNode));
  BOOST_TEST(findings[0].message.find("nvmlInit failed: Driver Not Loaded (9)") !=
             std::string::npos);
  // Without GPUs expected, NVML that will not start is no finding.
  BOOST_TEST(NvmlFindings("{\"init_error\":9}", "", std::nullopt).empty());
  BOOST_TEST(DrainReason(NvmlFindings("{\"init_error\":15}", "", 2u)) ==
             "[hardware] k8sbridge-health: NVML failed: nvmlInit failed: GPU is lost (15)");
}

BOOST_AUTO_TEST_CASE(kernel_log_xids_since_the_last_run) {
  std::string script = "{\"devices\":[" + Device() + "," + Device({}, 0x3c) + "]}";
  FakeNvml nvml(script);
  nvml.config.kmsg_path =
      nvml.dir.Write("kmsg",
                     "6,100,5,-;something else\n"
                     "4,101,6,-;NVRM: Xid (PCI:0000:3c:00): 48, pid=1234, name=python, DBE\n");
  HealthState state;
  Report first = RunChecks(nvml.config, 2u, state);
  BOOST_TEST(DrainReason(first.findings) ==
             "[hardware] k8sbridge-health: GPU 1 XID 48 (Double-bit ECC error)");
  BOOST_TEST(state.kmsg_sequence == 101u);
  // The same record is not reported twice.
  Report second = RunChecks(nvml.config, 2u, state);
  BOOST_TEST(second.findings.empty());
  // A restarted log (lower sequence numbers) is read from the start.
  nvml.dir.Write("kmsg",
                 "4,7,6,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n");
  Report third = RunChecks(nvml.config, 2u, state);
  BOOST_TEST(DrainReason(third.findings) ==
             "[hardware] k8sbridge-health: GPU 0 XID 79 (GPU has fallen off the bus)");
}

BOOST_AUTO_TEST_CASE(kmsg_record_parsing) {
  auto x = ParseKmsgXid(
      "4,5521,1234567,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=0, GPU has fallen off the bus.");
  BOOST_REQUIRE(x.has_value());
  BOOST_TEST(x->sequence == 5521u);
  BOOST_TEST(x->pci_bus_id == "0000:3b:00");
  BOOST_TEST(x->xid == 79u);
  BOOST_TEST(!ParseKmsgXid("6,1,1,-;eth0: link up").has_value());
  BOOST_TEST(!ParseKmsgXid("garbage").has_value());
  BOOST_TEST(!ParseKmsgXid("4,1,1,-;NVRM: Xid (PCI:0000:3b:00): notanumber").has_value());
}

BOOST_AUTO_TEST_CASE(gres_gpu_count) {
  BOOST_TEST(GpusFromGres("gpu:8").value() == 8u);
  BOOST_TEST(GpusFromGres("gpu:h100:4(S:0-1),nic:2").value() == 4u);
  BOOST_TEST(GpusFromGres("gpu").value() == 1u);
  BOOST_TEST(!GpusFromGres("(null)").has_value());
  BOOST_TEST(!GpusFromGres("").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
