// kubesim's strictness rules (docs/kubesim.md, "Strictness rules"), through the REST API
// without sockets: every rule answers as kube-apiserver does.
#include <fstream>
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "api.h"
#include "fake_clock.h"
#include "nodes.h"
#include "patch.h"
#include "schema.h"
#include "store.h"
#include "test_util.h"
#include "validation.h"

using namespace kubesim;
using namespace kubesim::testing;

namespace {

struct Strict {
  k8sbridge::FakeClock clock;
  Store store{clock, 1000};
  Api api{store};
  Strict() { BOOST_REQUIRE(CreateDefaultNamespaces(store).ok()); }

  // `target` may carry a query; the method decides the verb.
  ApiResponse Send(const std::string& method, const std::string& target, const std::string& body,
                   const std::string& content_type = "application/json") {
    return CallApi(api, method, target, body, content_type, "application/json");
  }

  static std::string Message(const ApiResponse& r) { return GetString(Json(r.body), "message"); }
  static std::string Header(const ApiResponse& r, const std::string& name) {
    std::string all;
    for (const auto& [k, v] : r.headers) {
      if (k == name)
        all += (all.empty() ? "" : "|") + v;
    }
    return all;
  }
};

const char kPods[] = "/api/v1/namespaces/default/pods";

std::string PodWith(const std::string& name, const std::string& container_extra,
                    const std::string& spec_extra = "") {
  return R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":")" + name +
         R"("},"spec":{"containers":[{"name":"c","image":"x")" + container_extra + "}]" +
         spec_extra + "}}";
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(strictness, Strict)

BOOST_AUTO_TEST_CASE(create_with_a_resource_version_is_refused) {
  auto r = Send("POST", "/api/v1/namespaces/default/configmaps",
                R"({"metadata":{"name":"cm","resourceVersion":"42"}})");
  BOOST_TEST(r.code == 500);
  BOOST_TEST(Message(r) == "resourceVersion should not be set on objects to be created");
  BOOST_TEST(!store.Get("configmaps", "default", "cm").ok());
  // The versioner ignores (and clears) "0" and non-numbers.
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/configmaps",
                  R"({"metadata":{"name":"zero","resourceVersion":"0"}})")
                 .code == 201);
}

BOOST_AUTO_TEST_CASE(names_follow_each_kinds_rule) {
  // Namespaces are DNS labels: no dots.
  auto ns = Send("POST", "/api/v1/namespaces", R"({"metadata":{"name":"a.b"}})");
  BOOST_TEST(ns.code == 422);
  BOOST_TEST(Message(ns) ==
             "Namespace \"a.b\" is invalid: metadata.name: Invalid value: \"a.b\": must not "
             "contain dots");
  // Nodes, config maps, leases: DNS subdomains (dots fine, no ':' or capitals).
  BOOST_TEST(Send("POST", "/api/v1/nodes", R"({"metadata":{"name":"gpu.rack1"}})").code == 201);
  auto lease = Send("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                    R"({"metadata":{"name":"sync:leader"}})");
  BOOST_TEST(lease.code == 422);
  BOOST_TEST(Message(lease).rfind("Lease.coordination.k8s.io \"sync:leader\" is invalid: "
                                  "metadata.name: Invalid value: \"sync:leader\": a lowercase "
                                  "RFC 1123 subdomain must consist of",
                                  0) == 0);
  BOOST_TEST(
      Send("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{"name":"Conf"}})")
          .code == 422);
  std::string long_name(254, 'a');
  BOOST_TEST(Message(Send("POST", "/api/v1/namespaces/default/secrets",
                          R"({"metadata":{"name":")" + long_name + "\"}}"))
                 .find("must be no more than 253 characters") != std::string::npos);
  // core/v1 events only get the path-segment check; events.k8s.io/v1 wants a subdomain.
  const std::string event =
      R"({"metadata":{"name":"pod:1"},"involvedObject":{"kind":"Pod","name":"p",)"
      R"("namespace":"default"},"reason":"R","message":"m","type":"Normal"})";
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/events", event).code == 201);
  auto slash = Send("POST", "/api/v1/namespaces/default/events",
                    R"({"metadata":{"name":"a/b"},"involvedObject":{"namespace":"default"}})");
  BOOST_TEST(Message(slash) ==
             "Event \"a/b\" is invalid: metadata.name: Invalid value: \"a/b\": may not contain "
             "'/'");
  // generateName: checked as a prefix (a trailing '-' is fine), then completed.
  auto generated = Send("POST", "/api/v1/namespaces", R"({"metadata":{"generateName":"team-"}})");
  BOOST_TEST(generated.code == 201);
  auto bad_prefix = Send("POST", "/api/v1/namespaces", R"({"metadata":{"generateName":"Team-"}})");
  BOOST_TEST(bad_prefix.code == 422);
  BOOST_TEST(Message(bad_prefix).find("metadata.generateName: Invalid value: \"Team-\"") !=
             std::string::npos);
  auto no_name = Send("POST", "/api/v1/namespaces/default/configmaps", R"({"metadata":{}})");
  BOOST_TEST(Message(no_name) ==
             "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is "
             "required");
}

