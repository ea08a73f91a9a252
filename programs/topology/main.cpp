// k8sbridge-topology: discovers the InfiniBand fabric (ibnetdiscover dumps, a live
// scan through libibnetdisc, or Kubernetes node labels), renders topology.conf /
// topology.yaml, writes it atomically and runs `scontrol reconfigure` only when the
// switch hierarchy changed. Slurm's own topology/tree (or topology/block) plugin
// then places jobs. docs/topology.md says why this is a program and not a plugin.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "k8sbridge/hostlist.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/text.h"
#include "k8sbridge/topology/fabric.h"
#include "k8sbridge/topology/live.h"
#include "k8sbridge/topology/model.h"
#include "k8sbridge/topology/refresh.h"

namespace topo = k8sbridge::topology;
using k8sbridge::AnswerHelpOrVersion;
using k8sbridge::Status;

namespace {

constexpr std::string_view kUsage = R"(usage: k8sbridge-topology [options]
       k8sbridge-topology --help | --version

Fabric sources (at least one; several are merged by GUID, separate fabrics stay separate):
  --ibnetdiscover FILE     an `ibnetdiscover` text dump (repeatable)
  --live[=CA[:PORT]]       scan the fabric behind a local HCA port with libibnetdisc
                           (repeatable, one per fabric)
  --labels FILE            `kubectl get nodes -o json` output with tiered topology labels
                           (instead of a fabric)

Host mapping and model:
  --host-regex RE          node description -> Slurm node name, one capture group
                           (default: the first word, "w-0 mlx5_0" -> w-0)
  --nodes HOSTLIST         all Slurm nodes; those without an HCA are CPU-only
  --cpu-only-regex RE      Slurm nodes that are CPU-only even with an HCA
  --cpu-only own-root|exclude   where CPU-only nodes go (default own-root)
  --cpu-only-switch NAME   the CPU-only root's name (default cpu-only)
  --switch-prefix P        generated switch names start with P (default ib)
  --label-prefix P         label prefix (default network.topology.nvidia.com/)
  --label-tiers a,b,c      tier label names from the leaf up (default leaf,spine,core)

Output:
  --format tree|block|yaml topology.conf tree form (default), block form, or 25.05 topology.yaml
  --output PATH            write here atomically (default: stdout, no refresh logic)
  --state PATH             where hosts' last known switches are kept (default PATH.state)
  --no-reconfigure         Slurm is not running yet (e.g. before slurmctld starts)
  --scontrol PATH          scontrol to run for reconfigure (default scontrol)
  --dump-graph PATH        also write the canonical fabric graph ("-" = stdout)
  -v, --verbose            debug logging

Exit status: 0 ok, 1 bad input or discovery failure (the old file stays), 2 reconfigure failed.
)";

struct Args {
  std::vector<std::string> dumps;
  std::vector<std::string> live;
  std::string labels;
  std::string format = "tree";
  std::string output;
  std::string state;
  std::string scontrol = "scontrol";
  std::string dump_graph;
  std::string nodes;
  std::string label_prefix = "network.topology.nvidia.com/";
  std::string label_tiers = "leaf,spine,core";
  bool reconfigure = true;
  bool verbose = false;
  topo::BuildOptions build;
};

// The options that only set a string of Args; nullptr for any other.
std::string* StringOption(Args& args, std::string_view arg) {
  const std::pair<std::string_view, std::string*> options[] = {
      {"--labels", &args.labels},
      {"--format", &args.format},
      {"--output", &args.output},
      {"--state", &args.state},
      {"--scontrol", &args.scontrol},
      {"--dump-graph", &args.dump_graph},
      {"--host-regex", &args.build.host_regex},
      {"--nodes", &args.nodes},
      {"--cpu-only-regex", &args.build.cpu_only_regex},
      {"--cpu-only-switch", &args.build.cpu_only_switch},
      {"--switch-prefix", &args.build.switch_prefix},
      {"--label-prefix", &args.label_prefix},
      {"--label-tiers", &args.label_tiers},
  };
  for (const auto& [name, field] : options) {
    if (arg == name)
      return field;
  }
  return nullptr;
}

