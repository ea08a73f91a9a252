// Scenarios of the Kubernetes client against an API server, one per run:
//   kube_scenarios DIR SCENARIO
// DIR holds `kubeconfig` (its user's token in DIR/token, through tokenFile) and, for
// the TLS scenario, `client-cert-kubeconfig`. Prints what the client did ("retried
// after 1 s", "relisted", "surfaced: ...") and exits 0 when the client behaved as
// documented in docs/client.md, 1 otherwise.
//
// The test that runs it makes the faults (harness.kube_scenarios: the real Kubernetes
// in tests/integration/test_kube_client.py, and a failing load balancer in front of it
// in test_kube_client_lb.py). A scenario asks for one with a line
// "CONTROL <request>" on stdout and reads the answer on stdin: "OK[ <detail>]" once
// it is in place, or "ERR <why>".
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/kube/informer.h"
#include "k8sbridge/kube/leader.h"
#include "recording_logger.h"

namespace {

using namespace k8sbridge;
using namespace k8sbridge::kube;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string g_dir;

void Say(const std::string& s) {
  std::printf("%s\n", s.c_str());
  std::fflush(stdout);
}

// Asks the test for a fault (see the top of this file); returns the answer's detail.
Result<std::string> Control(const std::string& request) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::printf("CONTROL %s\n", request.c_str());
  std::fflush(stdout);
  std::string answer;
  for (int ch; (ch = std::getchar()) != EOF && ch != '\n';)
    answer += static_cast<char>(ch);
  if (answer == "OK")
    return std::string();
  if (answer.rfind("OK ", 0) == 0)
    return answer.substr(3);
  return Status::Internal(
      fmt::format("control {}: {}", request, answer.empty() ? "no answer" : answer));
}

// CountingMetrics, and a hook that sees each attempt before the client acts on its
// answer (a retry's wait comes after it).
class HookedMetrics final : public Metrics {
 public:
  explicit HookedMetrics(CountingMetrics& counts) : counts_(counts) {}
  void RequestDone(std::string_view verb, int code, Clock::Steady::duration latency) override {
    counts_.RequestDone(verb, code, latency);
    if (on_request)
      on_request(verb, code);
  }
  void WatchRestarted(std::string_view resource, std::string_view reason) override {
    counts_.WatchRestarted(resource, reason);
  }
  std::function<void(std::string_view verb, int code)> on_request;

 private:
  CountingMetrics& counts_;
};

#define EXPECT(cond, ...)                                                                      \
  do {                                                                                         \
    if (!(cond))                                                                               \
      return Status::Internal(fmt::format("{}:{}: expected {}: {}", __FILE__, __LINE__, #cond, \
                                          fmt::format(__VA_ARGS__)));                          \
  } while (0)

struct Harness {
  RecordingLogger log;
  CountingMetrics metrics;
  HookedMetrics hooked{metrics};
  Config config;
  std::unique_ptr<Client> client;

  static Result<std::unique_ptr<Harness>> Make(const std::string& kubeconfig = "",
                                               ClientOptions options = {}) {
    auto h = std::make_unique<Harness>();
    auto cfg = LoadKubeconfig({kubeconfig.empty() ? g_dir + "/kubeconfig" : kubeconfig}, "",
                              /*allow_insecure_http=*/false);
    if (!cfg.ok())
      return cfg.status();
    h->config = *cfg;
    options.logger = &h->log;
    options.metrics = &h->hooked;
    if (options.qps == 5)
      options.qps = 0;
    auto c = Client::Create(h->config, options);
    if (!c.ok())
      return c.status();
    h->client = std::move(*c);
    return h;
  }
  // Asks the test for a fault (Control), as a Status.
  static Status Fault(const std::string& request) {
    auto r = Control(request);
    return r.ok() ? Status::Ok() : r.status();
  }
  // Ends every fault (and resumes a paused API server).
  static Status ClearFaults() { return Fault("clear"); }
  // The delay the client logged before retrying, e.g. "1 s" / "800 ms", or "".
  std::string LoggedRetry() const {
    for (const auto& l : log.lines()) {
      auto p = l.message.find("retrying after ");
      if (p != std::string::npos)
        return l.message.substr(p + 15, l.message.find(' ', p + 15) - p - 15) + " s";
      p = l.message.find("retrying in ");
      if (p != std::string::npos)
        return l.message.substr(p + 12, l.message.find(" ms", p) - p - 12) + " ms";
    }
    return "";
  }
};

Object Pod(const std::string& name) {
  auto o = Object::Parse(fmt::format(
      R"({{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{}","namespace":"default","labels":{{"app":"kube-scenarios"}}}},)"
      R"("spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}})",
      name));
  return *o;
}

Object ConfigMap(const std::string& name, const std::string& value) {
  return *Object::Parse(fmt::format(
      R"({{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{}","namespace":"default","labels":{{"app":"kube-scenarios"}}}},"data":{{"k":"{}"}}}})",
      name, value));
}

