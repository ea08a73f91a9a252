"""The README's main job on one machine: Slurm's power saving turns powered-down
CLOUD nodes into Kubernetes worker pods running slurmd, runs a 4-node job in
them, and deletes the pods once they are idle. Run it through scripts/demo.sh.

Everything on the Slurm side is real: munge, slurmctld, slurmd in the pods, and
k8sbridge's programs as slurm.conf has them. Two modes:

- in-cluster (the default): a real Kubernetes (tests/harness/deployment.py: the
  upstream control plane, CoreDNS and two real nodes, each a kubelet with
  containerd, runc, a CNI bridge and kube-proxy, the images imported into their
  containerd), and k8sbridge deployed on it as a platform team deploys it,
  `kubectl apply` of deploy/overlays/demo; slurmctld runs in the controller pod
  from the controller image, worker pods from the worker image, and the job is
  submitted from the login pod with `kubectl exec`;
- --host-controller: slurmctld on this host, outside Kubernetes (a site whose
  controller is not a pod); Kubernetes is the upstream one (harness.cluster's
  PodCluster) with four real nodes, each a kubelet with containerd and runc, that
  advertise 8 GPUs each in two InfiniBand leaves, and the worker pods are containers
  that run the host's k8sbridge-worker and slurmd.
"""

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the harness package
from harness.cluster import GPU_PRODUCT, LEAF_LABEL, PodCluster  # noqa: E402
from harness import kube  # noqa: E402
from harness.deployment import NAMESPACES, WORKER_NAMESPACE, Deployment  # noqa: E402
from harness.rig import NodeSpec, leftovers  # noqa: E402
from harness.testcase import wait_for_no_leftovers  # noqa: E402

SUSPEND_TIME = 20


def say(text=""):
    print(f"[{time.strftime('%H:%M:%S')}] {text}" if text else "", flush=True)


def show(title, text):
    say(title)
    for line in text.rstrip().splitlines():
        print("    " + line)
    sys.stdout.flush()


def show_changes(last, views):
    """Shows each (title, read) view whose output changed since `last` (a dict the
    caller keeps); kubectl's AGE column (the fifth) is left out of the comparison,
    since it changes every second."""
    for title, read in views:
        now = read()
        key = "\n".join(" ".join(w for i, w in enumerate(line.split()) if i != 4)
                        for line in now.splitlines()) if "kubectl" in title else now
        if last.get(title) != key:
            last[title] = key
            show(title, now)


class Demo:
    def __init__(self, cluster):
        self.c = cluster
        self.last = {}

    def kubectl(self, *args):
        return self.c.sim.kubectl(*args, check=False).stdout

    def sinfo(self):
        return self.c.rig.check_output(["sinfo", "-N", "-o", "%N %T %f"])

    def pods(self):
        return self.kubectl("get", "pods", "-o", "wide")

    def show_changes(self):
        show_changes(self.last, (("sinfo -N:", self.sinfo),
                                 ("kubectl get pods -o wide:", self.pods)))

    def run(self):
        rig = self.c.rig
        show("Kubernetes nodes (real kubelets) with their GPU and InfiniBand leaf labels:",
             self.kubectl("get", "nodes", "-o", "wide", "-L", "nvidia.com/gpu.product",
                          "-L", LEAF_LABEL))
        show("k8sbridge.conf:", self.c.conf_path.read_text())
        show("slurm.conf power saving:",
             "\n".join(line for line in rig.slurm_conf.read_text().splitlines()
                       if line.split("=")[0] in ("ResumeProgram", "SuspendProgram",
                                                 "ResumeFailProgram", "SuspendTime")
                       or line.startswith("NodeName")))
        self.show_changes()
        out = rig.workdir / "demo-job.out"
        script = ("#!/bin/sh\n"
                  "echo \"job $SLURM_JOB_ID on $SLURM_JOB_NODELIST\"\n"
                  "srun -l sh -c 'echo \"$(hostname) pod IP $(hostname -I)\"' | sort\n")
        job = rig.sbatch(script, ["-N4", "-C", "h100", "-J", "demo", "-o", str(out)])
        say(f"submitted: sbatch -N4 -C h100 (job {job}); Slurm resumes 4 CLOUD nodes")
        deadline = time.monotonic() + 300
        while True:
            self.show_changes()
            state = rig.job(job).get("JobState")
            if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"job {job} did not finish in 300 s:\n{self.c.describe()}")
            time.sleep(1)
        say(f"job {job} {state}")
        show("job output:", out.read_text() if out.exists() else "(no output)")
        say(f"the nodes are idle: after SuspendTime={SUSPEND_TIME}s Slurm runs SuspendProgram, "
            "which deletes the pods")
        deadline = time.monotonic() + 180
        while True:
            self.show_changes()
            nodes = rig.nodes()
            if all("POWERED_DOWN" in n["State"] for n in nodes.values()) and \
                    all(self.c.pod(name) is None for name in nodes):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"the pods were not deleted in 180 s:\n{self.c.describe()}")
            time.sleep(1)
        say("all pods deleted and all nodes powered down again (~ in sinfo)")
        return state == "COMPLETED"


