#include <boost/test/unit_test.hpp>

#include "k8sbridge/slurm/constraint.h"

namespace slurm = k8sbridge::slurm;
using Alternatives = std::vector<std::vector<std::string>>;

namespace {
Alternatives Dnf(std::string_view expression) {
  auto r = slurm::ParseConstraint(expression);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return r->alternatives;
}
std::string ErrorOf(std::string_view expression) {
  auto r = slurm::ParseConstraint(expression);
  return r.ok() ? "" : r.status().message();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(constraint)

BOOST_AUTO_TEST_CASE(plain_and_or) {
  BOOST_CHECK(Dnf("").empty());
  BOOST_CHECK(Dnf("  ").empty());
  BOOST_CHECK((Dnf("h100") == Alternatives{{"h100"}}));
  BOOST_CHECK((Dnf("h100&ib") == Alternatives{{"h100", "ib"}}));
  BOOST_CHECK((Dnf("ib,h100") == Alternatives{{"h100", "ib"}}));
  BOOST_CHECK((Dnf("h100|a100") == Alternatives{{"a100"}, {"h100"}}));
  // '&' binds tighter than '|'.
  BOOST_CHECK((Dnf("ib&h100|a100") == Alternatives{{"a100"}, {"h100", "ib"}}));
  BOOST_CHECK((Dnf("ib&(h100|a100)") == Alternatives{{"a100", "ib"}, {"h100", "ib"}}));
  BOOST_CHECK((Dnf("(a|b)&(c|d)") == Alternatives{{"a", "c"}, {"a", "d"}, {"b", "c"}, {"b", "d"}}));
  BOOST_CHECK((Dnf("a&a|a") == Alternatives{{"a"}}));
  BOOST_CHECK((Dnf("gpu.h100-80g_x:y") == Alternatives{{"gpu.h100-80g_x:y"}}));
}

BOOST_AUTO_TEST_CASE(counts_are_dropped_and_matching_or_is_a_plain_or_with_notes) {
  auto r = slurm::ParseConstraint("ib&h100*2");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK((r->alternatives == Alternatives{{"ib"}}));
  BOOST_REQUIRE_EQUAL(r->notes.size(), 1u);
  BOOST_CHECK_EQUAL(r->notes[0],
                    "'h100*2' counts nodes, which one pod cannot check: it does not constrain the "
                    "pod");
  r = slurm::ParseConstraint("[leaf1|leaf2]&ib");
  BOOST_REQUIRE(r.ok());
  BOOST_CHECK((r->alternatives == Alternatives{{"ib", "leaf1"}, {"ib", "leaf2"}}));
  BOOST_REQUIRE_EQUAL(r->notes.size(), 1u);
  BOOST_CHECK_EQUAL(r->notes[0],
                    "matching OR '[leaf1|leaf2]' is placed as a plain OR: each pod may take a "
                    "different alternative (Slurm still enforces it when it picks nodes)");
  // An alternative left empty by a count makes the whole OR unconstrained.
  BOOST_CHECK(Dnf("a*1|b").empty());
  BOOST_CHECK(Dnf("[a*2&b*3]").empty());
}

BOOST_AUTO_TEST_CASE(syntax_errors_name_the_position) {
  BOOST_CHECK_EQUAL(ErrorOf("a&"), "constraint 'a&': a feature name is missing at position 3");
  BOOST_CHECK_EQUAL(ErrorOf("|a"),
                    "constraint '|a': a feature name is missing before '|' at position 1");
  BOOST_CHECK_EQUAL(ErrorOf("(a|b"), "constraint '(a|b': '(' is never closed at position 1");
  BOOST_CHECK_EQUAL(ErrorOf("a)"), "constraint 'a)': unexpected ')' at position 2");
  BOOST_CHECK_EQUAL(ErrorOf("a*"),
                    "constraint 'a*': '*' must be followed by a node count at position 3");
  BOOST_CHECK_EQUAL(ErrorOf("!a"),
                    "constraint '!a': '!a': negated features cannot be placed; remove the '!' at "
                    "position 1");
  std::string many = "(a|b)";
  for (char c = 'c'; c < 'c' + 12; c += 2)
    many += std::string("&(") + c + "|" + char(c + 1) + ")";
  std::string error = ErrorOf(many);  // 2^7 alternatives
  BOOST_CHECK_MESSAGE(error.find("': too many alternatives at position") != std::string::npos,
                      error);
}

BOOST_AUTO_TEST_CASE(gpus_from_gres) {
  auto gpus = [](std::string_view gres) {
    auto r = slurm::GpusFromGres(gres);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  };
  BOOST_CHECK_EQUAL(gpus(""), 0);
  BOOST_CHECK_EQUAL(gpus("(null)"), 0);
  BOOST_CHECK_EQUAL(gpus("gpu:8"), 8);
  BOOST_CHECK_EQUAL(gpus("gpu:h100:8"), 8);
  BOOST_CHECK_EQUAL(gpus("gpu:h100:8(S:0-1)"), 8);
  BOOST_CHECK_EQUAL(gpus("gpu:a100:4(S:0,1),gpu:h100:4(S:1)"), 8);
  BOOST_CHECK_EQUAL(gpus("shard:16,gpu:2,mps:200"), 2);
  BOOST_CHECK_EQUAL(gpus("gpu"), 1);
  BOOST_CHECK_EQUAL(gpus("gpu:h100"), 1);
  std::string huge = "gpu:1024";
  for (int i = 0; i < 70; ++i)
    huge += ",gpu:1024";
  BOOST_CHECK(!slurm::GpusFromGres(huge).ok());
  auto bad = slurm::GpusFromGres("gpu:h100:8K");
  BOOST_REQUIRE(!bad.ok());
  BOOST_CHECK_EQUAL(bad.status().message(),
                    "Gres 'gpu:h100:8K': cannot read a GPU count from 'gpu:h100:8K'; expected "
                    "gpu[:type]:count");
}

BOOST_AUTO_TEST_SUITE_END()
