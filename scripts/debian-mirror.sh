#!/bin/sh
# Prints the URI of the Debian mirror this machine's apt uses (deb822 sources first,
# then sources.list). Scripts that fetch from Debian (build-slurm.sh, build-root.sh,
# the packaging test) use it, so they reach only the host the machine is set up for.
set -eu
uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$uri" ]; then
  uri=$(awk '$1=="deb" && $2 ~ /^http/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
if [ -z "$uri" ]; then
  echo "debian-mirror: no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; add one" >&2
  exit 1
fi
echo "$uri"
