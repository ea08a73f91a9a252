#include "k8sbridge/slurm/api.h"

#include <pwd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace k8sbridge::slurm {

namespace {

Node::Base BaseOf(uint32_t state) {
  switch (state & NODE_STATE_BASE) {
    case NODE_STATE_DOWN:
      return Node::Base::kDown;
    case NODE_STATE_IDLE:
      return Node::Base::kIdle;
    case NODE_STATE_ALLOCATED:
      return Node::Base::kAllocated;
    case NODE_STATE_ERROR:
      return Node::Base::kError;
    case NODE_STATE_MIXED:
      return Node::Base::kMixed;
    case NODE_STATE_FUTURE:
      return Node::Base::kFuture;
    default:
      return Node::Base::kUnknown;
  }
}

std::string Text(const char* s) {
  // Slurm prints an unset string as "(null)" in some fields (gres).
  return s != nullptr && std::string_view(s) != "(null)" ? s : "";
}

Node Convert(const node_info_t& info) {
  Node n;
  n.name = Text(info.name);
  const uint32_t state = info.node_state;
  n.base = BaseOf(state);
  n.drain = (state & NODE_STATE_DRAIN) != 0;
  n.cloud = (state & NODE_STATE_CLOUD) != 0;
  n.powered_down = (state & NODE_STATE_POWERED_DOWN) != 0;
  n.powering_up = (state & NODE_STATE_POWERING_UP) != 0;
  n.powering_down = (state & NODE_STATE_POWERING_DOWN) != 0;
  n.power_down = (state & NODE_STATE_POWER_DOWN) != 0;
  n.power_up = (state & NODE_STATE_POWER_UP) != 0;
  n.not_responding = (state & NODE_STATE_NO_RESPOND) != 0;
  n.fail = (state & NODE_STATE_FAIL) != 0;
  n.reboot_requested = (state & NODE_STATE_REBOOT_REQUESTED) != 0;
  n.reboot_issued = (state & NODE_STATE_REBOOT_ISSUED) != 0;
  n.reason = Text(info.reason);
  n.reason_time = info.reason_time;
  n.features = Text(info.features);
  n.features_act = Text(info.features_act);
  n.gres = Text(info.gres);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
  n.topology = Text(info.topology_str);
#endif
  return n;
}

// "socket=/run/munge/munge.socket.2,ttl=300": comma-separated key=value.
std::string MungeSocketOf(std::string_view authinfo) {
  constexpr std::string_view kKey = "socket=";
  while (!authinfo.empty()) {
    const size_t comma = authinfo.find(',');
    std::string_view item = authinfo.substr(0, comma);
    if (item.starts_with(kKey))
      return std::string(item.substr(kKey.size()));
    if (comma == std::string_view::npos)
      break;
    authinfo.remove_prefix(comma + 1);
  }
  return "";
}

class ApiSlurm final : public Slurm {
 public:
  explicit ApiSlurm(const SlurmApi& api) : api_(api) {}
  Result<std::vector<Node>> LoadNodes() override;
  Result<std::optional<std::vector<Node>>> LoadChangedNodes() override;
  Result<Node> LoadNode(std::string_view node) override;
  Status Drain(std::string_view node, std::string_view reason) override;
  Status Undrain(std::string_view node) override;
  Status Fail(std::string_view node, std::string_view reason) override;
  Status ReturnToService(std::string_view node) override;
  Status PowerDown(std::string_view node) override;
  Status Reboot(std::string_view node, std::string_view reason) override;
  Status SetFeatures(std::string_view node, std::string_view available,
                     std::string_view active) override;
  bool SupportsTopologyUpdate() const override;
  Status SetTopology(std::string_view node, std::string_view topology) override;
  Result<std::string> MungeSocket() override;
  Result<Timeouts> LoadTimeouts() override;

 private:
  void Init();
  std::string LastError() const;
  std::string UserName(uint32_t uid);  // load_mu_ held
  Node FromInfo(const node_info_t& info);
  // One slurm_update_node of the node's state; `reason` and `node_addr` go with it
  // unless empty.
  Status UpdateState(std::string_view node, uint32_t state, std::string_view reason,
                     std::string_view what, std::string_view node_addr = {});

  const SlurmApi api_;
  std::once_flag init_;
  // load_mu_: the change-detected copy and the user-name cache; update_mu_: one
  // read-then-write at a time, so a drain's live read is still true when it writes.
  std::mutex load_mu_, update_mu_;
  time_t last_update_ = 0;
  std::vector<Node> nodes_;
  std::map<uint32_t, std::string> users_;
};

void ApiSlurm::Init() {
  // Reads slurm.conf (SLURM_CONF, else the compiled-in path). Lazily: a program
  // that never reaches Slurm must not go looking for a configuration server.
  std::call_once(init_, [this] {
    if (api_.init != nullptr)
      api_.init(nullptr);
  });
}

std::string ApiSlurm::LastError() const {
  const int err = errno;  // libslurm reports its errors through errno (24.11)
  return fmt::format("{} (errno {})", api_.strerror(err), err);
}

std::string ApiSlurm::UserName(uint32_t uid) {
  if (uid == NO_VAL || uid == INFINITE)  // unset
    return "";
  if (auto it = users_.find(uid); it != users_.end())
    return it->second;
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  std::string name = std::to_string(uid);
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr)
    name = found->pw_name;
  users_.emplace(uid, name);
  return name;
}

