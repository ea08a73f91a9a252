#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "k8sbridge/kube/config.h"
#include "testing.h"

namespace k8sbridge::kube {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kube-config-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text) {
    auto p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

const char* kBase = R"(apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c1
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: certs/ca.crt
    tls-server-name: kubernetes.default
- name: c2
  cluster:
    server: https://10.0.0.2:6443
    certificate-authority-data: aGVsbG8=
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: slurm}
- name: prod
  context: {cluster: c2, user: u2}
users:
- name: u1
  user:
    token: abc
- name: u2
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
)";

// A kubeconfig and what its error must say; the error must also name the file.
struct BadCase {
  std::string yaml, expect;
};
template <size_t N>
void ExpectErrors(TempDir& dir, const BadCase (&cases)[N]) {
  for (const auto& tc : cases) {
    auto f = dir.Write("bad", tc.yaml);
    auto c = LoadKubeconfig({f}, "x");
    BOOST_REQUIRE(!c.ok());
    BOOST_TEST(c.status().code() == Status::Code::kInvalidArgument);
    BOOST_TEST_INFO(c.status().message());
    BOOST_TEST(c.status().message().find(f) != std::string::npos);
    BOOST_TEST(c.status().message().find(tc.expect) != std::string::npos);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(config)

BOOST_AUTO_TEST_CASE(current_context_and_relative_paths) {
  TempDir dir;
  auto f = dir.Write("kc/config", kBase);
  auto c = LoadKubeconfig({f});
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->server == "https://10.0.0.1:6443");
  BOOST_TEST(c->ca_file == (dir.path / "kc/certs/ca.crt").string());
  BOOST_TEST(c->tls_server_name == "kubernetes.default");
  BOOST_TEST(c->token == "abc");
  BOOST_TEST(c->namespace_ == "slurm");
}

BOOST_AUTO_TEST_CASE(named_context_and_inline_data) {
  TempDir dir;
  auto c = LoadKubeconfig({dir.Write("config", kBase)}, "prod");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->ca_pem == "hello");
  BOOST_TEST(c->client_cert_pem == "cert");
  BOOST_TEST(c->client_key_pem == "key");
  BOOST_TEST(c->namespace_ == "default");
}

BOOST_AUTO_TEST_CASE(several_files_first_one_wins) {
  TempDir dir;
  auto first = dir.Write("a", R"(
current-context: prod
users:
- name: u2
  user:
    tokenFile: tok
)");
  auto second = dir.Write("b", kBase);
  auto c = LoadKubeconfig(
      SplitKubeconfigEnv(first + ":" + (dir.path / "missing").string() + ":" + second));
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->server == "https://10.0.0.2:6443");
  BOOST_TEST(c->token_file == (dir.path / "tok").string());  // u2 from the first file
  BOOST_TEST(c->client_cert_pem.empty());
}

BOOST_AUTO_TEST_CASE(exec_plugin_and_insecure) {
  TempDir dir;
  auto f = dir.Write("config", R"(
current-context: x
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
contexts:
- name: x
  context: {cluster: c, user: u}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/get-token
      args: ["--cluster", "c"]
      env:
      - {name: FOO, value: bar}
)");
  auto c = LoadKubeconfig({f});
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->insecure_skip_tls_verify);
  BOOST_TEST(c->exec.command == (dir.path / "bin/get-token").string());
  BOOST_TEST(c->exec.args.size() == 2u);
  BOOST_TEST(c->exec.env.at(0).first == "FOO");
  BOOST_TEST(c->exec.source.find("users[u].user.exec") != std::string::npos);
}