std::string Unique(const std::string& prefix) {
  static int n = 0;
  return fmt::format("{}-{}-{}", prefix, getpid(), ++n);
}

// Polls `cond` until it holds or `limit` passes (real time).
bool Eventually(const std::function<bool()>& cond, std::chrono::seconds limit = 30s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond())
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

// ---- calls ----------------------------------------------------------------------

Status Crud() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  std::string base = Unique("cm");
  for (int i = 0; i < 5; ++i) {
    auto r = ConfigMaps(c, "default").Create(ConfigMap(fmt::format("{}-{}", base, i), "v"));
    EXPECT(r.ok(), "{}", r.status().ToString());
  }
  ListOptions lo;
  lo.page_size = 2;
  lo.label_selector = "app=kube-scenarios";
  auto list = c.List(kConfigMaps, "default", lo);
  EXPECT(list.ok(), "{}", list.status().ToString());
  EXPECT(list->items.size() >= 5u, "{} items", list->items.size());
  EXPECT((*h)->metrics.Requests("LIST", 200) >= 3, "paged list used {} requests",
         (*h)->metrics.Requests("LIST", 200));
  Say(fmt::format("list: {} items in {} pages", list->items.size(),
                  (*h)->metrics.Requests("LIST", 200)));

  std::string name = base + "-0";
  auto got = ConfigMaps(c, "default").Get(name);
  EXPECT(got.ok(), "{}", got.status().ToString());
  Object cm = *got;
  cm.SetString("/data/k", "replaced");
  auto replaced = ConfigMaps(c, "default").Replace(cm);
  EXPECT(replaced.ok(), "{}", replaced.status().ToString());
  EXPECT(replaced->ResourceVersion() != got->ResourceVersion(), "rv unchanged");

  auto merge = ConfigMaps(c, "default").Patch(name, PatchType::kMerge, R"({"data":{"merge":"1"}})");
  EXPECT(merge.ok(), "{}", merge.status().ToString());
  auto json =
      ConfigMaps(c, "default")
          .Patch(name, PatchType::kJson, R"([{"op":"add","path":"/data/json","value":"1"}])");
  EXPECT(json.ok(), "{}", json.status().ToString());
  auto smp =
      ConfigMaps(c, "default").Patch(name, PatchType::kStrategicMerge, R"({"data":{"smp":"1"}})");
  EXPECT(smp.ok(), "{}", smp.status().ToString());
  PatchOptions apply;
  apply.field_manager = "kube-scenarios";
  apply.force = true;
  auto ssa = ConfigMaps(c, "default")
                 .Patch(name, PatchType::kApply,
                        fmt::format("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {}\n  "
                                    "namespace: default\ndata:\n  apply: \"1\"\n",
                                    name),
                        apply);
  EXPECT(ssa.ok(), "{}", ssa.status().ToString());
  auto data = configmap::Data(*ssa);
  EXPECT(data.count("merge") && data.count("json") && data.count("smp") && data.count("apply"),
         "{}", ssa->ToJson());
  Say("patch: merge, json, strategic-merge and apply all applied");

  // A wrong media type is surfaced as 415 / kInvalidArgument.
  auto bad =
      c.Request("PATCH", Client::Path(kConfigMaps, "default", name), "{}", "application/xml");
  EXPECT(bad.ok() && bad->status == 415, "expected 415");

  DeleteOptions wrong;
  wrong.precondition_uid = "not-the-uid";
  auto refused = ConfigMaps(c, "default").Delete(name, wrong);
  EXPECT(refused.status().code() == Status::Code::kConflict, "{}", refused.status().ToString());
  Say("delete with a wrong uid precondition surfaced: " + refused.status().ToString());
  DeleteOptions right;
  right.precondition_uid = ssa->Uid();
  right.grace_period_seconds = 0;
  right.propagation_policy = "Background";
  auto deleted = ConfigMaps(c, "default").Delete(name, right);
  EXPECT(deleted.ok(), "{}", deleted.status().ToString());
  auto gone = ConfigMaps(c, "default").Get(name);
  EXPECT(gone.status().code() == Status::Code::kNotFound && HttpCode(gone.status()) == 404 &&
             Reason(gone.status()) == "NotFound",
         "{}", gone.status().ToString());
  for (int i = 1; i < 5; ++i)
    (void)ConfigMaps(c, "default").Delete(fmt::format("{}-{}", base, i));

  // Typed helpers: nodes (cordon), pods, leases, events.
  auto nodes = Nodes(c).List();
  EXPECT(nodes.ok() && !nodes->items.empty(), "no nodes");
  std::string node_name = nodes->items[0].Name();
  auto cordoned = SetNodeUnschedulable(c, node_name, true);
  EXPECT(cordoned.ok() && node::Unschedulable(*cordoned), "{}", cordoned.status().ToString());
  auto uncordoned = SetNodeUnschedulable(c, node_name, false);
  EXPECT(uncordoned.ok() && !node::Unschedulable(*uncordoned), "{}",
         uncordoned.status().ToString());
  std::string pod_name = Unique("pod");
  auto pod = Pods(c, "default").Create(Pod(pod_name));
  EXPECT(pod.ok(), "{}", pod.status().ToString());
  EXPECT(Pods(c, "default").Delete(pod_name).ok(), "pod delete");
  Say(fmt::format("typed helpers: cordoned {}, created and deleted pod {}", node_name, pod_name));
  return Status::Ok();
}

