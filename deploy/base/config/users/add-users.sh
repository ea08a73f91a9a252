#!/bin/sh
# add-users.sh ROOT [--homes | --list | --directory]: the site's users
# (docs/deploy.md, "Users"). Adds the passwd and group lines beside this script
# (the slurm-users ConfigMap, files mode) to ROOT/etc/passwd and ROOT/etc/group: the
# login and controller containers at their start (ROOT /), the jail's populate Job
# (ROOT /jail). A name ROOT already has keeps its own line, so no site line
# replaces root or a system account; a line that is not a user's (an id below
# 1000) stops it. In directory mode (a group named in directory-group beside this
# script, sssd answering in the pod) the site's users are also that group's
# members in the directory, which the pod's own lookups reach through sssd.
#   --homes      a site user's missing home is made, theirs and 0700 (the login
#                pods, where the slurm-home volume is /home)
#   --list       prints the site's user names, one a line (the accounts sidecar)
#   --directory  the directory's users and their groups are copied into ROOT's
#                files too (the jail, where no sssd answers)
set -eu
root=$1
option=${2:-}
dir=$(dirname "$0")
group=$(sed -e 's/#.*//' "$dir/directory-group" 2>/dev/null | tr -d '[:space:]')

# append FILE SOURCE: the passwd(5) or group(5) lines on stdin that ROOT's FILE
# lacks, appended to it; SOURCE names them in an error.
append() {
  fields=7
  [ "$1" = group ] && fields=4
  new=$(awk -F: -v fields="$fields" -v file="$2" '
    FNR == NR { have[$1] = 1; next }
    /^[[:space:]]*(#|$)/ { next }
    NF != fields || $3 !~ /^[0-9]+$/ || $3 < 1000 {
      printf "%s line %d: \"%s\" needs %d fields and an id of 1000 or more: fix it " \
             "(docs/deploy.md, \"Users\")\n", file, FNR, $0, fields > "/dev/stderr"
      bad = 1
      next
    }
    !($1 in have) { print; have[$1] = 1 }
    END { exit bad }' "$root/etc/$1" -)
  [ -z "$new" ] || printf '%s\n' "$new" >>"$root/etc/$1"
}

# The members of the directory's group, one a line (none in files mode).
directory_users() {
  [ -n "$group" ] || return 0
  if ! line=$(getent -s sss group "$group"); then
    echo "sssd does not know the group $group (the slurm-users ConfigMap's directory-group):" \
         "create it in the directory with the site's users as members, or name another" \
         "(docs/deploy.md, \"Users\")" >&2
    return 1
  fi
  printf '%s\n' "$line" | cut -d: -f4 | tr ',' '\n' | sed '/^$/d'
}

missing() {
  echo "the directory group $group lists $1, who has no passwd entry: left out" >&2
}

for f in passwd group; do
  append "$f" "slurm-users ConfigMap, $f" <"$dir/$f"
done
members=$(directory_users)
case $option in
--homes)
  for user in $(awk -F: '!/^[[:space:]]*(#|$)/ { print $1 }' "$dir/passwd") $members; do
    getent passwd "$user" || missing "$user"
  done | awk -F: '{ print $3, $4, $6 }' | while read -r uid gid home; do
    [ -e "$home" ] || install -d -m 0700 -o "$uid" -g "$gid" "$home"
  done;;
--list)
  awk -F: '!/^[[:space:]]*(#|$)/ { print $1 }' "$dir/passwd"
  [ -z "$members" ] || printf '%s\n' "$members";;
--directory)
  [ -n "$group" ] || exit 0
  for user in $members; do getent -s sss passwd "$user" || missing "$user"; done |
    append passwd "the directory (sssd), passwd"
  { for user in $members; do getent -s sss group "$(id -g "$user")" || true; done
    getent -s sss group "$group"; } | append group "the directory (sssd), group";;
esac
