"""node_features_k8s.so in real daemons (no Kubernetes needed):

- it loads in slurmctld and in slurmd (NodeFeaturesPlugins=k8s), and slurmd outside
  a worker pod registers with slurm.conf's features;
- `scontrol show config` lists the plugin and its settings (get_config);
- a build that claims another Slurm version is refused by slurmctld and by slurmd,
  and the log names both versions (ours) besides Slurm's own "Incompatible Slurm
  plugin" line;
- an invalid Feature= name in k8sbridge.conf stops slurmctld at start with the
  file and line.
"""

import re
import subprocess

from harness.features import FeaturesRigCase, PLUGIN_DIR, SKEWED_PLUGIN_DIR, features_of
from harness.rig import RigError, slurm_version
from harness.testcase import main


# src/interfaces/node_features.c's syms[] in each release: 24.11 has 17; 25.11 removed
# five; 26.05 added job_features_need_reboot.
ABI_24_11 = {"boot_time", "changeable_feature", "get_node", "job_valid", "job_xlate",
             "get_node_bitmap", "overlap", "node_power", "node_set", "node_state",
             "node_update", "node_update_valid", "node_xlate", "node_xlate2", "step_config",
             "user_update", "get_config"}
ABI_26_05 = (ABI_24_11 - {"get_node", "node_power", "node_update", "node_update_valid",
                          "step_config"}) | {"job_features_need_reboot"}


def expected_abi() -> set:
    names = ABI_26_05 if slurm_version() >= (26, 5, 0) else ABI_24_11
    return {"plugin_name", "plugin_type", "plugin_version", "init", "fini"} | {
        f"node_features_p_{name}" for name in names}


class FeaturesPlugin(FeaturesRigCase):
    def test_exports_exactly_the_abi_and_links_no_libslurm(self):
        so = PLUGIN_DIR / "node_features_k8s.so"
        out = subprocess.run(["nm", "-D", "--defined-only", str(so)], check=True,
                             capture_output=True, text=True).stdout
        exported = {line.split()[-1] for line in out.splitlines() if line.strip()}
        self.assertEqual(exported, expected_abi())
        needed = subprocess.run(["readelf", "-d", str(so)], check=True, capture_output=True,
                                text=True).stdout
        self.assertNotIn("libslurm", needed)

    def test_loads_in_both_daemons_and_lists_its_settings(self):
        rig = self.make_rig(nodes=["w-0"], power=False)
        with rig:
            rig.start_slurmd("w-0")
            rig.wait_nodes_idle(["w-0"])
            ctld = (rig.logdir / "slurmctld.log").read_text()
            self.assertIn("node_features/k8s: loaded", ctld)
            slurmd = (rig.logdir / "slurmd-w-0.log").read_text()
            self.assertIn("node_features/k8s: K8SBRIDGE_HOST_NODE is not set", slurmd)
            node = rig.node("w-0")
            self.assertEqual(features_of(node, "AvailableFeatures"), {"h100", "a100"})

            config = rig.check_output(["scontrol", "show", "config"])
            self.assertIn("node_features/k8s", config)
            for line in ("Feature", "h100 Selector=nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
                         "FeatureLabelPrefix", "feature.node.kubernetes.io/",
                         "FeatureLabelTimeout", "2000ms", "FeatureCacheFile", "K8sbridgeConf",
                         str(rig.etc / "k8sbridge.conf")):
                self.assertIn(line, config)
        self.assertRigGone(rig)

    def test_a_different_slurm_version_is_refused_naming_both(self):
        if not (SKEWED_PLUGIN_DIR / "node_features_k8s.so").exists():
            self.skipTest("the skewed test build is missing")
        rig = self.make_rig(nodes=["w-0"], power=False, plugin_dir=SKEWED_PLUGIN_DIR)
        with self.assertRaises(RigError) as caught:
            with rig:
                pass
        message = str(caught.exception)
        self.assertIn("node_features/k8s was built for Slurm 24.11.4 but this daemon is "
                      "Slurm 24.11.5", message)
        self.assertIn("Incompatible Slurm plugin", message)
        self.assertRigGone(rig)

    def test_slurmd_refuses_a_different_version_too(self):
        if not (SKEWED_PLUGIN_DIR / "node_features_k8s.so").exists():
            self.skipTest("the skewed test build is missing")
        rig = self.make_rig(nodes=["w-0"], power=False)
        with rig:
            # The rig's slurm.conf with the skewed PluginDir and slurmd files of its own;
            # slurmd loads node_features before it talks to anyone, and stops there.
            text = rig.slurm_conf.read_text()
            text = text.replace(f"PluginDir={PLUGIN_DIR}:", f"PluginDir={SKEWED_PLUGIN_DIR}:")
            log = rig.workdir / "slurmd-skewed.log"
            text = re.sub(r"SlurmdLogFile=.*", f"SlurmdLogFile={log}", text)
            text = re.sub(r"SlurmdPidFile=.*", f"SlurmdPidFile={rig.workdir}/skewed.pid", text)
            text = re.sub(r"SlurmdSpoolDir=.*", f"SlurmdSpoolDir={rig.workdir}/skewed-spool",
                          text)
            conf = rig.etc / "slurm-skewed.conf"
            conf.write_text(text)
            result = rig.run([str(rig.prefix / "sbin" / "slurmd"), "-D", "-N", "w-0", "-f",
                              str(conf)], timeout=120)
            self.assertNotEqual(result.returncode, 0)
            text = log.read_text()
            self.assertIn("node_features/k8s was built for Slurm 24.11.4 but this daemon is "
                          "Slurm 24.11.5", text)
            self.assertIn("Incompatible Slurm plugin", text)
            self.assertIn("failed to initialize node_features plugin", text)
        self.assertRigGone(rig)

    def test_invalid_feature_name_stops_slurmctld_with_file_and_line(self):
        rig = self.make_rig(nodes=["w-0"], power=False)
        rig.config.extra_files["k8sbridge.conf"] += "Feature=h100|a100 Selector=x=y\n"
        with self.assertRaises(RigError) as caught:
            with rig:
                pass
        message = str(caught.exception)
        self.assertIn("k8sbridge.conf:11", message)
        self.assertIn("not a Slurm feature name", message)
        self.assertRigGone(rig)


if __name__ == "__main__":
    main()
