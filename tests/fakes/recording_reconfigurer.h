// A Reconfigurer (k8sbridge/topology/refresh.h) that counts calls, for unit tests
// only.
#pragma once

#include "k8sbridge/topology/refresh.h"

namespace k8sbridge::topology {

// Counts calls; can be told to fail.
class RecordingReconfigurer final : public Reconfigurer {
 public:
  Status Reconfigure() override {
    ++calls_;
    return fail_ ? Status::Unavailable("slurmctld is not answering (test)") : Status::Ok();
  }
  int calls() const { return calls_; }
  void set_fail(bool fail) { fail_ = fail; }

 private:
  int calls_ = 0;
  bool fail_ = false;
};

}  // namespace k8sbridge::topology
