#!/usr/bin/env bash
# Registers a cluster in slurmdbd and gives users an account on it: what a cluster
# needs in its accounting database before its jobs are accounted, and before
# AccountingStorageEnforce=associations lets its users submit (docs/accounting.md).
#
# Usage: accounting-init.sh CLUSTER ACCOUNT [USER...]
# Shipped in the slurm-accounting ConfigMap (deploy/base), whose accounts sidecar in
# the controller pod runs it for the site's users (docs/deploy.md, "Accounting").
#   CLUSTER  slurm.conf's ClusterName
#   ACCOUNT  an account under root, made if missing; each USER gets an association
#            in it (fair-share 1, Slurm's default: equal shares), made if missing
# Runs sacctmgr from PATH against the slurmdbd that SLURM_CONF's slurm.conf names
# (AccountingStorageHost/Port), as root or as slurmdbd's SlurmUser. Idempotent: what
# exists is kept, so it can run again to add users. Register the cluster before its
# slurmctld first starts, so slurmctld finds it at once.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "accounting-init: usage: $0 CLUSTER ACCOUNT [USER...]" >&2
  exit 2
fi
cluster=$1
account=$2
shift 2
log() { echo "accounting-init: $*" >&2; }
command -v sacctmgr >/dev/null ||
  { log "no sacctmgr on PATH ($PATH): put Slurm's bin directory on it"; exit 1; }

# Prints what `sacctmgr show` finds (nothing when there is none); fails with
# sacctmgr when slurmdbd does not answer.
found() { sacctmgr --noheader --parsable2 show "$@"; }

if [ -z "$(found cluster where name="$cluster" format=cluster)" ]; then
  log "adding cluster $cluster"
  sacctmgr --immediate add cluster "$cluster" >/dev/null
fi
if [ -z "$(found account where name="$account" cluster="$cluster" withassoc format=account)" ]; then
  log "adding account $account on cluster $cluster"
  sacctmgr --immediate add account "$account" cluster="$cluster" \
    description="$account" organization="$account" >/dev/null
fi
# The account's users, read once: the sidecar runs this every minute for every
# site user, and one query per user would load slurmdbd with the site's size.
members=$(found association where cluster="$cluster" account="$account" format=user)
for user in "$@"; do
  if ! id -u "$user" >/dev/null 2>&1; then
    log "user '$user' does not exist on this host: create it (or fix the name) first"
    exit 1
  fi
  if ! grep -qxF -- "$user" <<<"$members"; then
    log "adding user $user to account $account on cluster $cluster"
    sacctmgr --immediate add user "$user" account="$account" cluster="$cluster" >/dev/null
  fi
done
