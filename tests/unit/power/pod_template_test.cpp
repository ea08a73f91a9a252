#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include "k8sbridge/power/pod_template.h"

namespace power = k8sbridge::power;

namespace {
std::string Json(const rapidjson::Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v.Accept(writer);
  return buffer.GetString();
}
std::string ErrorOf(std::string_view yaml) {
  auto r = power::ParsePodTemplate(yaml, "worker.yaml");
  return r.ok() ? "" : r.status().message();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(pod_template)

BOOST_AUTO_TEST_CASE(yaml_scalars_become_typed_json) {
  auto doc = power::YamlToJson(R"(
a: 1
b: "1"
c: true
d: 'false'
e: ~
f: 2.5
g: text
h: [x, 3]
i: 99999999999999999999999
j: !!str 7
k:
l: 0400
m: 0x1F
n: yes
o: "0400"
p: -12
q: 1e3
r: 1e999
)",
                               "t.yaml");
  BOOST_REQUIRE_MESSAGE(doc.ok(), doc.status().ToString());
  BOOST_CHECK_EQUAL(
      Json(*doc),
      R"({"a":1,"b":"1","c":true,"d":"false","e":null,"f":2.5,"g":"text",)"
      R"("h":["x",3],"i":"99999999999999999999999","j":"7","k":null,"l":256,"m":31,"n":true,)"
      R"("o":"0400","p":-12,"q":1000.0,"r":"1e999"})");
}

BOOST_AUTO_TEST_CASE(yaml_errors_name_line_and_column) {
  auto doc = power::YamlToJson("spec:\n  containers: [a\n", "t.yaml");
  BOOST_REQUIRE(!doc.ok());
  BOOST_CHECK_MESSAGE(doc.status().message().starts_with("t.yaml:3:1: not valid YAML: "),
                      doc.status().message());
  doc = power::YamlToJson("a: 1\na: 2\n", "t.yaml");
  BOOST_REQUIRE(!doc.ok());
  BOOST_CHECK_EQUAL(doc.status().message(), "t.yaml:2: key 'a' appears twice: keep one");
}

BOOST_AUTO_TEST_CASE(alias_bombs_are_refused) {
  std::string yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    yaml += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i)
      yaml += std::string(i ? ", *" : "*") + char(c - 1);
    yaml += "]\n";
  }
  auto doc = power::YamlToJson(yaml, "bomb.yaml");
  BOOST_REQUIRE(!doc.ok());
  BOOST_CHECK_EQUAL(doc.status().message(),
                    "bomb.yaml: more than 200000 values (aliases expanding?): not a pod template");
}

BOOST_AUTO_TEST_CASE(accepts_pod_template_and_bare_pod) {
  auto t = power::ParsePodTemplate(R"(
apiVersion: v1
kind: PodTemplate
metadata:
  name: this-is-the-podtemplate-object-name-and-is-ignored
template:
  metadata:
    labels: {team: hpc}
  spec:
    containers:
    - name: sidecar
      image: busybox
    - name: slurmd
      image: registry.example/slurm-worker:24.11
)",
                                   "worker.yaml");
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  BOOST_CHECK_EQUAL(t->worker_container, 1u);
  BOOST_CHECK_EQUAL(t->file, "worker.yaml");
  BOOST_CHECK_EQUAL(Json((*t->pod)["metadata"]), R"({"labels":{"team":"hpc"}})");

  auto bare = power::ParsePodTemplate("spec:\n  containers:\n  - {name: w, image: i}\n", "b.yaml");
  BOOST_REQUIRE_MESSAGE(bare.ok(), bare.status().ToString());
  BOOST_CHECK_EQUAL(bare->worker_container, 0u);
  BOOST_CHECK_EQUAL(Json(*bare->pod),
                    R"({"metadata":{},"spec":{"containers":[{"name":"w","image":"i"}]}})");
}

