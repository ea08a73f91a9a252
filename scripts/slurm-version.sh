#!/bin/sh
# Prints X.Y.Z from the SLURM_VERSION_NUMBER in the slurm_version.h given as $1.
# The build uses it to compare an installed Slurm with a configured source tree.
set -eu
header=$1
[ -r "$header" ] || { echo "slurm-version: cannot read $header" >&2; exit 1; }
hex=$(awk '$1=="#define" && $2=="SLURM_VERSION_NUMBER" {print $3; exit}' "$header")
[ -n "$hex" ] || { echo "slurm-version: no SLURM_VERSION_NUMBER in $header" >&2; exit 1; }
n=$((hex))
printf '%d.%d.%d\n' $(((n >> 16) & 255)) $(((n >> 8) & 255)) $((n & 255))
