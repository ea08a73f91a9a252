#include "k8sbridge/kube/config.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

namespace k8sbridge::kube {

namespace {

Result<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::IoError(fmt::format("{}: cannot read {}", what, path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ResolveAgainst(const std::string& file, const std::string& path) {
  if (path.empty() || path[0] == '/')
    return path;
  auto dir = std::filesystem::path(file).parent_path();
  return (dir / path).lexically_normal().string();
}

// Reads the scalar `key` of `node` into `out`; an error names file, field and problem.
Status Scalar(const YAML::Node& node, const char* key, const std::string& where, std::string& out) {
  YAML::Node v = node[key];
  if (!v)
    return Status::Ok();
  if (!v.IsScalar()) {
    return Status::InvalidArgument(fmt::format("{}.{}: must be a string", where, key));
  }
  out = v.Scalar();
  return Status::Ok();
}

Status BoolField(const YAML::Node& node, const char* key, const std::string& where, bool& out) {
  YAML::Node v = node[key];
  if (!v)
    return Status::Ok();
  const std::string s = v.IsScalar() ? v.Scalar() : "";
  if (s == "true") {
    out = true;
  } else if (s == "false") {
    out = false;
  } else {
    return Status::InvalidArgument(fmt::format("{}.{}: must be true or false", where, key));
  }
  return Status::Ok();
}

#define K8SB_RETURN_IF_ERROR(expr) \
  do {                             \
    Status _s = (expr);            \
    if (!_s.ok())                  \
      return _s;                   \
  } while (0)

// Iterates a kubeconfig list (clusters, users, contexts) of {name, <inner>}.
template <typename Fn>
Status ForEachNamed(const YAML::Node& root, const char* list, const char* inner,
                    const std::string& file, Fn fn) {
  YAML::Node items = root[list];
  if (!items || items.IsNull())
    return Status::Ok();
  if (!items.IsSequence()) {
    return Status::InvalidArgument(fmt::format("{}: {}: must be a list", file, list));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    YAML::Node item = items[i];
    std::string where = fmt::format("{}: {}[{}]", file, list, i);
    if (!item.IsMap())
      return Status::InvalidArgument(where + ": must be a mapping");
    std::string name;
    K8SB_RETURN_IF_ERROR(Scalar(item, "name", where, name));
    if (name.empty())
      return Status::InvalidArgument(where + ".name: missing");
    where = fmt::format("{}: {}[{}]", file, list, name);
    YAML::Node body = item[inner];
    if (!body || !body.IsMap()) {
      return Status::InvalidArgument(fmt::format("{}.{}: missing or not a mapping", where, inner));
    }
    K8SB_RETURN_IF_ERROR(fn(name, body, where + "." + inner));
  }
  return Status::Ok();
}

Status ParseExec(const YAML::Node& exec, const std::string& where, const std::string& file,
                 ExecConfig& out) {
  out.source = where;
  K8SB_RETURN_IF_ERROR(Scalar(exec, "command", where, out.command));
  if (out.command.empty())
    return Status::InvalidArgument(where + ".command: missing");
  if (out.command.find('/') != std::string::npos)
    out.command = ResolveAgainst(file, out.command);
  K8SB_RETURN_IF_ERROR(Scalar(exec, "apiVersion", where, out.api_version));
  if (out.api_version != "client.authentication.k8s.io/v1" &&
      out.api_version != "client.authentication.k8s.io/v1beta1") {
    return Status::InvalidArgument(
        fmt::format("{}.apiVersion: {} is not supported; use client.authentication.k8s.io/v1",
                    where, out.api_version));
  }
  if (YAML::Node args = exec["args"]; args && !args.IsNull()) {
    if (!args.IsSequence())
      return Status::InvalidArgument(where + ".args: must be a list");
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].IsScalar()) {
        return Status::InvalidArgument(fmt::format("{}.args[{}]: must be a string", where, i));
      }
      out.args.push_back(args[i].Scalar());
    }
  }
  if (YAML::Node env = exec["env"]; env && !env.IsNull()) {
    if (!env.IsSequence())
      return Status::InvalidArgument(where + ".env: must be a list");
    for (size_t i = 0; i < env.size(); ++i) {
      std::string ew = fmt::format("{}.env[{}]", where, i);
      if (!env[i].IsMap())
        return Status::InvalidArgument(ew + ": must be a mapping");
      std::string name, value;
      K8SB_RETURN_IF_ERROR(Scalar(env[i], "name", ew, name));
      K8SB_RETURN_IF_ERROR(Scalar(env[i], "value", ew, value));
      if (name.empty())
        return Status::InvalidArgument(ew + ".name: missing");
      out.env.emplace_back(name, value);
    }
  }
  return Status::Ok();
}

// Decodes the base64 scalar `key` of `node` into `out`; leaves `out` alone when unset.
Status Base64Field(const YAML::Node& node, const char* key, const std::string& where,
                   std::string& out) {
  std::string data;
  K8SB_RETURN_IF_ERROR(Scalar(node, key, where, data));
  if (data.empty())
    return Status::Ok();
  auto decoded = DecodeBase64(data, where + "." + key);
  if (!decoded.ok())
    return decoded.status();
  out = *decoded;
  return Status::Ok();
}

// A kubeconfig field k8sbridge does not implement, and what to do instead.
struct Unsupported {
  const char* field;
  const char* fix;
};

// Every key of `node` must be in `known`; one listed in `unsupported` (or any other)
// is an error naming the field, the file and the fix, never silently ignored: a
// kubeconfig that asks for impersonation or a proxy would otherwise act as another
// identity or connect another way than its author meant.
Status OnlyKnownFields(const YAML::Node& node, const std::string& where,
                       std::initializer_list<std::string_view> known,
                       std::initializer_list<Unsupported> unsupported) {
  for (const auto& entry : node) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    if (std::find(known.begin(), known.end(), key) != known.end())
      continue;
    for (const auto& u : unsupported) {
      if (key == u.field) {
        return Status::InvalidArgument(
            fmt::format("{}.{}: not supported by k8sbridge; {}", where, key, u.fix));
      }
    }
    return Status::InvalidArgument(fmt::format("{}.{}: unknown field; remove it (supported: {})",
                                               where, key,
                                               fmt::join(known.begin(), known.end(), ", ")));
  }
  return Status::Ok();
}