BOOST_AUTO_TEST_CASE(errors_name_the_file_and_field) {
  BOOST_CHECK_EQUAL(ErrorOf("- a\n"),
                    "pod template worker.yaml: (top level): is a list, expected a mapping with "
                    "metadata and spec (a PodTemplate or a Pod)");
  BOOST_CHECK_EQUAL(ErrorOf("kind: Deployment\nspec: {}\n"),
                    "pod template worker.yaml: kind: is 'Deployment': use PodTemplate (or Pod)");
  BOOST_CHECK_EQUAL(ErrorOf("kind: PodTemplate\nspec: {}\n"),
                    "pod template worker.yaml: template: a PodTemplate needs template: {metadata, "
                    "spec}: add it");
  BOOST_CHECK_EQUAL(ErrorOf("metadata: {}\n"),
                    "pod template worker.yaml: spec: is missing or not a mapping: add the pod spec "
                    "with its containers");
  BOOST_CHECK_EQUAL(ErrorOf("kind: PodTemplate\ntemplate:\n  spec: {containers: []}\n"),
                    "pod template worker.yaml: template.spec.containers: must list at least one "
                    "container (the one named slurmd, else the first, runs the worker)");
  BOOST_CHECK_EQUAL(ErrorOf("spec:\n  containers:\n  - name: slurmd\n"),
                    "pod template worker.yaml: spec.containers[0].image: is missing: every "
                    "container needs a name and an image");
  BOOST_CHECK_EQUAL(ErrorOf("metadata: {name: w-0}\nspec: {containers: [{name: a, image: b}]}\n"),
                    "pod template worker.yaml: metadata.name: remove it: each worker pod is named "
                    "after its Slurm node");
  BOOST_CHECK_EQUAL(
      ErrorOf("metadata: {labels: {k8sbridge.io/node: x}}\nspec: {containers: [{name: a, image: "
              "b}]}\n"),
      "pod template worker.yaml: metadata.labels.k8sbridge.io/node: is set by k8sbridge to mark "
      "the pods it owns: remove it from the template");
  BOOST_CHECK_EQUAL(
      ErrorOf("metadata: {labels: {gpu: true}}\nspec: {containers: [{name: a, image: b}]}\n"),
      "pod template worker.yaml: metadata.labels.gpu: is a boolean: quote the value, e.g. "
      "\"true\"");
  BOOST_CHECK_EQUAL(
      ErrorOf("spec: {nodeName: n1, containers: [{name: a, image: b}]}\n"),
      "pod template worker.yaml: spec.nodeName: remove it: the scheduler places worker pods (use "
      "nodeSelector, affinity or Feature= mappings)");
  BOOST_CHECK_EQUAL(
      ErrorOf("spec: {restartPolicy: Always, containers: [{name: a, image: b}]}\n"),
      "pod template worker.yaml: spec.restartPolicy: must be Never or unset: a worker that fails "
      "must leave a Failed pod that k8sbridge replaces, not restart in place as a node Slurm "
      "thinks is booting");
}

BOOST_AUTO_TEST_CASE(bidirectional_mount_propagation_is_refused) {
  // The jail's bind mounts would reach the Kubernetes node's mount namespace and
  // outlive the pod (docs/jail.md): refused in any container, init ones included.
  const std::string fix =
      ": is Bidirectional: the mounts made in the pod (the jail's binds of /dev, /sys, "
      "/run/munge, the Slurm directories and --bind paths) would reach the Kubernetes node's "
      "mount namespace and outlive the pod; remove mountPropagation (the default, None, keeps "
      "them in the pod), or use HostToContainer";
  BOOST_CHECK_EQUAL(
      ErrorOf("kind: PodTemplate\ntemplate:\n  spec:\n    containers:\n    - name: slurmd\n"
              "      image: w\n      volumeMounts:\n      - {name: k, mountPath: /etc/k}\n"
              "      - {name: jail, mountPath: /jail, mountPropagation: Bidirectional}\n"),
      "pod template worker.yaml: template.spec.containers[0].volumeMounts[1].mountPropagation" +
          fix);
  BOOST_CHECK_EQUAL(
      ErrorOf("spec:\n  initContainers:\n  - name: init\n    image: i\n    volumeMounts:\n"
              "    - {name: jail, mountPath: /jail, mountPropagation: Bidirectional}\n"
              "  containers: [{name: slurmd, image: w}]\n"),
      "pod template worker.yaml: spec.initContainers[0].volumeMounts[0].mountPropagation" + fix);
  BOOST_CHECK_EQUAL(
      ErrorOf("spec:\n  containers:\n  - name: slurmd\n    image: w\n    volumeMounts: {a: b}\n"),
      "pod template worker.yaml: spec.containers[0].volumeMounts: is a mapping, expected a list "
      "of mounts");
  // What stays in the pod is accepted.
  auto ok = power::ParsePodTemplate(
      "spec:\n  containers:\n  - name: slurmd\n    image: w\n    volumeMounts:\n"
      "    - {name: a, mountPath: /a, mountPropagation: HostToContainer}\n"
      "    - {name: b, mountPath: /b, mountPropagation: None}\n    - {name: c, mountPath: /c}\n",
      "worker.yaml");
  BOOST_CHECK_MESSAGE(ok.ok(), ok.status().ToString());
}

