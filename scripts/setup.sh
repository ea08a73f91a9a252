#!/usr/bin/env bash
# Installs everything k8sbridge's build, tests and demo need on Debian 12, as root.
# Idempotent: a second run only checks, and finishes in seconds.
#   - Debian packages (the list below)
#   - Slurm 24.11.5 built from the upstream tarball, cached outside the repository
#     (scripts/build-slurm.sh, under $K8SBRIDGE_CACHE, keyed by its configure options
#     and build dependencies)
#   - the jail root filesystem, when scripts/make-jail.sh exists
#   - the upstream Kubernetes programs (etcd, kube-apiserver, kube-controller-manager,
#     kube-scheduler, kubelet, kube-proxy, kubectl, kwok) and CoreDNS built from their
#     Go modules (scripts/build-kubernetes.sh, keyed by tools/kubernetes' and
#     tools/coredns' go.sum and Go's version)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export K8SBRIDGE_CACHE=${K8SBRIDGE_CACHE:-/var/cache/k8sbridge}

if [ "$(id -u)" != 0 ]; then
  echo "setup: run as root (it installs Debian packages and builds under $K8SBRIDGE_CACHE)" >&2
  exit 1
fi

packages=(
  # build
  build-essential meson ninja-build pkg-config clang clang-format clang-tidy
  # compiler cache for scripts/test.sh (under \$K8SBRIDGE_CACHE/ccache, keyed by the
  # preprocessed sources and flags)
  ccache
  # fuzz/: libFuzzer and the sanitizer runtimes, only recommended by clang (and so
  # left out by --no-install-recommends)
  libclang-rt-14-dev
  # libraries
  libcurl4-openssl-dev libssl-dev rapidjson-dev libfmt-dev libyaml-cpp-dev libboost-dev
  libboost-test-dev libmunge-dev libibnetdisc-dev libibmad-dev libibumad-dev
  prometheus-cpp-dev
  # the accounting database of tests/harness/accounting.py (slurmdbd's MariaDB)
  mariadb-server
  # test rig and peers
  munge iproute2 util-linux procps psmisc python3 python3-kubernetes python3-yaml ibsim-utils
  # Debian's Prometheus: tests/integration/test_metrics.py scrapes every metrics
  # endpoint with it (docs/sync.md, "Metrics")
  prometheus
  # the test cluster's certificates (tests/harness/pki.py)
  python3-cryptography
  # the deployed end-to-end test's users' SSH client and the login pods' host keys
  # (ssh, ssh-keygen: tests/integration/test_deploy_e2e.py, docs/deploy.md "Users")
  openssh-client
  # the site's LDAP directory the deployed end-to-end test's sssd asks for users
  # (tests/harness/ldap.py: slapd, and ldapsearch/ldapmodify; docs/deploy.md "Users")
  slapd ldap-utils
  infiniband-diags debootstrap valgrind
  # fetching the Slurm tarball from Debian's source archive
  dpkg-dev ca-certificates
  # the Debian build root of the packages (scripts/build-root.sh), the packaging
  # test's clean roots, and the images, built offline (scripts/images.py) and run by
  # a real OCI runtime in tests (runc: crun refuses this kernel's hybrid cgroups)
  mmdebstrap umoci skopeo runc
  # the one-layer busybox image of the real nodes' tests (tests/harness/oci_layout.py)
  busybox-static
  # the real Kubernetes nodes of tests/harness/kubelet_node.py: their container runtime
  # (runc above), CNI plugins, and the iptables and conntrack that kube-proxy, the
  # kubelet and the CNI plugins use inside each node's network namespace
  containerd containernetworking-plugins iptables conntrack
  # benchmarks only: bench/power_bench.py's floor, the API server's raw pod-create rate
  # (wrk POSTs the 1000 rendered pods through bench/wrk_create.lua)
  wrk
)
# Slurm's own build dependencies: scripts/build-slurm.sh keys its cache by them
mapfile -t slurm_build_deps < <("$here/build-slurm.sh" --build-deps)
packages+=("${slurm_build_deps[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Each real Kubernetes node of the tests (kubelet, containerd, kube-proxy) takes
# inotify instances, and the integration tests run several nodes at a time: the
# default of 128 instances per user runs out ("fsnotify watcher init: too many open
# files"), as kind's documentation warns for multi-node clusters.
if [ "$(sysctl -n fs.inotify.max_user_instances)" -lt 1024 ]; then
  sysctl -qw fs.inotify.max_user_instances=1024
fi
kubernetes=$("$here/build-kubernetes.sh" | tail -n 1)
echo "setup: Kubernetes programs at $kubernetes" >&2

slurm_prefix=$("$here/build-slurm.sh" | tail -n 1)
echo "setup: Slurm at $slurm_prefix" >&2

if [ -x "$here/make-jail.sh" ]; then
  "$here/make-jail.sh" >&2
fi
echo "setup: done" >&2
