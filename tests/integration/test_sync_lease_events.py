"""k8sbridge-sync against what a real API server does (issue 17), with the rig and a
real Kubernetes (KubeCluster, kwok's nodes):

- With Namespace=slurm, the Events about a Kubernetes node (HardwareDrain) are
  created in `default`: a real apiserver accepts events about a cluster-scoped object
  only in default or kube-system (422 elsewhere), so they must be listed by
  `kubectl get events -A` there, next to the pod's own events in slurm.
- A leader whose API server stalls on the Lease (an admission webhook that takes
  9 s over every write of it) stops leading before another candidate could take the
  Lease (within the renew deadline, not after its client's 30 s request timeout),
  and leads again once the server answers.
"""

from harness.rig import wait_for
from harness.sync import SyncRigTestCase
from harness.testcase import main

TAINT = "k8sbridge.io/hardware"
LEASE_DURATION = 6  # SyncLeaseDuration of SyncRigTestCase: renew deadline 4 s, retry 1 s
LEASE = "k8sbridge-sync-rig"  # the daemon's Lease: k8sbridge-sync-<ClusterName>
# How long the webhook holds each write of the Lease: longer than the lease duration,
# shorter than the API server waits for the webhook (KubeCluster: 10 s).
STALL = 9


class NodeEventsInDefault(SyncRigTestCase):
    namespace = "slurm"  # made with the deployment's RBAC (harness.sync)

    def test_hardware_drain_event_is_created_in_default(self):
        with self.make_rig() as rig:
            self.kubelet(rig)
            self.power_up(rig, ["w-0"])
            d = self.start_daemon(rig)
            self.wait_leader(d)
            self.assertIsNotNone(self.pod("w-0"), "the worker pod lives in namespace slurm")

            rig.check_output(["scontrol", "update", "nodename=w-0", "state=drain",
                              "reason=[hardware] xid 79"])
            wait_for(lambda: TAINT in [t["key"] for t in
                                       self.knode("node-0")["spec"].get("taints", [])],
                     30, lambda: f"node-0 tainted; log:\n{d.log()[-3000:]}")

            def events():
                return self.kube.kubectl_json("get", "events", "-A")["items"]

            def hardware_drain():
                return [e for e in events() if e.get("reason") == "HardwareDrain"]
            wait_for(hardware_drain, 30,
                     lambda: f"a HardwareDrain event; events: {events()}\nlog:\n{d.log()[-3000:]}")
            drain = hardware_drain()[0]
            self.assertEqual(drain["metadata"]["namespace"], "default", drain)
            # kubectl reads core/v1 Events (involvedObject); events.k8s.io/v1 says regarding.
            about = drain.get("involvedObject") or drain.get("regarding")
            self.assertEqual(about["kind"], "Node", drain)
            self.assertEqual(about["name"], "node-0", drain)
            # The pod's own event stays next to the pod.
            wait_for(lambda: [e for e in events() if e.get("reason") == "SlurmNodeDrained"],
                     30, "a SlurmNodeDrained event")
            pod_events = [e for e in events() if e.get("reason") == "SlurmNodeDrained"]
            self.assertEqual(pod_events[0]["metadata"]["namespace"], "slurm", pod_events[0])
            rig.check_output(["scontrol", "update", "nodename=w-0", "state=resume"])
        self.assertNoLeftovers()


class LeaderUnderStall(SyncRigTestCase):

    def write_conf(self, name="k8sbridge.conf", extra=""):
        # A long request timeout, as on a real cluster: a lease renewal must be bounded
        # by the renew deadline, not by this.
        conf = super().write_conf(name, extra)
        with open(conf["path"]) as f:
            text = f.read()
        with open(conf["path"], "w") as f:
            f.write(text.replace("RequestTimeout=3\n", "RequestTimeout=30\n"))
        return conf

    def test_stalled_lease_stops_leading_and_recovers(self):
        with self.make_rig() as rig:
            d = self.start_daemon(rig)
            self.wait_leader(d)
            self.kube.add_fault("leases", "*", None, times=0, name=LEASE, delay=STALL)
            try:
                # Before another candidate could take the Lease (LEASE_DURATION after
                # our last renewal), we no longer act as leader.
                wait_for(lambda: d.metric("k8sbridge_sync_leader") == 0, LEASE_DURATION,
                         lambda: f"leadership dropped within the renew deadline; log:\n"
                                 f"{d.log()[-3000:]}")
                wait_for(lambda: "no longer leading" in d.log(), 10,
                         lambda: f"the log says so; log:\n{d.log()[-3000:]}")
            finally:
                self.kube.clear_faults()
            # The server answers again: the same daemon takes the Lease back.
            self.wait_leader(d)
            self.assertIsNone(d.proc.poll(), d.log())
        self.assertNoLeftovers()


if __name__ == "__main__":
    main()