// Each bad input names the file, the field and what is wrong.
BOOST_AUTO_TEST_CASE(errors_name_file_field_and_problem) {
  TempDir dir;
  const BadCase cases[] = {
      {"clusters: {}\n", "clusters: must be a list"},
      {"clusters:\n- name: c\n  cluster: {server: 1, insecure-skip-tls-verify: maybe}\n",
       "clusters[c].cluster.insecure-skip-tls-verify: must be true or false"},
      {"clusters:\n- cluster: {server: x}\n", "clusters[0].name: missing"},
      {"clusters:\n- name: c\n  cluster: {certificate-authority-data: '!!!'}\n",
       "clusters[c].cluster.certificate-authority-data: not valid base64"},
      {"users:\n- name: u\n  user: {client-certificate: a.crt}\n",
       "users[u].user: client-certificate(-data) is set without client-key(-data)"},
      {"users:\n- name: u\n  user: {exec: {command: x, apiVersion: "
       "client.authentication.k8s.io/v1alpha1}}\n",
       "users[u].user.exec.apiVersion: client.authentication.k8s.io/v1alpha1 is not supported"},
      {"users:\n- name: u\n  user: {exec: {args: [a]}}\n", "users[u].user.exec.command: missing"},
      {"contexts: [{name: x, context: {user: u}}]\n", "contexts[x].context.cluster: missing"},
      {"clusters: [\n", "invalid YAML"},
  };
  ExpectErrors(dir, cases);
}

// docs/client.md says bad fields are errors: a field k8sbridge does not implement
// (impersonation, auth-provider, basic auth) or does not know is refused with the
// field, the file and the fix, never silently ignored.
BOOST_AUTO_TEST_CASE(unsupported_and_unknown_fields_are_errors) {
  TempDir dir;
  const BadCase cases[] = {
      {"users:\n- name: u\n  user: {token: t, as: admin}\n",
       "users[u].user.as: not supported by k8sbridge; impersonation is not implemented"},
      {"users:\n- name: u\n  user: {token: t, as-groups: ['system:masters']}\n",
       "users[u].user.as-groups: not supported"},
      {"users:\n- name: u\n  user: {auth-provider: {name: gcp}}\n",
       "users[u].user.auth-provider: not supported by k8sbridge; auth-provider plugins were "
       "removed"},
      {"users:\n- name: u\n  user: {username: a, password: b}\n",
       "users[u].user.username: not supported by k8sbridge; basic authentication"},
      {"users:\n- name: u\n  user: {tokenfile: /t}\n",
       "users[u].user.tokenfile: unknown field; remove it (supported: client-certificate"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority-dat: x}\n",
       "clusters[c].cluster.certificate-authority-dat: unknown field"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', proxy-url: 'proxy:3128'}\n",
       "clusters[c].cluster.proxy-url: proxy:3128 is not a proxy URL; use http://"},
      {"contexts: [{name: x, context: {cluster: c, namespaces: a}}]\n",
       "contexts[x].context.namespaces: unknown field"},
  };
  ExpectErrors(dir, cases);
}

// proxy-url is implemented: it reaches the transport (CURLOPT_PROXY).
BOOST_AUTO_TEST_CASE(proxy_url_is_read) {
  TempDir dir;
  auto f = dir.Write("config", R"(clusters:
- name: c
  cluster: {server: 'https://10.0.0.1:6443', proxy-url: 'socks5://127.0.0.1:1080',
            extensions: [], disable-compression: true}
users:
- name: u
  user: {token: t, extensions: []}
contexts:
- name: x
  context: {cluster: c, user: u}
)");
  auto c = LoadKubeconfig({f}, "x");
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->proxy_url == "socks5://127.0.0.1:1080");
}

BOOST_AUTO_TEST_CASE(dangling_references_are_named) {
  TempDir dir;
  auto f = dir.Write("config", kBase);
  auto c = LoadKubeconfig({f}, "nope");
  BOOST_TEST(c.status().message().find("context \"nope\"") != std::string::npos);
  auto g =
      dir.Write("config2", "current-context: x\ncontexts: [{name: x, context: {cluster: gone}}]\n");
  auto d = LoadKubeconfig({g});
  BOOST_TEST(
      d.status().message().find("contexts[x].context.cluster: cluster \"gone\" is not defined") !=
      std::string::npos);
  auto h = dir.Write("config3",
                     "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
                     "clusters: [{name: c, cluster: {server: 'ftp://x'}}]\n");
  auto e = LoadKubeconfig({h});
  BOOST_TEST(e.status().message().find("clusters[c].cluster.server") != std::string::npos);
  BOOST_TEST(!LoadKubeconfig({(dir.path / "absent").string()}).ok());
}