Status Conflict() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  std::string name = Unique("conflict");
  auto created = ConfigMaps(c, "default").Create(ConfigMap(name, "0"));
  EXPECT(created.ok(), "{}", created.status().ToString());
  Object stale = *created;
  Object fresh = *created;
  fresh.SetString("/data/k", "1");
  EXPECT(ConfigMaps(c, "default").Replace(fresh).ok(), "first replace");
  stale.SetString("/data/k", "2");
  auto refused = ConfigMaps(c, "default").Replace(stale);
  EXPECT(refused.status().code() == Status::Code::kConflict && HttpCode(refused.status()) == 409,
         "{}", refused.status().ToString());
  Say("stale replace surfaced: " + refused.status().ToString());
  auto updated = ConfigMaps(c, "default").Update(name, [](Object& o) {
    o.SetString("/data/k", o.String("/data/k") + "+2");
    return Status::Ok();
  });
  EXPECT(updated.ok(), "{}", updated.status().ToString());
  EXPECT(updated->String("/data/k") == "1+2", "{}", updated->ToJson());
  // And a helper that has to re-read: another writer changes the object between
  // our read and our write, once.
  bool interfered = false;
  auto racing = ConfigMaps(c, "default").Update(name, [&](Object& o) {
    if (!interfered) {
      interfered = true;
      Object other = o;
      other.SetString("/data/other", "yes");
      (void)ConfigMaps(c, "default").Replace(other);
    }
    o.SetString("/data/k", "final");
    return Status::Ok();
  });
  EXPECT(racing.ok(), "{}", racing.status().ToString());
  EXPECT(racing->String("/data/other") == "yes" && racing->String("/data/k") == "final", "{}",
         racing->ToJson());
  EXPECT((*h)->metrics.Requests("PUT", 409) == 2, "PUT 409 count {}",
         (*h)->metrics.Requests("PUT", 409));
  Say("409 on replace resolved by Update re-reading the object");
  (void)ConfigMaps(c, "default").Delete(name);
  return Status::Ok();
}

// ---- injected faults on plain calls ---------------------------------------------

Status Fault429() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  // Our LISTs of nodes are refused with 429 and Retry-After (the API server's
  // priority and fairness, while another request holds their priority level) until
  // the test releases the level: here, once the client has seen the 429 and before
  // its retry.
  if (auto s = (*h)->Fault("reject-reads nodes"); !s.ok())
    return s;
  Status released = Status::Internal("the LIST was never refused");
  (*h)->hooked.on_request = [&](std::string_view verb, int code) {
    if (verb == "LIST" && code == 429 && !released.ok())
      released = Harness::Fault("release-reads");
  };
  auto t0 = std::chrono::steady_clock::now();
  auto r = Nodes(c).List();
  auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  (*h)->hooked.on_request = nullptr;
  EXPECT(released.ok(), "{}", released.ToString());
  EXPECT(r.ok(), "{}", r.status().ToString());
  EXPECT((*h)->metrics.Requests("LIST", 429) == 1 && (*h)->metrics.Requests("LIST", 200) == 1,
         "metrics");
  EXPECT((*h)->LoggedRetry() == "1 s", "logged {}", (*h)->LoggedRetry());
  Say(fmt::format("429 Retry-After: 1 retried after {} (took {} ms)", (*h)->LoggedRetry(),
                  took.count()));
  return Status::Ok();
}

Status Fault503() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  if (auto s = (*h)->Fault("refuse configmaps create 503 times=1 retry-after=1"); !s.ok())
    return s;
  std::string name = Unique("cm503");
  auto r = ConfigMaps(c, "default").Create(ConfigMap(name, "x"));
  EXPECT(r.ok(), "{}", r.status().ToString());
  EXPECT((*h)->metrics.Requests("POST", 503) == 1, "metrics");
  Say(fmt::format("503 Retry-After: 1 on create retried after {}", (*h)->LoggedRetry()));
  (void)ConfigMaps(c, "default").Delete(name);
  return Status::Ok();
}

