// Topology benchmark: synthetic ibnetdiscover dumps of rail-optimised fabrics (8
// HCAs per host, one per rail; 32 hosts per leaf; pods of 8 leaf groups; three
// tiers) turned into topology.conf: parse + build + render. Prints wall time and
// peak memory per size, each size in its own child process so that peak RSS is
// that size's own. Peer: a plain line split of the same dump (the least any parser
// must do), measured in the same run. Goal: 10k hosts under 1 s, linear growth.
//   topology_bench [hosts...]     (default 1000 5000 10000)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "k8sbridge/log.h"
#include "k8sbridge/topology/fabric.h"
#include "k8sbridge/topology/model.h"
#include "synthetic_fabric.h"

namespace topo = k8sbridge::topology;

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

long CurrentRssKb() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages_total = 0, pages_rss = 0;
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2) {
      pages_rss = 0;
    }
    std::fclose(f);
  }
  return pages_rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int RunOne(int hosts) {
  std::string dump = topo::testing::SyntheticIbnetdiscover({.hosts = hosts,
                                                            .rails = 8,
                                                            .hosts_per_leaf = 32,
                                                            .groups_per_pod = 8,
                                                            .uplinks = 8,
                                                            .cores_per_plane = 4});
  long rss_before = CurrentRssKb();

  auto t0 = std::chrono::steady_clock::now();
  // The peer: split the dump into lines and touch each one, as any parser must.
  size_t lines = 0;
  size_t checksum = 0;
  for (size_t pos = 0, end; (end = dump.find('\n', pos)) != std::string::npos; pos = end + 1) {
    ++lines;
    checksum += static_cast<unsigned char>(dump[pos]);
  }
  asm volatile("" : : "r"(checksum) : "memory");
  auto t1 = std::chrono::steady_clock::now();
  auto graph = topo::ParseIbnetdiscover(dump, "synthetic");
  if (!graph.ok()) {
    std::fprintf(stderr, "parse failed: %s\n", graph.status().ToString().c_str());
    return 1;
  }
  auto t2 = std::chrono::steady_clock::now();
  k8sbridge::NullLogger logger;
  auto built = topo::BuildTopology(*graph, {}, logger);
  if (!built.ok()) {
    std::fprintf(stderr, "build failed: %s\n", built.status().ToString().c_str());
    return 1;
  }
  std::string conf = topo::RenderTreeConf(*built);
  auto t3 = std::chrono::steady_clock::now();

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double total = Seconds(t3 - t1);
  std::printf(
      "%6d hosts %6zu nodes %5.1f MiB dump: parse %.3f s, build+render %.3f s, total %.3f s"
      " (%.1f us/host); peak RSS %.1f MiB (%.1f MiB above the dump); "
      "%zu switches in topology.conf; vs line-split peer x%.0f\n",
      hosts, graph->nodes().size(), dump.size() / 1048576.0, Seconds(t2 - t1), Seconds(t3 - t2),
      total, total * 1e6 / hosts, usage.ru_maxrss / 1024.0, (usage.ru_maxrss - rss_before) / 1024.0,
      built->switches.size(), total / std::max(Seconds(t1 - t0), 1e-9));
  if (lines == 0) {
    return 1;
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--one") {
    return RunOne(std::atoi(argv[2]));
  }
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) {
    sizes.push_back(std::atoi(argv[i]));
  }
  if (sizes.empty()) {
    sizes = {1000, 5000, 10000};
  }
  for (int hosts : sizes) {
    pid_t pid = fork();
    if (pid == 0) {
      std::string n = std::to_string(hosts);
      execl("/proc/self/exe", argv[0], "--one", n.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "size %d failed\n", hosts);
      return 1;
    }
  }
  return 0;
}
