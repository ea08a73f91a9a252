#include "k8sbridge/slurm/constraint.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "k8sbridge/text.h"

namespace k8sbridge::slurm {

namespace {

using Dnf = std::vector<std::vector<std::string>>;

// More alternatives than this come only from a pathological expression such as
// (a|b)&(c|d)&... and would make a pod spec nobody can read.
constexpr size_t kMaxAlternatives = 64;

bool IsOperator(char c) {
  return std::string_view("&|,*[]()").find(c) != std::string_view::npos;
}

class ConstraintParser {
 public:
  explicit ConstraintParser(std::string_view text) : text_(text) {}

  Result<FeatureConstraint> Parse() {
    SkipSpace();
    if (pos_ == text_.size())
      return FeatureConstraint{};
    auto dnf = Or();
    if (!dnf.ok())
      return dnf.status();
    SkipSpace();
    if (pos_ != text_.size())
      return Error("unexpected '" + std::string(1, text_[pos_]) + "'");
    FeatureConstraint out;
    for (auto& alternative : *dnf) {
      std::sort(alternative.begin(), alternative.end());
      alternative.erase(std::unique(alternative.begin(), alternative.end()), alternative.end());
    }
    // An empty alternative (everything in it was dropped) is satisfied by any node,
    // so the whole OR is.
    bool unconstrained = std::any_of(dnf->begin(), dnf->end(), [](auto& a) { return a.empty(); });
    if (!unconstrained) {
      std::sort(dnf->begin(), dnf->end());
      dnf->erase(std::unique(dnf->begin(), dnf->end()), dnf->end());
      out.alternatives = std::move(*dnf);
    }
    out.notes = std::move(notes_);
    return out;
  }

 private:
  Status Error(std::string_view what) const {
    return Status::InvalidArgument(
        fmt::format("constraint '{}': {} at position {}", text_, what, pos_ + 1));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }

  Result<Dnf> Or() {
    auto left = And();
    if (!left.ok())
      return left;
    Dnf out = std::move(*left);
    SkipSpace();
    while (pos_ < text_.size() && text_[pos_] == '|') {
      ++pos_;
      auto right = And();
      if (!right.ok())
        return right;
      out.insert(out.end(), right->begin(), right->end());
      if (out.size() > kMaxAlternatives)
        return Error("too many alternatives");
      SkipSpace();
    }
    return out;
  }

  Result<Dnf> And() {
    auto left = Factor();
    if (!left.ok())
      return left;
    Dnf out = std::move(*left);
    SkipSpace();
    while (pos_ < text_.size() && (text_[pos_] == '&' || text_[pos_] == ',')) {
      ++pos_;
      auto right = Factor();
      if (!right.ok())
        return right;
      Dnf product;
      for (const auto& a : out) {
        for (const auto& b : *right) {
          auto both = a;
          both.insert(both.end(), b.begin(), b.end());
          product.push_back(std::move(both));
        }
      }
      if (product.size() > kMaxAlternatives)
        return Error("too many alternatives");
      out = std::move(product);
      SkipSpace();
    }
    return out;
  }

  Result<Dnf> Factor() {
    SkipSpace();
    if (pos_ == text_.size())
      return Error("a feature name is missing");
    char c = text_[pos_];
    if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      size_t open_at = pos_++;
      auto inner = Or();
      if (!inner.ok())
        return inner;
      SkipSpace();
      if (pos_ == text_.size() || text_[pos_] != close) {
        pos_ = open_at;
        return Error(fmt::format("'{}' is never closed", c));
      }
      ++pos_;
      if (c == '[') {
        notes_.push_back(
            fmt::format("matching OR '{}' is placed as a plain OR: each pod may take a different "
                        "alternative (Slurm still enforces it when it picks nodes)",
                        text_.substr(open_at, pos_ - open_at)));
      }
      return SkipCount(std::move(*inner), open_at);
    }
    if (IsOperator(c))
      return Error(fmt::format("a feature name is missing before '{}'", c));
    size_t start = pos_;
    while (pos_ < text_.size() && !IsOperator(text_[pos_]) &&
           !std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
    std::string name(text_.substr(start, pos_ - start));
    if (name.front() == '!') {
      pos_ = start;
      return Error(fmt::format("'{}': negated features cannot be placed; remove the '!'", name));
    }
    return SkipCount(Dnf{{std::move(name)}}, start);
  }

  // "name*N" or "(...)*N": the count applies to part of the job's nodes only, so
  // the operand constrains no single pod.
  Result<Dnf> SkipCount(Dnf operand, size_t operand_start) {
    SkipSpace();
    if (pos_ >= text_.size() || text_[pos_] != '*')
      return operand;
    ++pos_;
    size_t digits = pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
    if (digits == pos_)
      return Error("'*' must be followed by a node count");
    notes_.push_back(
        fmt::format("'{}' counts nodes, which one pod cannot check: it does not constrain the pod",
                    text_.substr(operand_start, pos_ - operand_start)));
    return Dnf{{}};
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace

Result<FeatureConstraint> ParseConstraint(std::string_view expression) {
  return ConstraintParser(expression).Parse();
}

Result<int> GpusFromGres(std::string_view gres) {
  // Drop "(S:0-1)" socket annotations first: they may hold commas.
  std::string plain;
  int depth = 0;
  for (char c : gres) {
    if (c == '(')
      ++depth;
    if (depth == 0)
      plain.push_back(c);
    if (c == ')' && depth > 0)
      --depth;
  }
  int total = 0;
  size_t start = 0;
  while (start <= plain.size()) {
    size_t comma = plain.find(',', start);
    std::string_view entry = std::string_view(plain).substr(
        start, comma == std::string::npos ? std::string_view::npos : comma - start);
    size_t colon = entry.find(':');
    std::string_view name = entry.substr(0, colon);
    if (name == "gpu") {
      int count = 1;
      if (colon != std::string_view::npos) {
        std::string_view last = entry.substr(entry.rfind(':') + 1);
        auto parsed = text::ParseInt<int>(last);
        bool numeric = parsed.ok();
        if (numeric)
          count = *parsed;
        // "gpu:h100" (a type, no count) means one GPU; "gpu:x" with a count suffix
        // such as "8K" is not a GPU count.
        if (!numeric) {
          bool typed = entry.find(':') == entry.rfind(':') && !last.empty() &&
                       !std::isdigit(static_cast<unsigned char>(last.front()));
          if (!typed) {
            return Status::InvalidArgument(fmt::format(
                "Gres '{}': cannot read a GPU count from '{}'; expected gpu[:type]:count", gres,
                entry));
          }
          count = 1;
        }
        if (count < 0 || count > 1024) {
          return Status::InvalidArgument(
              fmt::format("Gres '{}': GPU count {} is out of range", gres, count));
        }
      }
      total += count;
      if (total > 65536) {
        return Status::InvalidArgument(
            fmt::format("Gres '{}': more than 65536 GPUs on one node is not a real Gres", gres));
      }
    }
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return total;
}

}  // namespace k8sbridge::slurm
