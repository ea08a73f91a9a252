#!/usr/bin/env bash
# Builds the upstream Kubernetes programs that the tests, the demo and the benchmarks
# run (etcd, etcdctl, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy, kubectl, kwok) from their own Go modules, through the wrapper module
# tools/kubernetes (go.mod and go.sum pin every version), and CoreDNS, the real nodes'
# cluster DNS, through tools/coredns (a module of its own: its requirements would
# raise modules that Kubernetes shares with it).
#
# Usage: scripts/build-kubernetes.sh [--cache DIR]
# Prints the directory holding the programs on its last line. The binaries, Go's
# module cache and its build cache live under $K8SBRIDGE_CACHE; the binaries are keyed
# by both modules' go.mod and go.sum, this script and the Go version, so a second run
# builds nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
module="$here/../tools/kubernetes"
coredns_module="$here/../tools/coredns"
cache=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    *) echo "build-kubernetes: unknown argument '$1' (use --cache DIR)" >&2; exit 2 ;;
  esac
done
log() { echo "build-kubernetes: $*" >&2; }

command -v go >/dev/null || {
  log "no 'go' on PATH: Go 1.26 or newer is needed (the machines have it at /usr/local/go)"
  exit 1
}
export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build" GOFLAGS=-mod=readonly
export GOTOOLCHAIN=local GOPROXY=${GOPROXY:-https://proxy.golang.org}

# The release is the one go.mod pins; --version prints it, as upstream's builds do.
release=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$module/go.mod")
[ -n "$release" ] || { log "tools/kubernetes/go.mod requires no k8s.io/kubernetes"; exit 1; }
key=$( (cat "$module/go.mod" "$module/go.sum" "$coredns_module/go.mod" "$coredns_module/go.sum" "$0"
  go version; echo "${SOURCE_DATE_EPOCH:-0}") |
  sha256sum | cut -c1-16)
out="$cache/kubernetes-$release-$key"
programs=(etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy
  kubectl kwok coredns)
mkdir -p "$cache"
# One builder per key: a second run (a test's harness beside set-up, say) waits here and
# then reuses what the first built, instead of building into the same directory.
exec 9>"$out.lock"
flock 9
if [ -f "$out/.complete" ]; then
  log "reusing $out"
  echo "$out"
  exit 0
fi

# Upstream's hack/lib/golang.sh: the version through -X, the tags selinux and notest,
# the control plane static (CGO off); kubelet keeps cgo, as upstream builds it.
minor=${release#v1.}; minor=${minor%%.*}
# The build date is SOURCE_DATE_EPOCH's, as in reproducible builds (0 when unset).
stamp=$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$release -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$stamp -X $pkg.gitCommit="
done
# A module's version from a require line (its line in the tool block has none).
required() { awk -v m="$1" '$1 == m && $2 ~ /^v/ {print $2}' "$2"; }
etcd_version=$(required go.etcd.io/etcd/server/v3 "$module/go.mod")
kwok_version=$(required sigs.k8s.io/kwok "$module/go.mod")
coredns_version=$(required github.com/coredns/coredns "$coredns_module/go.mod")
ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}"
ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${release#v}"

tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
started=$(date +%s)
build() {  # name, package, cgo
  log "building $1 ($2)"
  (cd "$module" && CGO_ENABLED=$3 go build -trimpath -tags selinux,notest -ldflags "$ldflags" \
    -o "$tmp/$1" "$2")
}
# CoreDNS names its release in its source (coremain.CoreVersion): --version prints it.
build_coredns() {
  log "building coredns (github.com/coredns/coredns $coredns_version)"
  (cd "$coredns_module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" \
    -o "$tmp/coredns" github.com/coredns/coredns)
}
build etcd go.etcd.io/etcd/server/v3 0
build etcdctl go.etcd.io/etcd/etcdctl/v3 0
for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl; do
  build "$c" "k8s.io/kubernetes/cmd/$c" 0
done
build kubelet k8s.io/kubernetes/cmd/kubelet 1
build kwok sigs.k8s.io/kwok/cmd/kwok 0
build_coredns
for p in "${programs[@]}"; do
  [ -x "$tmp/$p" ] || { log "$p was not built"; exit 1; }
done
printf '%s\n' "kubernetes $release" "etcd $etcd_version" "kwok $kwok_version" \
  "coredns $coredns_version" "$(go version)" >"$tmp/VERSIONS"
touch "$tmp/.complete"
rm -rf "$out"
mv "$tmp" "$out"
log "built Kubernetes $release in $(( $(date +%s) - started ))s into $out"
echo "$out"
