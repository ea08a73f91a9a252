#!/bin/sh
# Writes a manual page (section 8) for each installed program from its own --help
# and --version (help2man), so the pages say what the programs say and cannot drift.
# Usage: debian/make-manpages.sh SBINDIR MANDIR
set -eu
sbindir=$1
mandir=$2
mkdir -p "$mandir"
page() {  # program, one-line description
  help2man --no-info --section=8 --name="$2" --output="$mandir/$1.8" "$sbindir/$1"
}
page k8sbridge-power "Slurm's ResumeProgram, SuspendProgram, ResumeFailProgram and PrologSlurmctld: worker pods for CLOUD nodes"
page k8sbridge-sync "the two-way Slurm and Kubernetes sync daemon"
page k8sbridge-topology "Slurm topology.conf from the InfiniBand fabric or Kubernetes node labels"
page k8sbridge-worker "a worker pod's command: checks munge, prepares the jail, runs slurmd"
page k8sbridge-jail-prepare "binds what job steps need into the shared jail, once per pod"
page k8sbridge-health "Slurm's HealthCheckProgram for GPUs and the fabric"
page k8sbridge-entrypoint "the controller and login containers' command: checks munge and the Slurm release, runs the daemon as PID 1"
