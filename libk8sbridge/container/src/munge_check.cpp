#include "k8sbridge/container/munge_check.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace k8sbridge::container {
namespace {

// A pod may wait in Pending or pull an image for a long time; munged caps the
// TTL at its --max-ttl (3600 s by default), and a stale credential still proves
// the key (kValidButStale).
constexpr int kCredentialTtlSeconds = 3600;

struct CtxDeleter {
  void operator()(munge_ctx_t ctx) const { munge_ctx_destroy(ctx); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxDeleter>;

Result<Ctx> MakeContext(const std::string& socket) {
  Ctx ctx(munge_ctx_create());
  if (!ctx)
    return Status::Internal("munge_ctx_create failed (out of memory)");
  if (!socket.empty()) {
    munge_err_t e = munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str());
    if (e != EMUNGE_SUCCESS) {
      return Status::InvalidArgument(
          fmt::format("munge socket {}: {}", socket, munge_ctx_strerror(ctx.get())));
    }
  }
  return ctx;
}

std::string SocketName(const std::string& socket) {
  return socket.empty() ? std::string("libmunge's default socket") : socket;
}

}  // namespace

std::string MungeCheckPayload(std::string_view cluster) {
  return fmt::format("k8sbridge-munge-check cluster={}", cluster);
}

const Result<std::string>& SharedMungeCredential::Get(MungeCodec& munge, std::string_view cluster) {
  std::call_once(once_, [&] { credential_ = munge.Encode(MungeCheckPayload(cluster)); });
  return credential_;
}

Result<std::string> LibMungeCodec::Encode(std::string_view payload) {
  auto ctx = MakeContext(socket_);
  if (!ctx.ok())
    return ctx.status();
  if (munge_ctx_set(ctx->get(), MUNGE_OPT_TTL, kCredentialTtlSeconds) != EMUNGE_SUCCESS) {
    return Status::Internal(
        fmt::format("munge: cannot set the credential TTL: {}", munge_ctx_strerror(ctx->get())));
  }
  char* cred = nullptr;
  const std::string copy(payload);
  munge_err_t e = munge_encode(&cred, ctx->get(), copy.data(), static_cast<int>(copy.size()));
  if (e != EMUNGE_SUCCESS) {
    std::free(cred);
    return Status::Unavailable(
        fmt::format("cannot encode the munge check credential with the munged at {}: {}; is munged "
                    "running, and is MungeSocket= in k8sbridge.conf the socket slurmctld uses?",
                    SocketName(socket_), munge_ctx_strerror(ctx->get())));
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

MungeDecoded LibMungeCodec::Decode(std::string_view credential) {
  MungeDecoded result;
  auto ctx = MakeContext(socket_);
  if (!ctx.ok()) {
    result.verdict = MungeDecoded::Verdict::kUnavailable;
    result.detail = ctx.status().message();
    return result;
  }
  const std::string cred(credential);
  void* buf = nullptr;
  int len = 0;
  munge_err_t e = munge_decode(cred.c_str(), ctx->get(), &buf, &len, nullptr, nullptr);
  if (buf != nullptr) {
    result.payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
    std::free(buf);
  }
  const char* why = munge_ctx_strerror(ctx->get());
  result.detail = why ? why : munge_strerror(e);
  switch (e) {
    case EMUNGE_SUCCESS:
      result.verdict = MungeDecoded::Verdict::kValid;
      break;
    case EMUNGE_CRED_EXPIRED:
    case EMUNGE_CRED_REWOUND:
    case EMUNGE_CRED_REPLAYED:
      result.verdict = MungeDecoded::Verdict::kValidButStale;
      break;
    case EMUNGE_CRED_INVALID:
    case EMUNGE_CRED_UNAUTHORIZED:
      result.verdict = MungeDecoded::Verdict::kKeyMismatch;
      break;
    case EMUNGE_SOCKET:
    case EMUNGE_SNAFU:
      result.verdict = MungeDecoded::Verdict::kUnavailable;
      break;
    default:
      result.verdict = MungeDecoded::Verdict::kMalformed;
      break;
  }
  return result;
}

}  // namespace k8sbridge::container
