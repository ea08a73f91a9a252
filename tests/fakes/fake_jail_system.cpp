#include "fake_jail_system.h"

#include <fcntl.h>

#include <fmt/format.h>

namespace k8sbridge::jail {

Status FakeJailSystem::CreateTmp(const Options&, const std::string& node, uint32_t job_id) {
  return Record(fmt::format("create_tmp {} {}", node, job_id), tmp_result);
}

Status FakeJailSystem::RemoveTmp(const Options&, const std::string& node, uint32_t job_id) {
  return Record(fmt::format("remove_tmp {} {}", node, job_id), Status::Ok());
}

Status FakeJailSystem::Enter(const TaskPlan& plan) {
  entered.push_back(plan);
  return Record("enter", enter_result);
}

Status FakeJailSystem::StartJobNamespace(const Options&, const TaskPlan& plan,
                                         const std::string& node, uint32_t job_id) {
  entered.push_back(plan);
  return Record(fmt::format("start_ns {} {}", node, job_id), start_ns_result);
}

Result<UniqueFd> FakeJailSystem::OpenJobNamespace(const Options&, const std::string& node,
                                                  uint32_t job_id) {
  Record(fmt::format("open_ns {} {}", node, job_id), open_ns_result);
  if (!open_ns_result.ok())
    return open_ns_result;
  return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

Status FakeJailSystem::JoinJobNamespace(int) {
  return Record("join_ns", join_result);
}

Status FakeJailSystem::RemoveJobNamespace(const Options&, const std::string& node,
                                          uint32_t job_id) {
  return Record(fmt::format("remove_ns {} {}", node, job_id), Status::Ok());
}

Status FakeJailSystem::CheckUser(const Options&, uid_t uid, const std::string& user) {
  return Record(fmt::format("check_user {} {}", user, uid), user_result);
}

Status FakeJailSystem::Drain(const std::string& node, const std::string& reason) {
  drains.push_back(fmt::format("{}: {}", node, reason));
  return Record("drain", Status::Ok());
}

}  // namespace k8sbridge::jail
