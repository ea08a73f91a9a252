#!/usr/bin/python3
"""Creates and then deletes N pods (default 1000) on a real Kubernetes API server
(harness.kube.KubeCluster: etcd, kube-apiserver and the controllers, two kwok nodes,
no scheduler, so the pods stay unbound and a delete removes them at once) three ways,
in the same run, and prints each one's wall time, CPU time and peak memory (of the
client processes only; the API server's own cost is the same for all three). Every
client uses one kubeconfig: TLS and the bearer token of the cluster's admin
ServiceAccount.

  1. libk8sbridge at bounded concurrency (bench/kube_pods_bench.cpp);
  2. `kubectl create -f pods.yaml` then `kubectl delete -f pods.yaml`, with the
     kubectl built with the cluster (harness.kube.kubectl_program);
  3. python3-kubernetes, one create and one delete call per pod.

    /usr/bin/python3 bench/kube_pods_bench.py [--pods 1000] [--concurrency 16]
                                              [--build-root BUILD]

Goal (issue 4): libk8sbridge at least 5x faster than kubectl in wall time, and less
CPU per request than either peer.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness package

PYTHON_CLIENT = r'''
import sys
from kubernetes import client, config
api = client.CoreV1Api(config.new_client_from_config(config_file=sys.argv[1]))
n = int(sys.argv[2])
for i in range(n):
    api.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"bench-py-{i}", "labels": {"bench": "py"}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}})
for i in range(n):
    api.delete_namespaced_pod(f"bench-py-{i}", "default")
'''


def run_measured(argv, env=None):
    """Runs argv; returns (wall s, cpu s, peak RSS MiB) of that child alone."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}):\n{out.decode(errors='replace')[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--build-root", default=os.environ.get("K8SBRIDGE_BUILD_ROOT", str(ROOT / "build")))
    args = parser.parse_args()
    os.environ.setdefault("K8SBRIDGE_BUILD_ROOT", args.build_root)
    from harness.kube import ADMIN_SA, KubeCluster, kubectl_program  # noqa: E402

    bench = Path(args.build_root) / "bench" / "kube_pods_bench"
    if not bench.exists():
        raise SystemExit(f"{bench} does not exist: meson compile -C {args.build_root} bench/kube_pods_bench")
    n = args.pods
    results = {}
    with KubeCluster(nodes=2, scheduler=False, audit=False) as kube, \
            tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOME=tmp)  # kubectl's discovery cache stays here
        # The ServiceAccount admission refuses pods until "default" has its account.
        deadline = time.monotonic() + 60
        while kube.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("namespace default has no default ServiceAccount")
            time.sleep(0.2)
        kubeconfig = str(kube.service_account_kubeconfig(*ADMIN_SA, expiration_seconds=24 * 3600))
        results["libk8sbridge"] = run_measured([str(bench), kubeconfig, str(n), str(args.concurrency)])

        manifest = Path(tmp) / "pods.yaml"
        docs = [{"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": f"bench-kubectl-{i}", "namespace": "default", "labels": {"bench": "kubectl"}},
                 "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]}}
                for i in range(n)]
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        kubectl = [str(kubectl_program()), "--kubeconfig", kubeconfig]
        c = run_measured(kubectl + ["create", "--validate=false", "-f", str(manifest)], env)
        d = run_measured(kubectl + ["delete", "--wait=false", "-f", str(manifest)], env)
        results["kubectl"] = (c[0] + d[0], c[1] + d[1], max(c[2], d[2]))

        script = Path(tmp) / "py_client.py"
        script.write_text(PYTHON_CLIENT)
        results["python3-kubernetes"] = run_measured(["/usr/bin/python3", str(script), kubeconfig, str(n)])

        left = kube.request("GET", "/api/v1/namespaces/default/pods")[2]
        remaining = len([p for p in left.get("items", []) if not p["metadata"].get("deletionTimestamp")])
        version = kube.version()

    print(f"{n} pods created then deleted on kube-apiserver ({version}; client processes only; "
          f"libk8sbridge concurrency {args.concurrency})")
    print(f"{'client':<20} {'wall s':>8} {'cpu s':>8} {'cpu ms/request':>15} {'peak MiB':>9}")
    for name, (wall, cpu, rss) in results.items():
        print(f"{name:<20} {wall:8.2f} {cpu:8.2f} {cpu * 1000 / (2 * n):15.3f} {rss:9.1f}")
    lib = results["libk8sbridge"]
    for peer in ("kubectl", "python3-kubernetes"):
        p = results[peer]
        print(f"{peer} / libk8sbridge: wall {p[0] / lib[0]:.1f}x, cpu {p[1] / lib[1]:.1f}x, "
              f"peak memory {p[2] / lib[2]:.1f}x")
    print(f"pods left without deletionTimestamp: {remaining}")


if __name__ == "__main__":
    main()
