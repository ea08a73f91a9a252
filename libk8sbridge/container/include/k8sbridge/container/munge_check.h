// The munge key check between the controller and a worker pod. The resume step
// encodes a credential with the controller's munged and puts it in the pod's
// environment; the worker entrypoint decodes it with the pod's munged before it
// starts slurmd. A pod holding another key fails at once, with a status that
// names the key, instead of a slurmd that never registers.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge::container {

// What the credential says: a worker accepts only one made for its own cluster.
// One credential serves every pod of a resume call (each pod has its own munged,
// so decoding it in many pods is no replay), which keeps a 1000-node resume at one
// munged round trip.
std::string MungeCheckPayload(std::string_view cluster);

struct MungeDecoded {
  enum class Verdict {
    kValid,
    // Expired, rewound or replayed: munge checked the MAC first, so the keys match;
    // the pod just took long to start (image pull, pending) or the clock moved.
    kValidButStale,
    kKeyMismatch,  // "Invalid credential": another key encoded it
    kUnavailable,  // no munged at the socket
    kMalformed,    // not a munge credential at all
  };
  Verdict verdict = Verdict::kMalformed;
  std::string payload;
  std::string detail;  // libmunge's words
};

class MungeCodec;

// The credential of one resume call, encoded when the first node needs it.
class SharedMungeCredential {
 public:
  const Result<std::string>& Get(MungeCodec& munge, std::string_view cluster);

 private:
  std::once_flag once_;
  Result<std::string> credential_ = Status::Internal("not encoded");
};

class MungeCodec {
 public:
  virtual ~MungeCodec() = default;
  virtual Result<std::string> Encode(std::string_view payload) = 0;
  virtual MungeDecoded Decode(std::string_view credential) = 0;
};

// libmunge against the munged at `socket` ("" = libmunge's default socket).
class LibMungeCodec final : public MungeCodec {
 public:
  explicit LibMungeCodec(std::string socket) : socket_(std::move(socket)) {}
  Result<std::string> Encode(std::string_view payload) override;
  MungeDecoded Decode(std::string_view credential) override;

 private:
  std::string socket_;
};

}  // namespace k8sbridge::container
