#include <string>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/status.h"

using k8sbridge::Result;
using k8sbridge::Status;

BOOST_AUTO_TEST_SUITE(statuses)

BOOST_AUTO_TEST_CASE(default_status_is_ok) {
  Status s;
  BOOST_TEST(s.ok());
  BOOST_TEST(s.ToString() == "OK");
  BOOST_TEST((s == Status::Ok()));
}

BOOST_AUTO_TEST_CASE(failed_status_keeps_code_and_message) {
  Status s = Status::InvalidArgument(
      "k8sbridge.conf:3: unknown key 'Namespce'; did you mean 'Namespace'?");
  BOOST_TEST(!s.ok());
  BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(Status::Code::kInvalidArgument));
  BOOST_TEST(
      s.ToString() ==
      "invalid argument: k8sbridge.conf:3: unknown key 'Namespce'; did you mean 'Namespace'?");
}

BOOST_AUTO_TEST_CASE(with_context_prefixes_message_and_keeps_code) {
  Status s = Status::NotFound("pod w-1").WithContext("suspend");
  BOOST_TEST(s.message() == "suspend: pod w-1");
  BOOST_TEST(static_cast<int>(s.code()) == static_cast<int>(Status::Code::kNotFound));
  BOOST_TEST(Status::Ok().WithContext("ignored").ok());
}

BOOST_AUTO_TEST_CASE(result_holds_value_or_status) {
  Result<std::string> good = std::string("w-0");
  BOOST_TEST(good.ok());
  BOOST_TEST(*good == "w-0");
  BOOST_TEST(good.status().ok());

  Result<std::string> bad = Status::Timeout("GET /api/v1/nodes: no answer within 5s");
  BOOST_TEST(!bad.ok());
  BOOST_TEST(bad.status().message() == "GET /api/v1/nodes: no answer within 5s");
}

BOOST_AUTO_TEST_SUITE_END()