BOOST_AUTO_TEST_CASE(labels_and_annotations_are_checked) {
  auto bad_label = Send("POST", "/api/v1/namespaces/default/configmaps",
                        R"({"metadata":{"name":"l","labels":{"a/b/c":"x","ok":"-bad"}}})");
  BOOST_TEST(bad_label.code == 422);
  auto body = Json(bad_label.body);
  BOOST_TEST(body["details"]["causes"].Size() == 2u);
  BOOST_TEST(GetString(body["details"]["causes"][0], "field") == "metadata.labels");
  BOOST_TEST(Message(bad_label).find("Invalid value: \"-bad\": a valid label must be an empty "
                                     "string or consist of alphanumeric characters") !=
             std::string::npos);
  auto bad_key = Send("POST", "/api/v1/namespaces/default/configmaps",
                      R"({"metadata":{"name":"a","annotations":{"k8s.io/":"x"}}})");
  BOOST_TEST(Message(bad_key).rfind("ConfigMap \"a\" is invalid: [metadata.annotations: Invalid "
                                    "value: \"k8s.io/\": name part must be non-empty, ",
                                    0) == 0);
  std::string big(262144, 'x');  // with its key, one byte over 256 KiB
  auto too_big = Send("POST", "/api/v1/namespaces/default/configmaps",
                      R"({"metadata":{"name":"b","annotations":{"k":")" + big + "\"}}}");
  BOOST_TEST(Message(too_big) ==
             "ConfigMap \"b\" is invalid: metadata.annotations: Too long: may not be more than "
             "262144 bytes");
  std::string fits(262143, 'x');
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/configmaps",
                  R"({"metadata":{"name":"c","annotations":{"k":")" + fits + "\"}}}")
                 .code == 201);
  // Updates are checked too (a patch that adds a bad label).
  auto patched = Send("PATCH", "/api/v1/namespaces/default/configmaps/c",
                      R"({"metadata":{"labels":{"x y":"1"}}})", "application/merge-patch+json");
  BOOST_TEST(patched.code == 422);
}