// What the options say together: a known format, and one kind of source.
Status CheckArgs(const Args& args) {
  if (args.format != "tree" && args.format != "block" && args.format != "yaml") {
    return Status::InvalidArgument(
        fmt::format("--format {}: expected tree, block or yaml", args.format));
  }
  if (args.dumps.empty() && args.live.empty() && args.labels.empty()) {
    return Status::InvalidArgument(
        "no fabric source: give --ibnetdiscover FILE, --live or --labels FILE");
  }
  if (!args.labels.empty() && (!args.dumps.empty() || !args.live.empty())) {
    return Status::InvalidArgument("--labels cannot be combined with fabric sources");
  }
  return Status::Ok();
}

Status ParseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_inline = false;
    if (arg.starts_with("--") && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      has_inline = true;
    }
    auto next = [&](std::string& out) -> Status {
      if (has_inline) {
        out = value;
        return Status::Ok();
      }
      if (i + 1 >= argc) {
        return Status::InvalidArgument(fmt::format("{} needs a value; see --help", arg));
      }
      out = argv[++i];
      return Status::Ok();
    };
    Status s;
    std::string tmp;
    if (std::string* field = StringOption(args, arg)) {
      s = next(*field);
    } else if (arg == "--ibnetdiscover") {
      s = next(tmp);
      args.dumps.push_back(tmp);
    } else if (arg == "--live") {
      args.live.push_back(has_inline ? value : "");
    } else if (arg == "--cpu-only") {
      s = next(tmp);
      if (tmp == "own-root") {
        args.build.cpu_only = topo::CpuOnlyPolicy::kOwnRoot;
      } else if (tmp == "exclude") {
        args.build.cpu_only = topo::CpuOnlyPolicy::kExclude;
      } else if (s.ok()) {
        s = Status::InvalidArgument(
            fmt::format("--cpu-only {}: expected own-root or exclude", tmp));
      }
    } else if (arg == "--no-reconfigure") {
      args.reconfigure = false;
    } else if (arg == "-v" || arg == "--verbose") {
      args.verbose = true;
    } else {
      s = Status::InvalidArgument(fmt::format("unknown option {}; see --help", argv[i]));
    }
    if (!s.ok()) {
      return s;
    }
  }
  return CheckArgs(args);
}

Status LoadFabric(const Args& args, topo::FabricGraph& graph) {
  for (const std::string& path : args.dumps) {
    auto text = topo::ReadFile(path);
    if (!text.ok()) {
      return text.status();
    }
    auto parsed = topo::ParseIbnetdiscover(*text, path);
    if (!parsed.ok()) {
      return parsed.status();
    }
    if (Status s = graph.Merge(*parsed); !s.ok()) {
      return s.WithContext(path);
    }
  }
  for (const std::string& spec : args.live) {
    topo::LiveOptions live;
    size_t colon = spec.find(':');
    live.ca_name = spec.substr(0, colon);
    if (colon != std::string::npos) {
      auto port = k8sbridge::text::ParseInt<int>(std::string_view(spec).substr(colon + 1), 0, 255);
      if (!port.ok()) {
        return Status::InvalidArgument(
            fmt::format("--live={}: expected CA[:PORT] with a numeric port ({})", spec,
                        port.status().message()));
      }
      live.ca_port = *port;
    }
    auto scanned = topo::DiscoverFabric(live);
    if (!scanned.ok()) {
      return scanned.status();
    }
    if (Status s = graph.Merge(*scanned); !s.ok()) {
      return s.WithContext("live scan");
    }
  }
  return Status::Ok();
}

// --label-tiers a,b,c: the tiers' label names from the leaf up.
std::vector<std::string> SplitTiers(const std::string& tiers) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos <= tiers.size();) {
    size_t comma = std::min(tiers.find(',', pos), tiers.size());
    if (comma > pos) {
      out.push_back(tiers.substr(pos, comma - pos));
    }
    pos = comma + 1;
  }
  return out;
}

