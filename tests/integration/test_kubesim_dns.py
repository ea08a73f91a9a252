"""kubesim's cluster DNS (docs/kubesim.md, "Cluster DNS"): with --kubelet, kubesim
serves DNS on the pod network's gateway and the kubelet writes each pod's resolv.conf
from its dnsPolicy, as kubelet + CoreDNS do in a cluster. A StatefulSet `web` with a
headless Service: from another pod of the namespace `web-0.web` resolves through the
search path to web-0's address, the service name too, an unknown name is NXDOMAIN; a
pod with dnsPolicy Default gets the host's resolver, one with None its dnsConfig. The
server is also asked directly from the host, over UDP and TCP.

Needs root (namespaces, a bridge, overlay mounts, runc). Its own bridge and /24 (a
rig slot this process holds) and runc root, as test_kubesim_oci.py.
"""

import json
import os
import random
import re
import shutil
import socket
import struct
import tempfile
import unittest
from pathlib import Path

from harness.kubesim import KUBESIM, KubeSim, mounts_under, remove_oci_kubelet_leftovers, wait_for
from harness.kubesim import runc_ids as runc_root_ids
from harness.oci_layout import build_image, skip_unless_oci_kubelet_can_run
from harness.rig import claim_slot

SLOT = claim_slot() if os.geteuid() == 0 else None
BRIDGE = f"ksimd{SLOT.number if SLOT else 0}"
NETWORK = SLOT.pod_network if SLOT else None
GATEWAY = str(next(NETWORK.hosts())) if NETWORK else ""
RUNC_ROOT = f"/run/kubesim-runc/{BRIDGE}"
NS = "slurm"


def runc_ids():
    return runc_root_ids(RUNC_ROOT)


def host_resolver():
    """The host's resolv.conf as the kubelet parses it: nameservers, searches, options."""
    servers, searches, options = [], [], []
    for line in Path("/etc/resolv.conf").read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fields[0] == "nameserver" and len(fields) > 1:
            servers.append(fields[1])
        elif fields[0] == "search":
            searches = [s[:-1] if len(s) > 1 and s.endswith(".") else s for s in fields[1:]]
        elif fields[0] == "options":
            options = fields[1:]
    return servers, searches, options


def dns_query(name, qtype=1, tcp=False):
    """Asks the cluster DNS; returns (rcode, [A addresses], flags)."""
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack(">HH", qtype, 1)
    if tcp:
        with socket.create_connection((GATEWAY, 53), timeout=5) as s:
            s.sendall(struct.pack(">H", len(q)) + q)
            data = b""
            while len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
                chunk = s.recv(4096)
                assert chunk, "the server closed the connection"
                data += chunk
            r = data[2:]
    else:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            s.sendto(q, (GATEWAY, 53))
            r = s.recv(4096)
    rid, flags, _, ancount = struct.unpack(">HHHH", r[:8])
    assert rid == qid, (rid, qid)
    pos = 12
    while r[pos]:
        pos += r[pos] + 1
    pos += 5
    addresses = []
    for _ in range(ancount):
        pos += 2 if r[pos] & 0xC0 == 0xC0 else len(name) + 2
        rtype, _, _, rdlen = struct.unpack(">HHIH", r[pos:pos + 10])
        if rtype == 1:
            addresses.append(socket.inet_ntoa(r[pos + 10:pos + 14]))
        pos += 10 + rdlen
    return flags & 0xF, addresses, flags


class ClusterDnsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        skip_unless_oci_kubelet_can_run(KUBESIM)
        cls.work = Path(tempfile.mkdtemp(prefix="kubesim-dns-"))
        cls.state = cls.work / "state"
        build_image(cls.work / "images" / "testbox", "1.0", "kubesim dns test image")
        try:
            cls.sim = KubeSim("--kubelet", "--bridge", BRIDGE, "--pod-network", str(NETWORK),
                              "--kubelet-state-dir", str(cls.state), "--image-store",
                              str(cls.work / "images"), "--fake-nodes", "1", scheduler=True)
            cls.sim.kubectl("create", "namespace", NS)
            cls.start_web()
        except BaseException:
            cls.cleanup()
            raise

    @classmethod
    def start_web(cls):
        """StatefulSet web (one replica) behind the headless Service web."""
        cls.apply_objects(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS},
             "spec": {"clusterIP": "None", "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80}]}},
            {"apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "web", "namespace": NS},
             "spec": {"serviceName": "web", "replicas": 1,
                      "selector": {"matchLabels": {"app": "web"}},
                      "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                          "terminationGracePeriodSeconds": 1,
                          "containers": [{"name": "web", "image": "testbox:1.0",
                                          "command": ["sleep", "3600"]}]}}}})
        cls.web_ip = wait_for(
            lambda: (p := cls.get_pod("web-0")) and p["status"].get("phase") == "Running"
            and p["status"].get("podIP"), timeout=60, what="web-0 to run")

    @classmethod
    def tearDownClass(cls):
        try:
            cls.sim.close()
            left_runc, left_mounts = runc_ids(), mounts_under(cls.state)
        finally:
            cls.cleanup()
        assert not left_runc, f"runc containers left behind: {left_runc}"
        assert not left_mounts, f"mounts left behind: {left_mounts}"

    @classmethod
    def cleanup(cls):
        if hasattr(cls, "sim"):
            cls.sim.close()
        remove_oci_kubelet_leftovers(RUNC_ROOT, cls.state, BRIDGE)
        shutil.rmtree(cls.work, ignore_errors=True)

    @classmethod
    def apply_objects(cls, *objects):
        for obj in objects:
            cls.sim.kubectl("apply", "-f", "-", input=json.dumps(obj))

    @classmethod
    def get_pod(cls, name):
        r = cls.sim.kubectl("get", "pod", "-n", NS, name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def run_pod(self, name, script, volumes=(), **spec):
        """Runs `script` in a pod of the namespace to completion, with `volumes`
        (name, hostPath, mountPath) read-only; returns its log."""
        self.addCleanup(self.sim.kubectl, "delete", "pod", "-n", NS, name, "--grace-period=1",
                        "--ignore-not-found")
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "main", "image": "testbox:1.0",
                                         "command": ["/bin/sh", "-c", script]}]}}
        if volumes:
            body["spec"]["volumes"] = [{"name": n, "hostPath": {"path": p, "type": "Directory"}}
                                       for n, p, _ in volumes]
            body["spec"]["containers"][0]["volumeMounts"] = [
                {"name": n, "mountPath": m, "readOnly": True} for n, _, m in volumes]
        body["spec"].update(spec)
        self.apply_objects(body)
        wait_for(lambda: (p := self.get_pod(name)) and
                 p["status"].get("phase") in ("Succeeded", "Failed"), timeout=60,
                 what=f"{name} to finish")
        return self.sim.kubectl("logs", "-n", NS, name).stdout

    # ---- tests ----------------------------------------------------------------------

    def test_names_resolve_from_a_pod_through_the_search_path(self):
        # The host's getent (its /usr and /lib as read-only hostPath volumes: busybox is
        # static and cannot resolve through the C library) asks as Slurm does,
        # getaddrinfo with resolv.conf's search path and ndots; nslookup asks the
        # server for the name as given.
        host_dirs = [("usr", "/usr", "/usr"), ("lib", "/usr/lib", "/lib"),
                     ("lib64", "/usr/lib64", "/lib64")]
        script = ("cat /etc/resolv.conf; for n in web-0.web web no-such-name.web; do "
                  "echo \"== $n\"; /usr/bin/getent ahosts $n; echo \"rc=$?\"; done; "
                  f"echo '== fqdn'; nslookup -type=a no-such-name.{NS}.svc.cluster.local; "
                  "echo \"rc=$?\"")
        out = self.run_pod("client", script, volumes=host_dirs)
        _, host_searches, _ = host_resolver()
        searches = [f"{NS}.svc.cluster.local", "svc.cluster.local", "cluster.local"]
        searches += [s for s in host_searches if s not in searches]
        self.assertEqual(out.split("== ")[0],
                         f"search {' '.join(searches)}\nnameserver {GATEWAY}\noptions ndots:5\n")
        sections = {s.split("\n", 1)[0]: s for s in out.split("== ")[1:]}
        ip = re.escape(self.web_ip)
        self.assertRegex(sections["web-0.web"],
                         rf"{ip} +STREAM web-0\.web\.{NS}\.svc\.cluster\.local")
        self.assertIn("rc=0", sections["web-0.web"])
        self.assertRegex(sections["web"], rf"{ip} +STREAM web\.{NS}\.svc\.cluster\.local")
        self.assertIn("rc=2", sections["no-such-name.web"])
        self.assertIn("NXDOMAIN", sections["fqdn"])
        self.assertIn("rc=1", sections["fqdn"])

    def test_the_server_answers_the_host_over_udp_and_tcp(self):
        fqdn = f"web-0.web.{NS}.svc.cluster.local"
        for tcp in (False, True):
            rcode, addresses, flags = dns_query(fqdn, tcp=tcp)
            self.assertEqual((rcode, addresses), (0, [self.web_ip]), f"tcp={tcp}")
            self.assertTrue(flags & 0x0400, "authoritative")
        self.assertEqual(dns_query(f"web.{NS}.svc.cluster.local")[:2], (0, [self.web_ip]))
        self.assertEqual(dns_query(f"web.{NS}.svc.cluster.local", qtype=28)[:2], (0, []))
        self.assertEqual(dns_query(f"nothing.{NS}.svc.cluster.local")[0], 3)  # NXDOMAIN
        self.assertEqual(dns_query("example.com")[0], 3)  # NXDOMAIN: nothing to forward to

    def test_dns_policy_default_keeps_the_host_resolver(self):
        out = self.run_pod("host-dns", "cat /etc/resolv.conf", dnsPolicy="Default")
        servers, searches, options = host_resolver()
        want = (f"search {' '.join(searches)}\n" if searches else "")
        want += "".join(f"nameserver {s}\n" for s in servers)
        want += f"options {' '.join(options)}\n" if options else ""
        self.assertEqual(out, want)

    def test_dns_policy_none_uses_dns_config(self):
        out = self.run_pod("own-dns", "cat /etc/resolv.conf", dnsPolicy="None",
                           dnsConfig={"nameservers": ["192.0.2.53"], "searches": ["example.org"],
                                      "options": [{"name": "ndots", "value": "2"},
                                                  {"name": "edns0"}]})
        self.assertEqual(out, "search example.org\nnameserver 192.0.2.53\n"
                              "options ndots:2 edns0\n")
        # Upstream validation: None needs a name server.
        r = self.sim.kubectl("run", "-n", NS, "bad-dns", "--image=testbox:1.0", "--restart=Never",
                             "--overrides", json.dumps({"spec": {"dnsPolicy": "None"}}),
                             check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("must provide `dnsConfig` when `dnsPolicy` is None", r.stderr)


if __name__ == "__main__":
    unittest.main()
