// spank_jail: the SPANK ABI, and nothing else. Every callback reads what it needs
// from Slurm (checking each spank call), then hands over to libk8sbridge's
// jail::JailStep (libk8sbridge/include/k8sbridge/jail/step.h), which holds the
// logic and its tests. One dispatcher per callback picks the Slurm context:
//
//   srun / sbatch / salloc (local, allocator): register --no-jail
//   slurmstepd (remote): init_post_opt checks the jail and prepares the step
//       (in the extern step: starts the job's namespace), task_init_privileged
//       moves each task into the jail, task_init checks the user
//   slurmd job epilog (job_script): removes the job's private /tmp
//
// The plugin is also loaded by srun and sbatch inside the jail, which may be
// another Debian release: it is linked with fmt header-only (see meson.build)
// so it needs nothing beyond the C and C++ runtimes.
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <slurm/slurm.h>
// The callback prototypes in spank.h sit outside its own extern "C" block.
extern "C" {
#include <slurm/spank.h>
}

#include "k8sbridge/jail/enter.h"
#include "k8sbridge/jail/options.h"
#include "k8sbridge/jail/step.h"
#include "k8sbridge/log.h"
#include "k8sbridge/slurm/daemon.h"

// spank.h's SPANK_PLUGIN() gives these internal linkage in C++; Slurm's loader
// looks them up with dlsym, so they are defined with C linkage by hand.
extern "C" {
extern const char plugin_name[] = "spank_jail";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;
}

namespace {

using k8sbridge::LogLevel;
using k8sbridge::Status;
namespace jail = k8sbridge::jail;

constexpr int kFail = -1;  // 24.11 fails a step only on a negative return

// Forwards to Slurm's logger with the plugin prefix.
class SlurmLogger final : public k8sbridge::Logger {
 public:
  void Log(LogLevel level, std::string_view message) override {
    int n = static_cast<int>(message.size());
    switch (level) {
      case LogLevel::kDebug:
        slurm_debug("spank_jail: %.*s", n, message.data());
        break;
      case LogLevel::kInfo:
        slurm_info("spank_jail: %.*s", n, message.data());
        break;
      case LogLevel::kWarning:
        slurm_info("spank_jail: warning: %.*s", n, message.data());
        break;
      case LogLevel::kError:
        slurm_error("spank_jail: %.*s", n, message.data());
        break;
    }
  }
};

struct PluginState {
  SlurmLogger log;
  // Drains through the daemon's own Slurm API (the plugin links no libslurm).
  k8sbridge::Result<std::unique_ptr<k8sbridge::slurm::Slurm>> slurm =
      k8sbridge::slurm::NewDaemonSlurm();
  jail::RealJailSystem system{slurm.ok() ? slurm->get() : nullptr, slurm.status()};
  std::optional<jail::JailStep> step;
  std::optional<jail::Options> options;
  bool no_jail_requested = false;  // set by the option callback, before init_post_opt
};
PluginState* state = nullptr;

// Slurm calls this wherever the option (or its _SLURM_SPANK_OPTION_ variable)
// is seen; in slurmstepd that is before init_post_opt, where getopt is refused.
int no_jail_cb(int, const char*, int) {
  if (state != nullptr)
    state->no_jail_requested = true;
  return 0;
}

struct spank_option no_jail_option = {
    const_cast<char*>("no-jail"),
    nullptr,
    const_cast<char*>("Run this job's steps on the node's own root instead of the jail "
                      "(only where the administrator allows it)"),
    0,
    0,
    no_jail_cb};

std::string NodeName() {
  if (const char* env = std::getenv("SLURMD_NODENAME"); env != nullptr && *env != '\0') {
    return env;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0)
    return "";
  std::string name(host);
  return name.substr(0, name.find('.'));
}

std::string UserName(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}

bool ParseOptions(int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  auto options = jail::ParseOptions(args);
  if (!options.ok()) {
    state->log.Error("{}", options.status().message());
    return false;
  }
  state->options = *options;
  return true;
}

template <typename T>
bool GetItem(spank_t sp, spank_item_t item, const char* what, T* out) {
  spank_err_t rc = spank_get_item(sp, item, out);
  if (rc != ESPANK_SUCCESS) {
    state->log.Error("spank_get_item({}) failed: {}", what, spank_strerror(rc));
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  if (state == nullptr)
    state = new PluginState();
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
    spank_err_t rc = spank_option_register(sp, &no_jail_option);
    if (rc != ESPANK_SUCCESS) {
      state->log.Error("cannot register --no-jail: {}", spank_strerror(rc));
      return kFail;
    }
  }
  if (ctx == S_CTX_REMOTE) {
    if (!ParseOptions(ac, av))
      return kFail;
  }
  return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (!spank_remote(sp) || state == nullptr || !state->options)
    return 0;
  jail::StepInfo info;
  if (!GetItem(sp, S_JOB_ID, "S_JOB_ID", &info.job_id) ||
      !GetItem(sp, S_JOB_STEPID, "S_JOB_STEPID", &info.step_id) ||
      !GetItem(sp, S_JOB_UID, "S_JOB_UID", &info.uid)) {
    return kFail;
  }
  info.user = UserName(info.uid);
  info.node = NodeName();
  info.no_jail_requested = state->no_jail_requested;
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr)
    info.slurm_conf = conf;
  state->step.emplace(*state->options, state->system, state->log);
  Status s = state->step->Prepare(info);
  return s.ok() ? 0 : kFail;
}

// Runs in the task's own child of slurmstepd, before it execs the user's
// program. A task that does not make it into the jail is ended here, by the
// plugin: returning an error is not enough, since with `optional` in
// plugstack.conf Slurm ignores it and runs the task on the pod's root.
int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  if (!spank_remote(sp))
    return 0;
  Status s = state != nullptr && state->step
                 ? state->step->EnterTask()
                 : Status::PermissionDenied(
                       "spank_jail was not set up for this step (its options or its init failed: "
                       "see the spank_jail error before this one): refusing to run the task "
                       "outside the jail");
  // Every task that runs, in the jail or (an allowed --no-jail) on the host,
  // execs with no_new_privs.
  if (s.ok())
    s = jail::SealTask(state->step->task_slurm_conf());
  if (s.ok())
    return 0;
  slurm_error("spank_jail: %s: ending the task before it runs (exit code %d)", s.message().c_str(),
              jail::kTaskRefusedExitCode);
  _exit(jail::kTaskRefusedExitCode);
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  if (!spank_remote(sp) || state == nullptr || !state->step)
    return 0;
  Status s = state->step->CheckTaskUser();
  if (!s.ok()) {
    // The task's stderr is the user's by now: say why the step fails there.
    std::fprintf(stderr, "spank_jail: error: %s\n", s.message().c_str());
    std::fflush(stderr);
    return kFail;
  }
  return 0;
}

// slurmd runs this in a private stack of its own: slurm_spank_init is not
// called there, so the options are parsed here.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  if (state == nullptr)
    state = new PluginState();
  if (!state->options && !ParseOptions(ac, av))
    return kFail;
  uint32_t job_id = 0;
  if (!GetItem(sp, S_JOB_ID, "S_JOB_ID", &job_id))
    return kFail;
  Status s = jail::JobEpilog(*state->options, state->system, NodeName(), job_id, state->log);
  return s.ok() ? 0 : kFail;
}

int slurm_spank_exit(spank_t, int, char**) {
  delete state;
  state = nullptr;
  return 0;
}

}  // extern "C"
