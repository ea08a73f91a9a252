// The job-wide mount namespace (namespace=job, the default): the jail is set up
// once per job and node, and every task of the job's steps joins it with one
// setns(2) instead of building a namespace of its own.
//
// The extern step (PrologFlags=Contain) forks a holder process that does for
// itself what EnterJail does for a task (its own mount namespace, slave to the
// host's; the jail bound, the private /tmp and binds mounted, pivot_root, a
// fresh /proc) and then serves the job's steps. The namespace lives exactly as
// long as the holder, and the holder dies with the extern step:
// PR_SET_PDEATHSIG, and the step's own kill of everything it tracks. Nothing is
// mounted on the host to keep the namespace alive, so no failure path can leave
// a mount behind.
//
// The holder probes the jail as the job sees it (the same stat and read as
// ProbeJail) every kBeat, and touches a state file, <tmp_base>/<node>/job<id>.ns
// ("PID STARTTIME"), after each success. A step whose state file was touched
// within kFresh opens /proc/PID/ns/mnt directly, checking the start time after
// the open so that a reused pid never lets a task into another job's namespace:
// no round trip, no waiting on another process. Otherwise (the last probe
// failed, or the holder is stuck in one) the step asks the holder through a
// Unix socket, <tmp_base>/<node>/job<id>.sock, and waits for a fresh probe
// only until probe_timeout: a holder stuck on a hung jail fails the step at
// the deadline, exactly as a stuck prober does, and a failed probe fails it
// with the prober's message. So a jail that has been hung or gone for longer
// than kFresh is always caught at step start; a step that starts within kFresh
// of the jail breaking is not, as a step that starts just after a probe is not.
// Both files sit in the node directory that only root can enter.
//
// A job without a holder (no PrologFlags=Contain, or a failed start) is not
// an error: its steps probe the jail themselves and their tasks enter it one
// by one, as with namespace=task.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "k8sbridge/jail/enter.h"
#include "k8sbridge/jail/paths.h"
#include "k8sbridge/status.h"

namespace k8sbridge::jail {

inline constexpr std::chrono::milliseconds kBeat{200};
inline constexpr std::chrono::milliseconds kFresh{500};

struct JobNamespacePaths {
  std::string socket;  // where the holder answers
  std::string state;   // "PID STARTTIME"; its mtime is the last good probe
};
JobNamespacePaths JobNamespacePathsFor(const std::string& tmp_base, const std::string& node,
                                       uint32_t job_id);

// Forks the holder and waits up to `timeout` for it to report that it is
// inside the jail. On failure the holder is killed and its files removed: the
// job's tasks enter the jail per task. `probe_rel` is the probe file, relative
// to the jail.
Status StartJobNamespace(const TaskPlan& plan, const std::string& probe_rel,
                         const JobNamespacePaths& paths, std::chrono::milliseconds timeout);

// The job's namespace, from a fresh state file or else by asking the holder to
// probe the jail and hand it over.
//   Ok: the namespace, to be joined by the step's tasks;
//   Unavailable: there is no holder (the caller falls back to probing itself);
//   Timeout: the holder did not answer within `timeout` (a hung jail);
//   NotFound: the holder's probe failed (the jail is gone from under the job).
// `jail` and `probe_rel` only name things in messages.
Result<UniqueFd> OpenJobNamespace(const JobNamespacePaths& paths, const std::string& jail,
                                  const std::string& probe_rel, std::chrono::milliseconds timeout);

// Moves the calling single-threaded process (root) into `ns_fd`'s mount
// namespace; its root and working directory become the jail's root.
Status JoinJobNamespace(int ns_fd);

// Job end: the files go (the holder has died with the extern step).
Status RemoveJobNamespace(const JobNamespacePaths& paths);

}  // namespace k8sbridge::jail
