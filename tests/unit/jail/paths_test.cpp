#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/file.h"
#include "k8sbridge/jail/paths.h"
#include "test_dir.h"

namespace k8sbridge::jail {
namespace {

namespace fs = std::filesystem;
using testing::TestDir;

BOOST_AUTO_TEST_SUITE(jail_paths)

BOOST_AUTO_TEST_CASE(jail_root_must_be_owned_and_not_writable_by_others) {
  TestDir d;
  std::string jail = d / "jail";
  fs::create_directory(jail);
  ::chmod(jail.c_str(), 0755);
  BOOST_TEST(CheckJailRoot(jail, ::getuid()).ok());

  ::chmod(jail.c_str(), 0775);
  Status s = CheckJailRoot(jail, ::getuid());
  BOOST_TEST((s.code() == Status::Code::kPermissionDenied));
  BOOST_TEST(s.message().find("writable by its group") != std::string::npos, s.message());

  ::chmod(jail.c_str(), 0757);
  s = CheckJailRoot(jail, ::getuid());
  BOOST_TEST(s.message().find("writable by others") != std::string::npos, s.message());
  BOOST_TEST(s.message().find("chmod go-w " + jail) != std::string::npos, s.message());

  ::chmod(jail.c_str(), 0755);
  s = CheckJailRoot(jail, ::getuid() + 1);
  BOOST_TEST(s.message().find("is owned by uid") != std::string::npos, s.message());

  s = CheckJailRoot(d / "missing", ::getuid());
  BOOST_TEST((s.code() == Status::Code::kNotFound));
  BOOST_TEST(s.message().find("is the shared jail volume mounted") != std::string::npos);

  std::ofstream(d / "file") << "x";
  s = CheckJailRoot(d / "file", ::getuid());
  BOOST_TEST(s.message().find("is not a directory") != std::string::npos, s.message());
}

struct JailTree {
  TestDir d;
  std::string jail = d / "jail";
  std::string outside = d / "outside";
  JailTree() {
    fs::create_directories(jail + "/etc");
    fs::create_directories(jail + "/usr/lib");
    fs::create_directories(outside);
    fs::create_directory_symlink("/etc", jail + "/abs-escape");
    fs::create_directory_symlink("../../outside", jail + "/etc/rel-escape");
    fs::create_directory_symlink("usr/lib", jail + "/lib");          // stays inside
    fs::create_directory_symlink("/usr/lib", jail + "/abs-inside");  // absolute: refused too
  }
};

BOOST_AUTO_TEST_CASE(resolution_stays_beneath_the_jail) {
  JailTree t;
  auto root = OpenJailRoot(t.jail);
  BOOST_REQUIRE(root.ok());
  BOOST_TEST(OpenBeneath(root->get(), "/etc", t.jail).ok());
  BOOST_TEST(OpenBeneath(root->get(), "/lib", t.jail).ok());  // relative symlink inside
  for (const char* bad :
       {"/abs-escape", "/abs-escape/passwd", "/etc/rel-escape", "/..", "/abs-inside"}) {
    auto r = OpenBeneath(root->get(), bad, t.jail);
    BOOST_TEST_CONTEXT(bad) {
      BOOST_REQUIRE(!r.ok());
      BOOST_TEST((r.status().code() == Status::Code::kPermissionDenied));
      BOOST_TEST(r.status().message().find("resolves through a symlink out of the jail") !=
                 std::string::npos);
    }
  }
  auto missing = OpenBeneath(root->get(), "/nope", t.jail);
  BOOST_TEST((missing.status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(make_path_creates_inside_and_never_outside) {
  JailTree t;
  auto root = OpenJailRoot(t.jail);
  BOOST_REQUIRE(root.ok());
  auto made = MakePathBeneath(root->get(), "/var/spool/slurmd", false, t.jail);
  BOOST_REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  BOOST_TEST(fs::is_directory(t.jail + "/var/spool/slurmd"));
  auto file = MakePathBeneath(root->get(), "/etc/hosts", true, t.jail);
  BOOST_REQUIRE(file.ok());
  BOOST_TEST(fs::is_regular_file(t.jail + "/etc/hosts"));
  // Again: already there is fine.
  BOOST_TEST(MakePathBeneath(root->get(), "/var/spool/slurmd", false, t.jail).ok());

  auto escaped = MakePathBeneath(root->get(), "/etc/rel-escape/planted", false, t.jail);
  BOOST_TEST((escaped.status().code() == Status::Code::kPermissionDenied));
  BOOST_TEST(!fs::exists(t.outside + "/planted"));
}

// A user who can rename the jail's etc/ or usr/, or a directory above the
// jail, can swap what every job trusts.
BOOST_AUTO_TEST_CASE(jail_etc_usr_and_parents_must_be_trusted_too) {
  TestDir d;
  uid_t me = ::geteuid();
  std::string jail = d / "jail";
  fs::create_directories(jail + "/etc");
  fs::create_directories(jail + "/usr");
  for (const std::string& p : {jail, jail + "/etc", jail + "/usr"})
    ::chmod(p.c_str(), 0755);
  BOOST_TEST(CheckJailRoot(jail, me).ok());

  ::chmod((jail + "/etc").c_str(), 0777);
  Status s = CheckJailRoot(jail, me);
  BOOST_TEST((s.code() == Status::Code::kPermissionDenied));
  BOOST_TEST(s.message().find("jail directory " + jail +
                              "/etc is writable by others (mode 0777)") != std::string::npos,
             s.message());
  ::chmod((jail + "/etc").c_str(), 0755);
  ::chmod((jail + "/usr").c_str(), 0775);
  s = CheckJailRoot(jail, me);
  BOOST_TEST(s.message().find(jail + "/usr is writable by its group") != std::string::npos,
             s.message());
  ::chmod((jail + "/usr").c_str(), 0755);
  fs::remove(jail + "/usr");
  fs::create_directory_symlink("/usr", jail + "/usr");
  s = CheckJailRoot(jail, me);
  BOOST_TEST(s.message().find(jail + "/usr is a symlink") != std::string::npos, s.message());

  std::string open_parent = d / "open";
  fs::create_directories(open_parent + "/jail");
  ::chmod(open_parent.c_str(), 0777);
  ::chmod((open_parent + "/jail").c_str(), 0755);
  s = CheckJailRoot(open_parent + "/jail", me);
  BOOST_TEST(
      s.message().find("its parent " + open_parent + " is writable by others") != std::string::npos,
      s.message());
  ::chmod(open_parent.c_str(), 01777);  // sticky, like /tmp: nobody else can rename the jail
  BOOST_TEST(CheckJailRoot(open_parent + "/jail", me).ok());
}

// A bind source is opened without following any symlink or /proc magic link.
BOOST_AUTO_TEST_CASE(host_paths_with_symlinks_or_magic_links_are_refused) {
  TestDir d;
  fs::create_directories(d / "real/sub");
  fs::create_directory_symlink(d / "real", d / "link");
  BOOST_TEST(OpenHostPath(d / "real/sub", "bind source").ok());
  for (const std::string& bad :
       {d / "link", d / "link/sub", "/proc/" + std::to_string(::getpid()) + "/root" + d / "real"}) {
    auto r = OpenHostPath(bad, "bind source");
    BOOST_TEST_CONTEXT(bad) {
      BOOST_REQUIRE(!r.ok());
      BOOST_TEST((r.status().code() == Status::Code::kPermissionDenied));
      BOOST_TEST(r.status().message().find("bind source " + bad +
                                           " is a symlink or has a symlink") != std::string::npos,
                 r.status().message());
    }
  }
  auto missing = OpenHostPath(d / "nope", "bind source");
  BOOST_TEST((missing.status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_CASE(atomic_write_replaces_whole_file) {
  TestDir d;
  std::string p = d / "state";
  BOOST_REQUIRE(WriteFileAtomic(p, "one\n", 0644).ok());
  BOOST_REQUIRE(WriteFileAtomic(p, "two\n", 0600).ok());
  BOOST_TEST(*ReadFile(p) == "two\n");
  struct stat st {};
  ::stat(p.c_str(), &st);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  BOOST_TEST(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) == 1);
  BOOST_TEST((ReadFile(d / "missing").status().code() == Status::Code::kNotFound));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace k8sbridge::jail
