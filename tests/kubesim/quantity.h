// Kubernetes resource quantities ("500m", "4Gi", "8"), shared by the API's
// validation and the scheduler's resource fit.
#pragma once

#include <cstdint>
#include <string_view>

#include "k8sbridge/status.h"

namespace kubesim {

using k8sbridge::Result;

// A Kubernetes quantity ("500m", "4Gi", "8", "1.5", "2e3") in thousandths of a unit,
// rounded up as Quantity.MilliValue() does. kInvalidArgument names the bad text.
Result<int64_t> ParseQuantityMilli(std::string_view text);

}  // namespace kubesim
