#!/bin/sh
# Prints X.YY.Z from the SLURM_VERSION_NUMBER in the slurm_version.h given as $1, as
# Slurm writes its own version (26.05.5: the minor release is two digits, the month).
# The build uses it to compare an installed Slurm with a configured source tree, and
# the programs compare it with `slurmd -V` (container_start.cpp).
set -eu
header=$1
[ -r "$header" ] || { echo "slurm-version: cannot read $header" >&2; exit 1; }
hex=$(awk '$1=="#define" && $2=="SLURM_VERSION_NUMBER" {print $3; exit}' "$header")
[ -n "$hex" ] || { echo "slurm-version: no SLURM_VERSION_NUMBER in $header" >&2; exit 1; }
n=$((hex))
printf '%d.%02d.%d\n' $(((n >> 16) & 255)) $(((n >> 8) & 255)) $((n & 255))