BOOST_AUTO_TEST_CASE(automount_service_account_token_must_be_a_boolean) {
  BOOST_CHECK_EQUAL(
      ErrorOf("spec:\n  automountServiceAccountToken: 'no'\n  containers: [{name: a, image: b}]\n"),
      "pod template worker.yaml: spec.automountServiceAccountToken: is a string, expected true "
      "or false (unset: k8sbridge sets false, so no job can read the pod's token)");
}

// Why a token a job could read is refused, and the token a worker pod may carry:
// the fixes follow them in the messages.
const std::string kJobCouldRead =
    "a job could read it (a job's stdio, such as sbatch --input=, is opened outside the jail, "
    "as the job's user) and act on the cluster with it";
const std::string kRootOnlyToken =
    "a program in the pod that needs a token gets a projected serviceAccountToken volume with "
    "defaultMode: 0400 and no fsGroup (docs/power.md, \"Pod templates\")";

// A worker pod whose slurmd mounts the volume `token` at `mount_path`; `volume` is
// the rest of that volume's entry, `spec_extra` more of the spec.
std::string TokenPod(std::string_view volume,
                     std::string_view mount_path = "/var/run/secrets/kubernetes.io/serviceaccount",
                     std::string_view spec_extra = "") {
  return fmt::format(
      "spec:\n{}  containers:\n  - name: slurmd\n    image: w\n    volumeMounts:\n"
      "    - {{name: jail, mountPath: /jail}}\n"
      "    - {{name: token, mountPath: '{}', readOnly: true}}\n"
      "  volumes:\n  - {{name: jail, emptyDir: {{}}}}\n  - name: token\n{}",
      spec_extra, mount_path, volume);
}

// The volume Kubernetes would automount, as a projected volume with `mode_line`.
std::string ProjectedToken(std::string_view mode_line = "defaultMode: 0400\n") {
  return fmt::format(
      "    projected:\n{}{}      sources:\n"
      "      - serviceAccountToken: {{path: token, expirationSeconds: 3600}}\n"
      "      - configMap: {{name: kube-root-ca.crt, items: [{{key: ca.crt, path: ca.crt}}]}}\n"
      "      - downwardAPI: {{items: [{{path: namespace, fieldRef: {{fieldPath: "
      "metadata.namespace}}}}]}}\n",
      mode_line.empty() ? "" : "      ", mode_line);
}

BOOST_AUTO_TEST_CASE(a_template_that_turns_the_automounted_token_on_is_refused) {
  BOOST_CHECK_EQUAL(
      ErrorOf("kind: PodTemplate\ntemplate:\n  spec:\n    automountServiceAccountToken: true\n"
              "    containers: [{name: slurmd, image: w}]\n"),
      "pod template worker.yaml: template.spec.automountServiceAccountToken: is true: the "
      "automounted token is readable by every user (mode 0644, which the pod cannot set), so " +
          kJobCouldRead + "; leave it unset or set false (" + kRootOnlyToken + ")");
  // YAML 1.1's yes is true too, as kubectl reads it.
  BOOST_CHECK_NE(
      ErrorOf("spec:\n  automountServiceAccountToken: yes\n  containers: [{name: a, image: b}]\n"),
      "");
  BOOST_CHECK_EQUAL(
      ErrorOf(
          "spec:\n  automountServiceAccountToken: false\n  containers: [{name: a, image: b}]\n"),
      "");
}

BOOST_AUTO_TEST_CASE(a_root_only_projected_token_at_the_token_directory_is_accepted) {
  BOOST_CHECK_EQUAL(ErrorOf(TokenPod(ProjectedToken())), "");
  // 0600 is root's alone too; JSON (and YAML written from it) gives the mode in
  // decimal: 256 is 0400. Root's own runAsUser leaves the token root's.
  BOOST_CHECK_EQUAL(ErrorOf(TokenPod(ProjectedToken("defaultMode: 0600\n"))), "");
  BOOST_CHECK_EQUAL(ErrorOf(TokenPod(ProjectedToken("defaultMode: 256\n"))), "");
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken(), "/var/run/secrets/kubernetes.io/serviceaccount",
                       "  securityContext: {runAsUser: 0}\n")),
      "");
  // Elsewhere in the pod, with a kubeconfig naming it (Kubeconfig=).
  BOOST_CHECK_EQUAL(ErrorOf(TokenPod(ProjectedToken(), "/etc/k8sbridge/token")), "");
  // Other projected sources need no mode of their own.
  BOOST_CHECK_EQUAL(ErrorOf("spec:\n  containers: [{name: slurmd, image: w}]\n  volumes:\n"
                            "  - name: info\n    projected:\n      sources:\n"
                            "      - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: "
                            "metadata.labels}}]}\n"),
                    "");
}

