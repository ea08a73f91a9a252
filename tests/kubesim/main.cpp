// kubesim: starts the Kubernetes stand-in (API server, scheduler) on loopback with a
// set of fake nodes, and writes a kubeconfig for clients. Test and demo
// infrastructure only; it ships nowhere (docs/kubesim.md).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dns.h"
#include "k8sbridge/clock.h"
#include "k8sbridge/log.h"
#include "kubelet.h"  // kubelet: runs pods (scheduler/kubelet engineer)
#include "kubelet_net.h"
#include "lifecycle.h"
#include "nodes.h"
#include "scheduler.h"
#include "server.h"
#include "store.h"
#include "tls.h"
#include "workload_controllers.h"

namespace {

constexpr const char* kUsage = R"(usage: kubesim --out DIR [options]

Starts a Kubernetes stand-in for tests and demos: an API server, a scheduler and a
set of fake nodes. Writes DIR/kubeconfig, DIR/ca.crt, DIR/token, DIR/client.crt,
DIR/client.key, DIR/endpoints (one HOST:PORT per line) and, last, DIR/ready.
Runs until SIGTERM or SIGINT. SIGHUP re-reads DIR/token (token rotation).

  --out DIR               where the files above go (created if missing)
  --listen HOST:PORT      address to serve on; repeat for more (default 127.0.0.1:0;
                          port 0 picks a free port). The kubeconfig names the first.
  --http                  plain HTTP instead of HTTPS with a generated test CA
  --token TOKEN           bearer token (default: random)
  --nodes FILE            YAML with Node manifests, instead of generated nodes
  --fake-nodes N          generate N nodes (default 4) named node-0 ...
  --node-prefix P         name prefix of generated nodes (default node-)
  --gpus-per-node G       nvidia.com/gpu per generated node (default 8)
  --gpu-product NAME      nvidia.com/gpu.product label (default NVIDIA-H100-80GB-HBM3)
  --ib-leaves L           spread generated nodes over L InfiniBand leaves (default 2)
  --ib-spines S           spines above the leaves (default 1)
  --cpu Q --memory Q      capacity of generated nodes (default 64, 512Gi)
  --history-window N      watch history length; older RVs get 410 (default 10000)
  --bookmark-interval-ms  time between a watch's BOOKMARKs (default 60000, as a real
                          API server; one also comes 2 s before the watch's timeout)
  --no-scheduler          do not bind pending pods
  --default-not-ready-toleration-seconds N
  --default-unreachable-toleration-seconds N
                          tolerationSeconds of the NoExecute tolerations every pod gets
                          for node.kubernetes.io/not-ready and .../unreachable
                          (DefaultTolerationSeconds admission; default 300 each)
  --pod-gc-quarantine-ms  how long a pod's node must be missing before pod GC
                          force-deletes the pod (default 40000, as upstream)
  --kubelet               run the pods bound to the fake nodes as processes in their own
                          network/UTS/mount namespaces (needs root; see docs/kubesim.md);
                          the API is also served on the bridge's gateway address, and
                          the cluster DNS on its port 53 (UDP and TCP), which pods'
                          resolv.conf names (docs/kubesim.md, "Cluster DNS")
  --bridge NAME           the kubelet's bridge (default ksim0); one per stand-in
  --pod-network CIDR      the pods' addresses (default 10.232.0.0/24); one per stand-in
  --kubelet-state-dir DIR volumes and container logs (default /run/kubesim); the
                          hostPath provisioner of the default StorageClass puts
                          PersistentVolumes in DIR/volumes/pvc-<uid>
  --image-store DIR       OCI mode: run every container from its image, found among the
                          OCI layouts in DIR, with runc (docs/kubesim.md, "OCI mode")
  --kubelet-backoff-ms N  the container restart and image pull back-off's first step
                          (default 10000, doubling to 30 times that; the kubelet: 10 s, 5 min)
  --cluster-domain D       the cluster DNS's zone and pods' search path (default
                          cluster.local)
  --no-cluster-dns        no DNS server: ClusterFirst pods fall back to the host's
                          resolv.conf, as a kubelet without --cluster-dns does
  --verbose               log at debug level
)";

int Fail(const std::string& message) {
  std::fprintf(stderr, "kubesim: %s\n", message.c_str());
  return 2;
}

std::string RandomToken() {
  std::random_device rd;
  std::string t;
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int i = 0; i < 32; ++i)
    t += kChars[rd() % (sizeof kChars - 1)];
  return t;
}