Status Fault500() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  if (auto s = (*h)->Fault("refuse configmaps create 500 times=1"); !s.ok())
    return s;
  std::string name = Unique("cm500");
  auto r = ConfigMaps(c, "default").Create(ConfigMap(name, "x"));
  EXPECT(r.status().code() == Status::Code::kUnavailable && HttpCode(r.status()) == 500 &&
             Reason(r.status()) == "InternalError",
         "{}", r.status().ToString());
  EXPECT((*h)->metrics.Requests("POST", 500) == 1, "one attempt only");
  Say("500 without Retry-After on create surfaced: " + r.status().ToString());
  return Status::Ok();
}

Status Fault500Read() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  if (auto s = (*h)->Fault("refuse nodes get 500 times=1"); !s.ok())
    return s;
  auto r = Nodes(c).Get("anything");
  EXPECT(r.status().code() == Status::Code::kUnavailable && HttpCode(r.status()) == 500 &&
             Reason(r.status()) == "InternalError",
         "{}", r.status().ToString());
  EXPECT((*h)->metrics.Requests("GET", 500) == 1, "one attempt only");
  Say("500 without Retry-After on GET surfaced: " + r.status().ToString());
  return Status::Ok();
}

// A write is not retried by the client: it may have been applied. `fault` asks for
// the reset of the next create of a ConfigMap.
Status WriteReset(Harness& h, const std::string& fault, const std::string& what) {
  Client& c = *h.client;
  if (auto s = h.Fault(fault); !s.ok())
    return s;
  std::string name = Unique("cmreset");
  auto w = ConfigMaps(c, "default").Create(ConfigMap(name, "x"));
  auto exists = ConfigMaps(c, "default").Get(name);
  if (w.ok()) {
    // Only libcurl's transparent re-send on a fresh connection can get here.
    Say(fmt::format(
        "{} on POST: re-sent once by libcurl (reused connection died before any answer); "
        "object exists: {}",
        what, exists.ok()));
  } else {
    EXPECT(w.status().code() == Status::Code::kUnavailable ||
               w.status().code() == Status::Code::kAlreadyExists,
           "{}", w.status().ToString());
    Say(fmt::format("{} on POST surfaced: {} (object exists afterwards: {})", what,
                    w.status().ToString(), exists.ok()));
  }
  EXPECT(h.metrics.Requests("POST", 0) <= 1, "the client retried a write");
  (void)ConfigMaps(c, "default").Delete(name);
  return Status::Ok();
}

Status FaultReset() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  // A read is retried after a reset: by the client after 0.8 s, or (when the reset
  // hit a reused keep-alive connection before any answer) re-sent at once by libcurl
  // on a fresh connection. The LIST is this client's first request: its connection
  // is new.
  if (auto s = (*h)->Fault("reset-next-read"); !s.ok())
    return s;
  auto r = Nodes(c).List();
  EXPECT(r.ok(), "{}", r.status().ToString());
  if ((*h)->metrics.Requests("LIST", 0) == 1) {
    Say(fmt::format("reset before answer on LIST retried by the client after {}",
                    (*h)->LoggedRetry()));
  } else {
    Say("reset before answer on LIST re-sent by libcurl on a fresh connection (reused connection "
        "died)");
  }
  // The write on a client of its own: on a new connection too.
  auto writer = Harness::Make();
  if (!writer.ok())
    return writer.status();
  return WriteReset(**writer, "reset-next-write configmaps", "reset before commit");
}

Status FaultResetAfterCommit() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  (void)(*h)->ClearFaults();
  return WriteReset(**h, "reset-after-commit configmaps", "reset after commit");
}

Status FaultStall() {
  ClientOptions o;
  o.request_timeout = 1000ms;
  auto h = Harness::Make("", o);
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  // The API server answers nothing until the stall is cleared.
  if (auto s = (*h)->Fault("stall"); !s.ok())
    return s;
  auto r = Nodes(c).Get("node-0");
  EXPECT(r.status().code() == Status::Code::kTimeout, "{}", r.status().ToString());
  Say("stalled GET surfaced after the 1 s total timeout: " + r.status().ToString());
  // Cancellation from another thread ends a stalled call too.
  CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(200ms);
    cancel.Cancel();
  });
  CallOptions call{&cancel, 60000ms};
  auto cancelled = c.Get(kNodes, "", "node-0", call);
  canceller.join();
  EXPECT(cancelled.status().code() == Status::Code::kCancelled, "{}",
         cancelled.status().ToString());
  Say("stalled GET cancelled: " + cancelled.status().ToString());
  (void)(*h)->ClearFaults();
  return Status::Ok();
}

Status FaultLatency() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  (void)(*h)->ClearFaults();
  auto before = Nodes(c).Get("node-0");  // the connection the LIST goes on
  EXPECT(before.ok(), "{}", before.status().ToString());
  // The server is slow: it answers the next request only after a while.
  if (auto s = (*h)->Fault("slow-next"); !s.ok())
    return s;
  auto r = Nodes(c).List();
  EXPECT(r.ok(), "{}", r.status().ToString());
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>((*h)->metrics.Latency("LIST", 200))
          .count();
  Say(fmt::format("slow LIST answered; latency hook saw {} ms", ms));
  return Status::Ok();
}