BOOST_AUTO_TEST_CASE(events_follow_legacy_and_v1_rules) {
  const std::string v1 = "/apis/events.k8s.io/v1/namespaces/";
  auto event = [](const std::string& ns, const std::string& regarding, const std::string& extra) {
    return R"({"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e.1",)"
           R"("namespace":")" +
           ns +
           R"("},"eventTime":"2026-12-01T10:00:00.000000Z","reportingController":"k8sbridge",)"
           R"("reportingInstance":"host-1","action":"Drain","reason":"HardwareDrain",)"
           R"("type":"Warning","note":"n","regarding":)" +
           regarding + extra + "}";
  };
  const std::string node = R"({"kind":"Node","name":"node-0"})";
  CreateNamespace(store, "slurm");
  // An event about a Node: only in default or kube-system.
  auto wrong_ns = Send("POST", v1 + "slurm/events", event("slurm", node, ""));
  BOOST_TEST(wrong_ns.code == 422);
  BOOST_TEST(Message(wrong_ns) ==
             "Event.events.k8s.io \"e.1\" is invalid: involvedObject.namespace: Invalid value: "
             "\"\": does not match event.namespace");
  BOOST_TEST(Send("POST", v1 + "default/events", event("default", node, "")).code == 201);
  // With an eventTime only cluster-scoped objects are tied to a namespace (upstream checks
  // a namespaced object's namespace only for events without one, see below).
  auto pod_elsewhere =
      Send("POST", v1 + "slurm/events",
           event("slurm", R"({"kind":"Pod","name":"p","namespace":"default"})", ""));
  BOOST_TEST(pod_elsewhere.code == 201);
  // eventTime needs the reporting fields; type Normal|Warning; no deprecated fields.
  auto bare = Send("POST", v1 + "default/events",
                   R"({"metadata":{"name":"e.2"},"eventTime":"2026-12-01T10:00:00.000000Z",)"
                   R"("regarding":{"kind":"Node","name":"n"},"type":"Info",)"
                   R"("deprecatedCount":3})");
  BOOST_TEST(Message(bare) ==
             "Event.events.k8s.io \"e.2\" is invalid: [reportingController: Required value, "
             "reportingController: Invalid value: \"\": name part must be non-empty, "
             "reportingController: Invalid value: \"\": name part must consist of alphanumeric "
             "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), reportingInstance: Required value, "
             "action: Required value, reason: Required value, type: Invalid value: \"\": has "
             "invalid value: Info, count: Invalid value: \"\": needs to be unset]");
  // note <= 1 kB after invalid UTF-8 became U+FFFD (3 bytes each).
  auto with_note = [&](const std::string& name, const std::string& note) {
    std::string body = event("default", node, "");
    body.replace(body.find("\"note\":\"n\""), 10, "\"note\":\"" + note + "\"");
    return body.replace(body.find("e.1"), 3, name);
  };
  BOOST_TEST(
      Send("POST", v1 + "default/events", with_note("e.3", std::string(1021, 'n') + "\xff")).code ==
      201);  // 1021 + 3 bytes
  auto cut = Send("POST", v1 + "default/events", with_note("e.4", std::string(1022, 'n') + "\xff"));
  BOOST_TEST(cut.code == 422);
  BOOST_TEST(Message(cut).find("message: Invalid value: \"\": can have at most 1024 characters") !=
             std::string::npos);
  // series.count >= 2 on an update through events.k8s.io/v1; the rest is immutable.
  auto series = Send("PATCH", v1 + "default/events/e.1",
                     R"({"series":{"count":1,"lastObservedTime":"2026-12-01T10:00:01.000000Z"}})",
                     "application/merge-patch+json");
  BOOST_TEST(Message(series) ==
             "Event.events.k8s.io \"e.1\" is invalid: series.count: Invalid value: \"\": should "
             "be at least 2");
  BOOST_TEST(Send("PATCH", v1 + "default/events/e.1",
                  R"({"series":{"count":2,"lastObservedTime":"2026-12-01T10:00:01.000000Z"}})",
                  "application/merge-patch+json")
                 .code == 200);
  auto renamed = Send("PATCH", v1 + "default/events/e.1", R"({"reason":"Other"})",
                      "application/merge-patch+json");
  BOOST_TEST(Message(renamed) ==
             "Event.events.k8s.io \"e.1\" is invalid: reason: Invalid value: \"Other\": field is "
             "immutable");
}

BOOST_AUTO_TEST_CASE(core_events_without_event_time) {
  CreateNamespace(store, "slurm");
  auto node_event = [](const std::string& ns) {
    return R"({"metadata":{"name":"n.1","namespace":")" + ns +
           R"("},"involvedObject":{"kind":"Node","name":"node-0"},"reason":"R","type":"Normal"})";
  };
  BOOST_TEST(Send("POST", "/api/v1/namespaces/slurm/events", node_event("slurm")).code == 422);
  BOOST_TEST(Send("POST", "/api/v1/namespaces/default/events", node_event("default")).code == 201);
  auto pod_elsewhere = Send("POST", "/api/v1/namespaces/slurm/events",
                            R"({"metadata":{"name":"p.1"},"involvedObject":{"kind":"Pod",)"
                            R"("name":"p","namespace":"default"},"reason":"R"})");
  BOOST_TEST(Message(pod_elsewhere) ==
             "Event \"p.1\" is invalid: involvedObject.namespace: Invalid value: \"default\": "
             "does not match event.namespace");
}

