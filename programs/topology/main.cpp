// k8sbridge-topology: discovers the InfiniBand fabric (ibnetdiscover dumps, a live
// scan through libibnetdisc, or Kubernetes node labels), renders topology.conf /
// topology.yaml, writes it atomically and runs `scontrol reconfigure` only when the
// switch hierarchy changed. Slurm's own topology/tree (or topology/block) plugin
// then places jobs. docs/topology.md says why this is a program and not a plugin.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "k8sbridge/file.h"
#include "k8sbridge/hostlist.h"
#include "k8sbridge/log.h"
#include "k8sbridge/program.h"
#include "k8sbridge/text.h"
#include "k8sbridge/topology/fabric.h"
#include "k8sbridge/topology/live.h"
#include "k8sbridge/topology/model.h"
#include "k8sbridge/topology/refresh.h"
#include "kube_nodes.h"

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
  --kube                   the same labels, read from the Kubernetes API server
  --config FILE            with --kube or --labels: k8sbridge.conf, whose NodeGroups are the
                           Slurm nodes (a group with PlacementDomain= under that leaf) and
                           whose Kubeconfig/KubeContext/InCluster keys say how --kube connects
                           (default: in-cluster, else $KUBECONFIG or ~/.kube/config)

Host mapping and model:
  --host-regex RE          node description -> Slurm node name, one capture group
                           (default: the first word, "w-0 mlx5_0" -> w-0)
  --nodes HOSTLIST         all Slurm nodes; those without an HCA (or without a labelled
                           Kubernetes node of their name) are CPU-only, others are left out
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
  --interval DURATION      keep running: refresh every DURATION (30s, 2m), rewriting the file
                           only when the topology changed; SIGTERM or SIGINT ends it (exit 0)
  -v, --verbose            debug logging

Exit status: 0 ok, 1 bad input or discovery failure (the old file stays), 2 reconfigure failed.
With --interval, a failed round is logged and retried; only a bad start exits (1).
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
  std::string config;
  std::string interval;
  std::chrono::milliseconds every{0};  // --interval; 0: one run
  bool kube = false;
  bool reconfigure = true;
  bool verbose = false;
  topo::BuildOptions build;
  std::vector<topo::DomainGroup> pinned;  // --config's NodeGroups with a PlacementDomain=
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
      {"--config", &args.config},
      {"--interval", &args.interval},
  };
  for (const auto& [name, field] : options) {
    if (arg == name)
      return field;
  }
  return nullptr;
}

