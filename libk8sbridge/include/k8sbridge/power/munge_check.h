// The munge key check between the controller and a worker pod. The resume step
// encodes a credential with the controller's munged and puts it in the pod's
// environment; the worker entrypoint decodes it with the pod's munged before it
// starts slurmd. A pod holding another key fails at once, with a status that
// names the key, instead of a slurmd that never registers.
#pragma once

#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge::power {

// The pod environment variable that carries the credential.
inline constexpr std::string_view kEnvMungeCheck = "K8SBRIDGE_MUNGE_CHECK";

// What the credential says: a worker accepts only one made for its own node.
std::string MungeCheckPayload(std::string_view cluster, std::string_view node);

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

}  // namespace k8sbridge::power