BOOST_AUTO_TEST_CASE(pods_need_images_and_valid_containers) {
  auto no_image =
      Send("POST", kPods, R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}})");
  BOOST_TEST(Message(no_image) == "Pod \"p\" is invalid: spec.containers[0].image: Required value");
  auto body = Json(no_image.body);
  BOOST_TEST(GetString(body["details"]["causes"][0], "reason") == "FieldValueRequired");
  auto dup = Send("POST", kPods,
                  R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x"},)"
                  R"({"name":"c","image":"x"},{"name":"Bad_C","image":"x"}]}})");
  BOOST_TEST(Message(dup).find("spec.containers[1].name: Duplicate value: \"c\"") !=
             std::string::npos);
  BOOST_TEST(Message(dup).find("spec.containers[2].name: Invalid value: \"Bad_C\": a lowercase "
                               "RFC 1123 label") != std::string::npos);
  auto env = Send("POST", kPods, PodWith("p", R"(,"env":[{"name":"A=B"},{"value":"x"}])"));
  BOOST_TEST(Message(env) ==
             "Pod \"p\" is invalid: [spec.containers[0].env[0].name: Invalid value: \"A=B\": a "
             "valid environment variable name must consist only of printable ASCII characters "
             "other than '=', spec.containers[0].env[1].name: Required value]");
  auto policy = Send("POST", kPods, PodWith("p", "", R"(,"restartPolicy":"Sometimes")"));
  BOOST_TEST(Message(policy) ==
             "Pod \"p\" is invalid: spec.restartPolicy: Unsupported value: \"Sometimes\": "
             "supported values: \"Always\", \"OnFailure\", \"Never\"");
  // validatePodDNSConfig
  auto dns_none = Send("POST", kPods, PodWith("p", "", R"(,"dnsPolicy":"None")"));
  BOOST_TEST(Message(dns_none) ==
             "Pod \"p\" is invalid: spec.dnsConfig: Required value: must provide `dnsConfig` "
             "when `dnsPolicy` is None");
  auto dns_bad = Send("POST", kPods,
                      PodWith("p", "",
                              R"(,"dnsPolicy":"Sometimes","dnsConfig":{"nameservers":["1.2.3",)"
                              R"("::1","1.1.1.1","2.2.2.2"],"searches":["Bad_Name"],)"
                              R"("options":[{"value":"1"}]})"));
  BOOST_TEST(Message(dns_bad) ==
             "Pod \"p\" is invalid: [spec.dnsPolicy: Unsupported value: \"Sometimes\": supported "
             "values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\", "
             "spec.dnsConfig.nameservers: Invalid value: []string{\"1.2.3\", \"::1\", "
             "\"1.1.1.1\", \"2.2.2.2\"}: must not have more than 3 nameservers, "
             "spec.dnsConfig.nameservers[0]: Invalid value: \"1.2.3\": must be a valid IP address, "
             "(e.g. 10.9.8.7 or 2001:db8::ffff), spec.dnsConfig.searches[0]: Invalid value: "
             "\"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case "
             "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
             "character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
             "spec.dnsConfig.options[0]: Required value: must not be empty]");
  auto mount =
      Send("POST", kPods, PodWith("p", R"(,"volumeMounts":[{"name":"v","mountPath":"/v"}])"));
  BOOST_TEST(Message(mount) ==
             "Pod \"p\" is invalid: spec.containers[0].volumeMounts[0].name: Not found: \"v\"");
}

