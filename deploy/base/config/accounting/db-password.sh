#!/bin/sh
# Prints the accounting database's password, checked: the one line of FILE (the
# Secret slurm-db-password's key `password`, mounted 0400).
#
# Usage: password=$(sh db-password.sh FILE)
# Shipped in the slurm-accounting ConfigMap (deploy/base): the database's container
# (db.yaml) and slurmdbd-conf.sh (the slurmdbd container's slurmdbd.conf, and the
# test rig's) take the password through it, so both refuse the same ones. The
# password goes unquoted into an SQL statement and slurmdbd.conf: letters and
# digits only. A missing, empty or refused password exits 1 with one line on
# stderr and, in a pod, in /dev/termination-log (what `kubectl describe pod`
# shows).
set -eu

fail() {
  echo "$1" >&2
  if [ -e /dev/termination-log ]; then echo "$1" >/dev/termination-log; fi
  exit 1
}

if [ $# -ne 1 ]; then
  echo "db-password: usage: $0 FILE" >&2
  exit 2
fi
secret=$1
[ -s "$secret" ] || fail "no database password ($secret): create the Secret slurm-db-password in this pod's namespace (docs/deploy.md, \"Accounting\")"
password=$(cat "$secret")
case $password in
  *[!A-Za-z0-9]*) fail "the Secret slurm-db-password's password has characters other than letters and digits: make a new one as docs/deploy.md (\"Accounting\") shows";;
esac
printf '%s\n' "$password"