Node ApiSlurm::FromInfo(const node_info_t& info) {
  Node n = Convert(info);
  n.reason_user = n.reason.empty() ? "" : UserName(info.reason_uid);
  return n;
}

Result<std::vector<Node>> ApiSlurm::LoadNodes() {
  auto changed = LoadChangedNodes();
  if (!changed.ok())
    return changed.status();
  std::lock_guard lock(load_mu_);
  return changed->has_value() ? std::move(**changed) : nodes_;
}

Result<std::optional<std::vector<Node>>> ApiSlurm::LoadChangedNodes() {
  Init();
  std::lock_guard lock(load_mu_);
  node_info_msg_t* msg = nullptr;
  // With the time of our copy, slurmctld answers SLURM_NO_CHANGE_IN_DATA (cheap)
  // unless a node changed since.
  if (api_.load_node(last_update_, &msg, SHOW_ALL) != SLURM_SUCCESS) {
    if (errno == SLURM_NO_CHANGE_IN_DATA && last_update_ != 0)
      return std::optional<std::vector<Node>>();
    return Status::Unavailable(fmt::format("slurm_load_node: {}", LastError()));
  }
  if (msg == nullptr)
    return Status::Unavailable("slurm_load_node answered nothing");
  std::vector<Node> nodes;
  nodes.reserve(msg->record_count);
  for (uint32_t i = 0; i < msg->record_count; ++i) {
    if (msg->node_array[i].name != nullptr)
      nodes.push_back(FromInfo(msg->node_array[i]));
  }
  last_update_ = msg->last_update;
  api_.free_node_info_msg(msg);
  nodes_ = nodes;
  return std::optional<std::vector<Node>>(std::move(nodes));
}

Result<Node> ApiSlurm::LoadNode(std::string_view node) {
  Init();
  // Its own RPC, not the change-detected copy: callers act on slurmctld's state now.
  std::lock_guard lock(load_mu_);
  std::string name(node);
  node_info_msg_t* msg = nullptr;
  if (api_.load_node_single(&msg, name.data(), SHOW_ALL) != SLURM_SUCCESS) {
    return Status::Unavailable(fmt::format("slurm_load_node_single({}): {}", node, LastError()));
  }
  Result<Node> out = Status::NotFound(fmt::format("Slurm has no node {}", node));
  for (uint32_t i = 0; msg != nullptr && i < msg->record_count; ++i) {
    const node_info_t& info = msg->node_array[i];
    if (info.name != nullptr && node == info.name)
      out = FromInfo(info);
  }
  if (msg != nullptr)
    api_.free_node_info_msg(msg);
  return out;
}

Status ApiSlurm::UpdateState(std::string_view node, uint32_t state, std::string_view reason,
                             std::string_view what, std::string_view node_addr) {
  std::string names(node);
  std::string text(reason);
  std::string addr(node_addr);
  update_node_msg_t msg;
  api_.init_update_node_msg(&msg);
  msg.node_names = names.data();
  msg.node_state = state;
  // slurmctld records the reason's author as the RPC's authenticated user: no
  // reason_uid is sent (26.05 has no such field).
  if (!text.empty())
    msg.reason = text.data();
  // slurmctld sets the address before the state, under the same lock.
  if (!addr.empty())
    msg.node_addr = addr.data();
  if (api_.update_node(&msg) != SLURM_SUCCESS) {
    const std::string addr_text = addr.empty() ? "" : " NodeAddr=" + addr;
    return Status::Unavailable(fmt::format("slurm_update_node(NodeName={} State={}{}): {}", node,
                                           what, addr_text, LastError()));
  }
  return Status::Ok();
}

Status ApiSlurm::Drain(std::string_view node, std::string_view reason) {
  std::lock_guard lock(update_mu_);
  Result<Node> live = LoadNode(node);
  if (ReasonPolicyFor(live) == ReasonWrite::kKeep)
    return Status::AlreadyExists(ForeignReasonKept(node, live->reason));
  return UpdateState(node, NODE_STATE_DRAIN, reason, "DRAIN");
}

Status ApiSlurm::Undrain(std::string_view node) {
  Init();
  std::lock_guard lock(update_mu_);
  return UpdateState(node, NODE_STATE_UNDRAIN, "", "UNDRAIN");
}