BOOST_AUTO_TEST_CASE(extended_resources_are_integers_with_equal_limits) {
  auto fraction =
      Send("POST", kPods, PodWith("p", R"(,"resources":{"limits":{"nvidia.com/gpu":"0.5"}})"));
  BOOST_TEST(Message(fraction) ==
             "Pod \"p\" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid "
             "value: \"0.5\": must be an integer");
  auto unequal = Send("POST", kPods,
                      PodWith("p", R"(,"resources":{"requests":{"nvidia.com/gpu":"1"},)"
                                   R"("limits":{"nvidia.com/gpu":"2"}})"));
  BOOST_TEST(Message(unequal) ==
             "Pod \"p\" is invalid: spec.containers[0].resources.requests: Invalid value: \"1\": "
             "must be equal to nvidia.com/gpu limit of 2");
  auto no_limit =
      Send("POST", kPods, PodWith("p", R"(,"resources":{"requests":{"nvidia.com/gpu":"1"}})"));
  BOOST_TEST(Message(no_limit) ==
             "Pod \"p\" is invalid: spec.containers[0].resources.limits: Required value: Limit "
             "must be set for non overcommitable resources");
  auto unknown = Send("POST", kPods, PodWith("p", R"(,"resources":{"limits":{"gpu":"1"}})"));
  BOOST_TEST(Message(unknown) ==
             "Pod \"p\" is invalid: spec.containers[0].resources.limits[gpu]: Invalid value: "
             "\"gpu\": must be a standard resource for containers");
  // What the bridge sends: limits only (requests default to them), or both equal.
  BOOST_TEST(
      Send("POST", kPods, PodWith("a", R"(,"resources":{"limits":{"nvidia.com/gpu":"8"}})")).code ==
      201);
  BOOST_TEST(Send("POST", kPods,
                  PodWith("b", R"(,"resources":{"requests":{"nvidia.com/gpu":8,"cpu":"1"},)"
                               R"("limits":{"nvidia.com/gpu":"8"}})"))
                 .code == 201);
}

BOOST_AUTO_TEST_CASE(pod_spec_is_immutable_but_for_images_and_tolerations) {
  BOOST_TEST(
      Send("POST", kPods, PodWith("p", "", R"(,"tolerations":[{"key":"a","operator":"Exists"}])"))
          .code == 201);
  auto patch = [&](const std::string& body) {
    return Send("PATCH", std::string(kPods) + "/p", body, "application/strategic-merge-patch+json");
  };
  BOOST_TEST(patch(R"({"spec":{"containers":[{"name":"c","image":"y"}]}})").code == 200);
  // An added toleration (after those admission gave the pod: DefaultTolerationSeconds).
  BOOST_TEST(Send("PATCH", std::string(kPods) + "/p",
                  R"([{"op":"add","path":"/spec/tolerations/-",)"
                  R"("value":{"key":"b","operator":"Exists"}}])",
                  "application/json-patch+json")
                 .code == 200);
  BOOST_TEST(patch(R"({"metadata":{"labels":{"x":"1"}}})").code == 200);
  auto removed = patch(R"({"spec":{"tolerations":[]}})");
  BOOST_TEST(removed.code == 422);
  auto node = patch(R"({"spec":{"nodeName":"node-0"}})");
  BOOST_TEST(node.code == 422);
  BOOST_TEST(Message(node).rfind("Pod \"p\" is invalid: spec: Forbidden: pod updates may not "
                                 "change fields other than `spec.containers[*].image`,",
                                 0) == 0);
  // A PUT of what was read back, with nothing changed, is fine.
  auto current = store.Get("pods", "default", "p");
  BOOST_REQUIRE(current.ok());
  BOOST_TEST(Send("PUT", std::string(kPods) + "/p", ToJson(**current)).code == 200);
}

