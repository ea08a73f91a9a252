#include "k8sbridge/jail/options.h"

#include <utility>

#include <fmt/format.h>

#include "k8sbridge/text.h"

namespace k8sbridge::jail {
namespace {

using conf::At;
using conf::Key;
using conf::KeyType;
using conf::Range;
using std::chrono::milliseconds;
using text::Split;

constexpr milliseconds kProbeTimeoutMin{100};
constexpr milliseconds kProbeTimeoutMax{600'000};

// --- Readers and validators of the options with a syntax of their own. ---

Status ReadJail(std::string_view value, Options& o) {
  auto path = NormalizeAbsolute(value, "the path");
  if (!path.ok())
    return path.status();
  if (*path == "/")
    return Status::InvalidArgument("it is the host root: point it at the jail directory");
  o.jail = *path;
  return Status::Ok();
}

Status ReadBinds(std::string_view value, Options& o) {
  auto binds = ParseBinds(value);
  if (!binds.ok())
    return binds.status();
  o.binds.insert(o.binds.end(), binds->begin(), binds->end());
  return Status::Ok();
}

Status ReadTmpBase(std::string_view value, Options& o) {
  auto path = NormalizeAbsolute(value, "the path");
  if (!path.ok())
    return path.status();
  if (*path == "/" || *path == "/tmp") {
    return Status::InvalidArgument(
        "use a directory only root writes to, such as /var/lib/k8sbridge/jail-tmp");
  }
  o.tmp_base = *path;
  return Status::Ok();
}

// A tmpfs `size=`: digits with an optional k, m, g or t, or a percentage
// from 1% to 100%. Checked here, so a typo fails every step with the option
// named instead of every job namespace with EINVAL from mount(2).
Status ReadTmpSize(std::string_view value, Options& o) {
  std::string_view digits = value;
  char unit = digits.empty() ? '\0' : digits.back();
  bool percent = unit == '%';
  if (percent || std::string_view("kmgtKMGT").find(unit) != std::string_view::npos)
    digits.remove_suffix(1);
  bool numeric = !digits.empty() && digits.size() <= 15 && digits.front() != '0' &&
                 digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!numeric || (percent && std::stoul(std::string(digits)) > 100)) {
    return Status::InvalidArgument(
        "expected a size such as 4g, 512m or 25% (a percentage of the node's memory, at most "
        "100%)");
  }
  o.tmp_size = value;
  return Status::Ok();
}

std::string ProbeError(std::string_view value) {
  return value.empty() || value.front() == '/' || value.find("..") != std::string_view::npos
             ? "not a path relative to the jail"
             : "";
}

// The words of an option that is one of a few, each meaning one value of E.
template <typename E>
struct Word {
  std::string_view word;
  E value;
};

constexpr Word<TmpMode> kTmpWords[] = {{"private", TmpMode::kPrivate}, {"jail", TmpMode::kJail}};
constexpr Word<IdentityCheck> kIdentityWords[] = {{"files", IdentityCheck::kFiles},
                                                  {"none", IdentityCheck::kNone}};
constexpr Word<NamespaceMode> kNamespaceWords[] = {{"job", NamespaceMode::kJob},
                                                   {"task", NamespaceMode::kTask}};

// Reads one of kWords (case-sensitive, as every option) into `kMember`.
template <auto kMember, const auto& kWords>
Status ReadWord(std::string_view value, Options& o) {
  std::string expected;
  for (const auto& [word, meaning] : kWords) {
    if (value == word) {
      o.*kMember = meaning;
      return Status::Ok();
    }
    expected += fmt::format("{}{}", expected.empty() ? "" : " or ", word);
  }
  return Status::InvalidArgument(fmt::format("expected {}", expected));
}

constexpr std::string_view kYesOrNo = "expected yes or no";

// One row per option, in the order of docs/jail.md.
constexpr Key<Options> kOptions[] = {
    {.name = "jail",
     .type = KeyType::kCustom,
     .field = ReadJail,
     .doc = "The jail's root directory on the node. Must be owned by root and not writable by "
            "group or others.",
     .default_doc = "(required)",
     .syntax = "DIR"},
    {.name = "binds",
     .type = KeyType::kCustom,
     .field = ReadBinds,
     .doc = "Host paths to bind into every task's view (DST defaults to SRC). A DST under `/tmp` "
            "is created in the job's private /tmp; any other DST must already exist in the jail "
            "(create it once, or let `k8sbridge-jail-prepare` bind it). May be given more than "
            "once.",
     .default_doc = "none",
     .syntax = "SRC[:DST][:ro],..."},
    {.name = "tmp",
     .type = KeyType::kCustom,
     .field = ReadWord<&Options::tmp, kTmpWords>,
     .doc = "`private`: each job gets a fresh /tmp and /var/tmp (below) and a fresh tmpfs on "
            "/dev/shm, removed when the job ends. `jail`: tasks use the jail's own /tmp, /var/tmp "
            "and /dev/shm.",
     .default_doc = "private",
     .syntax = "private|jail"},
    {.name = "tmp_base",
     .type = KeyType::kCustom,
     .field = ReadTmpBase,
     .doc = "Where private /tmp and /var/tmp directories live on the node: `DIR/<node>/job<id>` "
            "and `DIR/<node>/job<id>.var-tmp`, mode 1777, inside `DIR/<node>` (root's, 0700). "
            "Removed by the plugin's job epilog. DIR must be owned by root and not writable by "
            "group or others, and so must every directory above it (a sticky one such as `/tmp` "
            "is fine); otherwise every step fails with a message naming the directory and the "
            "fix.",
     .default_doc = "/var/lib/k8sbridge/jail-tmp",
     .syntax = "DIR"},
    {.name = "tmp_size",
     .type = KeyType::kCustom,
     .field = ReadTmpSize,
     .doc = "With `tmp=private` and a job namespace, the job's /tmp and /var/tmp are each a "
            "tmpfs of this size (tmpfs's `size=`: `4g`, `512m`, or a percentage of the node's "
            "memory), charged to the memory of the job that writes it, so no job can fill the "
            "node's disk. Without a job namespace they are the directories under `tmp_base` "
            "(put `tmp_base` on a size-limited volume).",
     .default_doc = "25%",
     .syntax = "SIZE"},
    {.name = "probe",
     .type = KeyType::kString,
     .field = At<&Options::probe>,
     .doc = "A file (relative to the jail) that every mounted jail has. Missing means "
            "\"unmounted\".",
     .fix = "expected a path relative to the jail without '..', such as etc/os-release",
     .validate = ProbeError,
     .syntax = "PATH"},
    {.name = "probe_timeout",
     .type = KeyType::kDuration,
     .field = At<&Options::probe_timeout>,
     .doc = "How long the liveness probe waits (`5`, `5s`, `1500ms`; 100 ms to 600 s).",
     .range = Range{kProbeTimeoutMin.count(), kProbeTimeoutMax.count()},
     .fix = "expected a duration between 100ms and 600s, such as 5s or 1500ms",
     .syntax = "DURATION"},
    {.name = "identity",
     .type = KeyType::kCustom,
     .field = ReadWord<&Options::identity, kIdentityWords>,
     .doc = "`files`: the job's uid must be in the jail's `/etc/passwd`, or the task fails with "
            "`spank_jail: error: user NAME (uid N) does not exist in jail DIR`. `none`: the jail "
            "resolves users itself (e.g. sssd inside the jail).",
     .default_doc = "files",
     .syntax = "files|none"},
    {.name = "drain",
     .type = KeyType::kBool,
     .field = At<&Options::drain>,
     .doc = "Drain the node when the jail is broken.",
     .fix = kYesOrNo,
     .syntax = "yes|no"},
    {.name = "namespace",
     .type = KeyType::kCustom,
     .field = ReadWord<&Options::ns, kNamespaceWords>,
     .doc = "`job`: one mount namespace per job and node, set up once by the job's extern step "
            "and joined by every task (needs `PrologFlags=Contain` in slurm.conf; without it, or "
            "when the set-up fails, tasks enter as with `task`). `task`: every task sets up a "
            "namespace of its own. See below.",
     .default_doc = "job",
     .syntax = "job|task"},
    {.name = "allow_root",
     .type = KeyType::kBool,
     .field = At<&Options::allow_root>,
     .doc = "Whether jobs of uid 0 may run. Root in the jail is root in a privileged pod, so by "
            "default every task of a root job is ended before it runs (exit code 213) with "
            "`spank_jail: job N step M runs as root (uid 0): spank_jail refuses root jobs, ...` "
            "in slurmd's log. It is not a node problem: no drain.",
     .fix = kYesOrNo,
     .syntax = "yes|no"},
    {.name = "allow_no_jail",
     .type = KeyType::kBool,
     .field = At<&Options::allow_no_jail>,
     .doc = "Whether a user's `--no-jail` (or its `_SLURM_SPANK_OPTION_spank_jail_no_jail` "
            "variable) is honoured. When it is not, the request is logged and ignored: the step "
            "still enters the jail.",
     .fix = kYesOrNo,
     .syntax = "yes|no"},
};

std::string ValidKeys() {
  std::string keys;
  for (const Key<Options>& key : kOptions)
    keys += fmt::format("{}{}", keys.empty() ? "" : ", ", key.name);
  return keys;
}

// One "key=value" argument into `o`; errors name the argument.
Status ApplyOption(Options& o, std::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument(fmt::format(
        "spank_jail argument '{}' is not key=value (valid keys: {})", arg, ValidKeys()));
  }
  std::string_view name = arg.substr(0, eq);
  std::string_view value = arg.substr(eq + 1);
  const Key<Options>* key = conf::FindKey(OptionTable(), name, conf::KeyCase::kExact);
  if (key == nullptr) {
    return Status::InvalidArgument(
        fmt::format("spank_jail: unknown option '{}' (valid keys: {})", name, ValidKeys()));
  }
  if (Status s = conf::ApplyKey(*key, value, o); !s.ok()) {
    return Status::InvalidArgument(
        fmt::format("spank_jail option {}={}: {}", name, value, s.message()));
  }
  return Status::Ok();
}

}  // namespace

