#!/bin/sh
# Prints the URI of the Debian mirror this machine's apt uses: the first URI that is
# not the security archive, from the deb822 sources first, then sources.list (its
# "[options]" skipped). Scripts that fetch from Debian (build-slurm.sh,
# build-root.sh, make-jail.sh, images.py, the packaging test) use it, so they reach
# only the host the machine is set up for.
set -eu
uri=$(awk 'tolower($1)=="uris:" { for (i = 2; i <= NF; i++) print $i }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v -- '-security' | head -n 1 || true)
if [ -z "$uri" ]; then
  uri=$(awk '$1=="deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' \
          /etc/apt/sources.list 2>/dev/null | grep -v -- '-security' | head -n 1 || true)
fi
if [ -z "$uri" ]; then
  echo "debian-mirror: no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list; add one" >&2
  exit 1
fi
echo "$uri"