BOOST_AUTO_TEST_CASE(a_projected_token_others_could_read_is_refused) {
  const std::string fix =
      ", so group and others can read the service account token: " + kJobCouldRead +
      "; set defaultMode: 0400 on the projected volume";
  BOOST_CHECK_EQUAL(ErrorOf(TokenPod(ProjectedToken(""))),
                    "pod template worker.yaml: spec.volumes[1].projected.defaultMode: is unset "
                    "(0644)" +
                        fix);
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken("defaultMode: 0644\n"))),
      "pod template worker.yaml: spec.volumes[1].projected.defaultMode: is 0644" + fix);
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken("defaultMode: 288\n"))),  // 0440
      "pod template worker.yaml: spec.volumes[1].projected.defaultMode: is 0440" + fix);
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken("defaultMode: '0400'\n"))),
      "pod template worker.yaml: spec.volumes[1].projected.defaultMode: is a string" + fix);
  // Refused wherever it is mounted, or not mounted at all.
  BOOST_CHECK_NE(ErrorOf(TokenPod(ProjectedToken(""), "/etc/k8sbridge/token")), "");
  // An item's own mode replaces defaultMode for its file.
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod("    projected:\n      defaultMode: 0400\n      sources:\n"
                       "      - serviceAccountToken: {path: sa-token}\n"
                       "      - secret: {name: s, items: [{key: k, path: token, mode: 0644}]}\n")),
      "pod template worker.yaml: spec.volumes[1].projected.sources[1].secret.items[0].mode: is "
      "0644, so group and others can read that file of the token's volume: " +
          kJobCouldRead + "; remove mode or set 0400");
}

BOOST_AUTO_TEST_CASE(a_projected_token_with_fs_group_is_refused) {
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken(), "/var/run/secrets/kubernetes.io/serviceaccount",
                       "  securityContext: {fsGroup: 2000}\n")),
      "pod template worker.yaml: spec.securityContext.fsGroup: is set, so the kubelet lets that "
      "group read the service account token of spec.volumes[1] (mode 0640): " +
          kJobCouldRead + "; remove fsGroup");
  // Without a token, fsGroup is no concern of k8sbridge's.
  BOOST_CHECK_EQUAL(
      ErrorOf("spec:\n  securityContext: {fsGroup: 2000}\n  containers: [{name: a, image: b}]\n"),
      "");
}

BOOST_AUTO_TEST_CASE(a_projected_token_given_to_a_user_other_than_root_is_refused) {
  // Every container runs as 1000: the kubelet makes the token 1000's (mode 0600).
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken(), "/var/run/secrets/kubernetes.io/serviceaccount",
                       "  securityContext: {runAsUser: 1000}\n")),
      "pod template worker.yaml: spec: every container runs as user 1000 (runAsUser), so the "
      "kubelet gives that user the service account token of spec.volumes[1]: " +
          kJobCouldRead + "; the worker runs as root: remove runAsUser");
  // Containers of different users: the token stays root's.
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod(ProjectedToken(), "/var/run/secrets/kubernetes.io/serviceaccount",
                       "  securityContext: {runAsUser: 1000}\n  initContainers:\n"
                       "  - {name: init, image: i, securityContext: {runAsUser: 0}}\n")),
      "");
}