std::span<const Key<Options>> OptionTable() {
  return kOptions;
}

std::string OptionsMarkdown() {
  return conf::KeysMarkdown(OptionTable(), "option");
}

Result<std::string> NormalizeAbsolute(std::string_view path, std::string_view what) {
  if (path.empty() || path.front() != '/') {
    return Status::InvalidArgument(
        fmt::format("{} '{}' is not an absolute path: write it starting with '/'", what, path));
  }
  std::string out;
  for (std::string_view part : Split(path, '/')) {
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      return Status::InvalidArgument(
          fmt::format("{} '{}' contains '..': write the path without it", what, path));
    }
    out += '/';
    out += part;
  }
  return out.empty() ? std::string("/") : out;
}

Result<std::vector<Bind>> ParseBinds(std::string_view text) {
  std::vector<Bind> binds;
  if (text.empty())
    return binds;
  for (std::string_view entry : Split(text, ',')) {
    if (entry.empty())
      continue;
    std::vector<std::string_view> fields = Split(entry, ':');
    bool read_only = false;
    if (fields.size() >= 2 && (fields.back() == "ro" || fields.back() == "rw")) {
      read_only = fields.back() == "ro";
      fields.pop_back();
    }
    if (fields.size() > 2) {
      return Status::InvalidArgument(
          fmt::format("entry '{}' has too many ':' fields: write SRC[:DST][:ro]", entry));
    }
    auto source = NormalizeAbsolute(fields[0], "bind source");
    if (!source.ok())
      return source.status();
    auto target = NormalizeAbsolute(fields.size() == 2 ? fields[1] : fields[0], "bind target");
    if (!target.ok())
      return target.status();
    if (*target == "/") {
      return Status::InvalidArgument(fmt::format(
          "entry '{}' would cover the jail's root: bind to a directory inside it", entry));
    }
    if (*target == "/proc" || target->starts_with("/proc/")) {
      return Status::InvalidArgument(
          fmt::format("entry '{}' targets /proc, which every task gets fresh: remove it", entry));
    }
    binds.push_back(Bind{*source, *target, read_only});
  }
  return binds;
}

Result<milliseconds> ParseDuration(std::string_view value) {
  return text::ParseDuration(value, kProbeTimeoutMin, kProbeTimeoutMax);
}

Result<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  for (const std::string& arg : args) {
    if (Status s = ApplyOption(o, arg); !s.ok())
      return s;
  }
  if (o.jail.empty()) {
    return Status::InvalidArgument(
        "spank_jail: no jail= option: add jail=/path/to/jail to its plugstack.conf line");
  }
  for (const Bind& b : o.binds) {
    if (b.source == o.jail || b.source.starts_with(o.jail + "/")) {
      return Status::InvalidArgument(fmt::format(
          "spank_jail option binds: source {} lies inside the jail {}: bind host paths only",
          b.source, o.jail));
    }
  }
  return o;
}

}  // namespace k8sbridge::jail
