#!/bin/sh
# Writes slurmdbd.conf for Slurm's accounting database, mode 0600 (slurmdbd refuses
# one that others can read: it holds the password); the caller gives it to
# slurmdbd's SlurmUser, which must own it.
#
# Usage: slurmdbd-conf.sh CONF PASSWORD_FILE DB_HOST DB_PORT DB_USER [KEY=VALUE...]
# Shipped in the slurm-accounting ConfigMap (deploy/base): the controller pod's
# slurmdbd container writes its slurmdbd.conf with it at every start, and so does
# the test rig (tests/harness/accounting.py), so the tests run what ships.
#   CONF           the file to write (slurmdbd reads it from slurm.conf's directory)
#   PASSWORD_FILE  the database password's file, checked by db-password.sh beside
#                  this script
#   DB_HOST, DB_PORT, DB_USER  the database (StorageHost, StoragePort, StorageUser)
#   KEY=VALUE      more lines, as they are: SlurmUser, DbdPort, PidFile, LogFile, ...
# Munge authentication, slurmdbd on this host (DbdHost=localhost), its database
# slurm_acct_db (StorageLoc; slurmdbd creates it at its first start).
set -eu

if [ $# -lt 5 ]; then
  echo "slurmdbd-conf: usage: $0 CONF PASSWORD_FILE DB_HOST DB_PORT DB_USER [KEY=VALUE...]" >&2
  exit 2
fi
conf=$1 password_file=$2 host=$3 port=$4 user=$5
shift 5
for line in "$@"; do
  case $line in
    [A-Za-z]*=*) ;;
    *) echo "slurmdbd-conf: '$line' is not a KEY=VALUE line of slurmdbd.conf" >&2; exit 2;;
  esac
done
password=$(sh "$(dirname "$0")/db-password.sh" "$password_file")

umask 077
{
  echo "AuthType=auth/munge"
  echo "DbdHost=localhost"
  echo "StorageType=accounting_storage/mysql"
  echo "StorageHost=$host"
  echo "StoragePort=$port"
  echo "StorageUser=$user"
  echo "StoragePass=$password"
  echo "StorageLoc=slurm_acct_db"
  for line in "$@"; do echo "$line"; done
} >"$conf.new"
mv -f "$conf.new" "$conf"