constexpr const char* kImpersonationFix =
    "impersonation is not implemented: give the user its own credentials (a token, a client "
    "certificate or an exec plugin) and remove the field";

Result<KubeconfigFile::Cluster> ParseCluster(const YAML::Node& c, const std::string& where,
                                             const std::string& file) {
  K8SB_RETURN_IF_ERROR(OnlyKnownFields(
      c, where,
      {"server", "certificate-authority", "certificate-authority-data", "tls-server-name",
       "insecure-skip-tls-verify", "proxy-url", "disable-compression", "extensions"},
      {}));
  KubeconfigFile::Cluster cl;
  K8SB_RETURN_IF_ERROR(Scalar(c, "server", where, cl.server));
  K8SB_RETURN_IF_ERROR(Scalar(c, "certificate-authority", where, cl.ca_file));
  K8SB_RETURN_IF_ERROR(Base64Field(c, "certificate-authority-data", where, cl.ca_pem));
  K8SB_RETURN_IF_ERROR(Scalar(c, "tls-server-name", where, cl.tls_server_name));
  K8SB_RETURN_IF_ERROR(BoolField(c, "insecure-skip-tls-verify", where, cl.insecure));
  K8SB_RETURN_IF_ERROR(Scalar(c, "proxy-url", where, cl.proxy_url));
  if (!cl.proxy_url.empty() && cl.proxy_url.rfind("http://", 0) != 0 &&
      cl.proxy_url.rfind("https://", 0) != 0 && cl.proxy_url.rfind("socks5://", 0) != 0) {
    return Status::InvalidArgument(fmt::format(
        "{}.proxy-url: {} is not a proxy URL; use http://, https:// or socks5://HOST:PORT", where,
        cl.proxy_url));
  }
  cl.ca_file = ResolveAgainst(file, cl.ca_file);
  return cl;
}

