#!/usr/bin/env bash
# The README's main command: sets everything up (Debian packages, Slurm 24.11.5,
# the upstream Kubernetes programs, k8sbridge's Debian packages and images) and runs
# k8sbridge's main job on a local cluster: a real Kubernetes (its control plane,
# CoreDNS and two real nodes, each a kubelet with containerd and runc, the images
# imported into them), `kubectl apply` deploys deploy/overlays/demo, Slurm's power
# saving in the controller pod turns powered-down CLOUD nodes into worker pods from
# the worker image, a 4-node job submitted from the login pod runs in them, and the
# pods are deleted after SuspendTime. Ctrl-C stops it cleanly.
#
#   bash scripts/demo.sh                     # in-cluster (the deployment in deploy/)
#   bash scripts/demo.sh --host-controller   # slurmctld on this host, outside Kubernetes
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
export K8SBRIDGE_CACHE=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
# The Kubernetes programs setup.sh built (cached: this only finds them).
K8SBRIDGE_KUBERNETES_BIN=$(bash scripts/build-kubernetes.sh | tail -n 1)
export K8SBRIDGE_KUBERNETES_BIN
build=${K8SBRIDGE_BUILD:-$root/build}
opts=(-Dslurm_prefix="$K8SBRIDGE_CACHE/slurm-24.11.5/install" -Dslurm_src="$K8SBRIDGE_CACHE/slurm-24.11.5/src")
if [ -f "$build/build.ninja" ]; then meson setup --reconfigure "$build" "${opts[@]}" >/dev/null
else meson setup "$build" "${opts[@]}" >/dev/null; fi
# What --host-controller runs from the build (the worker pods' containers run the
# host's programs): the power program and the worker entrypoint. ninja shows its
# progress; a cached build has nothing to do. The default mode runs only the
# packages and images.
if [ "${1:-}" = "--host-controller" ]; then
  echo "demo: building k8sbridge-power and k8sbridge-worker in $build"
  meson compile -C "$build" programs/power/k8sbridge-power container/worker/k8sbridge-worker
fi
export K8SBRIDGE_BUILD_ROOT="$build"
export K8SBRIDGE_SLURM_PREFIX="$K8SBRIDGE_CACHE/slurm-24.11.5/install"
export K8SBRIDGE_RIG_LOGDIR="$build/meson-logs/demo"
if [ "${1:-}" != "--host-controller" ]; then
  # The packages and images of this checkout, cached by their inputs (a second run
  # reuses them): what a platform team installs.
  echo "demo: building the Debian packages and the images (cached under $K8SBRIDGE_CACHE)"
  packages=$(bash scripts/build-packages.sh | tail -n 1)
  K8SBRIDGE_IMAGES=$(/usr/bin/python3 scripts/images.py --packages "$packages" | tail -n 1)
  export K8SBRIDGE_IMAGES
fi
exec /usr/bin/python3 scripts/demo.py "$@"
