#include <fstream>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/identity.h"
#include "test_dir.h"

namespace k8sbridge::jail {
namespace {

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "# comment\n"
    "broken line\n"
    "+@netgroup::::::\n"
    "bad:x:notanumber:1:::\n"
    "alice:x:1000:1000:Alice:/home/alice:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin";  // no final newline

BOOST_AUTO_TEST_SUITE(jail_identity)

BOOST_AUTO_TEST_CASE(finds_users_by_uid) {
  auto alice = FindUid(kPasswd, 1000);
  BOOST_REQUIRE(alice.has_value());
  BOOST_TEST(alice->name == "alice");
  BOOST_TEST(alice->gid == 1000u);
  BOOST_TEST(alice->home == "/home/alice");
  BOOST_TEST(FindUid(kPasswd, 65534)->name == "nobody");
  BOOST_TEST(FindUid(kPasswd, 0)->name == "root");
  BOOST_TEST(!FindUid(kPasswd, 1001).has_value());
  BOOST_TEST(!FindUid("", 0).has_value());
}

BOOST_AUTO_TEST_CASE(unknown_user_error_names_user_uid_and_jail) {
  testing::TestDir d;
  std::ofstream(d / "passwd") << kPasswd;
  BOOST_TEST(CheckUserInJail(d / "passwd", 1000, "alice", "/srv/jail").ok());
  Status s = CheckUserInJail(d / "passwd", 4242, "bob", "/srv/jail");
  BOOST_TEST((s.code() == Status::Code::kNotFound));
  BOOST_TEST(
      s.message().find("user bob (uid 4242) does not exist in jail /srv/jail") != std::string::npos,
      s.message());
  s = CheckUserInJail(d / "missing", 0, "root", "/srv/jail");
  BOOST_TEST(s.message().find("the jail needs an /etc/passwd") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
