// libFuzzer target: Status bodies (and ExecCredential output, parsed the same
// way) from a server or plugin we do not trust.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "k8sbridge/kube/api_error.h"
#include "k8sbridge/kube/credentials.h"
#include "k8sbridge/kube/object.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto error = k8sbridge::kube::ParseApiError(size % 600, body);
  auto status = k8sbridge::kube::ApiFailure("GET", "/fuzz", error);
  if (status.ok())
    __builtin_trap();  // a failure never becomes OK
  (void)k8sbridge::kube::ParseExecCredential(body, "fuzz");
  (void)k8sbridge::kube::ParseRfc3339(body);
  auto obj = k8sbridge::kube::Object::Parse(body);
  if (obj.ok())
    (void)obj->ToJson();
  return 0;
}