BOOST_AUTO_TEST_CASE(plain_http_is_refused_unless_allowed) {
  // Over http:// the bearer token (and every pod spec) would travel in clear.
  TempDir dir;
  auto f = dir.Write("config",
                     "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                     "clusters: [{name: c, cluster: {server: 'http://10.0.0.9:8080'}}]\n"
                     "users: [{name: u, user: {token: abc}}]\n");
  auto refused = LoadKubeconfig({f});
  BOOST_REQUIRE(!refused.ok());
  BOOST_TEST(refused.status().message() ==
                 f + ": clusters[c].cluster.server: \"http://10.0.0.9:8080\" is plain HTTP: the "
                     "bearer token and every request would travel in clear; use https://, or "
                     "set AllowInsecureHttp=yes in k8sbridge.conf for a test API server",
             refused.status().message());
  BOOST_TEST(!ProgramConfig(f, "", false).ok());
  auto allowed = LoadKubeconfig({f}, "", true);
  BOOST_REQUIRE_MESSAGE(allowed.ok(), allowed.status().ToString());
  BOOST_TEST(allowed->server == "http://10.0.0.9:8080");
  BOOST_TEST(ProgramConfig(f, "", false, true).ok());
}

BOOST_AUTO_TEST_CASE(in_cluster) {
  TempDir dir;
  dir.Write("sa/token", "tok\n");
  dir.Write("sa/ca.crt", "pem");
  dir.Write("sa/namespace", "slurm\n");
  auto c = InClusterConfig("10.96.0.1", "443", (dir.path / "sa").string());
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->server == "https://10.96.0.1:443");
  BOOST_TEST(c->token_file == (dir.path / "sa/token").string());
  BOOST_TEST(c->namespace_ == "slurm");
  auto v6 = InClusterConfig("fd00::1", "443", (dir.path / "sa").string());
  BOOST_TEST(v6->server == "https://[fd00::1]:443");
  BOOST_TEST(!InClusterConfig("", "", (dir.path / "sa").string()).ok());
  auto missing = InClusterConfig("h", "1", (dir.path / "nope").string());
  BOOST_TEST(missing.status().message().find("token: missing") != std::string::npos);
}

// slurmctld starts its power programs with SLURM_CONF alone in the environment; the
// controller entrypoint's service file stands in for the two variables.
BOOST_AUTO_TEST_CASE(in_cluster_from_the_service_file_when_the_environment_lacks_it) {
  TempDir dir;
  dir.Write("sa/token", "tok\n");
  dir.Write("sa/ca.crt", "pem");
  dir.Write("run/kubernetes-service",
            "# written by k8sbridge-entrypoint\nKUBERNETES_SERVICE_HOST=10.96.0.1\n"
            "KUBERNETES_SERVICE_PORT=6443\n");
  const std::string sa = (dir.path / "sa").string();
  const std::string file = (dir.path / "run/kubernetes-service").string();
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  auto c = InClusterConfigFromEnv(file, sa);
  BOOST_REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  BOOST_TEST(c->server == "https://10.96.0.1:6443");

  auto missing = InClusterConfigFromEnv((dir.path / "nope").string(), sa);
  BOOST_TEST(!missing.ok());
  BOOST_TEST(missing.status().message().find((dir.path / "nope").string()) != std::string::npos);
  BOOST_TEST(missing.status().message().find("Kubeconfig=") != std::string::npos);

  dir.Write("run/empty", "KUBERNETES_SERVICE_HOST=10.96.0.1\n");
  auto half = InClusterConfigFromEnv((dir.path / "run/empty").string(), sa);
  BOOST_TEST(!half.ok());
  BOOST_TEST(half.status().message().find("KUBERNETES_SERVICE_PORT") != std::string::npos);

  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto env = InClusterConfigFromEnv(file, sa);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  BOOST_REQUIRE_MESSAGE(env.ok(), env.status().ToString());
  BOOST_TEST(env->server == "https://[fd00::1]:443");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace k8sbridge::kube
