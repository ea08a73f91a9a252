"""kubesim's kubelet in OCI mode (kubesim --kubelet --image-store DIR), driven through
the real kubectl: pods run from OCI images with runc, as a kubelet + containerd + runc
run them. A one-layer busybox image is written by the test (harness.oci_layout), so
the test needs no image build: a pod runs in the image's root, containers of a pod
share the network namespace but not the filesystem, volumes appear, exit codes,
restarts and image errors show in the pod's status as a kubelet reports them,
kubectl logs prints a container's output, and a deleted pod leaves no runc container
or mount behind.

Needs root (namespaces, a bridge, overlay mounts, runc). The stand-in gets a bridge and
a /24 of its own (a rig slot this process holds) and its own runc root, so it never
meets another stand-in, a Slurm rig or harness.oci's containers.
"""

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness.kubesim import KUBESIM, KubeSim, mounts_under, remove_oci_kubelet_leftovers, wait_for
from harness.kubesim import runc_ids as runc_root_ids
from harness.oci_layout import build_image, skip_unless_oci_kubelet_can_run
from harness.rig import claim_slot

SLOT = claim_slot() if os.geteuid() == 0 else None
BRIDGE = f"ksimo{SLOT.number if SLOT else 0}"
NETWORK = str(SLOT.pod_network) if SLOT else "10.232.0.0/24"
RUNC_ROOT = f"/run/kubesim-runc/{BRIDGE}"


def runc_ids():
    return runc_root_ids(RUNC_ROOT)


class OciKubeletTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        skip_unless_oci_kubelet_can_run(KUBESIM)
        cls.work = Path(tempfile.mkdtemp(prefix="kubesim-oci-"))
        cls.state = cls.work / "state"
        store = cls.work / "images"
        cls.digest = build_image(store / "testbox", "1.0", "kubesim test image")
        # A repository path with a registry, and the "oci" directory scripts/images.py makes.
        build_image(store / "example.com" / "team" / "other" / "oci", "2.0", "the other image",
                    {"Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo entrypoint+cmd; exit 0"]})
        try:
            cls.sim = KubeSim("--kubelet", "--bridge", BRIDGE, "--pod-network", NETWORK,
                              "--kubelet-state-dir", str(cls.state), "--image-store", str(store),
                              "--kubelet-backoff-ms", "1000", "--fake-nodes", "1",
                              scheduler=True)
        except BaseException:
            cls.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.sim.close()  # SIGTERM: the kubelet stops every pod, runc and overlay
            left_runc, left_mounts = runc_ids(), mounts_under(cls.state)
        finally:
            cls.cleanup()
        assert not left_runc, f"runc containers left behind: {left_runc}"
        assert not left_mounts, f"mounts left behind: {left_mounts}"

    @classmethod
    def cleanup(cls):
        """Belt and braces, also when kubesim died: no container, mount or bridge stays."""
        remove_oci_kubelet_leftovers(RUNC_ROOT, cls.state, BRIDGE)
        shutil.rmtree(cls.work, ignore_errors=True)

    # ---- helpers ------------------------------------------------------------------

    def apply(self, obj):
        r = subprocess.run(
            ["/usr/bin/kubectl", "--kubeconfig", self.sim.kubeconfig, "apply", "-f", "-"],
            input=json.dumps(obj), capture_output=True, text=True, timeout=60,
            env={"HOME": str(self.sim.dir), "PATH": "/usr/bin:/bin"})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def get(self, name):
        r = self.sim.kubectl("get", "pod", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def delete(self, *names):
        self.sim.kubectl("delete", "pod", *names, "--grace-period=1", "--ignore-not-found")

    def wait_phase(self, name, *phases, timeout=60):
        return wait_for(lambda: (p := self.get(name)) and p.get("status", {}).get("phase")
                        in phases and p, timeout=timeout, what=f"{name} to reach {phases}")

    def status_of(self, pod, container):
        for s in pod["status"].get("containerStatuses", []):
            if s["name"] == container:
                return s
        return None

    def pod(self, name, *containers, **spec):
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                         "containers": list(containers)}}
        body["spec"].update(spec)
        return body

    def container(self, name, script, image="testbox:1.0", **extra):
        c = {"name": name, "image": image, "command": ["/bin/sh", "-c", script]}
        c.update(extra)
        return c

    def logs(self, pod, *args):
        return self.sim.kubectl("logs", pod, *args).stdout

    # ---- tests ----------------------------------------------------------------------

    # ---- kubectl exec: pods/exec over a WebSocket (v5.channel.k8s.io) ----------------

    def exec_in(self, *args, input=None, kubeconfig=None):
        return self.sim.kubectl("exec", *args, check=False, input=input, kubeconfig=kubeconfig,
                                timeout=90)

    def exec_pod(self, name):
        """A running pod of two containers for kubectl exec, its `main` with a working
        directory and a variable of its own."""
        self.addCleanup(self.delete, name)
        self.apply(self.pod(name,
                            self.container("main", "sleep 3600", workingDir="/etc",
                                           env=[{"name": "POD_VAR", "value": "from-pod"}]),
                            self.container("side", "sleep 3600")))
        self.wait_phase(name, "Running")

    def test_exec_streams_and_exit_code(self):
        self.exec_pod("shell")
        r = self.exec_in("shell", "-c", "main", "--", "sh", "-c",
                         "echo out; echo err >&2; pwd; echo $POD_VAR $IMAGE_VAR; "
                         "grep ^NAME= /etc/os-release")
        self.assertEqual(r.returncode, 0, r.stderr)
        # stdout and stderr apart; the container's working directory, environment, root
        self.assertEqual(r.stdout, 'out\n/etc\nfrom-pod from-image\nNAME="kubesim test image"\n')
        self.assertEqual(r.stderr, "err\n")
        r = self.exec_in("shell", "-c", "main", "--", "sh", "-c", "echo partial; exit 3")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stdout, "partial\n")
        self.assertEqual(r.stderr, "command terminated with exit code 3\n")

    def test_exec_container_choice_and_stdin(self):
        self.exec_pod("chooser")
        made = self.exec_in("chooser", "-c", "side", "--", "touch", "/only-in-side")
        self.assertEqual(made.returncode, 0, made.stderr)
        self.assertEqual(self.exec_in("chooser", "-c", "side", "--", "test", "-e",
                                      "/only-in-side").returncode, 0)
        self.assertEqual(self.exec_in("chooser", "-c", "main", "--", "test", "-e",
                                      "/only-in-side").returncode, 1)
        # Without -c kubectl picks the first container and says so on stderr.
        r = self.exec_in("chooser", "--", "sh", "-c", "echo $POD_VAR")
        self.assertEqual((r.returncode, r.stdout), (0, "from-pod\n"), r.stderr)
        # A script on stdin (kubectl exec -i ... < file), and enough bytes to need flow.
        script = "echo from-script $(hostname)\n"
        r = self.exec_in("-i", "chooser", "-c", "main", "--", "sh", "-c",
                         "cat > /tmp/job.sh && sh /tmp/job.sh", input=script)
        self.assertEqual((r.returncode, r.stdout), (0, "from-script chooser\n"), r.stderr)
        big = "x" * 300000 + "\n"
        r = self.exec_in("-i", "chooser", "-c", "main", "--", "wc", "-c", input=big)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, str(len(big))), r.stderr)

    def test_exec_errors_are_upstreams(self):
        r = self.exec_in("nosuchpod", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(), 'Error from server (NotFound): pods "nosuchpod" not found')
        self.exec_pod("errors")
        r = self.exec_in("errors", "-c", "nosuch", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(), "Error from server (BadRequest): container nosuch is not "
                                           "valid for pod errors")
        # A container that is not running: the kubelet's words through kubectl.
        self.addCleanup(self.delete, "pulling")
        self.apply(self.pod("pulling", self.container("main", "true", image="nosuch:1.0")))
        wait_for(lambda: (p := self.get("pulling")) and (s := self.status_of(p, "main")) and
                 "waiting" in s["state"], timeout=60, what="pulling's container to wait")
        r = self.exec_in("pulling", "--", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(),
                         'error: unable to upgrade connection: container not found ("main")')

    def test_exec_needs_pods_exec_in_rbac(self):
        self.exec_pod("guarded")
        self.sim.create_service_account("default", "viewer")
        self.addCleanup(self.sim.kubectl, "delete", "role,rolebinding", "viewer",
                        "--ignore-not-found")
        self.sim.kubectl("create", "role", "viewer", "--verb=get,list", "--resource=pods")
        self.sim.kubectl("create", "rolebinding", "viewer", "--role=viewer",
                         "--serviceaccount=default:viewer")
        viewer = self.sim.service_account_kubeconfig("default", "viewer")
        r = self.exec_in("guarded", "-c", "main", "--", "true", kubeconfig=viewer)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip(),
                         'Error from server (Forbidden): pods "guarded" is forbidden: User '
                         '"system:serviceaccount:default:viewer" cannot create resource '
                         '"pods/exec" in API group "" in the namespace "default"')
        # get and create on pods/exec (the WebSocket GET needs both): allowed.
        self.addCleanup(self.sim.kubectl, "delete", "role,rolebinding", "execer",
                        "--ignore-not-found")
        self.sim.kubectl("create", "role", "execer", "--verb=get,create",
                         "--resource=pods/exec")
        self.sim.kubectl("create", "rolebinding", "execer", "--role=execer",
                         "--serviceaccount=default:viewer")
        r = self.exec_in("guarded", "-c", "main", "--", "echo", "allowed", kubeconfig=viewer)
        self.assertEqual((r.returncode, r.stdout), (0, "allowed\n"), r.stderr)

    def test_exec_into_a_deployment(self):
        self.addCleanup(self.sim.kubectl, "delete", "deployment", "login", "--ignore-not-found")
        labels = {"app": "login"}
        self.apply({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "login", "namespace": "default"},
                    "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                             "template": {"metadata": {"labels": labels},
                                          "spec": {"terminationGracePeriodSeconds": 2,
                                                   "containers": [self.container(
                                                       "main", "sleep 3600")]}}}})
        # kubectl exec deploy/NAME takes the first pod without waiting for it to run, and
        # a kubelet answers exec into a container that has not started with "container
        # not found": wait as a user would (kubectl rollout status) for a running pod.
        wait_for(lambda: any(p["status"].get("phase") == "Running" for p in json.loads(
            self.sim.kubectl("get", "pods", "-l", "app=login", "-o", "json").stdout)["items"]),
                 timeout=60, what="the deployment's pod to run")
        r = self.exec_in("deploy/login", "--", "sh", "-c", "echo submitted; echo note >&2")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "submitted\n", "note\n"))

    def test_runs_in_the_image_root_and_reports_the_exit_code(self):
        self.addCleanup(self.delete, "exit3", "defaults")
        self.apply(self.pod("exit3", self.container(
            "main", "cat /etc/os-release; echo IMAGE_VAR=$IMAGE_VAR POD_VAR=$POD_VAR; "
                    "hostname; cat /etc/hostname; exit 3",
            env=[{"name": "POD_VAR", "value": "from-pod"}])))
        pod = self.wait_phase("exit3", "Failed")
        status = self.status_of(pod, "main")
        term = status["state"]["terminated"]
        self.assertEqual((term["reason"], term["exitCode"]), ("Error", 3))
        self.assertEqual(status["imageID"], f"docker.io/library/testbox@{self.digest}")
        self.assertTrue(status["containerID"].startswith("runc://"), status)
        # -o yaml, as a user reads it
        yaml = self.sim.kubectl("get", "pod", "exit3", "-o", "yaml").stdout
        self.assertIn("reason: Error", yaml)
        self.assertIn("exitCode: 3", yaml)
        out = self.logs("exit3")
        self.assertIn('NAME="kubesim test image"', out)  # the image's root, not the host's
        self.assertIn("IMAGE_VAR=from-image POD_VAR=from-pod", out)
        self.assertEqual(out.splitlines()[-2:], ["exit3", "exit3"])

        # No command in the pod: the image's Entrypoint and Cmd; a registry repository.
        self.apply(self.pod("defaults", {"name": "main", "image": "example.com/team/other:2.0"}))
        pod = self.wait_phase("defaults", "Succeeded")
        self.assertEqual(self.status_of(pod, "main")["state"]["terminated"]["reason"],
                         "Completed")
        self.assertEqual(self.logs("defaults"), "entrypoint+cmd\n")

    def test_containers_share_the_network_but_not_the_filesystem(self):
        self.addCleanup(self.delete, "pair")
        server = self.container("server", "echo served > /tmp/index.html; "
                                          "exec httpd -f -p 8080 -h /tmp")
        client = self.container(
            "client", "until wget -q -O - http://localhost:8080/index.html; do sleep 0.2; done; "
                      "test -e /tmp/index.html && echo shared-fs || echo own-fs; "
                      "readlink /proc/1/ns/mnt; sleep 3600")
        self.apply(self.pod("pair", server, client))
        pod = self.wait_phase("pair", "Running")
        self.assertEqual(pod["status"]["containerStatuses"][0]["ready"], True)
        out = wait_for(lambda: "fs" in (o := self.logs("pair", "-c", "client")) and o,
                       timeout=30, what="the client's answer")
        self.assertIn("served", out)
        self.assertIn("own-fs", out)
        # Both containers run; kubectl logs without -c on a two-container pod: upstream's 400
        code, _, body = self.sim.request("GET", "/api/v1/namespaces/default/pods/pair/log")
        self.assertEqual(code, 400, body)
        self.assertEqual(body["message"], "a container name must be specified for pod pair, "
                                          "choose one of: [server client]")
        self.assertEqual(len([i for i in runc_ids() if pod["metadata"]["uid"] in i]), 2)

    def test_volumes(self):
        self.addCleanup(self.delete, "volumes")
        self.addCleanup(self.sim.kubectl, "delete", "configmap,secret", "cfg", "--ignore-not-found")
        self.sim.kubectl("create", "configmap", "cfg", "--from-literal=color=blue")
        self.sim.kubectl("create", "secret", "generic", "cfg", "--from-literal=password=s3cret")
        script = ("cat /cfg/color; echo; cat /sec/password; echo; echo made > /scratch/x; "
                  "cat /scratch/x; touch /cfg/new 2>/dev/null && echo cfg-writable "
                  "|| echo cfg-read-only; readlink /cfg/color; readlink /cfg/..data | head -c 4; "
                  "echo; cat /all/shade /all/ns /all/pw; echo; cat /info/labels; "
                  "stat -c %a /sec/..data/password")
        self.apply(self.pod("volumes", self.container(
            "main", script,
            volumeMounts=[{"name": "cfg", "mountPath": "/cfg", "readOnly": True},
                          {"name": "sec", "mountPath": "/sec"},
                          {"name": "scratch", "mountPath": "/scratch"},
                          {"name": "all", "mountPath": "/all"},
                          {"name": "info", "mountPath": "/info"}]),
            volumes=[{"name": "cfg", "configMap": {"name": "cfg"}},
                     {"name": "sec", "secret": {"secretName": "cfg", "defaultMode": 0o400}},
                     {"name": "scratch", "emptyDir": {}},
                     {"name": "all", "projected": {"sources": [
                         {"configMap": {"name": "cfg", "items": [{"key": "color",
                                                                  "path": "shade"}]}},
                         {"secret": {"name": "cfg", "items": [{"key": "password",
                                                               "path": "pw"}]}},
                         {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {
                             "fieldPath": "metadata.namespace"}}]}}]}},
                     {"name": "info", "downwardAPI": {"items": [
                         {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}],
            ) | {"metadata": {"name": "volumes", "namespace": "default",
                              "labels": {"app": "vols", "tier": "test"}}})
        self.wait_phase("volumes", "Succeeded")
        self.assertEqual(self.logs("volumes").splitlines(),
                         ["blue", "s3cret", "made", "cfg-read-only",
                          "..data/color", "..20",  # the atomic writer's timestamped dir
                          "bluedefaults3cret",
                          'app="vols"', 'tier="test"', "400"])

    def test_volumes_that_cannot_be_set_up_keep_the_container_waiting(self):
        self.addCleanup(self.delete, "badhost", "token")
        missing = self.work / "no-such-dir"
        self.apply(self.pod("badhost", self.container(
            "main", "true", volumeMounts=[{"name": "h", "mountPath": "/h"}]),
            volumes=[{"name": "h", "hostPath": {"path": str(missing), "type": "Directory"}}]))
        pod = wait_for(lambda: (p := self.get("badhost")) and self.status_of(p, "main") and
                       "waiting" in self.status_of(p, "main")["state"] and
                       self.status_of(p, "main")["state"]["waiting"].get("message") and p,
                       timeout=30, what="badhost to wait")
        waiting = self.status_of(pod, "main")["state"]["waiting"]
        self.assertEqual(waiting["reason"], "ContainerCreating", waiting)
        self.assertIn("MountVolume.SetUp failed for volume", waiting["message"])
        self.assertIn(f"hostPath type check failed: {missing} is not a directory",
                      waiting["message"])
        self.assertEqual(pod["status"]["phase"], "Pending")
        # A projected token comes from the API server's issuer: the pod runs, and the
        # token authenticates as the pod's ServiceAccount.
        self.apply(self.pod("token", self.container(
            "main", "cat /t/token", volumeMounts=[{"name": "t", "mountPath": "/t"}]),
            volumes=[{"name": "t", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}]))
        self.wait_phase("token", "Succeeded")
        token = self.logs("token").strip()
        status, _, body = self.sim.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            token=token)
        self.assertEqual(status, 201, body)
        self.assertEqual(body["status"]["userInfo"]["username"],
                         "system:serviceaccount:default:default")

    def test_missing_image_is_err_image_pull_then_image_pull_back_off(self):
        self.addCleanup(self.delete, "noimage", "neverpull")
        self.apply(self.pod("noimage", {"name": "main", "image": "nothere:1"}))
        seen = set()

        def both():
            r = self.sim.kubectl("get", "pod", "noimage", "--no-headers").stdout.split()
            seen.add(r[2])
            return {"ErrImagePull", "ImagePullBackOff"} <= seen
        wait_for(both, timeout=60, interval=0.1, what="ErrImagePull and ImagePullBackOff")
        pod = self.get("noimage")
        self.assertEqual(pod["status"]["phase"], "Pending")
        waiting = self.status_of(pod, "main")["state"]["waiting"]
        if waiting["reason"] == "ErrImagePull":
            self.assertIn('failed to pull and unpack image "docker.io/library/nothere:1"',
                          waiting["message"])
        else:
            self.assertEqual(waiting["message"], 'Back-off pulling image "nothere:1"')
        self.assertEqual(runc_ids(), [i for i in runc_ids() if pod["metadata"]["uid"] not in i])

        self.apply(self.pod("neverpull", {"name": "main", "image": "nothere:1",
                                          "imagePullPolicy": "Never"}))
        pod = wait_for(lambda: (p := self.get("neverpull")) and self.status_of(p, "main") and
                       self.status_of(p, "main")["state"].get("waiting", {}).get("reason") ==
                       "ErrImageNeverPull" and p, timeout=30, what="ErrImageNeverPull")
        self.assertEqual(self.status_of(pod, "main")["state"]["waiting"]["message"],
                         'Container image "nothere:1" is not present with pull policy of Never')

    def test_restart_always_restarts_into_crash_loop_back_off(self):
        self.addCleanup(self.delete, "crasher")
        self.apply(self.pod("crasher", self.container("main", "echo run; exit 1"),
                            restartPolicy="Always"))

        def looping():
            s = self.status_of(self.get("crasher") or {"status": {}}, "main")
            return (s and s["restartCount"] >= 1 and
                    s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff" and s)
        s = wait_for(looping, timeout=60, what="CrashLoopBackOff with restarts")
        self.assertEqual(s["lastState"]["terminated"]["exitCode"], 1)
        self.assertEqual(self.get("crasher")["status"]["phase"], "Running")
        self.assertIn("CrashLoopBackOff",
                      self.sim.kubectl("get", "pod", "crasher", "--no-headers").stdout)
        self.assertEqual(self.logs("crasher", "--previous"), "run\n")
        events = self.sim.kubectl_json("get", "events")["items"]
        reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "crasher"}
        self.assertLessEqual({"Pulled", "Created", "Started", "BackOff"}, reasons)

    def test_graceful_delete_sends_sigterm_first(self):
        host = self.work / "graceful"
        host.mkdir()
        self.addCleanup(shutil.rmtree, host, True)
        self.apply(self.pod("graceful", self.container(
            "main", "trap 'echo term > /h/got-term; exit 0' TERM; "
                    "while true; do sleep 0.1; done",
            volumeMounts=[{"name": "h", "mountPath": "/h"}]),
            volumes=[{"name": "h", "hostPath": {"path": str(host), "type": "Directory"}}],
            terminationGracePeriodSeconds=60))
        self.wait_phase("graceful", "Running")
        self.sim.kubectl("delete", "pod", "graceful", "--wait=true", timeout=90)
        self.assertEqual((host / "got-term").read_text(), "term\n")
        events = self.sim.kubectl_json("get", "events")["items"]
        self.assertIn("Stopping container main",
                      [e["message"] for e in events if e["involvedObject"]["name"] == "graceful"])

    def test_delete_removes_the_containers_and_mounts(self):
        self.apply(self.pod("doomed", self.container("main", "sleep 3600")))
        pod = self.wait_phase("doomed", "Running")
        uid = pod["metadata"]["uid"]
        pod_dir = self.state / BRIDGE / "pods" / uid
        self.assertTrue([i for i in runc_ids() if uid in i])
        self.assertTrue(mounts_under(pod_dir))
        self.sim.kubectl("delete", "pod", "doomed", "--grace-period=1")
        self.assertIsNone(self.get("doomed"))
        self.assertEqual([i for i in runc_ids() if uid in i], [])
        self.assertEqual(mounts_under(pod_dir), [])
        self.assertFalse(pod_dir.exists())


if __name__ == "__main__":
    unittest.main(verbosity=2)
