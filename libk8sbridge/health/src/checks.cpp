#include "k8sbridge/health/checks.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 moved it here)

#include "k8sbridge/text.h"

namespace k8sbridge::health {
namespace fs = std::filesystem;

std::string_view XidMeaning(unsigned xid) {
  static const std::map<unsigned, std::string_view> meanings = {
      {13, "Graphics engine exception"},
      {31, "GPU memory page fault"},
      {32, "Invalid or corrupted push buffer stream"},
      {38, "Driver firmware error"},
      {43, "GPU stopped processing"},
      {45, "Preemptive cleanup, due to previous errors"},
      {48, "Double-bit ECC error"},
      {61, "Internal micro-controller breakpoint/warning"},
      {62, "Internal micro-controller halt"},
      {63, "ECC page retirement or row remapping recording event"},
      {64, "ECC page retirement or row remapper recording failure"},
      {68, "NVDEC0 exception"},
      {69, "Graphics engine class error"},
      {74, "NVLink error"},
      {79, "GPU has fallen off the bus"},
      {92, "High single-bit ECC error rate"},
      {94, "Contained ECC error"},
      {95, "Uncontained ECC error"},
      {119, "GSP RPC timeout"},
      {120, "GSP error"},
      {121, "C2C link corrected error"},
      {140, "Unrecovered ECC error"},
  };
  auto it = meanings.find(xid);
  return it == meanings.end() ? std::string_view() : it->second;
}

std::optional<std::string> CanonicalPciBusId(std::string_view bus_id) {
  auto hex = [](std::string_view digits, size_t min, size_t max) -> std::optional<unsigned> {
    if (digits.size() < min || digits.size() > max)
      return std::nullopt;
    auto value = text::ParseInt<unsigned>(digits, 0, std::numeric_limits<unsigned>::max(), 16);
    return value.ok() ? std::optional<unsigned>(*value) : std::nullopt;
  };
  auto c1 = bus_id.find(':');
  auto c2 = c1 == std::string_view::npos ? c1 : bus_id.find(':', c1 + 1);
  if (c2 == std::string_view::npos)
    return std::nullopt;
  std::string_view device = bus_id.substr(c2 + 1);
  if (auto dot = device.find('.'); dot != std::string_view::npos) {
    if (!hex(device.substr(dot + 1), 1, 1))
      return std::nullopt;
    device = device.substr(0, dot);
  }
  auto d = hex(bus_id.substr(0, c1), 4, 8), b = hex(bus_id.substr(c1 + 1, c2 - c1 - 1), 2, 2),
       v = hex(device, 2, 2);
  if (!d || !b || !v)
    return std::nullopt;
  return fmt::format("{:04x}:{:02x}:{:02x}", *d, *b, *v);
}

std::optional<KmsgHeader> ParseKmsgHeader(std::string_view record) {
  // "<priority>,<sequence>,<usec>,<flags>[,...];message"
  std::string_view header = record.substr(0, record.find(';'));
  auto c1 = header.find(',');
  if (c1 == std::string_view::npos)
    return std::nullopt;
  auto c2 = header.find(',', c1 + 1);
  auto priority = text::ParseInt<unsigned>(header.substr(0, c1));
  auto sequence = text::ParseInt<uint64_t>(
      header.substr(c1 + 1, c2 == std::string_view::npos ? header.npos : c2 - c1 - 1));
  if (!priority.ok() || !sequence.ok())
    return std::nullopt;
  return KmsgHeader{*priority, *sequence};
}

std::optional<KernelXid> ParseKmsgXid(std::string_view record) {
  auto semi = record.find(';');
  auto header = ParseKmsgHeader(record);
  // The kernel logs with facility 0; what user space writes into /dev/kmsg gets
  // another (LOG_USER unless it names one), so it cannot pass for the driver.
  if (semi == std::string_view::npos || !header || (header->priority >> 3) != 0)
    return std::nullopt;
  std::string_view msg = record.substr(semi + 1);
  // The driver's line starts the message: the same text further on is somebody
  // else's (a segfaulting program's name or file, as the kernel reports them).
  constexpr std::string_view kMarker = "NVRM: Xid (";
  if (!msg.starts_with(kMarker))
    return std::nullopt;
  msg.remove_prefix(kMarker.size());
  if (msg.starts_with("PCI:"))  // older drivers print the bus id without it
    msg.remove_prefix(4);
  auto close = msg.find(')');
  if (close == std::string_view::npos)
    return std::nullopt;
  auto bus_id = CanonicalPciBusId(msg.substr(0, close));
  msg.remove_prefix(close + 1);
  if (!bus_id || !msg.starts_with(':'))
    return std::nullopt;
  msg.remove_prefix(1);
  while (msg.starts_with(' '))
    msg.remove_prefix(1);
  unsigned xid = 0;
  auto [ptr, ec] = std::from_chars(msg.data(), msg.data() + msg.size(), xid);
  const bool number_ends = ptr == msg.data() + msg.size() || *ptr == ',' ||
                           std::isspace(static_cast<unsigned char>(*ptr));
  if (ec != std::errc() || ptr == msg.data() || !number_ends)
    return std::nullopt;
  return KernelXid{header->sequence, std::move(*bus_id), xid};
}

namespace {

constexpr std::string_view kNvmlMissingFix =
    "not a hardware fault: the NVIDIA driver must be loaded and, in a pod, injected by the "
    "container runtime (the NVIDIA container toolkit, e.g. through a RuntimeClass)";

std::string XidText(unsigned xid) {
  std::string_view meaning = XidMeaning(xid);
  return meaning.empty() ? fmt::format("XID {}", xid) : fmt::format("XID {} ({})", xid, meaning);
}

std::string ThrottleNames(unsigned long long bits) {
  std::vector<std::string_view> names;
  if (bits & kThrottleHwSlowdown)
    names.push_back("hardware slowdown");
  if (bits & kThrottleSwThermal)
    names.push_back("software thermal slowdown");
  if (bits & kThrottleHwThermal)
    names.push_back("hardware thermal slowdown");
  if (bits & kThrottleHwPowerBrake)
    names.push_back("hardware power brake");
  return names.empty() ? fmt::format("0x{:x}", bits) : fmt::format("{}", fmt::join(names, ", "));
}

void EvaluateOne(const GpuSnapshot& g, const std::vector<unsigned>& xids, const HealthConfig& c,
                 Report& r) {
  const std::string gpu = fmt::format("GPU {}", g.index);
  if (g.lost) {
    r.Fail("gpu.bus", gpu, fmt::format("lost ({})", g.lost_detail),
           fmt::format("{} (NVML: GPU is lost)", XidMeaning(79)));
    return;
  }
  r.Pass("gpu.bus", gpu, g.name.empty() ? "present" : g.name);
  if (c.check_xid) {
    std::vector<unsigned> drained;
    for (unsigned x : xids)
      if (c.xid_drain.contains(x))
        drained.push_back(x);
    if (!drained.empty()) {
      r.Fail("gpu.xid", gpu, fmt::format("{}", fmt::join(xids, ",")), XidText(drained.front()));
    } else {
      r.Pass("gpu.xid", gpu,
             xids.empty() ? "none" : fmt::format("{} (not draining)", fmt::join(xids, ",")));
    }
  }
  if (c.check_ecc && g.ecc_uncorrected_volatile) {
    unsigned long long n = *g.ecc_uncorrected_volatile;
    if (n > c.ecc_uncorrected_max)
      r.Fail("gpu.ecc", gpu, fmt::format("{}", n), fmt::format("{} uncorrectable ECC errors", n));
    else
      r.Pass("gpu.ecc", gpu, fmt::format("{} uncorrectable", n));
  }
  if (c.check_retired_pages && g.retired_pages_pending) {
    if (*g.retired_pages_pending)
      r.Fail("gpu.retired_pages", gpu, "pending", "retired pages pending (reset the GPU)");
    else
      r.Pass("gpu.retired_pages", gpu, "none pending");
  }
  if (c.check_row_remap && g.remap_failure) {
    if (*g.remap_failure)
      r.Fail("gpu.row_remap", gpu, "failure", "row remapping failure");
    else if (g.remap_pending.value_or(false))
      r.Fail("gpu.row_remap", gpu, "pending", "row remapping pending (reset the GPU)");
    else
      r.Pass(
          "gpu.row_remap", gpu,
          fmt::format("{} uncorrectable rows remapped", g.remapped_rows_uncorrectable.value_or(0)));
  }
  if (c.check_nvlink && !g.nvlink_active.empty()) {
    std::vector<unsigned> down;
    for (unsigned i = 0; i < g.nvlink_active.size(); ++i)
      if (!g.nvlink_active[i])
        down.push_back(i);
    std::string value =
        fmt::format("{}/{} active", g.nvlink_active.size() - down.size(), g.nvlink_active.size());
    if (!down.empty())
      r.Fail("gpu.nvlink", gpu, value,
             fmt::format("NVLink {} {} down", down.size() == 1 ? "link" : "links",
                         fmt::join(down, ",")));
    else
      r.Pass("gpu.nvlink", gpu, value);
  }
  if (c.check_throttle && g.throttle_reasons) {
    unsigned long long bad = *g.throttle_reasons & c.throttle_drain_mask;
    if (bad)
      r.Fail("gpu.throttle", gpu, fmt::format("0x{:x}", *g.throttle_reasons),
             fmt::format("clocks throttled: {}", ThrottleNames(bad)));
    else
      r.Pass("gpu.throttle", gpu, fmt::format("0x{:x}", *g.throttle_reasons));
  }
  if (c.check_pcie && g.pcie) {
    const PcieLink& l = *g.pcie;
    unsigned min_width = c.pcie_min_width.value_or(l.max_width);
    std::string value = fmt::format("x{} gen{} (max x{} gen{})", l.width, l.generation, l.max_width,
                                    l.max_generation);
    if (l.width < min_width)
      r.Fail("gpu.pcie", gpu, value,
             fmt::format("PCIe link x{}, expected x{}", l.width, min_width));
    else if (c.pcie_min_generation && l.generation < *c.pcie_min_generation)
      r.Fail("gpu.pcie", gpu, value,
             fmt::format("PCIe link gen{}, expected gen{}", l.generation, *c.pcie_min_generation));
    else
      r.Pass("gpu.pcie", gpu, value);
  }
}

}  // namespace

Report EvaluateGpus(const GpuInventory& inv, std::optional<unsigned> expected,
                    const std::vector<KernelXid>& kernel_xids, const HealthConfig& c) {
  Report r;
  if (!inv.driver_present) {
    // NVML that cannot be loaded says nothing about the GPUs: the drain names the
    // fix, and leaves out the [hardware] tag that would have the machine repaired.
    if (expected && *expected > 0)
      r.Fail("gpu.nvml", "", fmt::format("not available: {}", inv.driver_detail),
             fmt::format("expected {} GPUs, but NVML is not available ({}); {}", *expected,
                         inv.driver_detail, kNvmlMissingFix),
             Severity::kNode);
    else
      r.Pass("gpu.nvml", "NVML",
             fmt::format("not available, no GPUs expected ({})", inv.driver_detail));
    return r;
  }
  unsigned count = inv.count.value_or(0);
  if (expected && count != *expected)
    r.Fail("gpu.count", "", fmt::format("{}", count),
           fmt::format("{} of {} GPUs visible", count, *expected));
  else
    r.Pass("gpu.count", "GPUs", fmt::format("{}", count));
  for (const GpuSnapshot& g : inv.gpus) {
    std::vector<unsigned> xids = g.xids;
    // kmsg names "0000:3b:00", NVML "0000:3b:00.0": the same device, and only it.
    const auto gpu_bus_id = CanonicalPciBusId(g.pci_bus_id);
    for (const KernelXid& k : kernel_xids) {
      if (gpu_bus_id && CanonicalPciBusId(k.pci_bus_id) == gpu_bus_id)
        xids.push_back(k.xid);
    }
    EvaluateOne(g, xids, c, r);
  }
  return r;
}

namespace {

std::string ReadTrimmed(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

std::optional<double> ParseIbRate(std::string_view rate) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(rate.data(), rate.data() + rate.size(), v);
  if (ec != std::errc() || ptr == rate.data())
    return std::nullopt;
  return v;
}

Report CheckIbPorts(const HealthConfig& c) {
  Report r;
  std::error_code ec;
  if (!fs::is_directory(c.ib_sysfs_root, ec)) {
    if (!c.ib_ports.empty())
      r.Fail("ib.port", c.ib_sysfs_root, "missing",
             fmt::format("no InfiniBand devices ({} missing)", c.ib_sysfs_root));
    return r;
  }
  std::vector<fs::path> devices;
  for (const auto& e : fs::directory_iterator(c.ib_sysfs_root, ec))
    devices.push_back(e.path());
  std::sort(devices.begin(), devices.end());
  auto expectation_for = [&](const std::string& dev, unsigned port) -> const IbPortExpectation* {
    for (const auto& e : c.ib_ports)
      if ((e.device == "*" || e.device == dev) && (!e.port || *e.port == port))
        return &e;
    return nullptr;
  };
  // Every configured device must exist.
  for (const auto& e : c.ib_ports) {
    if (e.device != "*" && !fs::exists(fs::path(c.ib_sysfs_root) / e.device, ec))
      r.Fail("ib.port", e.device, "missing", fmt::format("InfiniBand device {} missing", e.device));
  }
  for (const fs::path& dev : devices) {
    std::vector<fs::path> ports;
    for (const auto& e : fs::directory_iterator(dev / "ports", ec))
      ports.push_back(e.path());
    std::sort(ports.begin(), ports.end());
    for (const fs::path& port : ports) {
      // sysfs numbers the ports; anything else in ports/ is not one.
      auto port_number = text::ParseInt<unsigned>(port.filename().string());
      if (!port_number.ok())
        continue;
      const unsigned n = *port_number;
      const std::string devname = dev.filename();
      const IbPortExpectation* want = expectation_for(devname, n);
      if (!c.ib_ports.empty() && !want)
        continue;  // only configured ports are checked
      std::string subject = fmt::format("{} port {}", devname, n);
      std::string state = ReadTrimmed(port / "state");      // "4: ACTIVE"
      std::string phys = ReadTrimmed(port / "phys_state");  // "5: LinkUp"
      std::string rate = ReadTrimmed(port / "rate");        // "400 Gb/sec (4X NDR)"
      std::string value = fmt::format("{}, {}, {}", state, phys, rate);
      if (state.find("ACTIVE") == std::string::npos) {
        r.Fail("ib.port", subject, value,
               fmt::format("state {}", state.empty() ? "unknown" : state));
      } else if (phys.find("LinkUp") == std::string::npos) {
        r.Fail("ib.port", subject, value,
               fmt::format("physical state {}", phys.empty() ? "unknown" : phys));
      } else if (want && want->min_rate_gbps > 0 &&
                 ParseIbRate(rate).value_or(0) < want->min_rate_gbps) {
        r.Fail("ib.port", subject, value,
               fmt::format("rate {}, expected {} Gb/s", rate, want->min_rate_gbps));
      } else {
        r.Pass("ib.port", subject, value);
      }
    }
  }
  return r;
}

std::optional<unsigned> GpusFromGres(std::string_view gres) {
  std::optional<unsigned> total;
  size_t start = 0;
  while (start < gres.size()) {
    size_t end = gres.find(',', start);
    if (end == std::string_view::npos)
      end = gres.size();
    std::string_view item = gres.substr(start, end - start);
    if (auto paren = item.find('('); paren != std::string_view::npos)
      item = item.substr(0, paren);
    if (item.starts_with("gpu")) {
      auto colon = item.rfind(':');
      unsigned n = 1;
      if (colon != std::string_view::npos) {
        std::string_view count = item.substr(colon + 1);
        // "gpu:h100" names a type and no count: one GPU.
        auto parsed = text::ParseInt<unsigned>(count);
        n = parsed.ok() ? *parsed : 1;
      }
      total = total.value_or(0) + n;
    }
    start = end + 1;
  }
  return total;
}

}  // namespace k8sbridge::health
