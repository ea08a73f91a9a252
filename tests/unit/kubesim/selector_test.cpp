#include <boost/test/unit_test.hpp>

#include "selector.h"
#include "test_util.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {
bool LabelsMatch(const std::string& selector, const std::string& labels) {
  auto parsed = LabelSelector::Parse(selector);
  BOOST_REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
  return parsed->Matches(Json(R"({"metadata":{"labels":)" + labels + "}}"));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(selector)

BOOST_AUTO_TEST_CASE(label_operators) {
  const std::string l = R"({"app":"web","tier":"front","example.com/x":"1"})";
  BOOST_TEST(LabelsMatch("", l));
  BOOST_TEST(LabelsMatch("app=web", l));
  BOOST_TEST(LabelsMatch("app==web", l));
  BOOST_TEST(!LabelsMatch("app!=web", l));
  BOOST_TEST(LabelsMatch("missing!=web", l));
  BOOST_TEST(LabelsMatch("tier in (front, back)", l));
  BOOST_TEST(!LabelsMatch("tier notin (front,back)", l));
  BOOST_TEST(LabelsMatch("missing notin (front)", l));
  BOOST_TEST(LabelsMatch("example.com/x", l));
  BOOST_TEST(!LabelsMatch("!example.com/x", l));
  BOOST_TEST(LabelsMatch("!missing,app=web,tier in (front)", l));
  BOOST_TEST(!LabelsMatch("app=web,tier=back", l));
  BOOST_TEST(!LabelsMatch("app", R"({})"));
}

BOOST_AUTO_TEST_CASE(label_parse_errors_name_the_part) {
  for (const char* bad : {"app=(x", "tier in ()", "tier within (a)", "a b=c", "=x", "app=x y"}) {
    auto parsed = LabelSelector::Parse(bad);
    BOOST_TEST(!parsed.ok(), bad);
    if (!parsed.ok())
      BOOST_TEST(parsed.status().message().find("unable to parse requirement") == 0u);
  }
}

BOOST_AUTO_TEST_CASE(field_selectors_per_kind) {
  auto pod = Json(
      R"({"metadata":{"name":"p","namespace":"ns"},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}})");
  auto sel =
      FieldSelector::Parse("pods", "spec.nodeName=n1,status.phase!=Pending,metadata.namespace==ns");
  BOOST_REQUIRE(sel.ok());
  BOOST_TEST(sel->Matches(pod));
  BOOST_TEST(!FieldSelector::Parse("pods", "spec.nodeName=")->Matches(pod));
  auto unbound = Json(R"({"metadata":{"name":"q"},"spec":{}})");
  BOOST_TEST(FieldSelector::Parse("pods", "spec.nodeName=")->Matches(unbound));
  auto node = Json(R"({"metadata":{"name":"n"},"spec":{}})");
  BOOST_TEST(FieldSelector::Parse("nodes", "spec.unschedulable=false")->Matches(node));
  auto unsupported = FieldSelector::Parse("nodes", "spec.nodeName=x");
  BOOST_TEST(!unsupported.ok());
  BOOST_TEST(unsupported.status().message() == "field label not supported: spec.nodeName");
  BOOST_TEST(!FieldSelector::Parse("configmaps", "data.x=1").ok());
  BOOST_TEST(FieldSelector::Parse("configmaps", "metadata.name=x").ok());
  auto ev = Json(
      R"({"involvedObject":{"kind":"Pod","name":"p"},"reason":"Pulled","source":{"component":"kubelet"}})");
  BOOST_TEST(FieldSelector::Parse("events", "involvedObject.name=p,reason=Pulled,source=kubelet")
                 ->Matches(ev));
  BOOST_TEST(FieldSelector::Parse("events", "regarding.name=p")->Matches(ev));
  BOOST_TEST(!FieldSelector::Parse("pods", "nonsense").ok());
}

BOOST_AUTO_TEST_SUITE_END()
