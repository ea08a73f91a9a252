#!/usr/bin/env bash
# The README's main command: sets everything up and runs k8sbridge's main job on
# a local demo cluster. Until the power_k8s demo lands, the main job is the rig's
# smoke job: real slurmctld and two slurmd "hosts" in their own namespaces
# running an srun and an sbatch job.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup.sh
export K8SBRIDGE_CACHE=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
build=${K8SBRIDGE_BUILD:-$root/build}
opts=(-Dslurm_prefix="$K8SBRIDGE_CACHE/slurm-24.11.5/install" -Dslurm_src="$K8SBRIDGE_CACHE/slurm-24.11.5/src")
if [ -f "$build/build.ninja" ]; then meson setup --reconfigure "$build" "${opts[@]}" >/dev/null
else meson setup "$build" "${opts[@]}" >/dev/null; fi
meson compile -C "$build" >/dev/null
exec /usr/bin/python3 tests/rig/rigctl.py smoke --nodes 2
