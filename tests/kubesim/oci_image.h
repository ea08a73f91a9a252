// Images for the kubesim kubelet's OCI mode: image references normalized as a real
// container runtime does (docker.io/library/ for short names, :latest by default,
// @sha256: digests), an image store of OCI image layouts on disk standing in for the
// registry, the image configuration (Entrypoint, Cmd, Env, WorkingDir, User,
// StopSignal) and the unpacking of an image's root once per manifest digest (umoci).
//
// The store's layout (docs/kubesim.md, "OCI mode"): every directory under the store
// that holds an OCI layout (an oci-layout file and index.json) is one repository; its
// path relative to the store, less a last "oci" component, is the repository name
// (normalized: k8sbridge-worker means docker.io/library/k8sbridge-worker); the
// org.opencontainers.image.ref.name annotations of index.json are its tags.
//
// kubesim is test and demo infrastructure (docs/kubesim.md); it ships nowhere.
#pragma once

#include <string>
#include <vector>

#include "k8sbridge/status.h"

namespace kubesim::oci {

using k8sbridge::Result;
using k8sbridge::Status;

// A normalized reference: repository "docker.io/library/busybox", tag "latest" (or
// empty when only a digest was given), digest "sha256:<64 hex>" or empty.
struct ImageReference {
  std::string repository;
  std::string tag;
  std::string digest;
  std::string String() const;  // repository[:tag][@digest]
};
// As github.com/distribution/reference's ParseNormalizedNamed plus the default tag;
// kInvalidArgument with "invalid reference format" for what a runtime refuses.
Result<ImageReference> NormalizeReference(const std::string& image);

// The parts of an image's configuration a container runtime uses.
struct ImageConfig {
  std::vector<std::string> entrypoint, cmd, env;
  std::string working_dir, user, stop_signal;
};
// The "config" of an OCI image configuration blob; kInvalidArgument on bad JSON.
Result<ImageConfig> ParseImageConfig(const std::string& json);

struct StoredImage {
  std::string layout;           // the OCI layout's directory
  std::string tag;              // a ref name of the manifest in index.json
  std::string manifest_digest;  // sha256:...; what the kubelet reports as imageID
  std::string repository;       // normalized
  ImageConfig config;
};

// The image store: a directory of OCI layouts (see above).
class ImageStore {
 public:
  explicit ImageStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  // kNotFound when the store has no such repository, tag or digest.
  Result<StoredImage> Resolve(const ImageReference& ref) const;

 private:
  std::string dir_;
};

// Unpacks `image` into <cache_dir>/<digest hex>/rootfs unless that is there already;
// returns the rootfs.
Result<std::string> UnpackImage(const StoredImage& image, const std::string& cache_dir);

// The mount points at or under `dir` (this process's mount namespace), deepest first.
std::vector<std::string> MountsUnder(const std::string& dir);

// Runs a program (not through a shell) and returns its output (stdout and stderr);
// a non-zero exit is kInternal with the output. Safe in a multi-threaded process.
Result<std::string> RunTool(const std::vector<std::string>& argv);

}  // namespace kubesim::oci
