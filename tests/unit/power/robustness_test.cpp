// Every parser here reads input from an admin or from Slurm: mangled versions of
// valid inputs must give a Status, never a crash (this runs under ASan/UBSan too).
#include <random>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/conf/bridge_conf.h"
#include "k8sbridge/power/pod_template.h"
#include "k8sbridge/power/resume_file.h"
#include "k8sbridge/slurm/constraint.h"

namespace conf = k8sbridge::conf;
namespace power = k8sbridge::power;
namespace slurm = k8sbridge::slurm;

namespace {

// Deterministic mutations: drop, duplicate, replace with a syntax character, or
// truncate, a few times each.
std::vector<std::string> Mutations(const std::string& seed, int count) {
  std::mt19937 random(42);
  static const char kSpecials[] = "[]{}(),:=&|*!\"'#\\-\n \t\0x9";
  const std::string specials(kSpecials, sizeof(kSpecials) - 1);  // with the NUL
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s = seed;
    int edits = 1 + static_cast<int>(random() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = random() % s.size();
      switch (random() % 4) {
        case 0:
          s.erase(at, 1 + random() % 3);
          break;
        case 1:
          s.insert(at, s.substr(at, 1 + random() % 8));
          break;
        case 2:
          s[at] = specials[random() % specials.size()];
          break;
        case 3:
          s.resize(at);
          break;
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(robustness)

BOOST_AUTO_TEST_CASE(mangled_inputs_give_a_status) {
  k8sbridge::BuiltinHostlists hostlists;
  int failures = 0;
  for (const std::string& text :
       Mutations("ClusterName=c QPS=5 Burst=10\nNodeGroup=g Nodes=w-[0-3,7] PodTemplate=\"/t y\" "
                 "Gpus=8\nFeature=h100 Selector=a.b/c=d,!e,f!=g\n",
                 1500)) {
    failures += !conf::ParseBridgeConfig(text, "k.conf", hostlists).ok();
  }
  for (const std::string& text : Mutations(
           R"({"all_nodes_resume":"w-[0-1]","jobs":[{"extra":null,"job_id":1,"features":"a&b",)"
           R"("nodes_alloc":"w-[0-1]","nodes_resume":"w-[0-1]","oversubscribe":"OK",)"
           R"("partition":"main","reservation":null}]})",
           1500)) {
    failures += !power::ParseResumeFile(text, "f", hostlists).ok();
  }
  for (const std::string& text : Mutations("(a|b)&[c|d*2],e|f*1&(g)", 1500)) {
    failures += !slurm::ParseConstraint(text).ok();
  }
  for (const std::string& text :
       Mutations("kind: PodTemplate\ntemplate:\n  metadata:\n    labels: {a: b}\n  spec:\n    "
                 "containers:\n    - name: slurmd\n      image: i\n      env: [{name: A, value: "
                 "\"1\"}]\n",
                 800)) {
    failures += !power::ParsePodTemplate(text, "t.yaml").ok();
  }
  for (const std::string& text : Mutations("gpu:h100:8(S:0-1),shard:4,gpu:2", 500)) {
    failures += !slurm::GpusFromGres(text).ok();
  }
  BOOST_TEST_MESSAGE("rejected mutations: " << failures);
  BOOST_CHECK_GT(failures, 0);
}

BOOST_AUTO_TEST_SUITE_END()
