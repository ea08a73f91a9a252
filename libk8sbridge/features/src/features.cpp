#include "k8sbridge/features/features.h"

#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "k8sbridge/slurm/constraint.h"
#include "k8sbridge/text.h"

namespace k8sbridge::features {

namespace {

using text::Contains;

bool IsAsciiAlpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsAsciiDigit(char c) {
  return c >= '0' && c <= '9';
}

// One label key's requirements collected from several selectors.
struct KeyDemand {
  std::optional<std::string> equals;  // In
  std::set<std::string> not_equals;   // NotIn
  bool exists = false, absent = false;
};

// Whether the selectors of `features` (changeable ones only) can hold on one node;
// if not, why.
std::optional<std::string> SelectorConflict(const conf::BridgeConfig& config,
                                            const std::vector<std::string>& features) {
  std::map<std::string, KeyDemand> demands;
  std::map<std::string, std::string> who;  // key -> feature that constrained it first
  for (const std::string& f : features) {
    const conf::FeatureMapping* m = config.MappingOf(f);
    if (!m)
      continue;
    for (const conf::LabelRequirement& r : m->selector) {
      KeyDemand& d = demands[r.key];
      auto [it, first] = who.emplace(r.key, f);
      const std::string& other = it->second;
      auto conflict = [&] {
        return fmt::format("'{}' and '{}' need different values of node label {}", other, f, r.key);
      };
      switch (r.op) {
        case conf::LabelRequirement::Op::kIn:
          if ((d.equals && *d.equals != r.value) || d.not_equals.count(r.value) || d.absent)
            return conflict();
          d.equals = r.value;
          break;
        case conf::LabelRequirement::Op::kNotIn:
          if (d.equals && *d.equals == r.value)
            return conflict();
          d.not_equals.insert(r.value);
          break;
        case conf::LabelRequirement::Op::kExists:
          if (d.absent)
            return conflict();
          d.exists = true;
          break;
        case conf::LabelRequirement::Op::kDoesNotExist:
          if (d.exists || d.equals)
            return conflict();
          d.absent = true;
          break;
      }
    }
  }
  return std::nullopt;
}

// The names in a constraint expression, without operators and counts.
std::vector<std::string> ConstraintNames(std::string_view expression) {
  std::vector<std::string> names;
  std::string current;
  bool after_star = false;
  for (char c : expression) {
    if (std::string_view("&|,*[]()!: \t").find(c) != std::string_view::npos) {
      if (!current.empty() && !after_star)
        names.push_back(current);
      current.clear();
      after_star = c == '*';
      continue;
    }
    current += c;
  }
  if (!current.empty() && !after_star)
    names.push_back(current);
  return names;
}

}  // namespace

bool IsPassThroughFeatureName(std::string_view name) {
  if (name.empty() || !(IsAsciiAlpha(name[0]) || name[0] == '_'))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return IsAsciiAlpha(c) || IsAsciiDigit(c) || c == '_' || c == '.' || c == '-';
  });
}

bool SelectorMatches(const std::vector<conf::LabelRequirement>& selector, const Labels& labels) {
  for (const conf::LabelRequirement& r : selector) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    switch (r.op) {
      case conf::LabelRequirement::Op::kIn:
        if (!has || it->second != r.value)
          return false;
        break;
      case conf::LabelRequirement::Op::kNotIn:
        if (has && it->second == r.value)
          return false;
        break;
      case conf::LabelRequirement::Op::kExists:
        if (!has)
          return false;
        break;
      case conf::LabelRequirement::Op::kDoesNotExist:
        if (has)
          return false;
        break;
    }
  }
  return true;
}

std::vector<std::string> NodeFeatures::All() const {
  std::vector<std::string> all;
  for (const auto* list : {&mapped, &passthrough}) {
    for (const std::string& f : *list) {
      if (!Contains(all, f))
        all.push_back(f);
    }
  }
  return all;
}

NodeFeatures FeaturesFromLabels(const conf::BridgeConfig& config, const Labels& labels) {
  NodeFeatures out;
  for (const conf::FeatureMapping& m : config.features) {
    if (SelectorMatches(m.selector, labels))
      out.mapped.push_back(m.feature);
  }
  const std::string& prefix = config.node_features.label_prefix;
  if (prefix.empty())
    return out;
  for (auto it = labels.lower_bound(prefix); it != labels.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, prefix.size(), prefix) != 0)
      break;
    std::string name = key.substr(prefix.size());
    if (it->second != "true") {
      // NFD also publishes values ("...cpu-model.vendor_id=Intel"); only booleans are
      // features, as in power_k8s's pass-through.
      out.skipped.push_back(
          fmt::format("{}={}: only the value \"true\" makes a feature", key, it->second));
    } else if (!IsPassThroughFeatureName(name)) {
      out.skipped.push_back(fmt::format(
          "{}={}: '{}' is not a usable Slurm feature name (a letter or '_' first, then letters, "
          "digits, '_', '.', '-')",
          key, it->second, name));
    } else if (config.MappingOf(name)) {
      // A Feature= line owns this name; the prefix label must not make it active.
      out.skipped.push_back(
          fmt::format("{}={}: '{}' is mapped by a Feature= line, whose Selector decides", key,
                      it->second, name));
    } else {
      out.passthrough.push_back(std::move(name));
    }
  }
  std::sort(out.passthrough.begin(), out.passthrough.end());
  return out;
}