bool WriteFile(const std::filesystem::path& path, const std::string& content, int mode = 0644) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out)
      return false;
    out << content;
    if (!out.flush())
      return false;
  }
  std::filesystem::permissions(tmp, static_cast<std::filesystem::perms>(mode));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  return s.substr(b);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  kubesim::ServerOptions server_options;
  server_options.listen.clear();
  kubesim::FakeNodeOptions fake;
  std::string out_dir, nodes_file, token;
  bool https = true, scheduler = true, verbose = false;
  bool kubelet = false;
  kubesim::KubeletOptions kubelet_options;
  bool cluster_dns = true;
  kubesim::ControllerOptions controller_options;
  size_t history_window = 10000;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size())
        return std::nullopt;
      return args[++i];
    };
    auto int_value = [&](int& out) {
      auto v = value();
      if (!v)
        return false;
      char* end = nullptr;
      long n = std::strtol(v->c_str(), &end, 10);
      if (end == v->c_str() || *end != '\0' || n < 0)
        return false;
      out = static_cast<int>(n);
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--out") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        out_dir = *v;
    } else if (a == "--listen" || a == "--extra-listen") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        server_options.listen.push_back(*v);
    } else if (a == "--http") {
      https = false;
    } else if (a == "--https") {
      https = true;
    } else if (a == "--token") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        token = *v;
    } else if (a == "--nodes") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        nodes_file = *v;
    } else if (a == "--fake-nodes") {
      ok = int_value(fake.count);
    } else if (a == "--node-prefix") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        fake.name_prefix = *v;
    } else if (a == "--gpus-per-node") {
      ok = int_value(fake.gpus_per_node);
    } else if (a == "--gpu-product") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        fake.gpu_product = *v;
    } else if (a == "--ib-leaves") {
      ok = int_value(fake.ib_leaves);
    } else if (a == "--ib-spines") {
      ok = int_value(fake.ib_spines);
    } else if (a == "--cpu") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        fake.cpu = *v;
    } else if (a == "--memory") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        fake.memory = *v;
    } else if (a == "--history-window") {
      int n = 0;
      ok = int_value(n) && n > 0;
      history_window = static_cast<size_t>(n);
    } else if (a == "--bookmark-interval-ms") {
      int n = 0;
      ok = int_value(n) && n > 0;
      server_options.bookmark_interval = std::chrono::milliseconds(n);
    } else if (a == "--default-not-ready-toleration-seconds" ||
               a == "--default-unreachable-toleration-seconds") {
      int n = 0;
      ok = int_value(n);
      (a == "--default-not-ready-toleration-seconds"
           ? server_options.admission.default_not_ready_toleration_seconds
           : server_options.admission.default_unreachable_toleration_seconds) = n;
    } else if (a == "--pod-gc-quarantine-ms") {
      int n = 0;
      ok = int_value(n);
      controller_options.pod_gc_quarantine = std::chrono::milliseconds(n);
    } else if (a == "--no-scheduler") {
      scheduler = false;
    } else if (a == "--kubelet") {
      kubelet = true;
    } else if (a == "--no-cluster-dns") {
      cluster_dns = false;
    } else if (a == "--cluster-domain") {
      auto v = value();
      ok = v.has_value() && !v->empty();
      if (ok)
        kubelet_options.cluster_domain = *v;
    } else if (a == "--image-store") {
      auto v = value();
      ok = v.has_value();
      if (ok)
        kubelet_options.image_store = *v;
    } else if (a == "--kubelet-backoff-ms") {
      int n = 0;
      ok = int_value(n) && n > 0;
      kubelet_options.backoff_base = std::chrono::milliseconds(n);
      kubelet_options.backoff_max = std::chrono::milliseconds(n * 30);
    } else if (a == "--bridge" || a == "--pod-network" || a == "--kubelet-state-dir") {
      auto v = value();
      ok = v.has_value();
      if (ok) {
        (a == "--bridge"        ? kubelet_options.bridge
         : a == "--pod-network" ? kubelet_options.pod_network
                                : kubelet_options.state_dir) = *v;
      }
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      return Fail(fmt::format("unknown argument \"{}\"; see kubesim --help", a));
    }
    if (!ok)
      return Fail(fmt::format("{} needs a valid value; see kubesim --help", a));
  }
  if (out_dir.empty())
    return Fail("--out DIR is required: the kubeconfig and CA go there");
  if (server_options.listen.empty())
    server_options.listen.push_back("127.0.0.1:0");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  std::filesystem::path out = std::filesystem::absolute(out_dir);
  if (ec)
    return Fail(fmt::format("cannot create --out {}: {}", out_dir, ec.message()));
  std::filesystem::remove(out / "ready", ec);

  k8sbridge::StderrLogger log("kubesim",
                              verbose ? k8sbridge::LogLevel::kDebug : k8sbridge::LogLevel::kInfo);
  k8sbridge::RealClock& clock = k8sbridge::RealClock::Instance();
  kubesim::Store store(clock, history_window);
  if (auto s = kubesim::CreateDefaultNamespaces(store); !s.ok())
    return Fail(s.ToString());

  std::vector<std::unique_ptr<rapidjson::Document>> nodes;
  if (!nodes_file.empty()) {
    if (!std::filesystem::is_regular_file(nodes_file)) {
      return Fail(fmt::format("--nodes {}: no such file", nodes_file));
    }
    auto loaded = kubesim::LoadNodes(ReadFile(nodes_file));
    if (!loaded.ok())
      return Fail(fmt::format("--nodes {}: {}", nodes_file, loaded.status().message()));
    nodes = std::move(*loaded);
  } else {
    nodes = kubesim::MakeFakeNodes(fake);
  }
  for (auto& node : nodes) {
    std::string name = kubesim::GetString(*node, "metadata.name");
    kubelet_options.nodes.push_back(name);
    auto created = store.Create("nodes", "", std::move(*node));
    if (!created.ok())
      return Fail(fmt::format("node {}: {}", name, created.status().ToString()));
  }

  if (token.empty())
    token = RandomToken();
  server_options.token = token;
  if (kubelet)  // pods/log reads the kubelet's container logs (pod_log.h)
    server_options.pod_log_root = kubelet_options.state_dir + "/" + kubelet_options.bridge;
  std::vector<std::string> extra_ips;
  for (const auto& l : server_options.listen) {
    std::string host = l.substr(0, l.rfind(':'));
    if (host.size() > 1 && host.front() == '[')
      host = host.substr(1, host.size() - 2);
    if (host != "127.0.0.1" && host != "::1")
      extra_ips.push_back(host);
  }
  std::string gateway;
  if (kubelet) {
    auto network = kubesim::ParsePodNetwork(kubelet_options.pod_network);
    if (!network.ok())
      return Fail("--pod-network: " + network.status().message());
    gateway = kubesim::FormatIPv4(network->Gateway());
    extra_ips.push_back(gateway);
  }
  if (https) {
    auto tls = kubesim::GenerateTlsMaterial(extra_ips);
    if (!tls.ok())
      return Fail(tls.status().ToString());
    server_options.tls = *tls;
    if (!WriteFile(out / "ca.crt", tls->ca_cert_pem) ||
        !WriteFile(out / "client.crt", tls->client_cert_pem) ||
        !WriteFile(out / "client.key", tls->client_key_pem, 0600)) {
      return Fail(fmt::format("cannot write certificates to {}", out.string()));
    }
  }

  // Signals go to sigwait below, not to whichever thread runs.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // pods/exec goes to the kubelet, which starts after the server (its listener on the
  // bridge needs the server's port).
  std::unique_ptr<kubesim::Kubelet> node_agent;
  std::atomic<kubesim::Kubelet*> exec_agent{nullptr};
  if (kubelet) {
    server_options.exec =
        [&exec_agent](const kubesim::ExecTarget& t) -> kubesim::Result<kubesim::ExecProcess> {
      kubesim::Kubelet* agent = exec_agent.load();
      if (agent == nullptr)
        return kubesim::Status::Unavailable("the kubelet is starting");
      return agent->Exec(t);
    };
  }
  kubesim::Server server(store, server_options, log);
  if (auto s = server.Start(); !s.ok())
    return Fail(s.ToString());
  std::unique_ptr<kubesim::dns::Server> dns_server;  // on the gateway, with the kubelet
  if (kubelet) {
    // Pods reach the API on the bridge's gateway, at the first listener's port; the
    // bridge exists once the kubelet has started, so that listener comes after.
    kubelet_options.service_host = gateway;
    if (cluster_dns)
      kubelet_options.cluster_dns = {gateway};
    kubelet_options.service_port = std::to_string(server.endpoints().front().second);
    // Projected serviceAccountToken volumes get tokens the API server accepts.
    kubelet_options.issue_token = [&server](const std::string& ns, const std::string& sa,
                                            int64_t seconds) {
      return server.token_issuer().Issue(ns, sa, seconds);
    };
    node_agent = std::make_unique<kubesim::Kubelet>(store, log, kubelet_options);
    if (auto s = node_agent->Start(); !s.ok()) {
      server.Stop();
      return Fail("kubelet: " + s.ToString());
    }
    exec_agent = node_agent.get();
    auto bound = server.Listen(gateway + ":" + kubelet_options.service_port);
    k8sbridge::Status dns_started = k8sbridge::Status::Ok();
    if (bound.ok() && cluster_dns) {
      dns_server = std::make_unique<kubesim::dns::Server>(
          store, log, kubesim::dns::ServerOptions{gateway, 53, kubelet_options.cluster_domain});
      dns_started = dns_server->Start();
    }
    if (!bound.ok() || !dns_started.ok()) {
      node_agent->Stop();
      server.Stop();
      return Fail(bound.ok() ? dns_started.ToString() : bound.status().ToString());
    }
  }
  // kube-controller-manager's node lifecycle, taint eviction, pod GC and disruption
  // controllers (lifecycle.h).
  kubesim::Controllers controllers(store, log, controller_options);
  controllers.Start();
  kubesim::WorkloadControllerOptions workload_options;
  workload_options.state_dir = kubelet_options.state_dir;
  workload_options.admission = server_options.admission;
  if (server_options.tls)  // the Server keeps its own copy; the controllers' pods need it too
    workload_options.admission.root_ca_pem = server_options.tls->ca_cert_pem;
  kubesim::WorkloadControllers workloads(store, log, workload_options);
  if (auto s = workloads.Start(); !s.ok()) {
    controllers.Stop();
    server.Stop();
    return Fail("workload controllers: " + s.ToString());
  }
  std::unique_ptr<kubesim::Scheduler> sched;
  if (scheduler) {
    sched = std::make_unique<kubesim::Scheduler>(store, log);
    sched->Start();
  }

  auto endpoints = server.endpoints();
  auto url_of = [&](const std::pair<std::string, uint16_t>& ep) {
    std::string host = ep.first.find(':') != std::string::npos ? "[" + ep.first + "]" : ep.first;
    return fmt::format("{}://{}:{}", https ? "https" : "http", host, ep.second);
  };
  std::string endpoint_lines;
  for (const auto& ep : endpoints)
    endpoint_lines += url_of(ep) + "\n";
  std::string kubeconfig = fmt::format(
      "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n    server: {}\n",
      url_of(endpoints.front()));
  if (https)
    kubeconfig += fmt::format("    certificate-authority: {}\n", (out / "ca.crt").string());
  kubeconfig +=
      "contexts:\n- name: kubesim\n  context:\n    cluster: kubesim\n    user: kubesim-admin\n"
      "    namespace: default\n";
  if (https) {
    kubeconfig +=
        "- name: kubesim-cert\n  context:\n    cluster: kubesim\n    user: kubesim-cert\n"
        "    namespace: default\n";
  }
  kubeconfig += "current-context: kubesim\nusers:\n- name: kubesim-admin\n  user:\n";
  kubeconfig += fmt::format("    tokenFile: {}\n", (out / "token").string());
  if (https) {
    kubeconfig += fmt::format(
        "- name: kubesim-cert\n  user:\n    client-certificate: {}\n    client-key: {}\n",
        (out / "client.crt").string(), (out / "client.key").string());
  }
  if (!WriteFile(out / "token", token, 0600) || !WriteFile(out / "kubeconfig", kubeconfig, 0600) ||
      !WriteFile(out / "endpoints", endpoint_lines) ||
      !WriteFile(out / "ready", std::to_string(getpid()) + "\n")) {
    if (node_agent)
      node_agent->Stop();
    if (sched)
      sched->Stop();
    server.Stop();
    return Fail(fmt::format("cannot write the kubeconfig to {}", out.string()));
  }
  std::printf("kubesim: serving %s (kubeconfig %s)\n", url_of(endpoints.front()).c_str(),
              (out / "kubeconfig").c_str());
  std::fflush(stdout);

  while (true) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGHUP) {
      std::string t = Trim(ReadFile(out / "token"));
      if (!t.empty()) {
        server.SetToken(t);
        log.Info("token re-read from {}", (out / "token").string());
      }
      continue;
    }
    break;
  }
  log.Info("stopping");
  if (dns_server)
    dns_server->Stop();
  if (node_agent)
    node_agent->Stop();  // stops every pod, removes the bridge
  if (sched)
    sched->Stop();
  workloads.Stop();
  controllers.Stop();
  server.Stop();
  store.Shutdown();
  std::filesystem::remove(out / "ready", ec);
  return 0;
}
