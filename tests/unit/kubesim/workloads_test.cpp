// kubesim's workload resources (docs/kubesim.md, "Workloads"): the pure pieces (hashes,
// Go value printing, Pod Security checks) and, through the REST API without sockets,
// defaulting, validation and the controllers on a fake clock.
#include <boost/test/unit_test.hpp>

#include "api.h"
#include "fake_clock.h"
#include "nodes.h"
#include "pod_security.h"
#include "store.h"
#include "test_util.h"
#include "workload_controllers.h"
#include "workloads.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

struct Cluster {
  k8sbridge::FakeClock clock;
  Store store{clock, 1000};
  Api api{store};
  k8sbridge::NullLogger log;
  WorkloadControllers controllers{store, log, Options()};
  Cluster() {
    BOOST_REQUIRE(CreateDefaultNamespaces(store).ok());
    BOOST_REQUIRE(CreateDefaultStorageClass(store).ok());
  }
  static WorkloadControllerOptions Options() {
    WorkloadControllerOptions o;
    o.state_dir = "/tmp/kubesim-unit-workloads";
    return o;
  }
  ApiResponse Send(const std::string& method, const std::string& target, const std::string& body,
                   const std::string& content_type = "application/json") {
    return CallApi(api, method, target, body, content_type, "application/json");
  }
  static std::string Message(const ApiResponse& r) { return GetString(Json(r.body), "message"); }
  // Plays the kubelet: every pod of the namespace Running and Ready.
  void MakeAllReady() {
    for (const ObjectPtr& pod : store.List("pods", "default").items) {
      (void)store.Mutate("pods", "default", GetString(*pod, "metadata.name"),
                         [](rapidjson::Document& doc) {
                           SetMember(doc, "status.phase", rapidjson::Value("Running"));
                           SetCondition(doc, "Ready", "True", "", "", "2026-01-01T00:00:00Z");
                           return Status::Ok();
                         });
    }
  }
};

const char kStatefulSet[] =
    R"({"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"db"},"spec":{)"
    R"("replicas":2,"serviceName":"db","selector":{"matchLabels":{"app":"db"}},)"
    R"("template":{"metadata":{"labels":{"app":"db"}},"spec":{"containers":[{"name":"c","image":"x"}]}},)"
    R"("volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],)"
    R"("resources":{"requests":{"storage":"1Gi"}}}}]}})";