Result<KubeconfigFile::User> ParseUser(const YAML::Node& u, const std::string& where,
                                       const std::string& file) {
  K8SB_RETURN_IF_ERROR(OnlyKnownFields(
      u, where,
      {"client-certificate", "client-key", "client-certificate-data", "client-key-data", "token",
       "tokenFile", "exec", "extensions"},
      {{"as", kImpersonationFix},
       {"as-uid", kImpersonationFix},
       {"as-groups", kImpersonationFix},
       {"as-user-extra", kImpersonationFix},
       {"auth-provider",
        "auth-provider plugins were removed from Kubernetes clients; use an exec credential "
        "plugin (users[].user.exec, e.g. kubelogin or the cloud's get-token command)"},
       {"username", "basic authentication is not supported; use a token or a client certificate"},
       {"password",
        "basic authentication is not supported; use a token or a client certificate"}}));
  KubeconfigFile::User us;
  K8SB_RETURN_IF_ERROR(Scalar(u, "client-certificate", where, us.cert_file));
  K8SB_RETURN_IF_ERROR(Scalar(u, "client-key", where, us.key_file));
  K8SB_RETURN_IF_ERROR(Base64Field(u, "client-certificate-data", where, us.cert_pem));
  K8SB_RETURN_IF_ERROR(Base64Field(u, "client-key-data", where, us.key_pem));
  K8SB_RETURN_IF_ERROR(Scalar(u, "token", where, us.token));
  K8SB_RETURN_IF_ERROR(Scalar(u, "tokenFile", where, us.token_file));
  us.cert_file = ResolveAgainst(file, us.cert_file);
  us.key_file = ResolveAgainst(file, us.key_file);
  us.token_file = ResolveAgainst(file, us.token_file);
  if (YAML::Node exec = u["exec"]; exec && !exec.IsNull()) {
    if (!exec.IsMap())
      return Status::InvalidArgument(where + ".exec: must be a mapping");
    K8SB_RETURN_IF_ERROR(ParseExec(exec, where + ".exec", file, us.exec));
  }
  bool has_cert = !us.cert_file.empty() || !us.cert_pem.empty();
  bool has_key = !us.key_file.empty() || !us.key_pem.empty();
  if (has_cert != has_key) {
    return Status::InvalidArgument(
        fmt::format("{}: {} is set without {}; give both or neither", where,
                    has_cert ? "client-certificate(-data)" : "client-key(-data)",
                    has_cert ? "client-key(-data)" : "client-certificate(-data)"));
  }
  return us;
}

Result<KubeconfigFile::Context> ParseContext(const YAML::Node& c, const std::string& where) {
  K8SB_RETURN_IF_ERROR(
      OnlyKnownFields(c, where, {"cluster", "user", "namespace", "extensions"}, {}));
  KubeconfigFile::Context ctx;
  K8SB_RETURN_IF_ERROR(Scalar(c, "cluster", where, ctx.cluster));
  K8SB_RETURN_IF_ERROR(Scalar(c, "user", where, ctx.user));
  K8SB_RETURN_IF_ERROR(Scalar(c, "namespace", where, ctx.namespace_));
  if (ctx.cluster.empty())
    return Status::InvalidArgument(where + ".cluster: missing");
  return ctx;
}

