// The spank_jail options an administrator writes in plugstack.conf:
//
//   required spank_jail.so jail=/srv/jail [binds=/scratch,/opt/a:/opt/b:ro] [tmp=private|jail]
//            [tmp_base=DIR] [probe=etc/os-release] [probe_timeout=5s] [identity=files|none]
//            [drain=yes|no] [allow_no_jail=yes|no] [allow_root=yes|no] [namespace=job|task]
//
// The options are the rows of OptionTable() (options.cpp, rows as conf/key_table.h
// describes them): the parser, its messages and the option table of docs/jail.md
// come from them. Parsing is pure so that every bad value gets a unit-tested
// message naming the option and the fix.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k8sbridge/conf/key_table.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// One host path made visible inside the jail.
struct Bind {
  std::string source;  // absolute host path
  std::string target;  // absolute path inside the jail (defaults to source)
  bool read_only = false;
  friend bool operator==(const Bind&, const Bind&) = default;
};

enum class TmpMode {
  kPrivate,  // a fresh /tmp per job (a tmpfs in the job namespace, else under tmp_base)
  kJail,     // the jail's own /tmp, shared by every job (for jails that manage /tmp themselves)
};

enum class IdentityCheck {
  kFiles,  // the job's uid must be in the jail's /etc/passwd
  kNone,   // the jail resolves users some other way (e.g. sssd inside); not checked
};

enum class NamespaceMode {
  kJob,   // one mount namespace per job and node, made by the extern step, joined by every task
  kTask,  // every task builds (and, by exiting, tears down) a namespace of its own
};

struct Options {
  std::string jail;
  std::vector<Bind> binds;
  TmpMode tmp = TmpMode::kPrivate;
  std::string tmp_base = "/var/lib/k8sbridge/jail-tmp";
  // The size of each tmpfs the job namespace mounts on /tmp and /var/tmp: a
  // tmpfs `size=` value (a count of bytes with k, m, g or t, or a percentage
  // of the node's memory).
  std::string tmp_size = "25%";
  std::string probe = "etc/os-release";  // relative to the jail: proves it is mounted
  std::chrono::milliseconds probe_timeout{5000};
  IdentityCheck identity = IdentityCheck::kFiles;
  bool drain = true;
  bool allow_no_jail = false;
  // Jobs of uid 0: root in the jail is root in a privileged pod, so their
  // tasks are refused unless the administrator allows them.
  bool allow_root = false;
  NamespaceMode ns = NamespaceMode::kJob;
};

// Parses plugstack.conf arguments ("key=value" each; option names are
// case-sensitive). Errors name the argument and the fix.
Result<Options> ParseOptions(const std::vector<std::string>& args);

// The options, in the order docs/jail.md lists them.
std::span<const conf::Key<Options>> OptionTable();

// The option table of docs/jail.md ("| option | default | meaning |").
std::string OptionsMarkdown();

// "SRC[:DST][:ro]" entries separated by commas. Errors name the entry.
Result<std::vector<Bind>> ParseBinds(std::string_view text);

// "5", "5s", "1500ms": a deadline between 100 ms and 10 minutes, as probe_timeout.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// Lexically normalizes an absolute path ("/a//b/./c/" -> "/a/b/c"). ".." is
// refused rather than interpreted: option paths must say what they mean.
Result<std::string> NormalizeAbsolute(std::string_view path, std::string_view what);

}  // namespace k8sbridge::jail