std::string SelectorText(const std::vector<conf::LabelRequirement>& selector) {
  std::string out;
  for (const conf::LabelRequirement& r : selector) {
    if (!out.empty())
      out += ',';
    switch (r.op) {
      case conf::LabelRequirement::Op::kIn:
        out += r.key + "=" + r.value;
        break;
      case conf::LabelRequirement::Op::kNotIn:
        out += r.key + "!=" + r.value;
        break;
      case conf::LabelRequirement::Op::kExists:
        out += r.key;
        break;
      case conf::LabelRequirement::Op::kDoesNotExist:
        out += "!" + r.key;
        break;
    }
  }
  return out;
}

bool IsChangeable(const conf::BridgeConfig& config, std::string_view feature) {
  return config.MappingOf(feature) != nullptr;
}

bool AnyChangeable(const conf::BridgeConfig& config, std::string_view features) {
  auto parsed = slurm::ParseConstraint(features);
  if (!parsed.ok())
    return true;
  for (const auto& alternative : parsed->alternatives) {
    for (const std::string& f : alternative) {
      if (IsChangeable(config, f))
        return true;
    }
  }
  return false;
}

std::vector<std::string> SplitFeatures(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos)
      comma = list.size();
    if (comma > start)
      out.emplace_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string JoinFeatures(const std::vector<std::string>& features) {
  std::vector<std::string> seen;
  std::string out;
  for (const std::string& f : features) {
    if (f.empty() || Contains(seen, f))
      continue;
    seen.push_back(f);
    if (!out.empty())
      out += ',';
    out += f;
  }
  return out;
}

std::string MergeNodeFeatures(std::string_view new_features, std::string_view orig_features,
                              const std::function<bool(std::string_view)>& is_changeable) {
  if (new_features.empty())
    return std::string(orig_features);
  if (orig_features.empty())
    return JoinFeatures(SplitFeatures(new_features));
  std::vector<std::string> merged = SplitFeatures(new_features);
  for (std::string& f : SplitFeatures(orig_features)) {
    if (!is_changeable(f))
      merged.push_back(std::move(f));
  }
  return JoinFeatures(merged);
}

Status ValidateJobFeatures(const conf::BridgeConfig& config, std::string_view job_features) {
  if (job_features.empty())
    return Status::Ok();
  std::vector<std::string> changeable;
  for (const std::string& name : ConstraintNames(job_features)) {
    if (IsChangeable(config, name) && !Contains(changeable, name))
      changeable.push_back(name);
  }
  if (changeable.empty())
    return Status::Ok();
  if (job_features.find_first_of("[]*") != std::string_view::npos) {
    return Status::InvalidArgument(fmt::format(
        "constraint \"{}\": Kubernetes-placed features ({}) cannot take a count (*N) or a "
        "matching OR ([a|b]), because each node's pod is placed on its own: use a|b or "
        "separate jobs",
        job_features, JoinFeatures(changeable)));
  }
  auto parsed = slurm::ParseConstraint(job_features);
  if (!parsed.ok())
    return parsed.status().WithContext(fmt::format("constraint \"{}\"", job_features));
  std::string why;
  for (const auto& alternative : parsed->alternatives) {
    auto conflict = SelectorConflict(config, alternative);
    if (!conflict)
      return Status::Ok();
    if (why.empty())
      why = *conflict;
  }
  return Status::InvalidArgument(fmt::format(
      "constraint \"{}\" can never be met: {}, so no Kubernetes node has both; ask for one of "
      "them (a|b)",
      job_features, why));
}

std::string BootFeatures(const conf::BridgeConfig& config, std::string_view job_features) {
  if (job_features.empty())
    return "";
  auto parsed = slurm::ParseConstraint(job_features);
  if (!parsed.ok())
    return "";
  for (const auto& alternative : parsed->alternatives) {
    if (SelectorConflict(config, alternative))
      continue;
    std::vector<std::string> boot;
    for (const std::string& f : alternative) {
      if (IsChangeable(config, f))
        boot.push_back(f);
    }
    return JoinFeatures(boot);
  }
  return "";
}

FeatureUpdate RelabelUpdate(const conf::BridgeConfig& config, const Labels& old_labels,
                            const Labels& new_labels, std::string_view available,
                            std::string_view active) {
  return ReplaceLabelFeatures(FeaturesFromLabels(config, old_labels).All(),
                              FeaturesFromLabels(config, new_labels).All(), available, active);
}

FeatureUpdate ReplaceLabelFeatures(const std::vector<std::string>& before,
                                   const std::vector<std::string>& after,
                                   std::string_view available, std::string_view active) {
  auto apply = [&](std::string_view current) {
    std::vector<std::string> out = after;
    for (std::string& f : SplitFeatures(current)) {
      if (!Contains(before, f) || Contains(after, f))
        out.push_back(std::move(f));
    }
    return JoinFeatures(out);
  };
  FeatureUpdate u;
  u.available = apply(available);
  u.active = apply(active);
  auto same = [](std::string_view a, std::string_view b) {
    std::vector<std::string> x = SplitFeatures(a), y = SplitFeatures(b);
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    x.erase(std::unique(x.begin(), x.end()), x.end());
    y.erase(std::unique(y.begin(), y.end()), y.end());
    return x == y;
  };
  u.changed = !same(u.available, available) || !same(u.active, active);
  return u;
}

}  // namespace k8sbridge::features