// ---- watches ------------------------------------------------------------------

struct Watching {
  std::unique_ptr<Harness> h;
  std::unique_ptr<Informer> informer;
};

Result<Watching> StartInformer(ReflectorOptions ro = {}, const std::string& kubeconfig = "") {
  Watching w;
  auto h = Harness::Make(kubeconfig);
  if (!h.ok())
    return h.status();
  w.h = std::move(*h);
  ro.namespace_ = "default";
  ro.label_selector = "app=kube-scenarios";
  w.informer = std::make_unique<Informer>(*w.h->client, kConfigMaps, ro, &w.h->metrics);
  w.informer->Start();
  if (!w.informer->WaitForSync(30s))
    return Status::Timeout("informer did not sync");
  return w;
}

Status WatchExpireMidStream() {
  ReflectorOptions ro;
  ro.watch_timeout_seconds = 2;  // streams end often, so a new watch meets the fault
  auto w = StartInformer(ro);
  if (!w.ok())
    return w.status();
  Harness& h = *w->h;
  (void)h.ClearFaults();
  std::string name = Unique("expire");
  EXPECT(ConfigMaps(*h.client, "default").Create(ConfigMap(name, "x")).ok(), "create");
  EXPECT(Eventually([&] { return w->informer->Get("default/" + name).has_value(); }),
         "the informer did not see {}", name);
  // The history the informer watches from is compacted away (the API server
  // restarts, as in a rollout): its next watch gets a 200 stream carrying an ERROR
  // 410 event.
  if (auto s = h.Fault("expire-watches"); !s.ok())
    return s;
  bool relisted = Eventually([&] { return h.metrics.WatchRestarts("expired") >= 1; }, 60s);
  std::string after = Unique("after");
  auto created_after = ConfigMaps(*h.client, "default").Create(ConfigMap(after, "x"));
  EXPECT(created_after.ok(), "create: {}", created_after.status().ToString());
  bool seen = Eventually([&] { return w->informer->Get("default/" + after).has_value(); });
  w->informer->Stop();
  EXPECT(relisted, "no relist after a mid-stream 410 (restarts: expired={} error={} closed={})",
         h.metrics.WatchRestarts("expired"), h.metrics.WatchRestarts("error"),
         h.metrics.WatchRestarts("closed"));
  EXPECT(seen, "cache did not converge after the relist");
  Say(fmt::format("mid-stream ERROR 410: relisted ({} LIST requests), cache converged",
                  h.metrics.Requests("LIST", 200)));
  (void)ConfigMaps(*h.client, "default").Delete(name);
  (void)ConfigMaps(*h.client, "default").Delete(after);
  return Status::Ok();
}

Status Watch410Http() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  auto list = c.List(kConfigMaps, "default");
  EXPECT(list.ok(), "{}", list.status().ToString());
  std::string name = Unique("compact");
  EXPECT(ConfigMaps(c, "default").Create(ConfigMap(name, "x")).ok(), "create");
  EXPECT(ConfigMaps(c, "default").Delete(name).ok(), "delete");
  // The history from the listed resourceVersion on is compacted away.
  EXPECT(Harness::Fault("expire-watches").ok(), "compaction");
  WatchOptions wo;
  wo.resource_version = list->resource_version;
  wo.timeout_seconds = 5;
  auto end = c.Watch(kConfigMaps, "default", wo, [](const WatchEvent&) { return true; });
  EXPECT(end.status().code() == Status::Code::kExpired, "{}",
         end.ok() ? "watch ok" : end.status().ToString());
  Say(fmt::format("watch from a compacted resourceVersion: {} (HTTP {})", end.status().ToString(),
                  HttpCode(end.status())));
  return Status::Ok();
}

Status WatchStall() {
  ReflectorOptions ro;
  ro.watch_timeout_seconds = 1;  // the API server still ends a stalled stream then
  ro.watch_slack = 2s;           // a stream silent past that is dropped by the client
  auto w = StartInformer(ro);
  if (!w.ok())
    return w.status();
  Harness& h = *w->h;
  (void)h.ClearFaults();
  // Watches of ConfigMaps are answered 200 and then get nothing until cleared.
  if (auto s = h.Fault("stall-watches configmaps"); !s.ok())
    return s;
  // Once a stream that was open before the fault has ended, every new one is stalled.
  int64_t before = h.metrics.Requests("WATCH", 200);
  EXPECT(Eventually([&] { return h.metrics.Requests("WATCH", 200) > before; }, 60s),
         "no watch restarted");
  std::string name = Unique("stall");
  EXPECT(ConfigMaps(*h.client, "default").Create(ConfigMap(name, "x")).ok(), "create");
  // While stalled, watches end with nothing in them and are opened again from the
  // same resourceVersion; the change is not seen (nothing is delivered).
  int64_t streams = h.metrics.Requests("WATCH", 200);
  bool rewatching =
      Eventually([&] { return h.metrics.Requests("WATCH", 200) >= streams + 3; }, 60s);
  bool seen_while_stalled = w->informer->Get("default/" + name).has_value();
  (void)h.ClearFaults();  // the server delivers again
  bool seen = Eventually([&] { return w->informer->Get("default/" + name).has_value(); }, 60s);
  w->informer->Stop();
  EXPECT(rewatching, "watches not re-opened during the stall");
  EXPECT(!seen_while_stalled, "an event arrived through a stalled watch");
  EXPECT(seen, "cache did not converge after the stall");
  EXPECT(h.metrics.Requests("LIST", 200) == 1, "relisted {} times",
         h.metrics.Requests("LIST", 200) - 1);
  Say(fmt::format(
      "stalled watch: {} silent streams re-opened from the last resourceVersion without a "
      "relist; cache converged once the stall ended",
      h.metrics.Requests("WATCH", 200) - streams));
  (void)ConfigMaps(*h.client, "default").Delete(name);
  return Status::Ok();
}