// What the options say together: a known format, one kind of source, and what
// --config and --interval need.
Status CheckArgs(const Args& args) {
  if (args.format != "tree" && args.format != "block" && args.format != "yaml") {
    return Status::InvalidArgument(
        fmt::format("--format {}: expected tree, block or yaml", args.format));
  }
  const bool fabric = !args.dumps.empty() || !args.live.empty();
  const int kinds = int{fabric} + int{!args.labels.empty()} + int{args.kube};
  if (kinds == 0) {
    return Status::InvalidArgument(
        "no fabric source: give --ibnetdiscover FILE, --live, --labels FILE or --kube");
  }
  if (kinds > 1) {
    return Status::InvalidArgument(
        "--labels FILE and --kube each replace the fabric sources: give only one of "
        "--ibnetdiscover/--live, --labels FILE or --kube");
  }
  if (!args.config.empty() && fabric) {
    return Status::InvalidArgument(
        "--config FILE is read for --kube and --labels only (its Kubernetes connection and "
        "NodeGroups); drop --config, and give the Slurm nodes with --nodes");
  }
  if (!args.interval.empty() && args.output.empty()) {
    return Status::InvalidArgument(
        "--interval needs --output PATH: a refresh loop keeps a file, it never prints");
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
    } else if (arg == "--kube") {
      args.kube = true;
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
  if (!args.interval.empty()) {
    auto every = k8sbridge::text::ParseDuration(args.interval, std::chrono::seconds(1));
    if (!every.ok()) {
      return every.status().WithContext(fmt::format("--interval {}", args.interval));
    }
    args.every = *every;
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

// Where the labelled nodes come from: --labels FILE (read every time), --kube once
// (one LIST) or --kube with --interval (the informer's cache). Null for fabrics.
using NodeSource = std::function<k8sbridge::Result<std::vector<topo::LabeledNode>>()>;

NodeSource LabelFileSource(const std::string& path) {
  return [path]() -> k8sbridge::Result<std::vector<topo::LabeledNode>> {
    auto text = topo::ReadFile(path);
    if (!text.ok()) {
      return text.status();
    }
    return topo::ParseNodeListJson(*text, path);
  };
}

// The hierarchy the labels give, kept to the Slurm nodes (--nodes, or the
// NodeGroups of --config) when they are known.
k8sbridge::Result<topo::Topology> TopologyFromLabelNodes(const Args& args, const NodeSource& source,
                                                         k8sbridge::Logger& logger) {
  auto nodes = source();
  if (!nodes.ok()) {
    return nodes.status();
  }
  topo::LabelOptions label_options;
  label_options.prefix = args.label_prefix;
  label_options.tiers = SplitTiers(args.label_tiers);
  label_options.cpu_only = args.build.cpu_only;
  label_options.cpu_only_switch = args.build.cpu_only_switch;
  auto matched =
      topo::MatchSlurmNodes(std::move(*nodes), args.build.all_nodes, args.pinned, label_options);
  if (!matched.ok()) {
    return matched.status();
  }
  const topo::SlurmNodeMatch& match = *matched;
  if (!match.left_out.empty()) {
    logger.Debug("{} Kubernetes nodes are no Slurm nodes and are left out, e.g. {}",
                 match.left_out.size(), match.left_out.front());
  }
  if (!match.unlabeled.empty()) {
    logger.Debug("{} Slurm nodes have no Kubernetes node of their name (CPU-only), e.g. {}",
                 match.unlabeled.size(), match.unlabeled.front());
  }
  return topo::TopologyFromLabels(match.nodes, label_options);
}

// --dump-graph: "-" is stdout.
Status DumpGraph(const topo::FabricGraph& graph, const std::string& path) {
  std::string dump = graph.CanonicalDump();
  if (path == "-") {
    std::cout << dump;
    return Status::Ok();
  }
  return k8sbridge::WriteFileAtomic(path, dump, 0644);
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

// One rendering: the hierarchy from the source, the fabric's state file updated
// (only when it changed, so a refresh loop does not rewrite it every round).
k8sbridge::Result<std::string> RenderOnce(Args& args, const std::string& state_path,
                                          const NodeSource& labels, k8sbridge::Logger& logger) {
  auto built = labels ? TopologyFromLabelNodes(args, labels, logger)
                      : TopologyFromFabric(args, state_path, logger);
  if (!built.ok()) {
    return built.status();
  }
  const topo::Topology& topology = *built;
  if (!labels && !state_path.empty() && !args.output.empty()) {
    std::string state = topo::RenderAttachments(topology.attachments);
    auto old = topo::ReadFile(state_path);
    if (!old.ok() || *old != state) {
      if (Status s = k8sbridge::WriteFileAtomic(state_path, state, 0644); !s.ok()) {
        return s;
      }
    }
  }
  logger.Debug("{} switches, {} roots", topology.switches.size(), topology.roots.size());
  return args.format == "tree"    ? topo::RenderTreeConf(topology)
         : args.format == "block" ? topo::RenderBlockConf(topology)
                                  : topo::RenderTopologyYaml(topology);
}

// Waits up to `timeout` for one of `signals` (blocked in every thread); the signal,
// or 0 when the time ran out.
int WaitForSignal(const sigset_t& signals, std::chrono::milliseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000) * 1'000'000L;
  int sig = sigtimedwait(&signals, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// --interval: a round every interval until SIGTERM or SIGINT.
int RefreshLoop(Args& args, const std::string& state_path, const NodeSource& labels,
                const sigset_t& signals, k8sbridge::Logger& logger) {
  topo::ScontrolReconfigurer reconfigurer(args.scontrol);
  topo::PeriodicRefresh refresher(topo::RefreshOptions{args.output, "", args.reconfigure},
                                  reconfigurer, logger);
  logger.Info("refreshing {} every {}", args.output, k8sbridge::text::FormatDuration(args.every));
  for (;;) {
    auto outcome = refresher.Round(RenderOnce(args, state_path, labels, logger));
    if (outcome.ok() && outcome->wrote) {
      logger.Info("{}", outcome->reconfigured ? "slurmctld reconfigured" : "no reconfigure needed");
    }
    if (int sig = WaitForSignal(signals, args.every); sig != 0) {
      logger.Info("SIG{}: stopping", sigabbrev_np(sig));
      return 0;
    }
  }
}

// One run: print, or write and reconfigure when the hierarchy changed.
int RunOnce(Args& args, const std::string& state_path, const NodeSource& labels,
            k8sbridge::Logger& logger) {
  auto rendered = RenderOnce(args, state_path, labels, logger);
  if (!rendered.ok()) {
    logger.Error("{}", rendered.status().message());
    return 1;
  }
  if (args.output.empty()) {
    std::cout << *rendered;
    return 0;
  }
  topo::ScontrolReconfigurer reconfigurer(args.scontrol);
  topo::RefreshOptions refresh{args.output, "", args.reconfigure};
  auto outcome = topo::Refresh(*rendered, refresh, reconfigurer, logger);
  if (!outcome.ok()) {
    logger.Error("{}", outcome.status().message());
    return outcome.status().code() == Status::Code::kUnavailable ? 2 : 1;
  }
  logger.Info("file {}, {}", outcome->wrote ? "rewritten" : "unchanged",
              outcome->reconfigured ? "slurmctld reconfigured" : "no reconfigure needed");
  return 0;
}

// --kube: the connection of --config, and the source (a LIST per run, or a watch
// that a refresh loop reads).
k8sbridge::Result<NodeSource> KubeSource(const Args& args, const topo::TopologyConf& conf,
                                         k8sbridge::Logger& logger,
                                         std::shared_ptr<topo::NodeWatch>& watch) {
  auto client = topo::MakeNodeClient(conf, logger);
  if (!client.ok()) {
    return client.status();
  }
  if (args.every.count() == 0) {
    std::shared_ptr<k8sbridge::kube::Client> shared = std::move(*client);
    return NodeSource([shared] { return topo::ListLabeledNodes(*shared); });
  }
  auto started = topo::NodeWatch::Start(std::move(*client), std::chrono::seconds(60));
  if (!started.ok()) {
    return started.status();
  }
  watch = std::move(*started);
  topo::NodeWatch* w = watch.get();
  return NodeSource([w] { return w->Nodes(); });
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
  // Blocked before any thread starts, so that only the loop's sigtimedwait takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  if (args.every.count() > 0) {
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }
  std::string state_path =
      args.state.empty() && !args.output.empty() ? args.output + ".state" : args.state;
  // --config: its NodeGroups are the Slurm nodes when --nodes gave none.
  auto conf = topo::LoadTopologyConf(args.config);
  if (!conf.ok()) {
    return fail(conf.status());
  }
  if (args.build.all_nodes.empty()) {
    args.build.all_nodes = conf->slurm_nodes;
  }
  args.pinned = conf->pinned;
  NodeSource labels;
  std::shared_ptr<topo::NodeWatch> watch;
  if (!args.labels.empty()) {
    labels = LabelFileSource(args.labels);
  } else if (args.kube) {
    auto source = KubeSource(args, *conf, logger, watch);
    if (!source.ok()) {
      return fail(source.status());
    }
    labels = std::move(*source);
  }
  return args.every.count() > 0 ? RefreshLoop(args, state_path, labels, signals, logger)
                                : RunOnce(args, state_path, labels, logger);
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