std::string PodSpec(const std::string& container_extra, const std::string& spec_extra = "") {
  return R"({"containers":[{"name":"c","image":"x")" + container_extra + "}]" + spec_extra + "}";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(workloads)

BOOST_AUTO_TEST_CASE(hashes_follow_upstream_encoding) {
  BOOST_TEST(Fnv32a("") == 2166136261u);
  BOOST_TEST(Fnv32a("a") == 0xe40c292cu);
  // rand.SafeEncodeString: byte % 27 into "bcdfghjklmnpqrstvwxz2456789".
  BOOST_TEST(SafeEncodeString("0") == "4");
  BOOST_TEST(SafeEncodeString("09") == "4f");
  auto t = Json(R"({"metadata":{"labels":{"app":"a"}},"spec":{}})");
  std::string h0 = PodTemplateHash(t, 0);
  BOOST_TEST(h0 == PodTemplateHash(t, 0));
  BOOST_TEST(h0 != PodTemplateHash(t, 1));
  BOOST_TEST(h0.find_first_not_of("bcdfghjklmnpqrstvwxz2456789") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(go_map_printing) {
  auto labels = Json(R"({"b":"2","a":"1"})");
  BOOST_TEST(GoStringMap(&labels) == R"(map[string]string{"a":"1", "b":"2"})");
  BOOST_TEST(GoStringMap(nullptr) == "map[string]string(nil)");
}

BOOST_AUTO_TEST_CASE(pod_security_baseline_checks) {
  auto spec = Json(PodSpec(
      R"(,"securityContext":{"privileged":true,"capabilities":{"add":["SYS_ADMIN","CHOWN"]}},)"
      R"("ports":[{"containerPort":80,"hostPort":8080}])",
      R"(,"hostNetwork":true,"hostPID":true,"volumes":[{"name":"h","hostPath":{"path":"/"}}])"));
  BOOST_TEST(FormatViolations(CheckPodSecurity(PodSecurityLevel::kBaseline, spec)) ==
             "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in "
             "securityContext.capabilities.add), host namespaces (hostNetwork=true, hostPID=true), "
             "hostPath volumes (volume \"h\"), hostPort (container \"c\" uses hostPort 8080), "
             "privileged (container \"c\" must not set securityContext.privileged=true)");
  BOOST_TEST(CheckPodSecurity(PodSecurityLevel::kPrivileged, spec).empty());
  BOOST_TEST(CheckPodSecurity(PodSecurityLevel::kBaseline, Json(PodSpec(""))).empty());
}

BOOST_AUTO_TEST_CASE(pod_security_restricted_checks) {
  BOOST_TEST(
      FormatViolations(CheckPodSecurity(PodSecurityLevel::kRestricted, Json(PodSpec("")))) ==
      "allowPrivilegeEscalation != false (container \"c\" must set "
      "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "
      "\"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod "
      "or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or "
      "container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
      "\"Localhost\")");
  auto good = Json(PodSpec(
      R"(,"securityContext":{"allowPrivilegeEscalation":false,)"
      R"("capabilities":{"drop":["ALL"]}})",
      R"(,"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}})"));
  BOOST_TEST(CheckPodSecurity(PodSecurityLevel::kRestricted, good).empty());
}

BOOST_AUTO_TEST_CASE(pod_security_enforce_refuses_with_upstream_message) {
  Cluster c;
  BOOST_REQUIRE(
      c.Send(
           "POST", "/api/v1/namespaces",
           R"({"metadata":{"name":"locked","labels":{"pod-security.kubernetes.io/enforce":"baseline"}}})")
          .code == 201);
  auto r = c.Send("POST", "/api/v1/namespaces/locked/pods",
                  R"({"metadata":{"name":"p"},"spec":)" +
                      PodSpec(R"(,"securityContext":{"privileged":true})") + "}");
  BOOST_TEST(r.code == 403);
  BOOST_TEST(Cluster::Message(r) ==
             "pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": privileged "
             "(container \"c\" must not set securityContext.privileged=true)");
}

BOOST_AUTO_TEST_CASE(defaults_and_validation_follow_upstream) {
  Cluster c;
  auto created = c.Send("POST", "/apis/apps/v1/namespaces/default/statefulsets", kStatefulSet);
  BOOST_REQUIRE_MESSAGE(created.code == 201, created.body);
  auto sts = Json(created.body);
  BOOST_TEST(GetString(sts, "spec.podManagementPolicy") == "OrderedReady");
  BOOST_TEST(GetString(sts, "spec.updateStrategy.type") == "RollingUpdate");
  BOOST_TEST(GetString(sts, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted") == "Retain");
  BOOST_TEST(GetString(sts, "spec.template.spec.restartPolicy") == "Always");
  auto update = c.Send("PATCH", "/apis/apps/v1/namespaces/default/statefulsets/db",
                       R"({"spec":{"serviceName":"other"}})", "application/merge-patch+json");
  BOOST_TEST(update.code == 422);
  BOOST_TEST(
      Cluster::Message(update).find("spec: Forbidden: updates to statefulset spec for fields "
                                    "other than 'replicas'") != std::string::npos);
  auto mismatch =
      c.Send("POST", "/apis/apps/v1/namespaces/default/deployments",
             R"({"metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"app":"x"}},)"
             R"("template":{"metadata":{"labels":{"app":"y"}},"spec":)" +
                 PodSpec("") + "}}}");
  BOOST_TEST(Cluster::Message(mismatch) ==
             "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: "
             "map[string]string{\"app\":\"y\"}: `selector` does not match template `labels`");
  auto pvc = c.Send("POST", "/api/v1/namespaces/default/persistentvolumeclaims",
                    R"({"metadata":{"name":"c"},"spec":{}})");
  BOOST_TEST(
      Cluster::Message(pvc) ==
      "PersistentVolumeClaim \"c\" is invalid: [spec.accessModes: Required value: at least 1 "
      "access mode is required, spec.resources[storage]: Required value]");
  auto job =
      c.Send("POST", "/apis/batch/v1/namespaces/default/jobs",
             R"({"metadata":{"name":"j"},"spec":{"template":{"spec":)" + PodSpec("") + "}}}");
  BOOST_TEST(Cluster::Message(job).find("spec.template.spec.restartPolicy: Unsupported value: "
                                        "\"Always\": supported values: \"OnFailure\", \"Never\"") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(statefulset_orders_pods_and_binds_claims) {
  Cluster c;
  BOOST_REQUIRE(
      c.Send("POST", "/apis/apps/v1/namespaces/default/statefulsets", kStatefulSet).code == 201);
  c.controllers.RunOnce();
  c.controllers.RunOnce();
  BOOST_TEST(c.store.Get("pods", "default", "db-0").ok());
  BOOST_TEST(!c.store.Get("pods", "default", "db-1").ok());  // db-0 is not Ready yet
  auto claim = c.store.Get("persistentvolumeclaims", "default", "data-db-0");
  BOOST_REQUIRE(claim.ok());
  BOOST_TEST(GetString(**claim, "status.phase") == "Bound");
  BOOST_TEST(GetString(**claim, "spec.storageClassName") == "standard");
  auto pv = c.store.Get("persistentvolumes", "", GetString(**claim, "spec.volumeName"));
  BOOST_REQUIRE(pv.ok());
  BOOST_TEST(GetString(**pv, "spec.hostPath.path") ==
             "/tmp/kubesim-unit-workloads/volumes/pvc-" + GetString(**claim, "metadata.uid"));
  c.MakeAllReady();
  c.controllers.RunOnce();
  BOOST_TEST(c.store.Get("pods", "default", "db-1").ok());
}

BOOST_AUTO_TEST_SUITE_END()