Status WatchReset() {
  auto w = StartInformer([] {
    ReflectorOptions ro;
    ro.watch_timeout_seconds = 1;
    return ro;
  }());
  if (!w.ok())
    return w.status();
  Harness& h = *w->h;
  (void)h.ClearFaults();
  // The connection the watch runs on is reset (as by a load balancer), twice; each
  // time the informer watches again.
  int resets = 0;
  for (int i = 0; i < 2; ++i) {
    int64_t streams = h.metrics.Requests("WATCH", 200);
    auto reset = Control("reset-connections");
    if (!reset.ok())
      return reset.status();
    resets += std::atoi(reset->c_str());
    EXPECT(Eventually([&] { return h.metrics.Requests("WATCH", 200) > streams; }, 60s),
           "no watch after reset {}", i + 1);
  }
  std::string name = Unique("reset");
  EXPECT(ConfigMaps(*h.client, "default").Create(ConfigMap(name, "x")).ok(), "create");
  bool seen = Eventually([&] { return w->informer->Get("default/" + name).has_value(); }, 60s);
  w->informer->Stop();
  EXPECT(resets >= 2, "{} connections reset", resets);
  EXPECT(seen, "cache did not converge");
  Say(fmt::format(
      "watch connections reset twice: watched again each time ({} failed attempts, restarts "
      "error={} closed={} expired={}); cache converged",
      h.metrics.Requests("WATCH", 0), h.metrics.WatchRestarts("error"),
      h.metrics.WatchRestarts("closed"), h.metrics.WatchRestarts("expired")));
  (void)ConfigMaps(*h.client, "default").Delete(name);
  return Status::Ok();
}

Status Watch5xx() {
  auto w = StartInformer([] {
    ReflectorOptions ro;
    ro.watch_timeout_seconds = 1;
    return ro;
  }());
  if (!w.ok())
    return w.status();
  Harness& h = *w->h;
  (void)h.ClearFaults();
  if (auto s = h.Fault("refuse-watches configmaps 500 times=1"); !s.ok())
    return s;
  std::string name = Unique("watch500");
  bool hit = Eventually([&] { return h.metrics.Requests("WATCH", 500) >= 1; }, 60s);
  EXPECT(ConfigMaps(*h.client, "default").Create(ConfigMap(name, "x")).ok(), "create");
  bool seen = Eventually([&] { return w->informer->Get("default/" + name).has_value(); }, 60s);
  w->informer->Stop();
  EXPECT(hit, "fault not hit");
  EXPECT(seen, "cache did not converge");
  Say(fmt::format(
      "500 on a watch backed off and re-watched (restarts error={}, expired={}); cache converged",
      h.metrics.WatchRestarts("error"), h.metrics.WatchRestarts("expired")));
  (void)ConfigMaps(*h.client, "default").Delete(name);
  return Status::Ok();
}

// ---- credentials --------------------------------------------------------------

