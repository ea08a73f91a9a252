#include <boost/test/unit_test.hpp>

#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/kube/object.h"
#include "testing.h"

namespace k8sbridge::kube {

BOOST_AUTO_TEST_SUITE(object)

BOOST_AUTO_TEST_CASE(typed_accessors_read_the_document) {
  auto pod = Object::Parse(testing::PodJson("p1", "7"));
  BOOST_REQUIRE(pod.ok());
  BOOST_TEST(pod->Name() == "p1");
  BOOST_TEST(pod->Namespace() == "default");
  BOOST_TEST(pod->ResourceVersion() == "7");
  BOOST_TEST(pod->Key() == "default/p1");
  BOOST_TEST(pod::Phase(*pod) == "Running");
  BOOST_TEST(pod::NodeName(*pod) == "n1");
  BOOST_TEST(pod->String("/no/such") == "");
  BOOST_TEST(!pod->Int("/metadata/name").has_value());
}

BOOST_AUTO_TEST_CASE(pointers_read_as_rfc_6901_says) {
  auto o = Object::Parse(R"({"metadata":{"annotations":{"a/b":"slash","c~d":"tilde","":"empty"}},)"
                         R"("spec":{"containers":[{"name":"c0"},{"name":"c1"}]},"n":5})");
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->String("/metadata/annotations/a~1b") == "slash");
  BOOST_TEST(o->String("/metadata/annotations/c~0d") == "tilde");
  BOOST_TEST(o->String("/metadata/annotations/") == "empty");
  BOOST_TEST(o->String("/metadata/annotations/" + PointerEscape("a/b")) == "slash");
  BOOST_TEST(o->String("/spec/containers/1/name") == "c1");
  BOOST_TEST(!o->Has("/spec/containers/2/name"));   // past the end
  BOOST_TEST(!o->Has("/spec/containers/01/name"));  // a leading zero is no index
  BOOST_TEST(!o->Has("/spec/containers/-"));
  BOOST_TEST(!o->Has("/n/x"));                        // below a number
  BOOST_TEST(!o->Has("/metadata/annotations/c~2d"));  // an invalid escape
  BOOST_TEST(!o->Has("/metadata/missing"));
  BOOST_TEST(!o->Has("metadata"));  // no leading slash: not a pointer
  BOOST_TEST(o->Has(""));           // the whole document
  BOOST_TEST(o->Int("/n").value_or(0) == 5);
}

BOOST_AUTO_TEST_CASE(copies_share_until_written) {
  auto a = Object::Parse(R"({"metadata":{"name":"a"},"spec":{"unschedulable":false}})");
  BOOST_REQUIRE(a.ok());
  Object b = *a;
  b.SetBool("/spec/unschedulable", true);
  b.SetString("/metadata/labels/x", "y");
  BOOST_TEST(node::Unschedulable(b));
  BOOST_TEST(!node::Unschedulable(*a));
  BOOST_TEST(b.Labels().at("x") == "y");
  BOOST_TEST(a->Labels().empty());
  BOOST_TEST(b.SetJson("/spec/taints", R"([{"key":"k","effect":"NoSchedule"}])"));
  BOOST_TEST(!b.SetJson("/spec/taints", "[oops"));
  b.Remove("/spec/taints");
  BOOST_TEST(!b.Has("/spec/taints"));
}

BOOST_AUTO_TEST_CASE(bad_json_is_an_error_not_a_crash) {
  BOOST_TEST(!Object::Parse("{").ok());
  BOOST_TEST(!Object::Parse("[1,2]").ok());
  BOOST_TEST(Object::Parse("{").status().message().find("offset") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(conditions_and_lease_fields) {
  auto n = Object::Parse(
      R"({"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}]}})");
  BOOST_REQUIRE(n.ok());
  BOOST_TEST(node::ConditionStatus(*n, "Ready") == "True");
  BOOST_TEST(node::ConditionStatus(*n, "DiskPressure") == "");
  auto l = Object::Parse(
      R"({"spec":{"holderIdentity":"me","leaseDurationSeconds":15,"leaseTransitions":3}})");
  BOOST_TEST(lease::HolderIdentity(*l) == "me");
  BOOST_TEST(lease::DurationSeconds(*l) == 15);
  BOOST_TEST(lease::Transitions(*l) == 3);
  auto cm = Object::Parse(R"({"data":{"a":"1","b":"2"}})");
  BOOST_TEST(configmap::Data(*cm).size() == 2u);
}

BOOST_AUTO_TEST_CASE(status_bodies_parse_into_api_error) {
  ApiError e =
      ParseApiError(409, testing::StatusJson(409, "Conflict", "the object has been modified"));
  BOOST_TEST(e.http_code == 409);
  BOOST_TEST(e.reason == "Conflict");
  BOOST_TEST(e.message == "the object has been modified");
  BOOST_TEST(e.details == R"({"name":"x","kind":"pods"})");
  ApiError html = ParseApiError(502, "<html>bad gateway</html>");
  BOOST_TEST(html.message == "<html>bad gateway</html>");
  BOOST_TEST(html.reason.empty());
  // A Status carried in a watch ERROR event has no HTTP code of its own.
  ApiError gone = ParseApiError(0, testing::StatusJson(410, "Expired", "too old resource version"));
  BOOST_TEST(gone.http_code == 410);
  Status s = ApiFailure("GET", "/api/v1/pods", gone);
  BOOST_TEST(s.code() == Status::Code::kExpired);
  BOOST_REQUIRE(s.api_error() != nullptr);
  BOOST_TEST(HttpCode(s) == 410);
  BOOST_TEST(HttpCode(s.WithContext("ctx")) == 410);
  BOOST_TEST(CodeForHttp(409, "AlreadyExists") == Status::Code::kAlreadyExists);
  BOOST_TEST(CodeForHttp(409, "Conflict") == Status::Code::kConflict);
  BOOST_TEST(CodeForHttp(503, "") == Status::Code::kUnavailable);
  BOOST_TEST(CodeForHttp(415, "UnsupportedMediaType") == Status::Code::kInvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