k8sbridge::Result<topo::Topology> TopologyFromLabelFile(const Args& args) {
  auto text = topo::ReadFile(args.labels);
  if (!text.ok()) {
    return text.status();
  }
  auto nodes = topo::ParseNodeListJson(*text, args.labels);
  if (!nodes.ok()) {
    return nodes.status();
  }
  topo::LabelOptions label_options;
  label_options.prefix = args.label_prefix;
  label_options.tiers = SplitTiers(args.label_tiers);
  label_options.cpu_only = args.build.cpu_only;
  label_options.cpu_only_switch = args.build.cpu_only_switch;
  return topo::TopologyFromLabels(*nodes, label_options);
}

// --dump-graph: "-" is stdout.
Status DumpGraph(const topo::FabricGraph& graph, const std::string& path) {
  std::string dump = graph.CanonicalDump();
  if (path == "-") {
    std::cout << dump;
    return Status::Ok();
  }
  return topo::WriteFileAtomically(path, dump);
}

// Builds from the fabric sources; the state file (when there is one) says
// where hosts were last seen.
k8sbridge::Result<topo::Topology> TopologyFromFabric(Args& args, const std::string& state_path,
                                                     k8sbridge::Logger& logger) {
  topo::FabricGraph graph;
  if (Status s = LoadFabric(args, graph); !s.ok()) {
    return s;
  }
  if (!args.dump_graph.empty()) {
    if (Status s = DumpGraph(graph, args.dump_graph); !s.ok()) {
      return s;
    }
  }
  if (!state_path.empty()) {
    auto state = topo::ReadFile(state_path);
    if (state.ok()) {
      auto remembered = topo::ParseAttachments(*state, state_path);
      if (!remembered.ok()) {
        return remembered.status();
      }
      args.build.remembered = std::move(*remembered);
    } else if (state.status().code() != Status::Code::kNotFound) {
      return state.status();
    }
  }
  return topo::BuildTopology(graph, args.build, logger);
}

int Run(int argc, char** argv) {
  if (auto answered = AnswerHelpOrVersion(argc, argv, "k8sbridge-topology", kUsage))
    return *answered;
  Args args;
  if (Status s = ParseArgs(argc, argv, args); !s.ok()) {
    std::cerr << "k8sbridge-topology: " << s.message() << "\n";
    return 1;
  }
  k8sbridge::StderrLogger logger("k8sbridge-topology", args.verbose ? k8sbridge::LogLevel::kDebug
                                                                    : k8sbridge::LogLevel::kInfo);
  auto fail = [&](const Status& s) {
    logger.Error("{}", s.message());
    return 1;
  };
  if (!args.nodes.empty()) {
    auto nodes = k8sbridge::ExpandHostlist(args.nodes);
    if (!nodes.ok()) {
      return fail(nodes.status().WithContext("--nodes"));
    }
    args.build.all_nodes = std::move(*nodes);
  }
  std::string state_path =
      args.state.empty() && !args.output.empty() ? args.output + ".state" : args.state;

  auto built = args.labels.empty() ? TopologyFromFabric(args, state_path, logger)
                                   : TopologyFromLabelFile(args);
  if (!built.ok()) {
    return fail(built.status());
  }
  const topo::Topology& topology = *built;

  std::string rendered = args.format == "tree"    ? topo::RenderTreeConf(topology)
                         : args.format == "block" ? topo::RenderBlockConf(topology)
                                                  : topo::RenderTopologyYaml(topology);
  if (args.output.empty()) {
    std::cout << rendered;
    return 0;
  }
  if (!state_path.empty() && args.labels.empty()) {
    if (Status s =
            topo::WriteFileAtomically(state_path, topo::RenderAttachments(topology.attachments));
        !s.ok()) {
      return fail(s);
    }
  }
  topo::ScontrolReconfigurer reconfigurer(args.scontrol);
  topo::RefreshOptions refresh{args.output, "", args.reconfigure};
  auto outcome = topo::Refresh(rendered, refresh, reconfigurer, logger);
  if (!outcome.ok()) {
    logger.Error("{}", outcome.status().message());
    return outcome.status().code() == Status::Code::kUnavailable ? 2 : 1;
  }
  logger.Info("{} switches, {} roots; file {}, {}", topology.switches.size(), topology.roots.size(),
              outcome->wrote ? "rewritten" : "unchanged",
              outcome->reconfigured ? "slurmctld reconfigured" : "no reconfigure needed");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
