// The sync daemon's planning pass alone, at cluster size: N CLOUD nodes in G node
// groups, each up with a Running, Ready worker pod on its own Ready Kubernetes node,
// one admin drain. Prints the wall time of Plan (the first pass, a quiet one, and
// one after a drain changed), so that bench/scale.py's drain latency can be split
// into the poll, the plan and the API call.
//   reconcile_bench N [GROUPS] [ROUNDS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/sync/reconcile.h"
#include "k8sbridge/text.h"

using namespace k8sbridge;

namespace {

kube::Object Parse(const std::string& json) {
  auto o = kube::Object::Parse(json);
  if (!o.ok()) {
    std::fprintf(stderr, "reconcile_bench: %s\n", o.status().ToString().c_str());
    std::exit(1);
  }
  return *o;
}

kube::Object WorkerPod(const std::string& node, const std::string& host) {
  return Parse(fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{0}","namespace":"slurm",)"
      R"("uid":"u-{0}","labels":{{"app.kubernetes.io/managed-by":"k8sbridge",)"
      R"("k8sbridge.io/cluster":"hpc1","k8sbridge.io/node":"{0}"}},)"
      R"("annotations":{{"k8sbridge.io/label-features":"h100"}}}},)"
      R"("spec":{{"nodeName":"{1}","containers":[{{"name":"slurmd","image":"w",)"
      R"("resources":{{"limits":{{"nvidia.com/gpu":"8"}}}}}}]}},)"
      R"("status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"True"}}]}}}})",
      node, host));
}

kube::Object KubeNode(const std::string& name) {
  return Parse(fmt::format(
      R"({{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{}","labels":)"
      R"({{"nvidia.com/gpu.product":"H100"}}}},"spec":{{}},"status":{{"allocatable":)"
      R"({{"nvidia.com/gpu":"8"}},"conditions":[{{"type":"Ready","status":"True"}}]}}}})",
      name));
}

double Millis(Clock::Steady::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reconcile_bench N [GROUPS] [ROUNDS]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const int groups = argc > 2 ? std::atoi(argv[2]) : 10;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  if (n <= 0 || groups <= 0 || n % groups) {
    std::fprintf(stderr, "reconcile_bench: N must be a positive multiple of GROUPS\n");
    return 2;
  }
  // As bench/scale.py's k8sbridge.conf: one feature from a label of every node.
  std::string text =
      "ClusterName=hpc1\nNamespace=slurm\nFeature=h100 Selector=nvidia.com/gpu.product=H100\n";
  for (int g = 0; g < groups; ++g) {
    text += fmt::format("NodeGroup=g{} Nodes=w-[{}-{}] PodTemplate=/t.yaml\n", g, g * (n / groups),
                        (g + 1) * (n / groups) - 1);
  }
  auto config = conf::ParseBridgeConfig(text, "bench.conf", BuiltinHostlists());
  if (!config.ok()) {
    std::fprintf(stderr, "reconcile_bench: %s\n", config.status().ToString().c_str());
    return 1;
  }
  sync::World world;
  for (int i = 0; i < n; ++i) {
    sync::SlurmNode s;
    s.name = fmt::format("w-{}", i);
    s.base = sync::SlurmNode::Base::kIdle;
    s.cloud = true;
    world.slurm.push_back(s);
    world.pods.push_back(WorkerPod(s.name, fmt::format("n-{}", i)));
    world.nodes.push_back(KubeNode(fmt::format("n-{}", i)));
  }
  sync::Reconciler r(sync::ReconcileOptions::From(*config));
  Clock::Steady::time_point now{std::chrono::hours(1)};
  Clock::Wall::time_point wall{std::chrono::seconds(1'800'000'000)};
  auto timed = [&] {
    auto start = Clock::Steady::now();
    auto actions = r.Plan(world, now, wall);
    now += std::chrono::seconds(1);
    return std::make_pair(Millis(Clock::Steady::now() - start), actions.size());
  };
  auto [first, first_actions] = timed();
  std::printf("reconcile_bench: %d nodes, %d groups: first Plan %.1f ms (%zu actions)\n", n, groups,
              first, first_actions);
  for (int round = 0; round < rounds; ++round) {
    auto [quiet, quiet_actions] = timed();
    auto& node = world.slurm[static_cast<size_t>(round * 7919 % n)];
    node.drain = true;
    node.reason = fmt::format("admin drain {}", round);
    node.reason_user = "root";
    node.reason_time = 1'800'000'000 + round;
    auto [changed, changed_actions] = timed();
    std::printf("  round %d: quiet Plan %.1f ms (%zu actions), after a drain %.1f ms (%zu)\n",
                round + 1, quiet, quiet_actions, changed, changed_actions);
  }
  return 0;
}
