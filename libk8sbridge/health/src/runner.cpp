#include "k8sbridge/health/runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <dirent.h>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "k8sbridge/health/checks.h"
#include "k8sbridge/health/watchdog.h"
#include "k8sbridge/text.h"

namespace k8sbridge::health {
namespace {

double Seconds(std::chrono::milliseconds d) {
  return static_cast<double>(d.count()) / 1000.0;
}

void CheckGpus(const HealthConfig& c, std::optional<unsigned> expected, HealthState& state,
               Report& r) {
  auto run = RunWithDeadline(
      [&](const auto& progress) -> Result<std::string> {
        auto inv =
            CollectGpus(c.nvml_library, static_cast<unsigned>(c.xid_event_wait.count()), progress);
        if (!inv.ok())
          return inv.status();
        return InventoryToJson(*inv);
      },
      c.check_timeout);
  if (!run.ok()) {
    r.Fail("gpu.nvml", "NVML", "not run", run.status().message(), Severity::kNode);
    return;
  }
  // NVML that loaded and then hangs or fails speaks for the GPUs behind it: a
  // wedged driver or a lost GPU. NVML that cannot be loaded at all is no error
  // here (EvaluateGpus: driver_present).
  if (!run->finished) {
    r.Fail("gpu.nvml", "NVML", "hung",
           fmt::format("call hung: {} did not return within {:g}s", run->last_progress,
                       Seconds(c.check_timeout)),
           Severity::kHardware);
    return;
  }
  if (!run->error.empty()) {
    r.Fail("gpu.nvml", "NVML", "error", fmt::format("failed: {}", run->error), Severity::kHardware);
    return;
  }
  auto inv = InventoryFromJson(run->output);
  if (!inv.ok()) {
    r.Fail("gpu.nvml", "NVML", "error", inv.status().message(), Severity::kNode);
    return;
  }
  std::vector<KernelXid> xids;
  if (c.check_xid)
    xids = ReadKernelXids(c.kmsg_path, state);
  r.Merge(EvaluateGpus(*inv, expected, xids, c));
}

bool IsMountPoint(const std::string& path) {
  char resolved[PATH_MAX];
  if (!realpath(path.c_str(), resolved))
    return false;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "<id> <parent> <maj:min> <root> <mount point> ..."
    size_t pos = 0;
    for (int field = 0; field < 4 && pos != std::string::npos; ++field)
      pos = line.find(' ', pos + 1);
    if (pos == std::string::npos)
      continue;
    size_t end = line.find(' ', pos + 1);
    if (line.substr(pos + 1, end - pos - 1) == resolved)
      return true;
  }
  return false;
}

void CheckJail(const HealthConfig& c, Report& r) {
  auto run = RunWithDeadline(
      [&](const auto& progress) -> Result<std::string> {
        progress(fmt::format("stat {}", c.jail_path));
        struct stat st {};
        if (stat(c.jail_path.c_str(), &st) != 0)
          return Status::NotFound(
              fmt::format("jail {} missing: {}", c.jail_path, std::strerror(errno)));
        if (!IsMountPoint(c.jail_path))
          return Status::NotFound(fmt::format("jail {} not mounted", c.jail_path));
        progress(fmt::format("list {}", c.jail_path));
        DIR* dir = opendir(c.jail_path.c_str());
        if (!dir)
          return Status::IoError(
              fmt::format("jail {} unreadable: {}", c.jail_path, std::strerror(errno)));
        int entries = 0;
        while (readdir(dir))
          ++entries;
        closedir(dir);
        return fmt::format("mounted, {} entries", entries - 2);
      },
      c.check_timeout);
  if (!run.ok()) {
    r.Fail("jail", c.jail_path, "not run", run.status().message(), Severity::kNode);
  } else if (!run->finished) {
    r.Fail("jail", c.jail_path, "hung",
           fmt::format("not answering within {:g}s", Seconds(c.check_timeout)), Severity::kNode);
  } else if (!run->error.empty()) {
    std::string msg = run->error;
    if (msg.starts_with("jail " + c.jail_path + " "))
      msg = msg.substr(6 + c.jail_path.size());
    r.Fail("jail", fmt::format("jail {}", c.jail_path), "failed", msg, Severity::kNode);
  } else {
    r.Pass("jail", c.jail_path, run->output);
  }
}

void CheckFreeSpace(const HealthConfig& c, const std::string& path, double min_gib, Report& r) {
  auto run = RunWithDeadline(
      [&](const auto& progress) -> Result<std::string> {
        progress(fmt::format("statvfs {}", path));
        struct statvfs vfs {};
        if (statvfs(path.c_str(), &vfs) != 0)
          return Status::IoError(fmt::format("{}", std::strerror(errno)));
        double gib = static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) /
                     (1024.0 * 1024.0 * 1024.0);
        return fmt::format("{:.1f}", gib);
      },
      c.check_timeout);
  if (!run.ok() || !run->finished || !run->error.empty()) {
    std::string why = !run.ok() ? run.status().message()
                      : !run->finished
                          ? fmt::format("not answering within {:g}s", Seconds(c.check_timeout))
                          : run->error;
    r.Fail("disk.free", path, "unknown", why, Severity::kNode);
    return;
  }
  JudgeFreeSpace(path, run->output, min_gib, r);
}

}  // namespace

