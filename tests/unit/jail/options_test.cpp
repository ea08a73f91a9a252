#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/options.h"

namespace k8sbridge::jail {
namespace {

Result<Options> Parse(std::vector<std::string> args) {
  return ParseOptions(args);
}

BOOST_AUTO_TEST_SUITE(jail_options)

BOOST_AUTO_TEST_CASE(defaults_with_only_jail) {
  auto o = Parse({"jail=/srv/jail/"});
  BOOST_REQUIRE(o.ok());
  BOOST_TEST(o->jail == "/srv/jail");
  BOOST_TEST(o->binds.empty());
  BOOST_TEST((o->tmp == TmpMode::kPrivate));
  BOOST_TEST(o->tmp_base == "/var/lib/k8sbridge/jail-tmp");
  BOOST_TEST(o->probe == "etc/os-release");
  BOOST_TEST(o->probe_timeout.count() == 5000);
  BOOST_TEST((o->identity == IdentityCheck::kFiles));
  BOOST_TEST(o->drain);
  BOOST_TEST(!o->allow_no_jail);
  BOOST_TEST(!o->allow_root);
  BOOST_TEST((o->ns == NamespaceMode::kJob));
}

BOOST_AUTO_TEST_CASE(every_option) {
  auto o = Parse({"jail=/j", "binds=/scratch,/opt/a:/opt/b:ro", "binds=/x:rw", "tmp=jail",
                  "tmp_base=/var/tmp/jt", "probe=.ready", "probe_timeout=1500ms", "identity=none",
                  "drain=no", "allow_no_jail=yes", "allow_root=yes", "namespace=task"});
  BOOST_REQUIRE_MESSAGE(o.ok(), o.status().ToString());
  BOOST_REQUIRE(o->binds.size() == 3u);
  BOOST_TEST((o->binds[0] == Bind{"/scratch", "/scratch", false}));
  BOOST_TEST((o->binds[1] == Bind{"/opt/a", "/opt/b", true}));
  BOOST_TEST((o->binds[2] == Bind{"/x", "/x", false}));
  BOOST_TEST((o->tmp == TmpMode::kJail));
  BOOST_TEST(o->tmp_base == "/var/tmp/jt");
  BOOST_TEST(o->probe == ".ready");
  BOOST_TEST(o->probe_timeout.count() == 1500);
  BOOST_TEST((o->identity == IdentityCheck::kNone));
  BOOST_TEST(!o->drain);
  BOOST_TEST(o->allow_no_jail);
  BOOST_TEST(o->allow_root);
  BOOST_TEST((o->ns == NamespaceMode::kTask));
}

BOOST_AUTO_TEST_CASE(errors_name_the_input_and_the_fix) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  std::vector<Case> cases = {
      {{}, "add jail=/path/to/jail"},
      {{"jail=relative"}, "'relative' is not an absolute path"},
      {{"jail=/"}, "host root"},
      {{"jail=/a/../b"}, "contains '..'"},
      {{"jail=/j", "colour=blue"}, "unknown option 'colour'"},
      {{"jail=/j", "tmp"}, "'tmp' is not key=value"},
      {{"jail=/j", "tmp=shared"}, "tmp=shared: expected private or jail"},
      {{"jail=/j", "tmp_base=/tmp"}, "tmp_base=/tmp"},
      {{"jail=/j", "probe=/etc/os-release"}, "relative to the jail"},
      {{"jail=/j", "probe=../x"}, "without '..'"},
      {{"jail=/j", "probe_timeout=soon"}, "probe_timeout=soon"},
      {{"jail=/j", "probe_timeout=5ms"}, "between 100ms and 600s"},
      {{"jail=/j", "identity=ldap"}, "expected files or none"},
      {{"jail=/j", "drain=maybe"}, "drain=maybe: expected yes or no"},
      {{"jail=/j", "allow_no_jail=sure"}, "allow_no_jail=sure"},
      {{"jail=/j", "allow_root=maybe"}, "allow_root=maybe: expected yes or no"},
      {{"jail=/j", "namespace=pod"}, "namespace=pod: expected job or task"},
      {{"jail=/j", "binds=scratch"}, "'scratch' is not an absolute path"},
      {{"jail=/j", "binds=/a:/b:/c"}, "too many ':'"},
      {{"jail=/j", "binds=/a:/"}, "cover the jail's root"},
      {{"jail=/j", "binds=/x:/proc/sys"}, "targets /proc"},
      {{"jail=/j", "binds=/j/etc:/etc2"}, "lies inside the jail"},
  };
  for (const Case& c : cases) {
    auto o = Parse(c.args);
    BOOST_TEST_CONTEXT("args " << c.args.size() << " needle " << c.needle) {
      BOOST_REQUIRE(!o.ok());
      BOOST_TEST((o.status().code() == Status::Code::kInvalidArgument));
      BOOST_TEST(o.status().message().find(c.needle) != std::string::npos, o.status().message());
    }
  }
}

// The job's /tmp and /var/tmp are tmpfs of this size in its namespace; a
// malformed size fails every step naming the option, not every job namespace
// with EINVAL from mount(2).
BOOST_AUTO_TEST_CASE(tmp_size_is_a_tmpfs_size) {
  BOOST_TEST(Parse({"jail=/j"})->tmp_size == "25%");
  for (const char* size : {"4g", "512m", "100%", "1", "16G", "2t"})
    BOOST_TEST(Parse({"jail=/j", std::string("tmp_size=") + size})->tmp_size == size);
  for (const char* size : {"", "0", "4x", "150%", "-1", "4gb", "1.5g", "%", "07m"}) {
    auto o = Parse({"jail=/j", std::string("tmp_size=") + size});
    BOOST_TEST_CONTEXT("tmp_size=" << size) {
      BOOST_REQUIRE(!o.ok());
      BOOST_TEST(o.status().message().find(std::string("spank_jail option tmp_size=") + size +
                                           ": expected a size such as 4g") != std::string::npos,
                 o.status().message());
    }
  }
}

BOOST_AUTO_TEST_CASE(durations) {
  BOOST_TEST(ParseDuration("5")->count() == 5000);
  BOOST_TEST(ParseDuration("2s")->count() == 2000);
  BOOST_TEST(ParseDuration("250ms")->count() == 250);
  BOOST_TEST(!ParseDuration("").ok());
  BOOST_TEST(!ParseDuration("s").ok());
  BOOST_TEST(!ParseDuration("-1s").ok());
  BOOST_TEST(!ParseDuration("601").ok());
}

BOOST_AUTO_TEST_CASE(normalize) {
  BOOST_TEST(*NormalizeAbsolute("/a//b/./c/", "x") == "/a/b/c");
  BOOST_TEST(*NormalizeAbsolute("/", "x") == "/");
  BOOST_TEST(!NormalizeAbsolute("", "x").ok());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