class InClusterDemo:
    """The same story with everything in pods (deploy/overlays/demo)."""

    def __init__(self, deployment):
        self.d = deployment
        self.last = {}

    def sinfo(self):
        r = self.d.login(["sinfo", "-N", "-o", "%N %T"], check=False, timeout=60)
        return r.stdout if r.returncode == 0 else f"(sinfo failed: {r.stderr.strip()})"

    def pods(self):
        return "".join(self.d.kubectl("get", "pods", "-o", "wide", check=False,
                                      namespace=namespace).stdout
                       for namespace in NAMESPACES)

    def show_changes(self):
        show_changes(self.last, (("sinfo -N (in the login pod):", self.sinfo),
                                 ("kubectl -n slurm (and -n slurm-workers) get pods -o wide:",
                                  self.pods)))

    def run(self):
        d = self.d
        show("Kubernetes nodes (real kubelets) with their GPU and InfiniBand leaf labels:",
             d.kube.kubectl("get", "nodes", "-o", "wide", "-L", kube.GPU_PRODUCT_LABEL,
                            "-L", kube.LEAF_LABEL, check=False).stdout)
        show("kubectl -n slurm (and -n slurm-workers) get statefulset,deployment,job,pvc:",
             "".join(d.kubectl("get", "statefulset,deployment,job,pvc", check=False,
                               namespace=namespace).stdout for namespace in NAMESPACES))
        say("waiting for the jail populate Job and slurmctld in pod slurmctld-0")
        d.wait_ready()
        self.show_changes()
        say("submitting from the login pod as a user: kubectl -n slurm exec statefulset/slurm-login "
            "-- runuser -u alice -- srun -N4 -l ...; Slurm resumes 4 CLOUD nodes, k8sbridge-power (in the "
            "controller pod) creates their worker pods")
        job = {}

        def run_job():
            job["result"] = d.login(["srun", "-N4", "-l", "sh", "-c",
                                     "echo $(hostname) pod IP $(hostname -I)"],
                                    check=False, timeout=600, user="alice")
        t = threading.Thread(target=run_job, daemon=True)
        t.start()
        while t.is_alive():
            self.show_changes()
            t.join(1)
        r = job["result"]
        show("srun output:", "\n".join(sorted(r.stdout.splitlines())) or "(none)")
        if r.returncode != 0:
            show("srun failed:", r.stderr)
            show("the cluster:", d.describe())
            return False
        show("kubectl -n slurm-workers get events --field-selector involvedObject.name=w-0 "
             "(the kubelet ran it):",
             d.kubectl("get", "events", "--field-selector", "involvedObject.name=w-0",
                       "-o", "custom-columns=SOURCE:.source.component,HOST:.source.host,"
                       "REASON:.reason,MESSAGE:.message", check=False,
                       namespace=WORKER_NAMESPACE).stdout)
        say("the nodes are idle: after SuspendTime=30s Slurm runs SuspendProgram, "
            "which deletes the pods")
        deadline = time.monotonic() + 240
        while d.worker_pods() or not all("POWERED_DOWN" in n["State"]
                                         for n in d.slurm_nodes().values()):
            self.show_changes()
            if time.monotonic() > deadline:
                show("the pods were not deleted in 240 s:", d.describe())
                return False
            time.sleep(1)
        self.show_changes()
        say("all worker pods deleted and all nodes powered down again (~ in sinfo)")
        return True


def host_controller_demo():
    nodes = [NodeSpec(f"w-{i}", features=["h100"]) for i in range(4)]
    groups = [("w", "w-[0-3]", f"Gpus=8 PlacementLabel={LEAF_LABEL}")]
    say("starting Kubernetes (etcd, kube-apiserver, controller-manager, scheduler, CoreDNS) "
        "with 4 real nodes (kubelet, containerd, runc; 8 GPUs each, 2 InfiniBand leaves), "
        "munge and slurmctld")
    with PodCluster(nodes, groups, fake_nodes=4, ib_leaves=2, suspend_time=SUSPEND_TIME,
                    conf_extra=f"Feature=h100 Selector=nvidia.com/gpu.product={GPU_PRODUCT}\n"
                               "PlacementAffinity=preferred") as cluster:
        ok = Demo(cluster).run()
    say("stopped: Kubernetes, its nodes and containers, slurmctld and munge are gone")
    # The demo's own rigs only: test rigs may be running beside it.
    left = {k: v for k, v in leftovers(cluster.rig_ids).items() if v}
    if left:
        say(f"warning: the demo left things behind: {left}")
    return ok


def in_cluster_demo(images):
    say(f"starting a real Kubernetes on this machine: the control plane, CoreDNS and two "
        f"nodes (kubelet, containerd, runc, kube-proxy), with the images in {images}")
    deployment = Deployment(Path(images), progress=say)
    with deployment as d:
        ok = InClusterDemo(d).run()
    say("stopped: the nodes, their containers and the control plane are gone")
    # The demo's own cluster only: test rigs may be running beside it.
    left = {k: v for k, v in wait_for_no_leftovers(deployment.rc.rig_ids).items() if v}
    if left:
        say(f"warning: the demo left things behind: {left}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host-controller", action="store_true",
                   help="slurmctld on this host instead of in the controller pod")
    p.add_argument("--images", default=os.environ.get("K8SBRIDGE_IMAGES"),
                   help="the images directory scripts/images.py printed (in-cluster mode)")
    args = p.parse_args()
    if args.host_controller:
        return 0 if host_controller_demo() else 1
    if not args.images:
        p.error("--images DIR (or K8SBRIDGE_IMAGES) is required in-cluster; "
                "scripts/demo.sh builds them")
    return 0 if in_cluster_demo(args.images) else 1


if __name__ == "__main__":
    sys.exit(main())
