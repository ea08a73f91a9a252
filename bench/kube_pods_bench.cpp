// One side of bench/kube_pods_bench.py: creates N pods, then deletes them, with
// libk8sbridge at bounded concurrency.
//   kube_pods_bench KUBECONFIG N CONCURRENCY
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "k8sbridge/kube/client.h"

using namespace k8sbridge;
using namespace k8sbridge::kube;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: kube_pods_bench KUBECONFIG N CONCURRENCY\n");
    return 2;
  }
  const size_t n = std::strtoul(argv[2], nullptr, 10);
  const size_t concurrency = std::strtoul(argv[3], nullptr, 10);
  auto config = LoadKubeconfig({argv[1]});
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  ClientOptions options;
  options.qps = 0;  // the test cluster is ours; bounded concurrency is the limit here
  auto client = Client::Create(*config, options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  Client& c = **client;
  auto name = [](size_t i) { return fmt::format("bench-lib-{}", i); };
  auto created = ForEachBounded(n, concurrency, [&](size_t i) {
    auto pod = Object::Parse(fmt::format(
        R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","labels":{{"bench":"lib"}}}},)"
        R"("spec":{{"containers":[{{"name":"c","image":"busybox","command":["sleep","3600"]}}]}}}})",
        name(i)));
    return c.Create(kPods, "default", *pod).status();
  });
  auto deleted = ForEachBounded(
      n, concurrency, [&](size_t i) { return c.Delete(kPods, "default", name(i)).status(); });
  size_t failed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!created[i].ok() || !deleted[i].ok()) {
      if (++failed <= 3) {
        std::fprintf(stderr, "pod %zu: %s / %s\n", i, created[i].ToString().c_str(),
                     deleted[i].ToString().c_str());
      }
    }
  }
  std::printf("libk8sbridge: %zu pods created and deleted, %zu failed\n", n, failed);
  return failed == 0 ? 0 : 1;
}
