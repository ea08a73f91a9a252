#!/bin/sh
# add-users.sh ROOT [--homes]: adds the site's users and groups, the passwd and
# group files beside this script (the slurm-users ConfigMap), to ROOT/etc/passwd
# and ROOT/etc/group: the login and controller containers at their start (ROOT /),
# the jail's populate Job (ROOT /jail). A name ROOT already has keeps its own line,
# so no site line replaces root or a system account; a line that is not a user's
# (an id below 1000) stops it. --homes: a user's missing home is made, theirs and
# 0700 (the login pods, where the slurm-home volume is /home).
set -eu
root=$1
dir=$(dirname "$0")
for f in passwd group; do
  fields=7
  [ "$f" = group ] && fields=4
  new=$(awk -F: -v fields="$fields" -v file="slurm-users ConfigMap, $f" '
    FNR == NR { have[$1] = 1; next }
    /^[[:space:]]*(#|$)/ { next }
    NF != fields || $3 !~ /^[0-9]+$/ || $3 < 1000 {
      printf "%s line %d: \"%s\" needs %d fields and an id of 1000 or more: fix it " \
             "(docs/deploy.md, \"Users\")\n", file, FNR, $0, fields > "/dev/stderr"
      bad = 1
      next
    }
    !($1 in have) { print; have[$1] = 1 }
    END { exit bad }' "$root/etc/$f" "$dir/$f")
  [ -z "$new" ] || printf '%s\n' "$new" >>"$root/etc/$f"
done
[ "${2:-}" = --homes ] || exit 0
awk -F: '!/^[[:space:]]*(#|$)/ { print $3, $4, $6 }' "$dir/passwd" |
  while read -r uid gid home; do
    [ -e "$home" ] || install -d -m 0700 -o "$uid" -g "$gid" "$home"
  done
