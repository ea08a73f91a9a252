// What every power action works with: the loaded configuration, Kubernetes, Slurm,
// the log and the optional event recorder and munge codec. Its own header, so the
// placement check and the pod calls can take it without including the actions
// that use them.
#pragma once

#include "k8sbridge/container/munge_check.h"
#include "k8sbridge/kube/client.h"
#include "k8sbridge/kube/events.h"
#include "k8sbridge/log.h"
#include "k8sbridge/power/setup.h"
#include "k8sbridge/slurm/port.h"

namespace k8sbridge::power {

struct PowerContext {
  const PowerSetup& setup;
  kube::Client& client;
  slurm::Slurm& slurm;  // the node's Gres; DOWN + POWER_DOWN of a failed resume
  Logger& log;
  kube::EventRecorder* events = nullptr;  // ResumeFail's pod events; null: log only
  // Resume's munge check credential (MungeCheck=yes); null: pods get none.
  container::MungeCodec* munge = nullptr;
};

}  // namespace k8sbridge::power
