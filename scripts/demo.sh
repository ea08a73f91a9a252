#!/usr/bin/env bash
# The README's main command: sets everything up (Debian packages, Slurm 24.11.5,
# the build) and runs k8sbridge's main job on a local demo cluster: Slurm's power
# saving turns powered-down CLOUD nodes into Kubernetes worker pods that run
# slurmd (in kubesim, the project's Kubernetes stand-in), runs a 4-node job in
# them, and deletes the pods after SuspendTime. Ctrl-C stops it cleanly.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
export K8SBRIDGE_CACHE=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
build=${K8SBRIDGE_BUILD:-$root/build}
opts=(-Dslurm_prefix="$K8SBRIDGE_CACHE/slurm-24.11.5/install" -Dslurm_src="$K8SBRIDGE_CACHE/slurm-24.11.5/src")
if [ -f "$build/build.ninja" ]; then meson setup --reconfigure "$build" "${opts[@]}" >/dev/null
else meson setup "$build" "${opts[@]}" >/dev/null; fi
# What the demo runs: the power program, the worker entrypoint, kubesim and its
# pod runner. ninja shows its progress; a cached build has nothing to do.
echo "demo: building k8sbridge-power, k8sbridge-worker and kubesim in $build"
meson compile -C "$build" programs/power/k8sbridge-power programs/worker/k8sbridge-worker \
  tests/kubesim/kubesim:executable tests/kubesim/kubesim-podrun
export K8SBRIDGE_BUILD_ROOT="$build"
export K8SBRIDGE_SLURM_PREFIX="$K8SBRIDGE_CACHE/slurm-24.11.5/install"
export K8SBRIDGE_RIG_LOGDIR="$build/meson-logs/demo"
exec /usr/bin/python3 scripts/demo.py
