"""The in-cluster deployment end to end on a real Kubernetes, as a GPU site applies
it: a copy of deploy/overlays/example-gpu with only what a site sets changed
(tests/harness/site.py: images, node pools, nodes and sizes, storage; checked
here against the shipped files), its users alice and bob in the site's LDAP
directory (a real slapd, tests/harness/ldap.py, named in the Secret slurm-sssd),
`kubectl kustomize <copy> | kubectl apply -f -`,
on RealCluster: the upstream control plane, CoreDNS and two real nodes, each a
kubelet with containerd, runc, a CNI bridge and kube-proxy, on InfiniBand leaves
leaf-0 and leaf-1, in the GPU pool, labelled as NVIDIA's GPU feature discovery and
NFD label them, with 16 GPUs each as the extended resource nvidia.com/gpu, and the
stand-in for the NVIDIA container toolkit (tests/harness/gpu_toolkit.py) as the
RuntimeClass `nvidia` that the site's node groups name. The images are imported
into every node's containerd (no registry). Then what users, Slurm and an admin do:

- a `--switches=1 -C h100 --gres=gpu:8` job of two nodes, from the login pod:
  k8sbridge-power creates the pods on the labelled nodes of one leaf, their
  slurmd register with the features node_features_k8s read, and each task sees
  its job's GPUs and the driver's NVML in the jail;
- a job on all four nodes: each task in the jail populated from the login image,
  in its job's cgroup; a one-GPU job's task opens only its own device;
- `sbatch` of a script that runs `srun`, both in the jail;
- k8sbridge-health in a worker pod finds a GPU fallen off the bus: the Slurm node
  is drained `[hardware]` and k8sbridge-sync cordons and taints its Kubernetes
  node; the GPU back, the node returns to service and is uncordoned;
- Debian's Prometheus scrapes the shipped Service through the shipped
  ServiceMonitor's scrape configuration;
- alice logs in over SSH as herself (the login Service's NodePort on a node, her
  key in her home on the slurm-home volume, the host keys of the Secret
  slurm-login-host-keys pinned in known_hosts); a wrong key, a user not in the
  directory and root are refused. From her shell and from her job she reads neither munge key
  nor any ServiceAccount token nor bob's home, nor another user's process's
  environment, files or root; her processes run with no_new_privs and no
  capability, so no setuid program (su, mount, passwd, ...) makes her root;
  munged runs as munge, not root, in the login pod, in the controller pod's
  slurmctld and slurmdbd containers and in the worker pod that ran her job;
- her `sbatch` runs as her in the jail and writes its output into /home/alice;
  from her shell, `sacct -u alice` shows the job COMPLETED with its nodes and exit
  code 0:0 (slurmdbd beside slurmctld, on the slurm-db StatefulSet's MariaDB), and
  `sshare -u alice` her fair-share row with her jobs' usage;
- alice is in no ConfigMap: the login pod and slurmctld find her through sssd;
  a user added to the directory logs in at once, and gets an association, with
  no pod restarted;
- after SuspendTime the pods are deleted, their containers gone from containerd,
  and the nodes powered down again; alice's output is still in her home, and the
  login pods, deleted, come back with the same host keys.

scripts/test.sh sets K8SBRIDGE_IMAGES for the artifacts suite; without it the test
skips. Needs root and what real nodes need (scripts/setup.sh).
"""

import base64
import ipaddress
import re
import shlex
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import yaml

from harness.deployment import (DEPLOY, GPU_RESOURCE, NAMESPACE, WORKER_NAMESPACE,
                                Deployment, images_or_skip, missing_images)
from harness.gpu_toolkit import RUNTIME_CLASS, pod_gpus
from harness.kube import LEAF_LABEL
from harness.prometheus import Prometheus, service_monitor_scrape
from harness.site import LEAF_OF_NODE, SLURM_NODES, USERS
from harness.testcase import close_leaving_nothing
from test_deploy_manifests import config_files, render, without_substitutions

# Each task: its node, its jail, then each GPU device file and what opening it
# gives (the job's: "No such device or address", no driver behind the stand-in;
# another's: "Operation not permitted", the job's device cgroup).
PROBE = ("echo $(hostname) $(cat /.k8sbridge-jail 2>/dev/null || echo no-jail) "
         "NVML=$(test -r /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 && echo yes || echo no) "
         "CUDA=${CUDA_VISIBLE_DEVICES:--}; "
         "for f in /dev/nvidia[0-7]; do head -c0 $f 2>&1 >/dev/null && echo \"$f opened\"; done; "
         "true")
DEVICE_LINE = re.compile(r"^(\d+): .*(/dev/nvidia\d).*?(No such device or address|"
                         r"Operation not permitted|opened)", re.M)
