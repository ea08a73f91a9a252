// The OCI mode's pure pieces: image reference normalization, the image store's
// lookup, argv/env merge rules, the runtime spec, capabilities and users, the pod
// phase and back-off rules, the atomic writer's layout and pods/log's tail. Running
// containers needs root and runc: tests/integration/test_kubesim_oci.py.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <boost/test/unit_test.hpp>

#include "fake_clock.h"
#include "k8sbridge/clock.h"
#include "kubelet.h"
#include "kubelet_oci.h"
#include "oci_image.h"
#include "oci_spec.h"
#include "pod_log.h"
#include "store.h"

namespace kubesim {
namespace {

namespace fs = std::filesystem;
using oci::NormalizeReference;

std::string Normalized(const std::string& image) {
  Result<oci::ImageReference> r = NormalizeReference(image);
  BOOST_REQUIRE_MESSAGE(r.ok(), image + ": " + r.status().ToString());
  return r->String();
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kubesim-oci-unit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

BOOST_AUTO_TEST_SUITE(oci_references)

BOOST_AUTO_TEST_CASE(short_names_get_docker_io_library_and_latest) {
  BOOST_CHECK_EQUAL(Normalized("busybox"), "docker.io/library/busybox:latest");
  BOOST_CHECK_EQUAL(Normalized("busybox:1.36"), "docker.io/library/busybox:1.36");
  BOOST_CHECK_EQUAL(Normalized("team/app"), "docker.io/team/app:latest");
  BOOST_CHECK_EQUAL(Normalized("index.docker.io/team/app:2"), "docker.io/team/app:2");
  BOOST_CHECK_EQUAL(Normalized("ghcr.io/org/app:v1"), "ghcr.io/org/app:v1");
  BOOST_CHECK_EQUAL(Normalized("localhost/app"), "localhost/app:latest");
  BOOST_CHECK_EQUAL(Normalized("registry:5000/app"), "registry:5000/app:latest");
  const std::string digest = "sha256:" + std::string(64, 'a');
  BOOST_CHECK_EQUAL(Normalized("app@" + digest), "docker.io/library/app@" + digest);
  BOOST_CHECK_EQUAL(Normalized("app:1@" + digest), "docker.io/library/app:1@" + digest);
}

BOOST_AUTO_TEST_CASE(what_a_runtime_refuses) {
  const std::string too_long(64, 'a');  // a name that reads as an image ID
  for (const std::string& bad :
       std::vector<std::string>{"", "Busybox", "app@sha256:123", "app:", too_long}) {
    Result<oci::ImageReference> r = NormalizeReference(bad);
    BOOST_CHECK_MESSAGE(!r.ok(), bad);
    if (!r.ok()) {
      BOOST_CHECK(r.status().message().find("invalid reference format") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_store_names_repositories_by_directory_and_tags_by_ref_name) {
  TempDir store;
  const std::string manifest_digest = "sha256:" + std::string(64, '1');
  const std::string config_digest = "sha256:" + std::string(64, '2');
  for (const fs::path& layout :
       {store.path / "app", store.path / "ghcr.io" / "org" / "tool" / "oci"}) {
    Write(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    Write(layout / "index.json",
          R"({"schemaVersion":2,"manifests":[{"digest":")" + manifest_digest +
              R"(","annotations":{"org.opencontainers.image.ref.name":"1.0"}}]})");
    Write(layout / "blobs" / "sha256" / std::string(64, '1'),
          R"({"config":{"digest":")" + config_digest + R"("}})");
    Write(layout / "blobs" / "sha256" / std::string(64, '2'),
          R"({"config":{"Entrypoint":["/bin/app"],"Cmd":["--serve"],"Env":["A=1"],)"
          R"("WorkingDir":"/srv","User":"1000:1000","StopSignal":"SIGINT"}})");
  }
  oci::ImageStore images(store.path.string());
  Result<oci::StoredImage> app = images.Resolve(*NormalizeReference("app:1.0"));
  BOOST_REQUIRE_MESSAGE(app.ok(), app.status().ToString());
  BOOST_CHECK_EQUAL(app->manifest_digest, manifest_digest);
  BOOST_CHECK_EQUAL(app->tag, "1.0");
  BOOST_CHECK_EQUAL(app->config.entrypoint.at(0), "/bin/app");
  BOOST_CHECK_EQUAL(app->config.working_dir, "/srv");
  BOOST_CHECK_EQUAL(app->config.stop_signal, "SIGINT");
  BOOST_CHECK(images.Resolve(*NormalizeReference("ghcr.io/org/tool:1.0")).ok());
  BOOST_CHECK(images.Resolve(*NormalizeReference("app@" + manifest_digest)).ok());
  Result<oci::StoredImage> missing = images.Resolve(*NormalizeReference("app:2.0"));
  BOOST_CHECK(missing.status().code() == Status::Code::kNotFound);
  BOOST_CHECK_EQUAL(missing.status().message(), "docker.io/library/app:2.0: not found");
  BOOST_CHECK(!images.Resolve(*NormalizeReference("other:1.0")).ok());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(oci_spec)

BOOST_AUTO_TEST_CASE(command_replaces_entrypoint_and_drops_cmd_args_replace_cmd) {
  oci::ImageConfig image;
  image.entrypoint = {"/entry"};
  image.cmd = {"default"};
  using V = std::vector<std::string>;
  BOOST_CHECK(oci::MergeArgv(image, std::nullopt, std::nullopt) == (V{"/entry", "default"}));
  BOOST_CHECK(oci::MergeArgv(image, V{"/bin/sh"}, std::nullopt) == (V{"/bin/sh"}));
  BOOST_CHECK(oci::MergeArgv(image, std::nullopt, V{"x"}) == (V{"/entry", "x"}));
  BOOST_CHECK(oci::MergeArgv(image, V{"/bin/sh"}, V{"-c", "y"}) == (V{"/bin/sh", "-c", "y"}));
  image.entrypoint.clear();
  BOOST_CHECK(oci::MergeArgv(image, std::nullopt, std::nullopt) == (V{"default"}));
}

BOOST_AUTO_TEST_CASE(pod_env_overrides_the_image_env_in_place) {
  const std::vector<std::string> env =
      oci::MergeEnv({"PATH=/bin", "A=image"}, {{"A", "pod"}, {"B", "2"}});
  BOOST_CHECK(env == (std::vector<std::string>{"PATH=/bin", "A=pod", "B=2"}));
}

BOOST_AUTO_TEST_CASE(capabilities_add_and_drop_on_containerd_defaults) {
  const std::vector<std::string> all = {"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_NET_ADMIN"};
  auto caps = oci::ApplyCapabilities(oci::DefaultCapabilities(), {"net_admin"}, {"CHOWN"}, all);
  BOOST_CHECK(std::find(caps.begin(), caps.end(), "CAP_NET_ADMIN") != caps.end());
  BOOST_CHECK(std::find(caps.begin(), caps.end(), "CAP_CHOWN") == caps.end());
  BOOST_CHECK(std::find(caps.begin(), caps.end(), "CAP_SETUID") != caps.end());
  BOOST_CHECK(oci::ApplyCapabilities(oci::DefaultCapabilities(), {"ALL"}, {}, all) == all);
  BOOST_CHECK(oci::ApplyCapabilities(oci::DefaultCapabilities(), {"KILL"}, {"ALL"}, all) ==
              (std::vector<std::string>{"CAP_KILL"}));
}

BOOST_AUTO_TEST_CASE(users_from_the_image_passwd_and_run_as_user) {
  TempDir root;
  Write(root.path / "etc" / "passwd",
        "root:x:0:0::/root:/bin/sh\nslurm:x:64030:64031::/:/bin/sh\n");
  Write(root.path / "etc" / "group", "root:x:0:\nmunge:x:500:\n");
  const std::string r = root.path.string();
  auto ids = [&](const std::string& user, std::optional<int64_t> u, std::optional<int64_t> g) {
    Result<oci::UserIds> got = oci::ResolveUser(user, u, g, r);
    BOOST_REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    return std::make_pair(got->uid, got->gid);
  };
  BOOST_CHECK((ids("", std::nullopt, std::nullopt) == std::make_pair(0u, 0u)));
  BOOST_CHECK((ids("slurm", std::nullopt, std::nullopt) == std::make_pair(64030u, 64031u)));
  BOOST_CHECK((ids("slurm:munge", std::nullopt, std::nullopt) == std::make_pair(64030u, 500u)));
  BOOST_CHECK((ids("1234:99", std::nullopt, std::nullopt) == std::make_pair(1234u, 99u)));
  BOOST_CHECK((ids("slurm", 64030, 7) == std::make_pair(64030u, 7u)));
  BOOST_CHECK(!oci::ResolveUser("nobody-here", std::nullopt, std::nullopt, r).ok());
}

BOOST_AUTO_TEST_CASE(the_spec_joins_the_sandbox_and_honours_privileged) {
  oci::SpecInput in;
  in.args = {"/bin/sh"};
  in.env = {"PATH=/bin"};
  in.rootfs = "/x/rootfs";
  in.hostname = "pod-a";
  in.netns = "/proc/7/ns/net";
  in.utsns = "/proc/7/ns/uts";
  in.ipcns = "/proc/7/ns/ipc";
  in.read_only_root = true;
  oci::SpecMount m;
  m.source = "/host/cfg";
  m.destination = "/cfg";
  m.read_only = true;
  in.mounts.push_back(m);
  auto spec = ParseJson(oci::BuildRuntimeSpec(in));
  BOOST_REQUIRE(spec.ok());
  const rapidjson::Value& s = **spec;
  BOOST_CHECK_EQUAL(GetString(s, "hostname"), "pod-a");
  BOOST_CHECK(Find(s, "root.readonly")->GetBool());
  std::map<std::string, std::string> ns;
  for (const auto& n : Find(s, "linux.namespaces")->GetArray())
    ns[GetString(n, "type")] = GetString(n, "path");
  BOOST_CHECK_EQUAL(ns.at("network"), "/proc/7/ns/net");
  BOOST_CHECK_EQUAL(ns.at("ipc"), "/proc/7/ns/ipc");
  BOOST_CHECK_EQUAL(ns.at("pid"), "");    // its own
  BOOST_CHECK_EQUAL(ns.at("mount"), "");  // its own
  BOOST_CHECK(Find(s, "linux.maskedPaths") != nullptr);
  const rapidjson::Value& mounts = *Find(s, "mounts");
  const rapidjson::Value& last = mounts[mounts.Size() - 1];
  BOOST_CHECK_EQUAL(GetString(last, "destination"), "/cfg");
  BOOST_CHECK_EQUAL(last["options"][1].GetString(), std::string("ro"));
  for (const auto& mount : mounts.GetArray()) {
    if (GetString(mount, "destination") == "/sys")
      BOOST_CHECK_EQUAL(mount["options"][3].GetString(), std::string("ro"));
  }

  in.privileged = true;
  spec = ParseJson(oci::BuildRuntimeSpec(in));
  BOOST_CHECK(Find(**spec, "linux.maskedPaths") == nullptr);
  for (const auto& mount : Find(**spec, "mounts")->GetArray()) {
    if (GetString(mount, "destination") == "/sys")
      BOOST_CHECK_EQUAL(mount["options"][3].GetString(), std::string("rw"));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(oci_pod_rules)

using kubelet_internal::ComputePodPhase;
using kubelet_internal::PhaseInput;
using State = OciContainer::State;

PhaseInput In(State state, int exit_code = 0, bool last = false) {
  PhaseInput p;
  p.state = state;
  p.exit_code = exit_code;
  p.has_last_termination = last;
  return p;
}

BOOST_AUTO_TEST_CASE(phase_as_the_kubelet_computes_it) {
  BOOST_CHECK_EQUAL(ComputePodPhase("Always", {}, {In(State::kWaiting)}), "Pending");
  BOOST_CHECK_EQUAL(ComputePodPhase("Always", {}, {In(State::kRunning), In(State::kRunning)}),
                    "Running");
  BOOST_CHECK_EQUAL(ComputePodPhase("Never", {}, {In(State::kTerminated, 0)}), "Succeeded");
  BOOST_CHECK_EQUAL(ComputePodPhase("Never", {}, {In(State::kTerminated, 3)}), "Failed");
  BOOST_CHECK_EQUAL(ComputePodPhase("Never", {}, {In(State::kTerminated, 0), In(State::kRunning)}),
                    "Running");
  // A crash loop: waiting with a last termination is a stopped container.
  BOOST_CHECK_EQUAL(ComputePodPhase("Always", {}, {In(State::kWaiting, 1, true)}), "Running");
  BOOST_CHECK_EQUAL(ComputePodPhase("OnFailure", {}, {In(State::kTerminated, 0)}), "Succeeded");
  BOOST_CHECK_EQUAL(ComputePodPhase("OnFailure", {}, {In(State::kWaiting, 2, true)}), "Running");
  // Init containers first.
  BOOST_CHECK_EQUAL(ComputePodPhase("Always", {In(State::kRunning)}, {In(State::kWaiting)}),
                    "Pending");
  BOOST_CHECK_EQUAL(ComputePodPhase("Never", {In(State::kTerminated, 1)}, {In(State::kWaiting)}),
                    "Failed");
  BOOST_CHECK_EQUAL(
      ComputePodPhase("Always", {In(State::kWaiting, 1, true)}, {In(State::kWaiting)}), "Pending");
  BOOST_CHECK_EQUAL(ComputePodPhase("Always", {In(State::kTerminated, 0)}, {In(State::kRunning)}),
                    "Running");
}

BOOST_AUTO_TEST_CASE(back_off_doubles_from_the_second_restart_up_to_the_cap) {
  using kubelet_internal::RestartDelay;
  using std::chrono::milliseconds;
  const milliseconds base(10000), max(300000);
  BOOST_CHECK_EQUAL(RestartDelay(0, base, max).count(), 0);
  BOOST_CHECK_EQUAL(RestartDelay(1, base, max).count(), 10000);
  BOOST_CHECK_EQUAL(RestartDelay(2, base, max).count(), 20000);
  BOOST_CHECK_EQUAL(RestartDelay(5, base, max).count(), 160000);
  BOOST_CHECK_EQUAL(RestartDelay(6, base, max).count(), 300000);
  BOOST_CHECK_EQUAL(RestartDelay(60, base, max).count(), 300000);
  BOOST_CHECK(kubelet_internal::ShouldRestart("Always", 0));
  BOOST_CHECK(!kubelet_internal::ShouldRestart("OnFailure", 0));
  BOOST_CHECK(kubelet_internal::ShouldRestart("OnFailure", 1));
  BOOST_CHECK(!kubelet_internal::ShouldRestart("Never", 1));
}

BOOST_AUTO_TEST_CASE(atomic_writer_layout) {
  TempDir dir;
  kubelet_internal::VolumePayload payload;
  payload["color"] = {"blue", 0644};
  payload["conf/app.ini"] = {"x=1", 0600};
  BOOST_REQUIRE(kubelet_internal::AtomicWrite(dir.path.string(), payload).ok());
  BOOST_CHECK(fs::is_symlink(dir.path / "..data"));
  const std::string ts = fs::read_symlink(dir.path / "..data").string();
  BOOST_CHECK(ts.rfind("..20", 0) == 0);
  BOOST_CHECK_EQUAL(fs::read_symlink(dir.path / "color").string(), "..data/color");
  BOOST_CHECK_EQUAL(fs::read_symlink(dir.path / "conf").string(), "..data/conf");
  std::ifstream in(dir.path / "conf" / "app.ini");
  std::string text;
  std::getline(in, text);
  BOOST_CHECK_EQUAL(text, "x=1");
  struct stat st;
  BOOST_REQUIRE(stat((dir.path / ts / "conf" / "app.ini").c_str(), &st) == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0600u);
  // A second write swaps ..data and drops what is gone.
  payload.erase("conf/app.ini");
  BOOST_REQUIRE(kubelet_internal::AtomicWrite(dir.path.string(), payload).ok());
  BOOST_CHECK(!fs::exists(fs::symlink_status(dir.path / "conf")));
  BOOST_CHECK(!fs::exists(dir.path / ts));
  BOOST_CHECK(!kubelet_internal::AtomicWrite(dir.path.string(), {{"../x", {"", 0644}}}).ok());
}

std::unique_ptr<rapidjson::Document> Json(const std::string& text) {
  auto doc = ParseJson(text);
  BOOST_REQUIRE_MESSAGE(doc.ok(), doc.status().ToString());
  return std::move(*doc);
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// An emptyDir is set up once per pod: a second container's start does not undo the
// mode the first one gave it (munged's socket directory, 0755).
BOOST_AUTO_TEST_CASE(an_empty_dir_is_made_0777_once) {
  k8sbridge::FakeClock clock;
  Store store{clock};
  auto pod = Json(R"({"metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":{}})");
  auto volume = Json(R"({"name":"run","emptyDir":{}})");
  TempDir dir;
  const std::string path = (dir.path / "run").string();
  BOOST_REQUIRE(kubelet_internal::PrepareVolume(store, nullptr, *pod, *volume, path).ok());
  struct stat st;
  BOOST_REQUIRE(stat(path.c_str(), &st) == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 07777, 0777u);
  BOOST_REQUIRE(chmod(path.c_str(), 0755) == 0);
  BOOST_REQUIRE(kubelet_internal::PrepareVolume(store, nullptr, *pod, *volume, path).ok());
  BOOST_REQUIRE(stat(path.c_str(), &st) == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 07777, 0755u);
}

BOOST_AUTO_TEST_CASE(projected_volume_with_a_token_from_the_issuer) {
  k8sbridge::FakeClock clock;
  Store store{clock};
  BOOST_REQUIRE(
      store.Create("namespaces", "", std::move(*Json(R"({"metadata":{"name":"ns"}})"))).ok());
  BOOST_REQUIRE(
      store
          .Create("configmaps", "ns",
                  std::move(*Json(R"({"metadata":{"name":"kube-root-ca.crt","namespace":"ns"},
                                     "data":{"ca.crt":"PEM"}})")))
          .ok());
  auto pod = Json(R"({"metadata":{"name":"p","namespace":"ns","uid":"u"},
      "spec":{"serviceAccountName":"robot"}})");
  auto volume = Json(R"({"name":"kube-api-access","projected":{"sources":[
      {"serviceAccountToken":{"path":"token","expirationSeconds":600}},
      {"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}},
      {"downwardAPI":{"items":[{"path":"namespace","fieldRef":{"fieldPath":"metadata.namespace"}}]}}]}})");
  std::string asked;
  kubelet_internal::TokenIssuer issuer = [&](const std::string& ns, const std::string& sa,
                                             int64_t seconds) -> Result<std::string> {
    asked = fmt::format("{}/{}/{}", ns, sa, seconds);
    return std::string("jwt");
  };
  TempDir dir;
  Result<std::string> path =
      kubelet_internal::PrepareVolume(store, issuer, *pod, *volume, dir.path.string());
  BOOST_REQUIRE_MESSAGE(path.ok(), path.status().ToString());
  BOOST_CHECK_EQUAL(asked, "ns/robot/600");
  BOOST_CHECK_EQUAL(ReadAll(dir.path / "token"), "jwt");
  BOOST_CHECK_EQUAL(ReadAll(dir.path / "ca.crt"), "PEM");
  BOOST_CHECK_EQUAL(ReadAll(dir.path / "namespace"), "ns");
  // The volume's defaultMode (0644): a non-root process in the pod reads the token.
  struct stat st;
  BOOST_REQUIRE(stat((dir.path / "token").c_str(), &st) == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0644u);
  // With an fsGroup the kubelet makes it 0600 (projected.go's collectData).
  auto grouped = Json(R"({"metadata":{"name":"p","namespace":"ns","uid":"u"},
      "spec":{"serviceAccountName":"robot","securityContext":{"fsGroup":64030}}})");
  TempDir grouped_dir;
  BOOST_REQUIRE(
      kubelet_internal::PrepareVolume(store, issuer, *grouped, *volume, grouped_dir.path.string())
          .ok());
  BOOST_REQUIRE(stat((grouped_dir.path / "token").c_str(), &st) == 0);
  BOOST_CHECK_EQUAL(st.st_mode & 0777, 0600u);

  Result<std::string> no_issuer =
      kubelet_internal::PrepareVolume(store, nullptr, *pod, *volume, dir.path.string());
  BOOST_REQUIRE(!no_issuer.ok());
  BOOST_CHECK(no_issuer.status().message().find("KubeletOptions::issue_token is unset") !=
              std::string::npos);
  auto missing = Json(R"({"name":"m","configMap":{"name":"nope"}})");
  Result<std::string> absent =
      kubelet_internal::PrepareVolume(store, nullptr, *pod, *missing, dir.path.string());
  BOOST_CHECK_EQUAL(absent.status().message(), "configmap \"nope\" not found");
  auto optional = Json(R"({"name":"m","configMap":{"name":"nope","optional":true}})");
  BOOST_CHECK(
      kubelet_internal::PrepareVolume(store, nullptr, *pod, *optional, dir.path.string()).ok());
}

BOOST_AUTO_TEST_CASE(a_claim_is_its_bound_volumes_host_path) {
  k8sbridge::FakeClock clock;
  Store store{clock};
  BOOST_REQUIRE(
      store.Create("namespaces", "", std::move(*Json(R"({"metadata":{"name":"ns"}})"))).ok());
  TempDir host;
  using kubelet_internal::ClaimHostPath;
  BOOST_CHECK_EQUAL(ClaimHostPath(store, "ns", "data").status().message(),
                    "persistentvolumeclaim \"data\" not found");
  BOOST_REQUIRE(store
                    .Create("persistentvolumeclaims", "ns",
                            std::move(*Json(R"({"metadata":{"name":"data","namespace":"ns"},
                                     "spec":{},"status":{"phase":"Pending"}})")))
                    .ok());
  Result<std::string> pending = ClaimHostPath(store, "ns", "data");
  BOOST_CHECK(pending.status().code() == Status::Code::kUnavailable);
  BOOST_CHECK_EQUAL(pending.status().message(),
                    "persistentvolumeclaim \"data\" is not bound (phase Pending)");
  auto bound = store.Mutate("persistentvolumeclaims", "ns", "data", [](rapidjson::Document& doc) {
    SetMember(doc, "spec.volumeName", rapidjson::Value("pv-1"));
    SetMember(doc, "status.phase", rapidjson::Value("Bound"));
    return Status::Ok();
  });
  BOOST_REQUIRE(bound.ok());
  BOOST_CHECK_EQUAL(ClaimHostPath(store, "ns", "data").status().message(),
                    "persistentvolume \"pv-1\" not found");
  if (!Store::IsClusterScoped("persistentvolumes")) {
    BOOST_TEST_MESSAGE("persistentvolumes are not a cluster-scoped resource of this store yet");
    return;
  }
  const std::string dir = (host.path / "pv-1").string();
  auto pv =
      store.Create("persistentvolumes", "",
                   std::move(*Json(R"({"metadata":{"name":"pv-1"},"spec":{"hostPath":{"path":")" +
                                   dir + R"("}}})")));
  BOOST_REQUIRE_MESSAGE(pv.ok(), pv.status().ToString());
  Result<std::string> path = ClaimHostPath(store, "ns", "data");
  BOOST_REQUIRE_MESSAGE(path.ok(), path.status().ToString());
  BOOST_CHECK_EQUAL(*path, dir);
  BOOST_CHECK(fs::is_directory(dir));
}

BOOST_AUTO_TEST_CASE(log_tail_lines) {
  BOOST_CHECK_EQUAL(TailLines("a\nb\nc\n", 2), "b\nc\n");
  BOOST_CHECK_EQUAL(TailLines("a\nb\nc", 1), "c");
  BOOST_CHECK_EQUAL(TailLines("a\nb\n", 5), "a\nb\n");
  BOOST_CHECK_EQUAL(TailLines("a\nb\n", -1), "a\nb\n");
  BOOST_CHECK_EQUAL(TailLines("a\nb\n", 0), "");
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace kubesim