Status TokenRotationDuringWatch() {
  ReflectorOptions ro;
  ro.watch_timeout_seconds = 2;  // streams end often, so a new one meets the new token
  auto w = StartInformer(ro);
  if (!w.ok())
    return w.status();
  Harness& h = *w->h;
  // The server revokes the token and DIR/token holds a new one.
  if (auto s = h.Fault("rotate-token"); !s.ok())
    return s;
  // The client still holds the old token: its next request gets 401, re-reads the
  // file and retries.
  std::string name = Unique("rotated");
  auto created = ConfigMaps(*h.client, "default").Create(ConfigMap(name, "x"));
  EXPECT(created.ok(), "{}", created.status().ToString());
  // The POST, or a watch that restarted first, met the 401 and re-read the token.
  auto unauthorized = [&] {
    int64_t n = 0;
    for (const auto& [k, v] : h.metrics.requests())
      n += k.second == 401 ? v : 0;
    return n;
  };
  EXPECT(unauthorized() >= 1, "no request met the rotated token");
  bool seen = Eventually([&] { return w->informer->Get("default/" + name).has_value(); }, 60s);
  // Wait for the stream opened with the old token to end and a new one to start.
  int64_t streams = h.metrics.Requests("WATCH", 200);
  bool rewatched = Eventually([&] { return h.metrics.Requests("WATCH", 200) > streams; }, 60s);
  std::string later = Unique("later");
  EXPECT(ConfigMaps(*h.client, "default").Create(ConfigMap(later, "x")).ok(), "create");
  bool seen_later =
      Eventually([&] { return w->informer->Get("default/" + later).has_value(); }, 60s);
  w->informer->Stop();
  EXPECT(seen && rewatched && seen_later, "informer lost track after rotation ({} {} {})", seen,
         rewatched, seen_later);
  Say(fmt::format(
      "token rotated during a watch: 401 (POST: {}, WATCH: {}) re-read the token file and "
      "retried; the informer kept watching ({} streams) and saw both new objects",
      h.metrics.Requests("POST", 401), h.metrics.Requests("WATCH", 401),
      h.metrics.Requests("WATCH", 200)));
  (void)ConfigMaps(*h.client, "default").Delete(name);
  (void)ConfigMaps(*h.client, "default").Delete(later);
  return Status::Ok();
}

Status ExecPluginExpiry() {
  // A plugin that hands out the server's current token, valid for as many seconds as
  // DIR/exec-plugin.validity says: 2 at first.
  std::string plugin = g_dir + "/exec-plugin.sh";
  std::string counter = g_dir + "/exec-plugin.runs";
  std::string validity = g_dir + "/exec-plugin.validity";
  fs::remove(counter);
  std::ofstream(validity) << "2\n";
  std::ofstream(plugin)
      << "#!/bin/sh\n"
      << "echo run >> '" << counter << "'\n"
      << "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) exit 3;; esac\n"
      << "exp=$(date -u -d \"+$(cat '" << validity << "') seconds\" +%Y-%m-%dT%H:%M:%SZ)\n"
      << "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
         "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}' \"$(cat '"
      << g_dir << "/token')\" \"$exp\"\n";
  chmod(plugin.c_str(), 0755);
  // The same cluster, with the exec user (DIR/kubeconfig's user is "scenarios", and
  // its users come last).
  std::ifstream in(g_dir + "/kubeconfig");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string kc = ss.str();
  auto pos = kc.find("users:");
  kc = kc.substr(0, pos) +
       "users:\n- name: scenarios\n  user:\n    exec:\n      apiVersion: "
       "client.authentication.k8s.io/v1\n"
       "      command: ./exec-plugin.sh\n";
  std::string kc_path = g_dir + "/exec-kubeconfig";
  std::ofstream(kc_path) << kc;
  auto runs = [&] {
    std::ifstream c(counter);
    int n = 0;
    std::string line;
    while (std::getline(c, line))
      ++n;
    return n;
  };
  auto h = Harness::Make(kc_path);
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  EXPECT(Nodes(c).List().ok(), "first call");
  EXPECT(Nodes(c).List().ok(), "second call");
  EXPECT(runs() == 1, "plugin ran {} times for two calls within its validity", runs());
  bool rerun = Eventually([&] { return Nodes(c).List().ok() && runs() >= 2; }, 20s);
  EXPECT(rerun, "plugin not re-run after its credential expired (runs {})", runs());
  Say(fmt::format("exec credential cached until expiry, then re-run (runs: {})", runs()));
  // A credential that outlives the rotation below: the plugin's next one is valid
  // for 10 minutes.
  std::ofstream(validity) << "600\n";
  int renewed = runs();
  EXPECT(Eventually([&] { return Nodes(c).List().ok() && runs() > renewed; }, 20s),
         "plugin not re-run after its credential expired (runs {})", runs());
  // The server rotates: the cached credential gets 401, the plugin runs again.
  int before = runs();
  if (auto s = Harness::Fault("rotate-token"); !s.ok())
    return s;
  auto after = Nodes(c).List();
  EXPECT(after.ok(), "{}", after.status().ToString());
  EXPECT((*h)->metrics.Requests("LIST", 401) == 1, "LIST 401: {}",
         (*h)->metrics.Requests("LIST", 401));
  EXPECT(runs() > before, "plugin not re-run on 401");
  Say(fmt::format("401 re-ran the exec plugin (LIST 401: {})",
                  (*h)->metrics.Requests("LIST", 401)));
  return Status::Ok();
}

