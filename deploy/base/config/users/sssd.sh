#!/bin/sh
# sssd.sh: the sssd sidecar of directory mode (deploy/components/sssd;
# docs/deploy.md, "Users"). Runs Debian's sssd in the foreground with the site's
# sssd.conf (the Secret slurm-sssd), its NSS socket in /var/lib/sss/pipes, the
# volume the pod's other containers mount there, and marks itself started
# (/run/k8sbridge-sssd.started, its startup probe) once sssd answers the group of
# directory-group beside this script: the pod's other containers start after
# that, so no lookup of theirs finds sssd not up yet.
set -eu
fail() { echo "sssd: $1" >&2; echo "sssd: $1" >/dev/termination-log; exit 1; }
dir=$(dirname "$0")
conf=/etc/sssd-conf/sssd.conf
group=$(sed -e 's/#.*//' "$dir/directory-group" | tr -d '[:space:]')
[ -n "$group" ] || fail "no group in the slurm-users ConfigMap's directory-group: name the directory's group of the site's users there (docs/deploy.md, \"Users\")"
[ -s "$conf" ] || fail "no sssd.conf in /etc/sssd-conf: create the Secret slurm-sssd with the site's sssd.conf in this pod's namespace (docs/deploy.md, \"Users\")"
# sssd reads only a root-owned file of mode 0600; the volume's files are links.
install -m 0600 "$conf" /etc/sssd/sssd.conf
# The image leaves out /var/log's contents; sssd logs to stderr but wants it.
mkdir -p /var/log/sssd
# Users see the socket's directory: only root may replace the socket in it. The
# volume hides the image's private/ (sssd's own sockets), which sssd does not make.
chmod 0755 /var/lib/sss/pipes
install -d -m 0750 /var/lib/sss/pipes/private
sssd -i --logger=stderr &
sssd=$!
trap 'kill -TERM $sssd 2>/dev/null; wait $sssd; exit 0' TERM INT
tries=0
until getent -s sss group "$group" >/dev/null; do
  if ! kill -0 $sssd 2>/dev/null; then
    status=0; wait $sssd || status=$?
    fail "sssd exited (status $status; its messages are above): check the Secret slurm-sssd's sssd.conf (docs/deploy.md, \"Users\")"
  fi
  tries=$((tries + 1))
  if [ $((tries % 15)) -eq 0 ]; then
    echo "sssd: the directory does not answer for the group $group yet: check ldap_uri and ldap_search_base in the Secret slurm-sssd's sssd.conf, that this pod reaches the server, and that the group exists there (docs/deploy.md, \"Users\")" >&2
  fi
  sleep 2 & wait $!
done
echo "sssd: the directory answers for the group $group" >&2
touch /run/k8sbridge-sssd.started
status=0; wait $sssd || status=$?
fail "sssd exited (status $status; its messages are above)"