void JudgeFreeSpace(const std::string& path, std::string_view gib_text, double min_gib, Report& r) {
  auto gib = text::ParseDouble(gib_text, 0);
  if (!gib.ok()) {
    r.Fail("disk.free", path, "unknown",
           fmt::format("unreadable free space from statvfs: {}", gib.status().message()),
           Severity::kNode);
    return;
  }
  std::string value = fmt::format("{} GiB free", gib_text);
  if (*gib < min_gib)
    r.Fail("disk.free", path, value,
           fmt::format("{} GiB free, expected at least {:g}", gib_text, min_gib), Severity::kNode);
  else
    r.Pass("disk.free", path, value);
}

std::vector<KernelXid> ReadKernelXids(const std::string& path, HealthState& state) {
  std::vector<KernelXid> all;
  bool any = false;
  uint64_t newest = 0;
  auto take = [&](std::string_view record) {
    // Every record moves the cursor, an XID or not; one whose header cannot be
    // read cannot.
    auto header = ParseKmsgHeader(record);
    if (!header)
      return;
    newest = any ? std::max(newest, header->sequence) : header->sequence;
    any = true;
    if (auto x = ParseKmsgXid(record))
      all.push_back(*x);
  };
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return {};
  if (S_ISCHR(st.st_mode)) {
    // /dev/kmsg: one record per read; non-blocking, so the end of the buffer is EAGAIN.
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
      return {};
    char buf[8192];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EPIPE)
        continue;  // overwritten records: skip ahead
      if (n <= 0)
        break;
      take(std::string_view(buf, static_cast<size_t>(n)));
    }
    close(fd);
  } else {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
      take(line);
  }
  if (!any)
    return {};
  // A log that restarted (a reboot, a new pod's kernel view) has a cursor from
  // the old one: then every record is new.
  const bool resume = state.has_kmsg_sequence && newest >= state.kmsg_sequence;
  std::vector<KernelXid> fresh;
  for (const KernelXid& x : all)
    if (!resume || x.sequence > state.kmsg_sequence)
      fresh.push_back(x);
  state.kmsg_sequence = newest;
  state.has_kmsg_sequence = true;
  return fresh;
}

Report RunChecks(const HealthConfig& c, std::optional<unsigned> expected_gpus, HealthState& state) {
  Report r;
  if (c.check_gpus)
    CheckGpus(c, expected_gpus, state, r);
  if (c.check_ib)
    r.Merge(CheckIbPorts(c));
  if (!c.jail_path.empty())
    CheckJail(c, r);
  for (const auto& [path, gib] : c.min_free_gib)
    CheckFreeSpace(c, path, gib, r);
  return r;
}

}  // namespace k8sbridge::health