BOOST_AUTO_TEST_CASE(another_volume_at_the_service_account_directory_is_refused) {
  BOOST_CHECK_EQUAL(
      ErrorOf(TokenPod("    secret: {secretName: worker-token, defaultMode: 0400}\n")),
      "pod template worker.yaml: spec.containers[0].volumeMounts[1].mountPath: is "
      "/var/run/secrets/kubernetes.io/serviceaccount, where Kubernetes clients read the pod's "
      "service account token (/var/run/secrets/kubernetes.io/serviceaccount), and volume "
      "'token' is not a projected serviceAccountToken volume only root can read: if it holds a "
      "token, " +
          kJobCouldRead + "; mount it elsewhere (" + kRootOnlyToken + ")");
  const std::string empty_dir = "    emptyDir: {}\n";
  // The same directory spelled otherwise, a file in it, and a parent that could hold it.
  for (std::string_view path : {"/var/run/secrets/kubernetes.io/serviceaccount/",
                                "/run/secrets/kubernetes.io/serviceaccount",
                                "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                "/var/run/secrets", "/var/run//secrets/./kubernetes.io"}) {
    BOOST_CHECK_MESSAGE(
        ErrorOf(TokenPod(empty_dir, path)).find(".mountPath: is ") != std::string::npos, path);
  }
  for (std::string_view path : {"/var/run", "/run", "/var/run/munge",
                                "/var/run/secrets/kubernetes.io/serviceaccountx", "/var/run/sec"}) {
    BOOST_CHECK_MESSAGE(ErrorOf(TokenPod(empty_dir, path)).empty(), path);
  }
  // A projected volume without a token source, and a mount of no volume listed.
  BOOST_CHECK_NE(ErrorOf(TokenPod("    projected:\n      defaultMode: 0400\n      sources:\n"
                                  "      - secret: {name: worker-token}\n")),
                 "");
  BOOST_CHECK_NE(ErrorOf("spec:\n  containers:\n  - name: slurmd\n    image: w\n"
                         "    volumeMounts: [{name: t, mountPath: /run/secrets}]\n"),
                 "");
  // In any kind of container.
  BOOST_CHECK_NE(ErrorOf("spec:\n  initContainers:\n  - name: init\n    image: i\n"
                         "    volumeMounts: [{name: t, mountPath: /run/secrets}]\n"
                         "  containers: [{name: slurmd, image: w}]\n"),
                 "");
}

BOOST_AUTO_TEST_CASE(shipped_template_keeps_the_jail_in_the_pod) {
  auto t = power::LoadPodTemplate(std::string(K8SBRIDGE_SOURCE_ROOT) +
                                  "/conf-templates/worker-pod.yaml");
  BOOST_REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  const rapidjson::Value& spec = (*t->pod)["spec"];
  bool has_jail = false;
  for (const auto& c : spec["containers"].GetArray()) {
    for (const auto& m : c["volumeMounts"].GetArray()) {
      std::string path = m["mountPath"].GetString();
      has_jail = has_jail || path == "/jail";
      BOOST_CHECK_MESSAGE(!m.HasMember("mountPropagation") ||
                              std::string(m["mountPropagation"].GetString()) != "Bidirectional",
                          path);
    }
  }
  BOOST_CHECK(has_jail);
  BOOST_REQUIRE(spec.HasMember("automountServiceAccountToken"));
  BOOST_CHECK(spec["automountServiceAccountToken"].IsFalse());
}

BOOST_AUTO_TEST_CASE(load_names_a_missing_file) {
  auto t = power::LoadPodTemplate("/nonexistent/worker.yaml");
  BOOST_REQUIRE(!t.ok());
  BOOST_CHECK_EQUAL(t.status().message(),
                    "cannot read pod template /nonexistent/worker.yaml: No such file or directory; "
                    "fix PodTemplate= in k8sbridge.conf or create the file (see "
                    "conf-templates/worker-pod.yaml)");
}

BOOST_AUTO_TEST_CASE(hash_follows_content_not_spelling) {
  auto a = power::ParsePodTemplate(
      "spec:\n  containers:\n  - {name: slurmd, image: w:1}\n  restartPolicy: Never\n", "a.yaml");
  auto b = power::ParsePodTemplate(
      "spec:\n  restartPolicy: Never\n  containers:\n  - image: w:1\n    name: slurmd\n", "b.yaml");
  auto c = power::ParsePodTemplate(
      "spec:\n  containers:\n  - {name: slurmd, image: w:2}\n  restartPolicy: Never\n", "c.yaml");
  BOOST_REQUIRE(a.ok() && b.ok() && c.ok());
  BOOST_CHECK_EQUAL(a->hash.size(), 16u);
  BOOST_CHECK_EQUAL(a->hash, b->hash);  // key order and flow style do not matter
  BOOST_CHECK_NE(a->hash, c->hash);     // a new image does
}

BOOST_AUTO_TEST_SUITE_END()