// Parses each entry of the named list with `parse` into the map `into`.
template <typename Entry, typename Parse>
Status ParseNamedList(const YAML::Node& root, const char* list, const char* inner,
                      const std::string& file, std::map<std::string, Entry>& into, Parse parse) {
  return ForEachNamed(
      root, list, inner, file,
      [&](const std::string& name, const YAML::Node& body, const std::string& where) -> Status {
        Result<Entry> entry = parse(body, where);
        if (!entry.ok())
          return entry.status();
        into.emplace(name, std::move(*entry));
        return Status::Ok();
      });
}

Result<KubeconfigFile> ParseUnsafe(std::string_view yaml, std::string_view file_view) {
  KubeconfigFile out;
  out.file = std::string(file_view);
  const std::string& file = out.file;
  YAML::Node root = YAML::Load(std::string(yaml));
  if (root.IsNull())
    return out;  // an empty file sets nothing
  if (!root.IsMap())
    return Status::InvalidArgument(file + ": not a kubeconfig (not a mapping)");
  if (YAML::Node kind = root["kind"]; kind && (!kind.IsScalar() || kind.Scalar() != "Config")) {
    return Status::InvalidArgument(file + ": kind: must be Config");
  }
  K8SB_RETURN_IF_ERROR(Scalar(root, "current-context", file, out.current_context));
  K8SB_RETURN_IF_ERROR(ParseNamedList(
      root, "clusters", "cluster", file, out.clusters,
      [&](const YAML::Node& c, const std::string& where) { return ParseCluster(c, where, file); }));
  K8SB_RETURN_IF_ERROR(ParseNamedList(
      root, "users", "user", file, out.users,
      [&](const YAML::Node& u, const std::string& where) { return ParseUser(u, where, file); }));
  K8SB_RETURN_IF_ERROR(
      ParseNamedList(root, "contexts", "context", file, out.contexts, ParseContext));
  return out;
}

}  // namespace

Result<KubeconfigFile> ParseKubeconfig(std::string_view yaml, std::string_view file) {
  try {
    return ParseUnsafe(yaml, file);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: line {}, column {}: invalid YAML: {}", file,
                                               e.mark.line + 1, e.mark.column + 1, e.msg));
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: invalid kubeconfig: {}", file, e.what()));
  }
}

std::vector<std::string> SplitKubeconfigEnv(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t end = value.find(':', start);
    if (end == std::string_view::npos)
      end = value.size();
    if (end > start)
      out.emplace_back(value.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

namespace {

// The files to read: those given, else $KUBECONFIG's, else ~/.kube/config.
std::vector<std::string> KubeconfigFiles(const std::vector<std::string>& given) {
  std::vector<std::string> files = given;
  if (files.empty()) {
    if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
      files = SplitKubeconfigEnv(env);
    } else if (const char* home = std::getenv("HOME"); home && *home) {
      files.push_back(std::string(home) + "/.kube/config");
    }
  }
  return files;
}

Result<std::vector<KubeconfigFile>> ReadKubeconfigs(const std::vector<std::string>& files) {
  std::vector<KubeconfigFile> parsed;
  for (const auto& f : files) {
    auto text = ReadFile(f, "kubeconfig");
    if (!text.ok()) {
      // A missing file in a KUBECONFIG list is skipped, as kubectl does, unless it is the only one.
      if (files.size() > 1 && !std::filesystem::exists(f))
        continue;
      return text.status();
    }
    auto kc = ParseKubeconfig(*text, f);
    if (!kc.ok())
      return kc.status();
    parsed.push_back(std::move(*kc));
  }
  return parsed;
}

// The first file to define a name wins.
template <typename Entry>
const Entry* FindNamed(const std::vector<KubeconfigFile>& parsed,
                       std::map<std::string, Entry> KubeconfigFile::*member,
                       const std::string& name) {
  for (const auto& kc : parsed) {
    auto it = (kc.*member).find(name);
    if (it != (kc.*member).end())
      return &it->second;
  }
  return nullptr;
}

// `all` names the files, for the messages.
Status CheckServer(const std::string& all, const std::string& cluster_name,
                   const KubeconfigFile::Cluster& cluster, bool allow_insecure_http) {
  if (cluster.server.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: clusters[{}].cluster.server: missing", all, cluster_name));
  }
  if (cluster.server.rfind("https://", 0) != 0 && cluster.server.rfind("http://", 0) != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: clusters[{}].cluster.server: {:?} must start with https:// or http://",
                    all, cluster_name, cluster.server));
  }
  if (cluster.server.rfind("http://", 0) == 0 && !allow_insecure_http) {
    return Status::InvalidArgument(fmt::format(
        "{}: clusters[{}].cluster.server: {:?} is plain HTTP: the bearer token and every "
        "request would travel in clear; use https://, or set AllowInsecureHttp=yes in "
        "k8sbridge.conf for a test API server",
        all, cluster_name, cluster.server));
  }
  return Status::Ok();
}

