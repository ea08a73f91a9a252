"""Pods on real nodes are real containers.

One RealCluster (tests/harness/kubelet_node.py): the upstream control plane of
KubeCluster, two real nodes, each its kubelet, containerd, runc, CNI bridge and
kube-proxy in network and mount namespaces of its own, and CoreDNS. Each test checks
what only a real node does: the container runs through containerd and runc, in the
node's cgroups; the kubelet reports its status, image ID and events; logs and exec
go through the kubelet; pods resolve cluster names through CoreDNS and reach each
other, across nodes too, and Services through kube-proxy's rules; deleting a pod
removes its container. The end checks that nothing is left: processes, namespaces,
bridge, mounts and cgroups.
"""

import ipaddress
import subprocess
import unittest
from pathlib import Path

from harness.kube import wait_for_condition
from harness.kubelet_node import (DNS_SERVICE_IP, NodeImage, RealCluster, RealNode,
                                  busybox_pod, skip_unless_real_nodes_can_run)
from harness.rig import RIG_ENV, alive, pids_with_env, rig_cgroups
from harness.testcase import close_leaving_nothing

HTTPD = "mkdir -p /www && echo served-by-$(hostname) > /www/index.html && " \
        "exec httpd -f -p 8080 -h /www"
# An httpd whose /cgi-bin/ip answers the address the request came from (httpd
# gives it as [::ffff:a.b.c.d]).
WHO_CALLS = "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\n" \
            "echo\\na=${REMOTE_ADDR##*:}\\necho from ${a%%]}\\n' > /www/cgi-bin/ip && " \
            "chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www"


class RealNodeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        skip_unless_real_nodes_can_run()
        cls.rc = RealCluster(nodes=2)
        cls.kube = cls.rc.kube
        cls.node0, cls.node1 = cls.rc.nodes
        print(f"{cls.kube.version()}, {cls.rc.dns.version()}, nodes "
              f"{[(n.name, n.address, n.pod_cidr) for n in cls.rc.nodes]}")

    @classmethod
    def tearDownClass(cls):
        close_leaving_nothing(cls.rc.close, cls.rc.rig_ids, "the real nodes")

    # --- helpers -------------------------------------------------------------------

    def run_pod(self, name, command, node, labels=None):
        """Creates a busybox pod on `node` (deleted after the test) and returns it
        once Running."""
        self.kube.create("/api/v1/namespaces/default/pods",
                         busybox_pod(name, command, node.name, labels), ok=(201,))
        self.addCleanup(self.kube.kubectl, "delete", "pod", name, "--wait=false",
                        "--ignore-not-found", check=False)
        return wait_for_condition(lambda: self.pod_if_running(name), 120, f"pod {name} to run")

    def pod_if_running(self, name):
        status, _, pod = self.kube.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        if status == 200 and pod["status"].get("phase") in ("Failed", "Succeeded"):
            raise AssertionError(f"pod {name} ended: {pod['status']}")
        return pod if status == 200 and pod["status"].get("phase") == "Running" else None

    def exec(self, pod, *argv, check=True):
        return self.kube.kubectl("exec", pod, "--", *argv, check=check, timeout=30)

    def fetch_until(self, client, host, port, expected, path="/"):
        """An HTTP GET of `path` from pod `client` until host:port answers 200 and
        `expected` (rules and routes take effect a moment after the objects exist).
        By nc: this busybox's wget crashes when given a time-out (-T)."""
        request = f"printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' | nc -w 3 {host} {port}"

        def answered():
            try:
                out = self.exec(client, "sh", "-c", request, check=False).stdout.splitlines()
            except subprocess.TimeoutExpired:
                return False
            return out[:1] == ["HTTP/1.1 200 OK"] and out[-1] == expected
        wait_for_condition(answered, 60, f"{host}:{port} to answer {expected!r} in {client}",
                           interval=0.5)

    def container_id(self, pod):
        uri = pod["status"]["containerStatuses"][0]["containerID"]
        self.assertTrue(uri.startswith("containerd://"), uri)
        return uri[len("containerd://"):]

    def events(self, name):
        status, _, body = self.kube.request(
            "GET", "/api/v1/namespaces/default/events?fieldSelector="
                   f"involvedObject.name%3D{name}")
        return body["items"] if status == 200 else []

    # --- tests ---------------------------------------------------------------------

    def test_nodes_are_real_kubelets_on_containerd(self):
        for node in self.rc.nodes:
            info = self.kube.kubectl_json("get", "node", node.name)
            self.assertEqual(info["spec"]["podCIDR"], node.pod_cidr)
            self.assertIn({"type": "InternalIP", "address": node.address},
                          info["status"]["addresses"])
            self.assertEqual(info["status"]["nodeInfo"]["kubeletVersion"],
                             self.kube.version().split()[-1])
            self.assertTrue(info["status"]["nodeInfo"]["containerRuntimeVersion"]
                            .startswith("containerd://1."),
                            info["status"]["nodeInfo"])

    def test_pod_runs_through_containerd_and_runc(self):
        pod = self.run_pod("hello", "exec sleep 3600", self.node0)
        status = pod["status"]
        self.assertEqual(status["hostIP"], self.node0.address)
        self.assertIn(ipaddress.ip_address(status["podIP"]),
                      ipaddress.ip_network(self.node0.pod_cidr))
        container = status["containerStatuses"][0]
        self.assertEqual(container["imageID"], self.rc.image_id())
        self.assertIn("running", container["state"])
        # containerd's shim runs it: a host process, in the node's cgroupRoot.
        pid = self.node0.tasks()[self.container_id(pod)]
        self.assertEqual(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2],
                         [b"sleep", b"3600"])
        cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        self.assertIn(f":memory:{self.node0.cgroup_root}/kubepods/besteffort/pod"
                      f"{pod['metadata']['uid']}/", cgroups)

    def test_kubelet_reports_the_container_events(self):
        self.run_pod("evented", "exec sleep 3600", self.node1)

        def kubelet_reasons():
            return {e["reason"] for e in self.events("evented")
                    if e["source"] == {"component": "kubelet", "host": self.node1.name}}
        wait_for_condition(lambda: {"Pulled", "Created", "Started"} <= kubelet_reasons(), 60,
                           "the kubelet's Pulled, Created and Started events")
        pulled = next(e for e in self.events("evented") if e["reason"] == "Pulled")
        self.assertIn("already present on machine", pulled["message"])

    def test_logs_and_exec_go_through_the_kubelet(self):
        self.run_pod("talker", "echo said-by-$(hostname); exec sleep 3600", self.node1)
        self.kube.clear_requests()
        wait_for_condition(lambda: self.kube.kubectl("logs", "talker", check=False).stdout
                           == "said-by-talker\n", 30, "the container's output in its log")
        self.assertIn('NAME="k8sbridge-busybox"', self.exec("talker", "cat", "/etc/os-release")
                      .stdout)
        self.assertEqual(self.exec("talker", "hostname").stdout, "talker\n")
        sub = {(r["subresource"], r["code"]) for r in self.kube.requests_log()
               if r["name"] == "talker"}
        self.assertIn(("log", 200), sub)
        self.assertIn(("exec", 101), sub)  # the stream the kubelet answered

    def test_pod_resolves_cluster_names_through_coredns(self):
        self.run_pod("resolver", "exec sleep 3600", self.node0)
        resolv = self.exec("resolver", "cat", "/etc/resolv.conf").stdout
        self.assertIn(f"nameserver {DNS_SERVICE_IP}", resolv)
        self.assertIn("search default.svc.cluster.local svc.cluster.local cluster.local", resolv)
        out = self.exec("resolver", "nslookup", "kubernetes.default.svc.cluster.local").stdout
        self.assertIn("Address: 10.233.0.1", out)  # the kubernetes Service's ClusterIP
        missing = self.exec("resolver", "nslookup", "nothing.default.svc.cluster.local",
                            check=False)
        self.assertIn("NXDOMAIN", missing.stdout + missing.stderr)

    def test_pod_reaches_pods_on_its_node_and_on_the_other(self):
        near = self.run_pod("near", HTTPD, self.node0)
        far = self.run_pod("far", HTTPD, self.node1)
        self.run_pod("caller", "exec sleep 3600", self.node0)
        self.fetch_until("caller", near["status"]["podIP"], 8080, "served-by-near")
        self.fetch_until("caller", far["status"]["podIP"], 8080, "served-by-far")

    def test_pods_on_two_nodes_see_each_other_s_own_address(self):
        """No NAT between pods (Kubernetes' network model): a pod on the other node
        sees the caller's pod IP, not its node's address."""
        far = self.run_pod("echoer", WHO_CALLS, self.node1)
        caller = self.run_pod("asker", "exec sleep 3600", self.node0)
        self.fetch_until("asker", far["status"]["podIP"], 8080,
                         f"from {caller['status']['podIP']}", path="/cgi-bin/ip")

    def test_service_cluster_ip_reaches_a_pod_through_kube_proxy(self):
        self.run_pod("web", HTTPD, self.node1, labels={"app": "web"})
        self.run_pod("browser", "exec sleep 3600", self.node0)
        self.kube.create("/api/v1/namespaces/default/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}, ok=(201,))
        self.addCleanup(self.kube.kubectl, "delete", "service", "web", check=False)
        ip = self.kube.kubectl_json("get", "service", "web")["spec"]["clusterIP"]
        wait_for_condition(lambda: self.node0.service_rules("default/web:http"), 60,
                           "kube-proxy's rules for web on real-0")
        self.fetch_until("browser", ip, 80, "served-by-web")
        self.fetch_until("browser", "web.default.svc.cluster.local", 80, "served-by-web")

    def test_deleting_the_pod_removes_its_container(self):
        pod = self.run_pod("doomed", "exec sleep 3600", self.node0)
        cid = self.container_id(pod)
        pid = self.node0.tasks()[cid]
        self.assertIn(cid, self.node0.containers())
        self.kube.kubectl("delete", "pod", "doomed", "--wait=true", timeout=120)
        wait_for_condition(lambda: cid not in self.node0.containers(), 60,
                           "containerd to forget the container")
        wait_for_condition(lambda: not alive(pid), 30,
                           "the container's process to end")

    def test_a_node_that_fails_to_start_leaves_nothing(self):
        """A third node whose image cannot be imported fails after its namespaces,
        cgroups and containerd exist: all of them go with it."""
        before = {p for p in pids_with_env(RIG_ENV, self.rc.id) if alive(p)}
        missing = NodeImage("k8sbridge.invalid/missing:1", self.rc.dir / "missing.tar", "")
        with self.assertRaisesRegex(RuntimeError, "images import"):
            RealNode(self.kube, self.rc.network, 2, self.rc.dir, self.rc.id, [missing])
        self.assertEqual({p for p in pids_with_env(RIG_ENV, self.rc.id) if alive(p)}, before)
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn(f"k8sb-{self.rc.id}-real-2", netns)
        links = subprocess.run(["ip", "link"], capture_output=True, text=True).stdout
        self.assertNotIn(f"kv{self.rc.id}2", links)
        self.assertEqual([c for c in rig_cgroups([self.rc.id]) if c.name.endswith("real-2")],
                         [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