Status ApiSlurm::Fail(std::string_view node, std::string_view reason) {
  std::lock_guard lock(update_mu_);
  const FailPlan plan = FailPlanFor(LoadNode(node));
  const std::string_view sent = plan.reason == ReasonWrite::kKeep ? std::string_view() : reason;
  // DOWN first: its jobs requeue at once. Then POWER_DOWN: the node goes to
  // POWERED_DOWN after SuspendTimeout (still DOWN, down~, in Slurm 24.11) instead of
  // waiting for ResumeTimeout. Without a reason slurmctld keeps the node's own. The
  // address goes with the POWER_DOWN, the update that ends POWERING_UP.
  if (Status s = UpdateState(node, NODE_STATE_DOWN, sent, "DOWN"); !s.ok())
    return s;
  return UpdateState(node, NODE_STATE_POWER_DOWN, sent, "POWER_DOWN", plan.node_addr);
}

Status ApiSlurm::ReturnToService(std::string_view node) {
  Init();
  std::lock_guard lock(update_mu_);
  // IDLE on a DOWN node clears DRAIN and FAIL and, on a powered-down one, makes it
  // available at once; the power flags stay (POWERED_DOWN), so Slurm resumes it when
  // a job needs it. port.h says why not RESUME.
  return UpdateState(node, NODE_STATE_IDLE, "", "IDLE");
}

Status ApiSlurm::PowerDown(std::string_view node) {
  Init();
  std::lock_guard lock(update_mu_);
  return UpdateState(node, NODE_STATE_POWER_DOWN, "", "POWER_DOWN");
}

Status ApiSlurm::Reboot(std::string_view node, std::string_view reason) {
  if (!api_.reboot_asap)
    return Status::Internal("a reboot needs scontrol: only k8sbridge's programs can ask one");
  std::lock_guard lock(update_mu_);
  return api_.reboot_asap(node, reason);
}

Status ApiSlurm::SetFeatures(std::string_view node, std::string_view available,
                             std::string_view active) {
  Init();
  std::lock_guard lock(update_mu_);
  std::string names(node), features(available), features_act(active);
  update_node_msg_t msg;
  api_.init_update_node_msg(&msg);
  msg.node_names = names.data();
  msg.features = features.data();
  msg.features_act = features_act.data();
  if (api_.update_node(&msg) != SLURM_SUCCESS) {
    return Status::Unavailable(
        fmt::format("slurm_update_node(NodeName={} Features={} ActiveFeatures={}): {}", node,
                    available, active, LastError()));
  }
  return Status::Ok();
}

// 25.05 added the node's topology units to update_node_msg_t and node_info_t.
bool ApiSlurm::SupportsTopologyUpdate() const {
  return SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0);
}

Status ApiSlurm::SetTopology(std::string_view node, std::string_view topology) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
  Init();
  std::lock_guard lock(update_mu_);
  std::string names(node), units(topology);
  update_node_msg_t msg;
  api_.init_update_node_msg(&msg);
  msg.node_names = names.data();
  msg.topology_str = units.data();
  if (api_.update_node(&msg) != SLURM_SUCCESS) {
    return Status::Unavailable(
        fmt::format("slurm_update_node(NodeName={} Topology={}): {}", node, topology, LastError()));
  }
  return Status::Ok();
#else
  return Status::Internal(
      fmt::format("slurm_update_node(NodeName={} Topology={}): this Slurm has no node topology "
                  "update (25.05+)",
                  node, topology));
#endif
}

Result<std::string> ApiSlurm::MungeSocket() {
  Init();
  std::lock_guard lock(load_mu_);
  slurm_conf_t* conf = nullptr;
  if (api_.load_ctl_conf(0, &conf) != SLURM_SUCCESS || conf == nullptr)
    return Status::Unavailable(fmt::format("slurm_load_ctl_conf: {}", LastError()));
  std::string socket = MungeSocketOf(Text(conf->authinfo));
  api_.free_ctl_conf(conf);
  return socket;
}

Result<Timeouts> ApiSlurm::LoadTimeouts() {
  Init();
  std::lock_guard lock(load_mu_);
  slurm_conf_t* conf = nullptr;
  if (api_.load_ctl_conf(0, &conf) != SLURM_SUCCESS || conf == nullptr)
    return Status::Unavailable(fmt::format("slurm_load_ctl_conf: {}", LastError()));
  Timeouts out;
  out.resume = std::chrono::seconds(conf->resume_timeout);
  // After 24.11, PrologTimeout (defaulting to PrologEpilogTimeout, and applying to
  // PrologSlurmctld: 26.05's slurm.conf(5)) took prolog_epilog_timeout's place in
  // slurm_conf_t. Unset is NO_VAL16: slurmctld waits for ever.
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 5, 0)
  const uint16_t prolog_timeout = conf->prolog_timeout;
#else
  const uint16_t prolog_timeout = conf->prolog_epilog_timeout;
#endif
  if (prolog_timeout < NO_VAL16)
    out.prolog_epilog = std::chrono::seconds(prolog_timeout);
  api_.free_ctl_conf(conf);
  return out;
}

}  // namespace

std::unique_ptr<Slurm> NewApiSlurm(const SlurmApi& api) {
  return std::make_unique<ApiSlurm>(api);
}

}  // namespace k8sbridge::slurm