void ApplyUser(const KubeconfigFile::User& user, Config& config) {
  config.client_cert_file = user.cert_file;
  config.client_cert_pem = user.cert_pem;
  config.client_key_file = user.key_file;
  config.client_key_pem = user.key_pem;
  config.token = user.token;
  config.token_file = user.token_file;
  config.exec = user.exec;
}

}  // namespace

Result<Config> LoadKubeconfig(const std::vector<std::string>& files_in, std::string_view context,
                              bool allow_insecure_http) {
  std::vector<std::string> files = KubeconfigFiles(files_in);
  if (files.empty()) {
    return Status::InvalidArgument("no kubeconfig: set KUBECONFIG or create ~/.kube/config");
  }
  auto parsed = ReadKubeconfigs(files);
  if (!parsed.ok())
    return parsed.status();
  std::string ctx_name(context);
  std::string ctx_source = "the context argument";
  for (const auto& kc : *parsed) {
    if (!ctx_name.empty())
      break;
    if (!kc.current_context.empty()) {
      ctx_name = kc.current_context;
      ctx_source = kc.file + ": current-context";
    }
  }
  std::string all = fmt::format("{}", fmt::join(files, ":"));
  if (ctx_name.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: current-context: missing; set it or pass a context", all));
  }
  const KubeconfigFile::Context* ctx = FindNamed(*parsed, &KubeconfigFile::contexts, ctx_name);
  if (!ctx) {
    return Status::InvalidArgument(fmt::format(
        "{}: context {:?} (from {}) is not defined in contexts", all, ctx_name, ctx_source));
  }
  const KubeconfigFile::Cluster* cluster =
      FindNamed(*parsed, &KubeconfigFile::clusters, ctx->cluster);
  if (!cluster) {
    return Status::InvalidArgument(
        fmt::format("{}: contexts[{}].context.cluster: cluster {:?} is not defined in clusters",
                    all, ctx_name, ctx->cluster));
  }
  if (Status s = CheckServer(all, ctx->cluster, *cluster, allow_insecure_http); !s.ok())
    return s;
  Config config;
  config.source = fmt::format("kubeconfig {} context {}", all, ctx_name);
  config.server = cluster->server;
  while (!config.server.empty() && config.server.back() == '/')
    config.server.pop_back();
  config.ca_file = cluster->ca_file;
  config.ca_pem = cluster->ca_pem;
  config.tls_server_name = cluster->tls_server_name;
  config.proxy_url = cluster->proxy_url;
  config.insecure_skip_tls_verify = cluster->insecure;
  if (config.insecure_skip_tls_verify && (!config.ca_file.empty() || !config.ca_pem.empty())) {
    return Status::InvalidArgument(fmt::format(
        "{}: clusters[{}].cluster: insecure-skip-tls-verify and certificate-authority are both "
        "set; remove one",
        all, ctx->cluster));
  }
  if (!ctx->user.empty()) {
    const KubeconfigFile::User* user = FindNamed(*parsed, &KubeconfigFile::users, ctx->user);
    if (!user) {
      return Status::InvalidArgument(
          fmt::format("{}: contexts[{}].context.user: user {:?} is not defined in users", all,
                      ctx_name, ctx->user));
    }
    ApplyUser(*user, config);
  }
  if (!ctx->namespace_.empty())
    config.namespace_ = ctx->namespace_;
  return config;
}