BOOST_AUTO_TEST_CASE(unknown_fields_warn_fail_or_vanish) {
  const std::string body =
      R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"u","colour":"x"},)"
      R"("data":{"a":"b"},"spec":{"foo":1}})";
  const std::string cms = "/api/v1/namespaces/default/configmaps";
  auto strict = Send("POST", cms + "?fieldValidation=Strict", body);
  BOOST_TEST(strict.code == 400);
  BOOST_TEST(Message(strict) ==
             "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding "
             "error: unknown field \"metadata.colour\", unknown field \"spec\"");
  auto warned = Send("POST", cms, body);  // the default is Warn
  BOOST_TEST(warned.code == 201);
  BOOST_TEST(
      Header(warned, "Warning") ==
      "299 - \"unknown field \\\"metadata.colour\\\"\"|299 - \"unknown field \\\"spec\\\"\"");
  auto stored = store.Get("configmaps", "default", "u");
  BOOST_REQUIRE(stored.ok());
  BOOST_TEST(Find(**stored, "spec") == nullptr);
  BOOST_TEST(Find(**stored, "metadata.colour") == nullptr);
  auto ignored = Send("PUT", cms + "/u?fieldValidation=Ignore", body);
  BOOST_TEST(ignored.code == 200);
  BOOST_TEST(ignored.headers.empty());
  auto bad = Send("POST", cms + "?fieldValidation=Loud", body);
  BOOST_TEST(Message(bad) ==
             "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: "
             "\"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");
  // Deep paths, lists and a patch under Strict (422, as the apiserver's patcher).
  BOOST_TEST(Send("POST", kPods, PodWith("p", "")).code == 201);
  auto deep = Send("PATCH", std::string(kPods) + "/p?fieldValidation=Strict",
                   R"({"spec":{"containers":[{"name":"c","imagePullPolcy":"Always"}]}})",
                   "application/strategic-merge-patch+json");
  BOOST_TEST(deep.code == 422);
  BOOST_TEST(Message(deep).find("strict decoding error: unknown field "
                                "\"spec.containers[0].imagePullPolcy\"") != std::string::npos);
  auto duplicate =
      Send("POST", cms + "?fieldValidation=Strict", R"({"metadata":{"name":"d","name":"d"}})");
  BOOST_TEST(Message(duplicate).find("duplicate field \"metadata.name\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(every_kind_has_a_schema_that_knows_the_usual_fields) {
  for (const auto& [group, resource] :
       std::vector<std::pair<std::string, std::string>>{{"", "pods"},
                                                        {"", "nodes"},
                                                        {"", "namespaces"},
                                                        {"", "configmaps"},
                                                        {"", "secrets"},
                                                        {"", "events"},
                                                        {"events.k8s.io", "events"},
                                                        {"coordination.k8s.io", "leases"}}) {
    BOOST_TEST(!SchemaTypeFor(group, resource).empty(), group + "/" + resource);
  }
  auto pod = Json(R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","labels":{"a":"b"},
      "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"u"}]},
      "spec":{"containers":[{"name":"slurmd","image":"x","securityContext":{"privileged":true},
      "resources":{"limits":{"nvidia.com/gpu":"8"}},"env":[{"name":"A","valueFrom":
      {"fieldRef":{"fieldPath":"status.podIP"}}}],"volumeMounts":[{"name":"v","mountPath":"/v",
      "mountPropagation":"HostToContainer"}]}],"volumes":[{"name":"v","secret":{"secretName":"s",
      "defaultMode":256}},{"name":"j","persistentVolumeClaim":{"claimName":"c"}}],
      "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":
      {"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}]}}},
      "tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}],
      "automountServiceAccountToken":false,"terminationGracePeriodSeconds":60},
      "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}})");
  BOOST_TEST(DropUnknownFields("Pod", pod).empty());
  auto lease = Json(R"({"metadata":{"name":"l"},"spec":{"holderIdentity":"h",
      "leaseDurationSeconds":15,"renewTime":"2026-12-01T10:00:00.000000Z","leaseTransitions":1}})");
  BOOST_TEST(DropUnknownFields("Lease", lease).empty());
}

BOOST_AUTO_TEST_CASE(the_shipped_worker_template_passes_strict_validation) {
  std::ifstream in(std::string(K8SBRIDGE_SOURCE_ROOT) + "/conf-templates/worker-pod.yaml");
  std::stringstream text;
  text << in.rdbuf();
  auto tmpl = YamlToJson(text.str());
  BOOST_REQUIRE(tmpl.ok());
  // A pod as k8sbridge-power renders it: the template's metadata and spec, a name.
  rapidjson::Document pod(rapidjson::kObjectType);
  auto& a = pod.GetAllocator();
  pod.AddMember("apiVersion", "v1", a);
  pod.AddMember("kind", "Pod", a);
  pod.AddMember("metadata", rapidjson::Value((**tmpl)["template"]["metadata"], a), a);
  pod.AddMember("spec", rapidjson::Value((**tmpl)["template"]["spec"], a), a);
  SetMember(pod, "metadata.name", rapidjson::Value("w-0"));
  SetMember(pod, "spec.restartPolicy", rapidjson::Value("Never"));
  auto r = Send("POST", std::string(kPods) + "?fieldValidation=Strict", ToJson(pod));
  BOOST_TEST(r.code == 201, r.body);
  BOOST_TEST(r.headers.empty());
}

BOOST_AUTO_TEST_SUITE_END()
