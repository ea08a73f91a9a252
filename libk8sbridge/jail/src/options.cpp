#include "k8sbridge/jail/options.h"

#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "k8sbridge/conf/conf_file.h"
#include "k8sbridge/text.h"

namespace k8sbridge::jail {
namespace {

constexpr std::string_view kValidKeys =
    "jail, binds, tmp, tmp_base, probe, probe_timeout, identity, drain, allow_no_jail, "
    "allow_root, namespace";

using text::Split;

Result<bool> ParseBool(std::string_view key, std::string_view value) {
  auto b = conf::ParseBool(std::string(value));
  if (!b.ok()) {
    return Status::InvalidArgument(
        fmt::format("spank_jail option {}={}: expected yes or no", key, value));
  }
  return b;
}

}  // namespace

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
      return Status::InvalidArgument(fmt::format(
          "spank_jail option binds: entry '{}' has too many ':' fields: write SRC[:DST][:ro]",
          entry));
    }
    auto source = NormalizeAbsolute(fields[0], "spank_jail binds source");
    if (!source.ok())
      return source.status();
    auto target =
        NormalizeAbsolute(fields.size() == 2 ? fields[1] : fields[0], "spank_jail binds target");
    if (!target.ok())
      return target.status();
    if (*target == "/") {
      return Status::InvalidArgument(fmt::format(
          "spank_jail option binds: entry '{}' would cover the jail's root: bind to a directory "
          "inside it",
          entry));
    }
    if (*target == "/proc" || target->starts_with("/proc/")) {
      return Status::InvalidArgument(fmt::format(
          "spank_jail option binds: entry '{}' targets /proc, which every task gets fresh: "
          "remove it",
          entry));
    }
    binds.push_back(Bind{*source, *target, read_only});
  }
  return binds;
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view value) {
  // Any duration reads here, so that the range check below names the probe's limits.
  auto d =
      text::ParseDuration(value, std::chrono::milliseconds(0), std::chrono::milliseconds::max());
  if (!d.ok()) {
    return Status::InvalidArgument(fmt::format(
        "spank_jail option probe_timeout={}: expected a duration such as 5s or 1500ms", value));
  }
  if (*d < std::chrono::milliseconds(100) || *d > std::chrono::minutes(10)) {
    return Status::InvalidArgument(
        fmt::format("spank_jail option probe_timeout={}: must be between 100ms and 600s", value));
  }
  return *d;
}

// One of a few words, each meaning one value of E.
template <typename E>
Status ParseChoice(std::string_view key, std::string_view value,
                   std::initializer_list<std::pair<std::string_view, E>> choices,
                   std::string_view expected, E* out) {
  for (const auto& [word, meaning] : choices) {
    if (value == word) {
      *out = meaning;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(
      fmt::format("spank_jail option {}={}: expected {}", key, value, expected));
}

// One "key=value" argument into `o`.
Status ApplyOption(Options* options, std::string_view key, std::string_view value,
                   bool* have_jail) {
  Options& o = *options;
  static constexpr std::pair<std::string_view, bool Options::*> kBools[] = {
      {"drain", &Options::drain},
      {"allow_no_jail", &Options::allow_no_jail},
      {"allow_root", &Options::allow_root}};
  for (const auto& [name, field] : kBools) {
    if (key != name)
      continue;
    auto b = ParseBool(key, value);
    if (!b.ok())
      return b.status();
    o.*field = *b;
    return Status::Ok();
  }
  if (key == "jail") {
    auto path = NormalizeAbsolute(value, "spank_jail option jail");
    if (!path.ok())
      return path.status();
    if (*path == "/") {
      return Status::InvalidArgument(
          "spank_jail option jail=/ is the host root: point it at the jail directory");
    }
    o.jail = *path;
    *have_jail = true;
  } else if (key == "binds") {
    auto binds = ParseBinds(value);
    if (!binds.ok())
      return binds.status();
    o.binds.insert(o.binds.end(), binds->begin(), binds->end());
  } else if (key == "tmp") {
    return ParseChoice(key, value, {{"private", TmpMode::kPrivate}, {"jail", TmpMode::kJail}},
                       "private or jail", &o.tmp);
  } else if (key == "tmp_base") {
    auto path = NormalizeAbsolute(value, "spank_jail option tmp_base");
    if (!path.ok())
      return path.status();
    if (*path == "/" || *path == "/tmp") {
      return Status::InvalidArgument(
          fmt::format("spank_jail option tmp_base={}: use a directory only root writes to, such as "
                      "/var/lib/k8sbridge/jail-tmp",
                      value));
    }
    o.tmp_base = *path;
  } else if (key == "probe") {
    if (value.empty() || value.front() == '/' || value.find("..") != std::string_view::npos) {
      return Status::InvalidArgument(fmt::format(
          "spank_jail option probe={}: expected a path relative to the jail without '..', "
          "such as etc/os-release",
          value));
    }
    o.probe = std::string(value);
  } else if (key == "probe_timeout") {
    auto d = ParseDuration(value);
    if (!d.ok())
      return d.status();
    o.probe_timeout = *d;
  } else if (key == "identity") {
    return ParseChoice(key, value,
                       {{"files", IdentityCheck::kFiles}, {"none", IdentityCheck::kNone}},
                       "files or none", &o.identity);
  } else if (key == "namespace") {
    return ParseChoice(key, value, {{"job", NamespaceMode::kJob}, {"task", NamespaceMode::kTask}},
                       "job or task", &o.ns);
  } else {
    return Status::InvalidArgument(
        fmt::format("spank_jail: unknown option '{}' (valid keys: {})", key, kValidKeys));
  }
  return Status::Ok();
}

Result<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  bool have_jail = false;
  for (const std::string& arg : args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return Status::InvalidArgument(fmt::format(
          "spank_jail argument '{}' is not key=value (valid keys: {})", arg, kValidKeys));
    }
    std::string_view key = std::string_view(arg).substr(0, eq);
    std::string_view value = std::string_view(arg).substr(eq + 1);
    if (Status s = ApplyOption(&o, key, value, &have_jail); !s.ok())
      return s;
  }
  if (!have_jail) {
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
