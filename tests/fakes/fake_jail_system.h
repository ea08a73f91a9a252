// A JailSystem (k8sbridge/jail/step.h) that records every call, for unit tests only.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/jail/step.h"

namespace k8sbridge::jail {

// Records every call; each step can be told to fail.
class FakeJailSystem final : public JailSystem {
 public:
  Status Probe(const Options&) override { return Record("probe", probe_result); }
  Status CheckRoot(const Options&) override { return Record("check_root", root_result); }
  Status CheckBinds(const TaskPlan&) override { return Record("check_binds", binds_result); }
  Status CreateTmp(const Options&, const std::string& node, uint32_t job_id) override;
  Status RemoveTmp(const Options&, const std::string& node, uint32_t job_id) override;
  Status Enter(const TaskPlan& plan) override;
  Status StartJobNamespace(const Options&, const TaskPlan& plan, const std::string& node,
                           uint32_t job_id) override;
  // A valid descriptor (of /dev/null) when open_ns_result is Ok.
  Result<UniqueFd> OpenJobNamespace(const Options&, const std::string& node,
                                    uint32_t job_id) override;
  Status JoinJobNamespace(int ns_fd) override;
  Status RemoveJobNamespace(const Options&, const std::string& node, uint32_t job_id) override;
  Status CheckUser(const Options&, uid_t uid, const std::string& user) override;
  Status Drain(const std::string& node, const std::string& reason) override;

  Status probe_result, root_result, binds_result, tmp_result, enter_result, user_result;
  Status start_ns_result, join_result;
  Status open_ns_result = Status::Unavailable("no job namespace holder");
  std::vector<std::string> calls;
  std::vector<std::string> drains;  // "node: reason"
  std::vector<TaskPlan> entered;

 private:
  Status Record(const std::string& call, const Status& result) {
    calls.push_back(call);
    return result;
  }
};

}  // namespace k8sbridge::jail
