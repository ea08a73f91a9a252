#include "k8sbridge/topology/fabric.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace k8sbridge::topology {

std::string_view NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kSwitch:
      return "switch";
    case NodeKind::kCa:
      return "ca";
    case NodeKind::kRouter:
      return "router";
  }
  return "?";
}

FabricLink MakeLink(uint64_t guid_a, int port_a, uint64_t guid_b, int port_b) {
  if (std::tie(guid_b, port_b) < std::tie(guid_a, port_a)) {
    return FabricLink{guid_b, port_b, guid_a, port_a};
  }
  return FabricLink{guid_a, port_a, guid_b, port_b};
}

Status FabricGraph::AddNode(const FabricNode& node) {
  auto [it, inserted] = nodes_.try_emplace(node.guid, node);
  if (inserted) {
    return Status::Ok();
  }
  FabricNode& known = it->second;
  if (known.kind != node.kind) {
    return Status::InvalidArgument(
        fmt::format("node GUID {:#018x} is a {} in one source and a {} in another; the sources "
                    "describe different fabrics with clashing GUIDs",
                    node.guid, NodeKindName(known.kind), NodeKindName(node.kind)));
  }
  if (known.description.empty()) {
    known.description = node.description;
  }
  known.num_ports = std::max(known.num_ports, node.num_ports);
  return Status::Ok();
}