Result<Config> InClusterConfig(std::string_view host, std::string_view port,
                               std::string_view sa_dir) {
  if (host.empty() || port.empty()) {
    return Status::InvalidArgument(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(not running in a pod?)");
  }
  Config config;
  const bool ipv6 = std::string_view(host).find(':') != std::string_view::npos;
  config.server =
      ipv6 ? fmt::format("https://[{}]:{}", host, port) : fmt::format("https://{}:{}", host, port);
  std::string dir(sa_dir);
  config.token_file = dir + "/token";
  config.ca_file = dir + "/ca.crt";
  config.source = "in-cluster service account " + dir;
  if (!std::filesystem::exists(config.token_file)) {
    return Status::InvalidArgument(fmt::format(
        "in-cluster config: {}: missing; is a service account token mounted?", config.token_file));
  }
  if (!std::filesystem::exists(config.ca_file)) {
    return Status::InvalidArgument(fmt::format("in-cluster config: {}: missing", config.ca_file));
  }
  if (auto ns = ReadFile(dir + "/namespace", "in-cluster namespace"); ns.ok()) {
    std::string n = *ns;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' '))
      n.pop_back();
    if (!n.empty())
      config.namespace_ = n;
  }
  return config;
}

namespace {

// The KEY=VALUE lines of the controller entrypoint's service file; unknown keys,
// blank lines and comments are skipped.
std::map<std::string, std::string> ReadServiceFile(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos)
      continue;
    values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

}  // namespace

Result<Config> InClusterConfigFromEnv(std::string_view service_file, std::string_view sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host != nullptr && *host != '\0' && port != nullptr && *port != '\0')
    return InClusterConfig(host, port, sa_dir);
  const std::string file(service_file);
  if (!std::filesystem::exists(file)) {
    return Status::InvalidArgument(fmt::format(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set and "
        "{} does not exist: run in a pod (slurmctld's power programs find the API server in "
        "that file, which k8sbridge-entrypoint controller writes), or set Kubeconfig= instead "
        "of InCluster=yes",
        file));
  }
  auto text = ReadFile(file, "in-cluster service file");
  if (!text.ok())
    return text.status();
  auto values = ReadServiceFile(*text);
  auto config =
      InClusterConfig(values["KUBERNETES_SERVICE_HOST"], values["KUBERNETES_SERVICE_PORT"], sa_dir);
  if (!config.ok())
    return config.status().WithContext(file);
  return config;
}

Result<std::string> DecodeBase64(std::string_view in, std::string_view what) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ')
      clean += c;
  }
  if (clean.size() % 4 != 0) {
    return Status::InvalidArgument(
        fmt::format("{}: not valid base64 (length {} is not a multiple of 4)", what, clean.size()));
  }
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()),
                          static_cast<int>(clean.size()));
  if (n < 0)
    return Status::InvalidArgument(fmt::format("{}: not valid base64", what));
  size_t pad = 0;
  if (!clean.empty() && clean.back() == '=')
    ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=')
    ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

Result<Config> ProgramConfig(const std::string& kubeconfig, const std::string& context,
                             bool in_cluster, bool allow_insecure_http) {
  if (in_cluster || (kubeconfig.empty() && std::getenv("KUBERNETES_SERVICE_HOST")))
    return InClusterConfigFromEnv();
  if (!kubeconfig.empty())
    return LoadKubeconfig({kubeconfig}, context, allow_insecure_http);
  return LoadKubeconfig({}, context, allow_insecure_http);
}

}  // namespace k8sbridge::kube