HEALTH = "/usr/sbin/k8sbridge-health"
HARDWARE_TAINT = "k8sbridge.io/hardware"
LOGIN_SELECTOR = "app.kubernetes.io/name=slurm-login"
# What a user must not read, in the login pod and in a job (in the jail on a
# worker): the munge key's Secret and munged's copy, the ServiceAccount token,
# bob's home, and through /proc the root-owned PID 1 (its environment, its open
# files, the pod's root beneath it). USER_PROBE prints a line for each: READ, DENIED
# (Permission denied) or ABSENT (not there to see), then the path.
PRIVATE = ["/etc/munge-key/munge.key", "/run/k8sbridge-munge/munge.key",
           "/var/run/secrets/kubernetes.io/serviceaccount/token",
           "/var/run/secrets/kubernetes.io/serviceaccount", "/home/bob", "/home/bob/secret",
           "/proc/1/environ", "/proc/1/fd", "/proc/1/root/etc/munge-key/munge.key",
           "/etc/slurm-db-password/password"]
# The login pod mounts the key (root's, 0400) and munged's copy is in a root-only
# directory; it has no token. /proc/1 is there, its private parts the kernel's
# ptrace check refuses.
LOGIN_SEES = {"/etc/munge-key/munge.key": "DENIED", "/run/k8sbridge-munge/munge.key": "DENIED",
              "/var/run/secrets/kubernetes.io/serviceaccount/token": "ABSENT",
              "/var/run/secrets/kubernetes.io/serviceaccount": "ABSENT",
              "/home/bob": "DENIED", "/home/bob/secret": "DENIED",
              "/proc/1/environ": "DENIED", "/proc/1/fd": "DENIED",
              "/proc/1/root/etc/munge-key/munge.key": "DENIED",
              "/etc/slurm-db-password/password": "ABSENT"}
# The jail holds none of the worker pod's secrets, and its /proc hides every
# process but the job's own (hidepid=invisible).
JOB_SEES = dict(LOGIN_SEES, **{path: "ABSENT" for path in PRIVATE
                               if not path.startswith("/home/")})
USER_PROBE = (
    "for f in " + " ".join(PRIVATE) + "; do "
    "if [ -d $f ]; then err=$(ls $f 2>&1 >/dev/null); else err=$(head -c1 $f 2>&1 >/dev/null); fi"
    " && echo READ $f || case $err in *'Permission denied'*) echo DENIED $f;; "
    "*) echo ABSENT $f;; esac; done; "
    "echo id $(id -u) $(id -un); grep -E '^(NoNewPrivs|CapPrm|CapEff):' /proc/self/status; "
    # su has no password to take and no terminal to ask on; sudo is not installed.
    "su -c 'id -u' root </dev/null >/dev/null 2>&1 && echo ROOT su || echo refused su; "
    "command -v sudo >/dev/null && echo present sudo || echo absent sudo; "
    "for b in $(find / -xdev -perm -4000 -type f 2>/dev/null); do echo setuid $b; done")
# As the admin in a container that starts munged: each munged's uids (real,
# effective, saved, filesystem), munge's uid, and the owner and mode of munged's
# directory and the key's copy.
MUNGED_PROBE = ("for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" != munged ] || "
                "echo munged $(grep '^Uid:' $p/status); done; echo munge $(id -u munge); "
                "stat -c '%n %U %a' /run/k8sbridge-munge /run/k8sbridge-munge/munge.key")


class LastOutput:
    """What a poll saw last, for the time-out's message: str(last.after(what))
    is read when the wait gives up."""

    def __init__(self):
        self.text = "(nothing yet)"

    def after(self, what: str):
        last = self

        class Message:
            def __str__(self):
                return f"{what} (last: {last.text})"
        return Message()


def configmaps_with_user(objects: list, user: str) -> list:
    """The ConfigMaps that hold a passwd(5) line of `user`."""
    return [o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap" and
            any(re.search(rf"^{user}:", text, re.M) for text in o.get("data", {}).values())]


def users_files(objects: list) -> dict:
    """The slurm-users ConfigMap's files (namespace slurm): {name: text}."""
    return next(o["data"] for o in objects if o["kind"] == "ConfigMap" and
                o["metadata"]["name"] == "slurm-users" and
                o["metadata"]["namespace"] == "slurm")