Status FabricGraph::AddLink(const FabricLink& link) {
  if (!nodes_.contains(link.guid_a) || !nodes_.contains(link.guid_b)) {
    return Status::InvalidArgument(
        fmt::format("link {:#018x}[{}] - {:#018x}[{}] names a node that was never described",
                    link.guid_a, link.port_a, link.guid_b, link.port_b));
  }
  PortKey a{link.guid_a, link.port_a};
  PortKey b{link.guid_b, link.port_b};
  for (const auto& [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
    auto [it, inserted] = peer_.try_emplace(from, to);
    if (!inserted && !(it->second == to)) {
      return Status::InvalidArgument(fmt::format(
          "port {} of node {:016x} is cabled both to {:016x}[{}] and to {:016x}[{}]; expected "
          "each port on one cable (corrupt or mixed-up dump)",
          from.port, from.guid, it->second.guid, it->second.port, to.guid, to.port));
    }
  }
  if (links_.insert(link).second) {
    auto add = [this](uint64_t from, uint64_t to) {
      auto& list = neighbours_[from];
      auto pos = std::lower_bound(list.begin(), list.end(), to);
      if (pos == list.end() || *pos != to) {
        list.insert(pos, to);
      }
    };
    add(link.guid_a, link.guid_b);
    add(link.guid_b, link.guid_a);
  }
  return Status::Ok();
}

Status FabricGraph::Merge(const FabricGraph& other) {
  for (const auto& [guid, node] : other.nodes_) {
    if (Status s = AddNode(node); !s.ok()) {
      return s;
    }
  }
  for (const FabricLink& link : other.links()) {
    if (Status s = AddLink(link); !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

void FabricGraph::Reserve(size_t nodes, size_t links) {
  nodes_.reserve(nodes);
  neighbours_.reserve(nodes);
  links_.reserve(links);
  peer_.reserve(2 * links);
}

std::vector<FabricLink> FabricGraph::links() const {
  std::vector<FabricLink> out(links_.begin(), links_.end());
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<uint64_t>& FabricGraph::Neighbours(uint64_t guid) const {
  static const std::vector<uint64_t> kNone;
  auto it = neighbours_.find(guid);
  return it == neighbours_.end() ? kNone : it->second;
}

std::string FabricGraph::CanonicalDump() const {
  std::string out;
  std::map<uint64_t, const FabricNode*> sorted;
  for (const auto& [guid, node] : nodes_) {
    sorted.emplace(guid, &node);
  }
  for (const auto& [guid, node_ptr] : sorted) {
    const FabricNode& node = *node_ptr;
    out += fmt::format("node {:016x} {} ports={} desc=\"{}\"\n", guid, NodeKindName(node.kind),
                       node.num_ports, node.description);
  }
  for (const FabricLink& link : links()) {
    out += fmt::format("link {:016x}[{}] {:016x}[{}]\n", link.guid_a, link.port_a, link.guid_b,
                       link.port_b);
  }
  return out;
}

// ---- ibnetdiscover text ------------------------------------------------------

namespace {

// A cursor over one line; every Expect* either consumes what it names or leaves an
// error describing what was expected at which column.
class LineCursor {
 public:
  explicit LineCursor(std::string_view line) : line_(line) {}

  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return AtEnd() ? '\0' : line_[pos_]; }
  size_t column() const { return pos_ + 1; }
  std::string_view Rest() const { return line_.substr(std::min(pos_, line_.size())); }

  void SkipSpace() {
    while (!AtEnd() && (line_[pos_] == ' ' || line_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (Peek() != c) {
      return false;
    }
    ++pos_;
    return true;
  }
  bool ConsumeWord(std::string_view word) {
    if (line_.substr(pos_).starts_with(word)) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  std::optional<uint64_t> Number(int base, int max_digits) {
    size_t start = pos_;
    auto is_digit = [base](char c) {
      return base == 16 ? std::isxdigit(static_cast<unsigned char>(c)) != 0
                        : (c >= '0' && c <= '9');
    };
    while (!AtEnd() && is_digit(line_[pos_]) && static_cast<int>(pos_ - start) < max_digits + 1) {
      ++pos_;
    }
    size_t len = pos_ - start;
    if (len == 0 || static_cast<int>(len) > max_digits) {
      pos_ = start;
      return std::nullopt;
    }
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(line_.data() + start, line_.data() + pos_, value, base);
    if (ec != std::errc() || ptr != line_.data() + pos_) {
      pos_ = start;
      return std::nullopt;
    }
    return value;
  }

 private:
  std::string_view line_;
  size_t pos_ = 0;
};

struct NodeId {
  NodeKind kind;
  uint64_t guid;
};

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Result<FabricGraph> Run(std::string_view text) {
    // ibnetdiscover spends roughly 150 bytes per node record and 60 per port line.
    graph_.Reserve(text.size() / 150 + 16, text.size() / 120 + 16);
    pending_.reserve(text.size() / 60 + 16);
    size_t line_start = 0;
    while (line_start < text.size()) {
      size_t end = text.find('\n', line_start);
      if (end == std::string_view::npos) {
        end = text.size();
      }
      std::string_view line = text.substr(line_start, end - line_start);
      if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
      }
      ++line_no_;
      if (Status s = ParseLine(line); !s.ok()) {
        return s;
      }
      line_start = end + 1;
    }
    if (Status s = EndRecord(); !s.ok()) {
      return s;
    }
    // Every cable must lead to a node the dump describes; a dump cut short
    // leaves cables into nodes that never appear.
    for (const auto& pending : pending_) {
      if (!graph_.nodes().contains(pending.link.guid_a) ||
          !graph_.nodes().contains(pending.link.guid_b)) {
        uint64_t missing = graph_.nodes().contains(pending.link.guid_a) ? pending.link.guid_b
                                                                        : pending.link.guid_a;
        return Status::InvalidArgument(fmt::format(
            "{}:{}: port line links to node {:016x}, which the file never describes; expected a "
            "complete ibnetdiscover dump (is the file truncated?)",
            source_, pending.line, missing));
      }
      if (Status s = graph_.AddLink(pending.link); !s.ok()) {
        return s.WithContext(fmt::format("{}:{}", source_, pending.line));
      }
    }
    if (Status s = CheckRemoteKinds(); !s.ok()) {
      return s;
    }
    if (graph_.nodes().empty()) {
      return Status::InvalidArgument(fmt::format(
          "{}: no Switch or Ca records found; expected the text output of `ibnetdiscover`",
          source_));
    }
    return std::move(graph_);
  }

 private:
  struct PendingLink {
    FabricLink link;
    int line;
  };

  Status Error(const LineCursor& cursor, std::string_view expected) const {
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: expected {}", source_, line_no_, cursor.column(), expected));
  }

  Status ParseLine(std::string_view line) {
    LineCursor cursor(line);
    cursor.SkipSpace();
    if (cursor.AtEnd()) {
      return EndRecord();  // a blank line ends a node record
    }
    if (cursor.Peek() == '#') {
      return Status::Ok();
    }
    if (cursor.Peek() == '[') {
      return ParsePortLine(cursor);
    }
    for (auto [word, kind] : {std::pair{"Switch", NodeKind::kSwitch},
                              std::pair{"Ca", NodeKind::kCa}, std::pair{"Rt", NodeKind::kRouter}}) {
      LineCursor probe = cursor;
      if (probe.ConsumeWord(word) && (probe.Peek() == ' ' || probe.Peek() == '\t')) {
        return ParseHeader(probe, kind);
      }
    }
    // key=value lines (vendid=, devid=, sysimgguid=, switchguid=, caguid=, rtguid=).
    std::string_view rest = cursor.Rest();
    size_t eq = rest.find('=');
    if (eq != std::string_view::npos && eq > 0 &&
        std::all_of(rest.begin(), rest.begin() + eq,
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; })) {
      return Status::Ok();
    }
    return Error(cursor,
                 "a node header (Switch/Ca/Rt <ports> \"<id>\"), a port line ([<port>] ...), a "
                 "key=value line or a # comment");
  }

  // `"S-0002c90200400b1c"`: the node kind letter and the node GUID.
  std::optional<NodeId> ParseId(LineCursor& cursor) {
    if (!cursor.Consume('"')) {
      return std::nullopt;
    }
    NodeKind kind;
    if (cursor.Consume('S')) {
      kind = NodeKind::kSwitch;
    } else if (cursor.Consume('H')) {
      kind = NodeKind::kCa;
    } else if (cursor.Consume('R')) {
      kind = NodeKind::kRouter;
    } else {
      return std::nullopt;
    }
    if (!cursor.Consume('-')) {
      return std::nullopt;
    }
    auto guid = cursor.Number(16, 16);
    if (!guid || !cursor.Consume('"')) {
      return std::nullopt;
    }
    return NodeId{kind, *guid};
  }

  std::optional<int> ParsePortNumber(LineCursor& cursor) {
    if (!cursor.Consume('[')) {
      return std::nullopt;
    }
    auto port = cursor.Number(10, 3);
    if (!port || *port > 255 || !cursor.Consume(']')) {
      return std::nullopt;
    }
    // Optional external (front-panel) port number: "[ext 5]".
    LineCursor probe = cursor;
    if (probe.ConsumeWord("[ext ") && probe.Number(10, 3) && probe.Consume(']')) {
      cursor = probe;
    }
    return static_cast<int>(*port);
  }

  // Optional "(portguid)" right after a port number.
  bool SkipPortGuid(LineCursor& cursor) {
    if (cursor.Peek() != '(') {
      return true;
    }
    cursor.Consume('(');
    return cursor.Number(16, 16) && cursor.Consume(')');
  }

  // ibnetdiscover finds nodes only through cables, so every record lists at least
  // one port; a record without any is where a truncated file stops.
  Status EndRecord() {
    if (current_ && current_ports_ == 0) {
      return Status::InvalidArgument(fmt::format(
          "{}:{}: node {:016x} has no port lines; expected at least one \"[port] ...\" line "
          "after its header (is the file truncated?)",
          source_, current_line_, current_->guid));
    }
    current_.reset();
    return Status::Ok();
  }

  Status ParseHeader(LineCursor& cursor, NodeKind kind) {
    if (Status s = EndRecord(); !s.ok()) {
      return s;
    }
    cursor.SkipSpace();
    LineCursor probe = cursor;
    auto ports = probe.Number(10, 3);
    if (!ports || *ports == 0 || *ports > 255) {
      return Error(cursor, "the number of ports (1-255) after the node type");
    }
    cursor = probe;
    cursor.SkipSpace();
    probe = cursor;
    auto id = ParseId(probe);
    if (!id) {
      return Error(cursor, "a quoted node id such as \"S-0002c90200400b1c\" or \"H-...\"");
    }
    cursor = probe;
    if (id->kind != kind) {
      return Error(cursor,
                   "a node id whose letter matches the record type (S- for Switch, H- for "
                   "Ca, R- for Rt)");
    }
    FabricNode node{id->guid, kind, static_cast<int>(*ports), ""};
    cursor.SkipSpace();
    if (!cursor.AtEnd()) {
      if (!cursor.Consume('#')) {
        return Error(cursor, "end of line or a # \"<node description>\" comment");
      }
      std::string_view comment = cursor.Rest();
      size_t open = comment.find('"');
      size_t close = comment.rfind('"');
      if (open == std::string_view::npos) {
        return Error(cursor, "a quoted node description after #");
      }
      if (close == open) {
        return Error(cursor, "a closing quote after the node description");
      }
      node.description = std::string(comment.substr(open + 1, close - open - 1));
    }
    if (Status s = graph_.AddNode(node); !s.ok()) {
      return s.WithContext(fmt::format("{}:{}", source_, line_no_));
    }
    current_ = node;
    current_line_ = line_no_;
    current_ports_ = 0;
    return Status::Ok();
  }

  Status ParsePortLine(LineCursor& cursor) {
    if (!current_) {
      return Error(cursor, "a node header (Switch/Ca/Rt line) before the first port line");
    }
    LineCursor probe = cursor;
    auto local_port = ParsePortNumber(probe);
    if (!local_port) {
      return Error(cursor, "a local port number in brackets, e.g. [3]");
    }
    cursor = probe;
    if (*local_port > current_->num_ports) {
      return Error(cursor, fmt::format("a port number at most {}, the node's port count",
                                       current_->num_ports));
    }
    probe = cursor;
    if (!SkipPortGuid(probe)) {
      return Error(cursor, "a port GUID in parentheses, e.g. (0002c90200400b1d)");
    }
    cursor = probe;
    cursor.SkipSpace();
    probe = cursor;
    auto remote = ParseId(probe);
    if (!remote) {
      return Error(cursor, "the quoted id of the remote node, e.g. \"S-0002c90200400b1c\"");
    }
    cursor = probe;
    auto remote_port = ParsePortNumber(probe);
    if (!remote_port || *remote_port == 0) {
      return Error(cursor, "the remote port number in brackets, e.g. [17]");
    }
    cursor = probe;
    if (!SkipPortGuid(probe)) {
      return Error(cursor, "a port GUID in parentheses, e.g. (0002c90200400b1d)");
    }
    cursor = probe;
    cursor.SkipSpace();
    if (!cursor.AtEnd() && cursor.Peek() != '#') {
      return Error(cursor, "end of line or a # comment after the remote port");
    }
    if (remote->guid == current_->guid && remote->kind == current_->kind &&
        *remote_port == *local_port) {
      return Error(cursor, "a remote end other than the port itself");
    }
    // The remote node's kind is checked when both are known: a clash is an error
    // from AddNode.
    ++current_ports_;
    pending_.push_back(
        {MakeLink(current_->guid, *local_port, remote->guid, *remote_port), line_no_});
    remote_kinds_.emplace_back(remote->guid, remote->kind, line_no_);
    return Status::Ok();
  }

  std::string_view source_;
  int line_no_ = 0;
  std::optional<FabricNode> current_;
  int current_line_ = 0;
  int current_ports_ = 0;
  FabricGraph graph_;
  std::vector<PendingLink> pending_;
  std::vector<std::tuple<uint64_t, NodeKind, int>> remote_kinds_;

 public:
  // Cross-checks the kind letter of every remote id against the node's header.
  Status CheckRemoteKinds() const {
    for (const auto& [guid, kind, line] : remote_kinds_) {
      auto it = graph_.nodes().find(guid);
      if (it != graph_.nodes().end() && it->second.kind != kind) {
        return Status::InvalidArgument(fmt::format(
            "{}:{}: port line names node {:016x} as a {}, but its record says {}; expected "
            "matching id letters (S-, H-, R-)",
            source_, line, guid, NodeKindName(kind), NodeKindName(it->second.kind)));
      }
    }
    return Status::Ok();
  }
};

}  // namespace

Result<FabricGraph> ParseIbnetdiscover(std::string_view text, std::string_view source) {
  Parser parser(source);
  return parser.Run(text);
}

}  // namespace k8sbridge::topology