Status Tls() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Config cfg = (*h)->config;
  if (cfg.server.rfind("https://", 0) != 0) {
    Say("the server runs plain HTTP: TLS scenario skipped");
    return Status::Ok();
  }
  // Verification is on by default: without the CA the handshake fails.
  Config no_ca = cfg;
  no_ca.ca_file.clear();
  auto c1 = Client::Create(no_ca);
  auto r1 = (*c1)->List(kNodes, "");
  EXPECT(r1.status().code() == Status::Code::kInvalidArgument, "{}", r1.status().ToString());
  Say("no CA: refused: " + r1.status().ToString());
  // insecure-skip-tls-verify works and warns.
  Config insecure = no_ca;
  insecure.insecure_skip_tls_verify = true;
  RecordingLogger log;
  ClientOptions o;
  o.logger = &log;
  auto c2 = Client::Create(insecure, o);
  EXPECT((*c2)->List(kNodes, "").ok(), "insecure");
  EXPECT(log.Contains("insecure-skip-tls-verify", LogLevel::kWarning), "no warning");
  // Client certificates (DIR/client-cert-kubeconfig).
  auto cert_cfg = LoadKubeconfig({g_dir + "/client-cert-kubeconfig"}, "");
  EXPECT(cert_cfg.ok(), "{}", cert_cfg.status().ToString());
  auto c3 = Client::Create(*cert_cfg);
  auto r3 = (*c3)->List(kNodes, "");
  EXPECT(r3.ok(), "client certificate: {}", r3.status().ToString());
  Say("CA verified; insecure-skip-tls-verify warned; client certificate accepted");
  return Status::Ok();
}

Status LeaderAndEvents() {
  auto h = Harness::Make();
  if (!h.ok())
    return h.status();
  Client& c = *(*h)->client;
  std::string lease = Unique("lease");
  LeaderElectionOptions a_opts;
  a_opts.namespace_ = "default";
  a_opts.name = lease;
  a_opts.identity = "a";
  LeaderElectionOptions b_opts = a_opts;
  b_opts.identity = "b";
  LeaderElector a(c, a_opts), b(c, b_opts);
  EXPECT(a.TryAcquireOrRenew(), "a acquires");
  EXPECT(!b.TryAcquireOrRenew(), "b must not acquire a held lease");
  EXPECT(a.TryAcquireOrRenew(), "a renews");
  a.Release();
  EXPECT(b.TryAcquireOrRenew(), "b acquires a released lease");
  auto l = Leases(c, "default").Get(lease);
  EXPECT(l.ok() && lease::HolderIdentity(*l) == "b" && lease::Transitions(*l) >= 1, "{}",
         l.ok() ? l->ToJson() : "");
  Say("leader election on a Lease: a acquired, b waited, a released, b took over");

  EventRecorderOptions eo;
  eo.reporting_instance = "kube-scenarios";
  auto node = Nodes(c).Get("node-0");
  EXPECT(node.ok(), "{}", node.status().ToString());
  {
    EventRecorder rec(c, eo);
    for (int i = 0; i < 3; ++i)
      rec.Record(ObjectReference::Of(*node), "Normal", "ScenarioRan", "Test", "folded");
    rec.Flush(30s);
    EXPECT(rec.failed() == 0, "event failures {}", rec.failed());
  }
  auto events = Events(c, "default").List();
  EXPECT(events.ok(), "{}", events.status().ToString());
  int64_t count = 0;
  for (const auto& e : events->items) {
    if (e.String("/reason") == "ScenarioRan")
      count = std::max<int64_t>(count, e.Int("/series/count").value_or(1));
  }
  EXPECT(count == 3, "series count {}", count);
  Say("three repeats recorded as one event with series.count 3");
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kube_scenarios DIR SCENARIO\n");
    return 2;
  }
  g_dir = argv[1];
  std::map<std::string, std::function<Status()>> scenarios = {
      {"crud", Crud},
      {"conflict", Conflict},
      {"fault-429", Fault429},
      {"fault-503", Fault503},
      {"fault-500", Fault500},
      {"fault-500-read", Fault500Read},
      {"fault-reset", FaultReset},
      {"fault-reset-after-commit", FaultResetAfterCommit},
      {"fault-stall", FaultStall},
      {"fault-latency", FaultLatency},
      {"watch-expire-mid-stream", WatchExpireMidStream},
      {"watch-410-http", Watch410Http},
      {"watch-stall", WatchStall},
      {"watch-reset", WatchReset},
      {"watch-5xx", Watch5xx},
      {"token-rotation", TokenRotationDuringWatch},
      {"exec-expiry", ExecPluginExpiry},
      {"tls", Tls},
      {"leader-events", LeaderAndEvents},
  };
  auto it = scenarios.find(argv[2]);
  if (it == scenarios.end()) {
    std::fprintf(stderr, "unknown scenario %s; one of:", argv[2]);
    for (const auto& [k, v] : scenarios)
      std::fprintf(stderr, " %s", k.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  Status s = it->second();
  if (!s.ok()) {
    std::printf("FAILED %s: %s\n", argv[2], s.ToString().c_str());
    return 1;
  }
  std::printf("OK %s\n", argv[2]);
  return 0;
}
