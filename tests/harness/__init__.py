"""The helpers of the integration tests, the demo and the benchmarks.

    harness.paths     the source and build roots, the built programs
    harness.rig       the test rig: munge, slurmctld and slurmd in namespaces
    harness.testcase  RigTestCase (fails a test whose rigs leave anything behind)
    harness.kube      KubeCluster: the real Kubernetes (upstream programs, kwok nodes)
    harness.pki       the test cluster's CA, certificates and keys, as kubeadm makes them
    harness.webhook   FaultWebhook: the API server refuses the writes a test names
    harness.front_proxy  FrontProxy: a load balancer before the API server that fails
                      as real ones do
    harness.kube_scenarios  runs the Kubernetes client's C++ scenarios and their faults
    harness.kubelet_node  RealCluster: KubeCluster with real nodes (kubelet, containerd,
                      runc, CNI, kube-proxy in namespaces) whose pods are containers
    harness.oci_layout  tiny OCI image layouts (busybox, the sandbox) for the real nodes
    harness.oci       k8sbridge's OCI images run under runc
    harness.deployment  k8sbridge deployed on RealCluster as a platform team deploys it
    harness.cluster   a rig with a Kubernetes and k8sbridge-power, and the kubelet
                      choice: real nodes' (RealCluster), or none or the test's own
                      (TestKubelet) on KubeCluster's kwok nodes
    harness.jail      jail fixtures and rigs for spank_jail
    harness.features  the node_features/k8s rig
    harness.sync      k8sbridge-sync daemons and their rig
    harness.fabrics   ibsim fabrics for the topology tests

meson puts tests/ on PYTHONPATH for the tests (tests/integration/meson.build);
scripts run by hand add it to sys.path themselves.
"""