class GpuSiteDeployment(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        images = images_or_skip()
        missing = missing_images(images)
        if missing:
            raise AssertionError(f"K8SBRIDGE_IMAGES={images} lacks {missing}")
        cls.d = Deployment(images, overlay="example-gpu", gpus_per_node=16,
                           progress=lambda text: print(
                               f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)).__enter__()

        cls.ssh_dir = Path(tempfile.mkdtemp(prefix="k8sbridge-e2e-ssh-"))
        cls.alice_job = None

    @classmethod
    def tearDownClass(cls):
        try:
            close_leaving_nothing(cls.d.close, cls.d.rc.rig_ids, "the deployment")
        finally:
            subprocess.run(["rm", "-rf", str(cls.ssh_dir)], check=False)

    # ---- helpers ----------------------------------------------------------------------

    def srun(self, *args, timeout=600):
        run = self.d.login(["srun", *args], check=False, timeout=timeout, user="alice")
        self.assertEqual(run.returncode, 0, f"srun {args}: {run.stdout}{run.stderr}\n"
                                            f"{self.d.describe()}")
        return run.stdout

    def devices(self, out: str) -> dict:
        """task -> {device: what opening it gave} from PROBE's output under srun -l."""
        seen = {}
        for task, device, result in DEVICE_LINE.findall(out):
            seen.setdefault(int(task), {})[device] = result
        return seen

    def pods(self) -> dict:
        return {p["metadata"]["name"]: p for p in self.d.worker_pods()}

    def k8s_node(self, name: str) -> dict:
        return self.d.kube.kubectl_json("get", "node", name)

    def assert_kubelet_ran(self, pod, image):
        """`pod`'s first container is a containerd task on the pod's real node, of the
        image imported there, and its status is that kubelet's."""
        d = self.d
        name = pod["metadata"]["name"]
        node = d.node(pod["spec"]["nodeName"])
        status = pod["status"]
        self.assertEqual(status["hostIP"], node.address, name)
        self.assertIn(ipaddress.ip_address(status["podIP"]),
                      ipaddress.ip_network(node.pod_cidr), name)
        container = status["containerStatuses"][0]
        self.assertIn("running", container["state"], name)
        # containerd's ID of the image imported into the node (its configuration's
        # digest), which only the runtime knows.
        self.assertEqual(container["imageID"], d.image(image).id, name)
        self.assertRegex(container["containerID"], r"^containerd://[0-9a-f]{64}$", name)
        cid = container["containerID"].split("://", 1)[1]
        self.assertIn(cid, node.tasks(), f"{name}: a running task in {node.name}'s containerd")
        return node, cid

    def assert_kubelet_events(self, pod):
        """The kubelet of the pod's node reported pulling (found present), creating and
        starting the container."""
        d = self.d
        name, host = pod["metadata"]["name"], pod["spec"]["nodeName"]
        namespace = pod["metadata"]["namespace"]

        def kubelet_reasons():
            return {e["reason"] for e in d.events(name, namespace)
                    if e.get("source") == {"component": "kubelet", "host": host}}
        d.wait(lambda: {"Pulled", "Created", "Started"} <= kubelet_reasons(), 60,
               f"the kubelet's Pulled, Created and Started events of {name}")
        for e in d.events(name, namespace):
            if e["reason"] == "Pulled":
                self.assertIn("already present on machine", e["message"], name)
        self.assertFalse([e for e in d.events(name, namespace) if e["reason"] == "Pulling"],
                         f"{name}: the kubelet tried to pull")

    def ssh_target(self):
        """(a node's address, the login Service's NodePort), once that node's
        kube-proxy forwards it."""
        service = self.d.get("service", "slurm-login-ssh")
        port = next(p["nodePort"] for p in service["spec"]["ports"] if p["name"] == "ssh")
        node = self.d.nodes[0]
        self.d.wait(lambda: node.service_rules("slurm/slurm-login-ssh:ssh"), 60,
                    f"kube-proxy on {node.name} to forward the login Service's NodePort")
        return node.address, port

    def known_hosts(self) -> Path:
        """known_hosts with the public host keys of the Secret slurm-login-host-keys,
        for both the target's address and port: ssh checks every login against them."""
        secret = self.d.get("secret", "slurm-login-host-keys")
        address, port = self.ssh_target()
        path = self.ssh_dir / "known_hosts"
        path.write_text("".join(
            f"[{address}]:{port} " + " ".join(base64.b64decode(v).decode().split()[:2]) + "\n"
            for k, v in sorted(secret["data"].items()) if k.endswith(".pub")))
        return path

    def key(self, name: str) -> Path:
        path = self.ssh_dir / name
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name,
                            "-f", str(path)], check=True)
        return path

    def ssh(self, user: str, key: Path, command: str, timeout=600):
        """The host's ssh client as `user` with `key`; a session that outlives
        `timeout` is a failure (returncode None) the caller reports."""
        address, port = self.ssh_target()
        known_hosts = self.ssh_dir / "known_hosts"
        if not known_hosts.exists():
            self.known_hosts()
        argv = ["ssh", "-F", "/dev/null", "-p", str(port), "-i", str(key),
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
                "-o", "ConnectTimeout=20", f"{user}@{address}", command]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out, err = (s.decode(errors="replace") if isinstance(s, bytes) else s or ""
                        for s in (e.stdout, e.stderr))
            return subprocess.CompletedProcess(argv, None, out, f"{err}ssh ran past {timeout} s")

    def alice(self, command: str, timeout=600) -> str:
        r = self.ssh("alice", self.key("alice"), command, timeout=timeout)
        self.assertEqual(r.returncode, 0, f"ssh alice {command!r}: {r.stdout}{r.stderr}\n"
                                          f"{self.d.describe()}")
        return r.stdout

    def wait_alice_logs_in(self, what: str):
        """Every login pod ready, then alice's login answers (a Service's endpoints
        and kube-proxy's rules follow a pod's readiness by a moment)."""
        def ready():
            pods = self.d.pods(LOGIN_SELECTOR)
            return pods and all(any(c["type"] == "Ready" and c["status"] == "True"
                                    for c in p["status"].get("conditions", [])) for p in pods)
        self.d.wait(ready, 300, f"the login pods ready ({what})")
        self.d.wait(lambda: self.ssh("alice", self.key("alice"), "true", timeout=60)
                    .returncode == 0, 120, f"alice's ssh login ({what})")

    def assert_private(self, out: str, sees: dict, where: str):
        """USER_PROBE's output: alice read nothing private (each path as `sees`
        says), runs as alice with no_new_privs and no capability, su refused, no
        sudo."""
        seen = dict((path, state) for state, path in
                    re.findall(r"^(READ|DENIED|ABSENT) (\S+)$", out, re.M))
        self.assertEqual(seen, sees, f"{where}: {out}")
        uid = USERS["alice"]
        self.assertIn(f"id {uid} alice", out, where)
        self.assertRegex(out, re.compile(r"^NoNewPrivs:\s+1$", re.M), where)
        self.assertRegex(out, re.compile(r"^CapPrm:\s+0+$", re.M), where)
        self.assertRegex(out, re.compile(r"^CapEff:\s+0+$", re.M), where)
        self.assertIn("refused su", out, where)
        self.assertIn("absent sudo", out, where)

    def assert_munged_drops_root(self, pod: str, container: str, namespace=NAMESPACE):
        """In `container` of `pod`, as the admin: munged runs as munge (every uid of
        it, none root), which alone owns munged's directory and the key's copy."""
        out = self.d.kubectl("exec", pod, "-c", container, "--", "sh", "-c", MUNGED_PROBE,
                             namespace=namespace).stdout
        where = f"{namespace}/{pod} {container}: {out}"
        uids = re.findall(r"^munged Uid: (\d+) (\d+) (\d+) (\d+)$", out, re.M)
        munge = re.findall(r"^munge (\d+)$", out, re.M)
        self.assertTrue(uids and len(munge) == 1 and munge[0] != "0", where)
        self.assertEqual({uid for four in uids for uid in four}, set(munge), where)
        self.assertIn("/run/k8sbridge-munge munge 700\n", out, where)
        self.assertIn("/run/k8sbridge-munge/munge.key munge 400\n", out, where)

    # ---- the tests, in order ----------------------------------------------------------

    def test_0_the_site_copy_changes_only_what_a_site_sets(self):
        shipped = config_files(render("overlays/example-gpu"))
        site = config_files(self.d.rendered)
        self.assertEqual(sorted(site), sorted(shipped))
        for name, text in shipped.items():
            self.assertEqual(without_substitutions(name, site[name]),
                             without_substitutions(name, text), name)
        # The users: the shipped files as they are (the directory's group that
        # directory-group names included); the site's users are in its directory,
        # in no ConfigMap.
        shipped, site = users_files(render("overlays/example-gpu")), users_files(self.d.rendered)
        self.assertEqual(site, shipped)
        self.assertNotEqual(self.d.directory_group(), "", "example-gpu's directory mode")
        for user in USERS:
            self.assertEqual(configmaps_with_user(self.d.rendered, user), [], user)

    def test_1_a_gpu_feature_job_on_one_switch_gets_pods_on_one_leaf(self):
        d = self.d
        d.wait_ready()
        ctld = d.get("pod", "slurmctld-0")
        self.assertEqual(ctld["spec"]["serviceAccountName"], "k8sbridge-controller")
        self.assert_kubelet_ran(ctld, "k8sbridge-controller")
        self.assertEqual(d.worker_pods(), [], "no worker pod before Slurm asks for one")
        nodes = d.slurm_nodes()
        self.assertEqual(sorted(nodes), SLURM_NODES)
        for name in SLURM_NODES:
            self.assertIn("POWERED_DOWN", nodes[name]["State"], name)
            self.assertIn("gpu:8", nodes[name].get("Gres", ""), name)

        # What a user types (README): srun from the login pod, through kubectl exec,
        # as a user (alice: one of the site's, in the login pod and the jail, with
        # her association in slurmdbd).
        d.kube.clear_requests()
        out = self.srun("-N2", "--switches=1", "-C", "h100", "--gres=gpu:8", "-l",
                        "sh", "-c", PROBE)
        # The exec went to the login pod's kubelet (the stream it answered).
        self.assertIn(("exec", 101), {(r["subresource"], r["code"])
                                      for r in d.kube.requests_log()
                                      if r["resource"] == "pods" and
                                      (r["name"] or "").startswith("slurm-login")})
        # In the jail: the driver's NVML the toolkit injected into the pod (k8sbridge-
        # jail-prepare bound it onto the read-only jail through a per-pod layer).
        hosts = sorted(re.findall(r"^\d+: (gpu-\d+) populated from the login image.* "
                                  r"NVML=yes CUDA=0,1,2,3,4,5,6,7$", out, re.M))
        self.assertEqual(len(hosts), 2, out)
        # --switches=1: Slurm's tree (the topology sidecar's, from the groups'
        # PlacementDomain) puts both on one leaf, and so do their pods.
        self.assertEqual(len({LEAF_OF_NODE[h] for h in hosts}), 1, out)
        for task, seen in self.devices(out).items():
            self.assertEqual(seen, {f"/dev/nvidia{i}": "No such device or address"
                                    for i in range(8)}, f"task {task}: {out}")
        pods = self.pods()
        self.assertEqual(sorted(pods), hosts)
        for name, pod in pods.items():
            spec = pod["spec"]
            node = self.k8s_node(spec["nodeName"])
            self.assertEqual(node["metadata"]["labels"][LEAF_LABEL], LEAF_OF_NODE[name], name)
            # -C h100 became the feature's node selector; the node has the label.
            self.assertEqual(spec["nodeSelector"].get("nvidia.com/gpu.product"),
                             node["metadata"]["labels"]["nvidia.com/gpu.product"], name)
            self.assertEqual(spec.get("runtimeClassName"), RUNTIME_CLASS, name)
            limits = spec["containers"][0]["resources"]["limits"]
            self.assertEqual(limits.get(GPU_RESOURCE), "8", name)
            self.assertRegex(spec["containers"][0]["image"], r"^k8sbridge-worker:", name)
            self.assert_kubelet_ran(pod, "k8sbridge-worker")
            self.assert_kubelet_events(pod)
        nodes = d.slurm_nodes()
        for name in hosts:
            self.assertEqual(nodes[name]["NodeAddr"], pods[name]["status"]["podIP"], name)
            # slurmd's node_features_k8s read its Kubernetes node's labels.
            self.assertEqual(set(nodes[name].get("ActiveFeatures", "").split(",")),
                             {"h100", "ib"}, f"{name}: {nodes[name]}")

    def test_2_jobs_run_in_the_jail_each_in_its_cgroup_with_its_own_gpus(self):
        d = self.d
        out = self.srun("-N4", "-l", "sh", "-c",
                        "echo $(hostname) $(grep ^VERSION_CODENAME= /etc/os-release) "
                        "$(cat /.k8sbridge-jail 2>/dev/null || echo no-jail) "
                        "$(grep -c /job_ /proc/self/cgroup)")
        lines = sorted(out.splitlines())
        self.assertEqual(len(lines), 4, out)
        for i, line in enumerate(lines):
            # Each task on its own node, in the jail populated from the login image,
            # in its job's cgroup (proctrack/cgroup and task/cgroup, as shipped).
            self.assertRegex(line, rf"^{i}: {SLURM_NODES[i]} VERSION_CODENAME=trixie "
                                   r"populated from the login image.* [1-9]\d*$")
        self.assertEqual(sorted(self.pods()), SLURM_NODES)
        # ConstrainDevices: a one-GPU job opens its device, and no other.
        out = self.srun("-N1", "--gres=gpu:1", "-l", "sh", "-c", PROBE)
        self.assertRegex(out, re.compile(r"CUDA=0$", re.M), out)
        seen = self.devices(out)[0]
        self.assertEqual(sorted(seen.values()),
                         ["No such device or address"] + ["Operation not permitted"] * 7, out)

        # The power programs ran in the controller pod under its own token.
        log = d.pod_file(d.get("pod", "slurmctld-0"), "log", "k8sbridge-power.log")
        self.assertIsNotNone(log, "k8sbridge-power.log in the controller pod's log volume")
        self.assertNotRegex(log.read_text(), r"forbidden|in-cluster config")

    def test_3_a_batch_script_and_its_srun_run_in_the_jail(self):
        d = self.d
        # The batch script (sbatch --wrap's) and the step it starts each check that
        # they run in the jail.
        script = ("test -e /.k8sbridge-jail || exit 3; "
                  "srun -N2 sh -c 'test -e /.k8sbridge-jail' || exit 4")
        r = d.login(["sbatch", "--parsable", "-N2", "--chdir=/tmp", "--output=/dev/null",
                     f"--wrap={script}"], user="alice")
        job = r.stdout.strip().split(";")[0]
        d.wait(lambda: d.job(job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED",
                                                       "NODE_FAIL", "TIMEOUT"),
               300, f"batch job {job} to end")
        info = d.job(job)
        self.assertEqual((info["JobState"], info["ExitCode"]), ("COMPLETED", "0:0"), info)

    def test_4_a_lost_gpu_drains_the_node_and_cordons_its_kubernetes_node(self):
        d = self.d
        victim = "gpu-003"
        pod = self.pods()[victim]
        k8s_name = pod["spec"]["nodeName"]

        def health():
            return d.kubectl("exec", victim, "-c", "slurmd", "--", "env",
                             f"SLURMD_NODENAME={victim}", HEALTH, check=False,
                             namespace=WORKER_NAMESPACE)
        gpus = pod_gpus(8)
        d.toolkit.set_gpus(victim, gpus[:3] + [dict(gpus[3], lost=True)] + gpus[4:])
        r = health()
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)  # unhealthy

        def drained():
            return d.slurm_nodes()[victim].get("Reason", "").startswith(
                "[hardware] k8sbridge-health: GPU 3")
        d.wait(drained, 60, f"{victim} drained for its lost GPU")

        def cordoned():
            node = self.k8s_node(k8s_name)
            return (node["spec"].get("unschedulable") is True and
                    HARDWARE_TAINT in {t["key"] for t in node["spec"].get("taints", [])})
        d.wait(cordoned, 120, f"k8sbridge-sync to cordon and taint {k8s_name}")

        # Repaired: two clean runs (ResumeAfterCleanRuns) return the node, and sync
        # uncordons the Kubernetes node it cordoned.
        d.toolkit.set_gpus(victim, gpus)
        for _ in range(2):
            r = health()
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        d.wait(lambda: "DRAIN" not in d.slurm_nodes()[victim]["State"], 60,
               f"{victim} back in service")
        d.wait(lambda: not cordoned() and not self.k8s_node(k8s_name)["spec"]
               .get("unschedulable"), 120, f"k8sbridge-sync to uncordon {k8s_name}")

    def test_5_prometheus_scrapes_the_metrics_service(self):
        d = self.d
        monitor = yaml.safe_load((DEPLOY / "components" / "servicemonitor" /
                                  "servicemonitor.yaml").read_text())
        # Prometheus runs on the host: it reaches the controller pod through the
        # pod's node, as a node of a cluster does.
        routes = [(node.pod_cidr, node.address) for node in d.nodes]
        try:
            for cidr, via in routes:
                subprocess.run(["ip", "route", "replace", cidr, "via", via], check=True)
            prom = Prometheus(service_monitor_scrape(monitor, d.kube.kubectl_json))
            try:
                prom.wait_targets_up(1)
                d.wait(lambda: prom.value("k8sbridge_sync_leader") == 1, 60,
                       "the scraped k8sbridge_sync_leader")
                self.assertEqual(prom.value("k8sbridge_power_metrics_file_readable"), 1)
                # The resumes of the jobs above, counted by the power programs.
                resumes = prom.value('sum(k8sbridge_power_calls_total{subcommand="resume",'
                                     'result="ok"})')
                self.assertGreaterEqual(resumes or 0, 2)
            finally:
                prom.close()
        finally:
            for cidr, via in routes:
                subprocess.run(["ip", "route", "del", cidr, "via", via], check=False)

    def test_5a_alice_logs_in_over_ssh_as_herself_and_no_one_else_does(self):
        d = self.d
        # The admin's part (docs/deploy.md, "Users"): alice's public key into her
        # home (made by the login pods, hers and 0700), a file of bob's that only he
        # may read, and alice's key in root's authorized_keys of every login pod,
        # which sshd must still refuse.
        pub = shlex.quote(self.key("alice").with_suffix(".pub").read_text().strip())
        d.login(["sh", "-ec",
                 f"install -d -m 0700 -o alice -g alice /home/alice/.ssh; "
                 f"echo {pub} > /home/alice/.ssh/authorized_keys; "
                 f"chown alice:alice /home/alice/.ssh/authorized_keys; "
                 f"echo bob-only > /home/bob/secret; chown bob:bob /home/bob/secret; "
                 f"chmod 0600 /home/bob/secret; stat -c '%a %U' /home/alice /home/bob"])
        for pod in d.pods(LOGIN_SELECTOR):
            d.kubectl("exec", pod["metadata"]["name"], "-c", "login", "--", "sh", "-ec",
                      f"install -d -m 0700 /root/.ssh; echo {pub} > /root/.ssh/authorized_keys")
        self.wait_alice_logs_in("first start")
        self.assertEqual(self.alice("id -un; echo $HOME").split(), ["alice", "/home/alice"])
        refusals = {
            "a wrong key": ("alice", self.key("mallory")),
            "a user not in the directory": ("carol", self.key("alice")),
            "root, even with alice's key in its authorized_keys": ("root", self.key("alice")),
            "bob with alice's key": ("bob", self.key("alice")),
        }
        for what, (user, key) in refusals.items():
            r = self.ssh(user, key, "id")
            self.assertEqual(r.returncode, 255, f"{what}: {r.stdout}{r.stderr}")
            self.assertIn("Permission denied (publickey)", r.stderr, what)

    def test_5b_alice_reads_no_key_token_or_other_home_and_cannot_become_root(self):
        # munged dropped root: the user munge runs it and alone owns the key's copy.
        owners = self.d.login(["sh", "-ec", "for p in /proc/[0-9]*; do "
                               "[ \"$(cat $p/comm 2>/dev/null)\" != munged ] || stat -c %U $p; "
                               "done | sort -u; stat -c '%U %a' /run/k8sbridge-munge "
                               "/run/k8sbridge-munge/munge.key"]).stdout.split("\n")
        self.assertEqual(owners[:3], ["munge", "munge 700", "munge 400"], owners)
        # And in the controller pod's two munged, slurmctld's and slurmdbd's.
        for container in ("slurmctld", "slurmdbd"):
            self.assert_munged_drops_root("slurmctld-0", container)
        out = self.alice(USER_PROBE)
        self.assert_private(out, LOGIN_SEES, "alice's shell in the login pod")
        setuid = re.findall(r"^setuid (.*)$", out, re.M)
        self.assertIn("/usr/bin/su", setuid, out)
        # From her job, in the jail on a worker: none of the worker pod's secrets
        # is in the jail, and the jail's setuid programs are as powerless.
        out = self.alice("srun -N1 sh -c " + shlex.quote("echo node $(hostname); " + USER_PROBE))
        self.assert_private(out, JOB_SEES, "alice's job in the jail")
        # The worker pod that ran it (its name is the node's) is there for
        # SuspendTime after: its munged, whose socket the jail has, is munge's too.
        node = re.findall(r"^node (\S+)$", out, re.M)
        self.assertEqual(len(node), 1, out)
        self.assert_munged_drops_root(node[0], "slurmd", namespace=WORKER_NAMESPACE)

    def test_5c_alices_batch_job_runs_as_her_and_writes_into_her_home(self):
        d = self.d
        # Two seconds of sleep: some usage for her fair-share (test_5d).
        out = self.alice("cd && sbatch --parsable -N1 "
                         "--wrap='id -un; cat /.k8sbridge-jail; hostname; sleep 2'")
        job = out.strip().split(";")[0]
        d.wait(lambda: d.job(job).get("JobState") in ("COMPLETED", "FAILED", "CANCELLED",
                                                       "NODE_FAIL", "TIMEOUT"),
               300, f"alice's batch job {job} to end")
        info = d.job(job)
        self.assertEqual((info["JobState"], info["ExitCode"], info["UserId"].split("(")[0]),
                         ("COMPLETED", "0:0", "alice"), info)
        lines = self.alice(f"cat ~/slurm-{job}.out; stat -c '%U %a' ~/slurm-{job}.out")
        self.assertRegex(lines, rf"^alice\npopulated from the login image.*\n"
                                rf"{info['NodeList']}\nalice 6\d\d\n$")
        type(self).alice_job = (job, lines)

    def test_5d_sacct_and_sshare_show_alices_job_and_fair_share(self):
        d = self.d
        self.assertIsNotNone(self.alice_job, "test_5c ran alice's job")
        job = self.alice_job[0]
        nodes = d.job(job)["NodeList"]
        last = LastOutput()

        def alice(command):
            r = self.ssh("alice", self.key("alice"), command, timeout=120)
            last.text = f"{command}: exit {r.returncode}: {r.stdout}{r.stderr}"
            return r.stdout if r.returncode == 0 else ""

        # slurmctld sends the job's records to slurmdbd (in the controller pod) as
        # they come; her sacct, from her shell, reads them there.
        want = f"{job}|COMPLETED|{nodes}|0:0"
        d.wait(lambda: alice(f"sacct -u alice -j {job} -X -n -P "
                             "-o JobID,State,NodeList,ExitCode").strip() == want,
               120, last.after(f"sacct -u alice to show {want}"))

        # Her association's usage grew when her jobs ended (AccountingStorageEnforce's
        # `limits`); sshare shows it with her fair-share factor.
        def fair_share():
            rows = [line.split("|") for line in
                    alice("sshare -u alice -n -P -o Account,User,RawUsage,FairShare")
                    .splitlines()]
            # sshare indents each account by its depth in the tree.
            mine = [r for r in rows if len(r) == 4 and r[1] == "alice"]
            return (len(mine) == 1 and mine[0][0].strip() == "users"
                    and int(mine[0][2]) > 0 and 0 <= float(mine[0][3]) <= 1)
        d.wait(fair_share, 120, last.after("sshare -u alice to show her usage in account users"))

    def test_5e_users_come_from_the_directory_and_a_new_one_needs_no_restart(self):
        d = self.d
        # alice is in no ConfigMap (test_0): the login pod and slurmctld's container
        # find her through the sssd sidecar, and their own files do not know her.
        uid = USERS["alice"]
        for where, target in (("the login pod", ["statefulset/slurm-login", "-c", "login"]),
                              ("slurmctld's container", ["slurmctld-0", "-c", "slurmctld"])):
            out = d.kubectl("exec", *target, "--", "sh", "-c",
                            "getent -s sss passwd alice; getent -s files passwd alice || "
                            "echo files: none").stdout.splitlines()
            self.assertEqual(len(out), 2, f"{where}: {out}")
            fields = out[0].split(":")
            self.assertEqual([fields[i] for i in (0, 2, 3, 5, 6)],
                             ["alice", str(uid), str(uid), "/home/alice", "/bin/bash"], where)
            self.assertEqual(out[1], "files: none", where)

        # A user added to the directory while everything runs: once the admin put
        # his key in his home, he logs in, and the accounts sidecar gives him an
        # association; no pod restarts.
        def pods_now():
            return {(p["metadata"]["name"], p["metadata"]["uid"],
                     tuple(c.get("restartCount", 0) for c in
                           p["status"]["containerStatuses"] +
                           p["status"].get("initContainerStatuses", [])))
                    for p in d.pods(LOGIN_SELECTOR) + [d.get("pod", "slurmctld-0")]}
        before = pods_now()
        d.directory.add_user("dave", 2003)
        pub = shlex.quote(self.key("dave").with_suffix(".pub").read_text().strip())
        d.login(["sh", "-ec", "install -d -m 0700 -o 2003 -g 2003 /home/dave /home/dave/.ssh; "
                 f"echo {pub} > /home/dave/.ssh/authorized_keys; "
                 "chown 2003:2003 /home/dave/.ssh/authorized_keys"])
        last = LastOutput()

        def dave_logs_in():
            r = self.ssh("dave", self.key("dave"), "id -un", timeout=60)
            last.text = f"exit {r.returncode}: {r.stdout}{r.stderr}"
            return r.returncode == 0 and r.stdout.split() == ["dave"]
        d.wait(dave_logs_in, 120, last.after("dave, added to the directory, to log in"))

        def associated():
            r = d.login(["scontrol", "show", "assoc_mgr", "flags=assoc", "users=dave"],
                        check=False, timeout=120)
            return r.returncode == 0 and "UserName=dave(2003)" in r.stdout
        # The accounts sidecar asks for the group every minute, and sssd answers
        # from its cache for a minute (the site's entry_cache_timeout).
        d.wait(associated, 240, "dave's association (the accounts sidecar, from the "
                                "directory's group)")
        self.assertEqual(pods_now(), before, "no pod restarted")

    def test_6_idle_nodes_power_down_and_their_pods_go(self):
        d = self.d
        containers = {name: self.assert_kubelet_ran(pod, "k8sbridge-worker")
                      for name, pod in self.pods().items()}

        def powered_down_without_pods():
            if d.worker_pods():
                return False
            states = d.slurm_nodes()
            return all("POWERED_DOWN" in states[n]["State"] and
                       not re.search(r"DOWN\*|DRAIN|FAIL", states[n]["State"])
                       for n in SLURM_NODES)
        d.wait(powered_down_without_pods, 300, "the worker pods deleted after SuspendTime")
        for name, (node, cid) in containers.items():
            d.wait(lambda: cid not in node.containers(), 60,
                   f"{name}'s container gone from {node.name}'s containerd")


    def test_7_homes_and_host_keys_outlive_the_pods(self):
        d = self.d
        self.assertEqual(d.worker_pods(), [])
        self.assertIsNotNone(self.alice_job, "test_5c ran alice's job")
        job, lines = self.alice_job
        # Her output, written on a worker pod that is gone, is in her home.
        self.assertEqual(self.alice(f"cat ~/slurm-{job}.out; stat -c '%U %a' "
                                    f"~/slurm-{job}.out"), lines)
        # The login pods deleted and made again: ssh, which checks the host key
        # against known_hosts (StrictHostKeyChecking=yes), logs alice in again.
        before = {p["metadata"]["uid"] for p in d.pods(LOGIN_SELECTOR)}
        d.kubectl("delete", "pod", "-l", LOGIN_SELECTOR, "--wait=true", timeout=180)
        d.wait(lambda: (lambda pods: len(pods) == len(before) and
                        not before & {p["metadata"]["uid"] for p in pods})(
                            d.pods(LOGIN_SELECTOR)), 120, "the login pods made again")
        self.wait_alice_logs_in("after the login pods were deleted")
        self.assertEqual(self.alice("id -un").split(), ["alice"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
