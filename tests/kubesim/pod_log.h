// The pods/{name}/log subresource (kubectl logs): the API server's checks of
// pkg/registry/core/pod/strategy.go (LogLocation) and the kubelet's of
// pkg/kubelet/kubelet_pods.go (validateContainerLogStatus), then the container's log
// file as the kubesim kubelet writes it under its state directory:
//   <root>/pods/<pod uid>/logs/<container>/<restartCount>.log  (OCI mode)
//   <root>/pods/<pod uid>/<container>.log                      (host mode)
// where <root> is <kubelet state dir>/<bridge>. Query: container, previous, tailLines,
// limitBytes; timestamps and follow are accepted, but the files carry no timestamps
// and a follow ends at the end of the file (docs/kubesim.md).
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <optional>
#include <string>

#include "api.h"
#include "store.h"

namespace kubesim {

ApiResponse PodLog(const Store& store, const std::string& log_root, const ApiRequest& request,
                   const Route& route);

// The container a pods/log or pods/exec request names (`container`; filled in when
// the pod has one container and none is named), or the 400 upstream answers
// (pkg/registry/core/pod/strategy.go: "a container name must be specified ...",
// "container C is not valid for pod P"; ephemeral containers count, as
// podHasContainerWithName counts them).
std::optional<ApiResponse> PickPodContainer(const rapidjson::Value& pod, const std::string& name,
                                            std::string& container);

// The last `lines` lines of `text` (all of it when lines < 0).
std::string TailLines(const std::string& text, long lines);

}  // namespace kubesim
