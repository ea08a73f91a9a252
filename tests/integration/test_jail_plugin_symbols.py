"""spank_jail.so exports only what Slurm's plugin loader looks up, and needs
nothing at load time beyond the C runtime and the Slurm API that every
process loading it (slurmstepd, slurmd, srun, sbatch, salloc) provides. It is
loaded by srun and sbatch inside the jail too, which may be another Debian
release: a stray libfmt/libyaml/libcurl dependency would break them there."""

import re
import subprocess
import unittest

from harness.jail import plugin_path

EXPORTED = {"plugin_name", "plugin_type", "plugin_version", "spank_plugin_version",
            "slurm_spank_init", "slurm_spank_init_post_opt", "slurm_spank_task_init_privileged",
            "slurm_spank_task_init", "slurm_spank_job_epilog", "slurm_spank_exit"}
ALLOWED_LIBS = re.compile(r"^(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|ld-linux[-\w]*)"
                          r"\.so")


class PluginSymbolsTest(unittest.TestCase):
    def nm(self, *args):
        return subprocess.run(["nm", "-D", *args, str(plugin_path())], check=True,
                              capture_output=True, text=True).stdout.splitlines()

    def test_exports_only_plugin_symbols(self):
        exported = {line.split()[-1] for line in self.nm("--defined-only")}
        self.assertEqual(exported, EXPORTED)

    def test_undefined_symbols_are_versioned_runtime_or_slurm_api(self):
        stray = []
        for line in self.nm("--undefined-only"):
            kind, name = line.split()[-2:]
            if "@" in name or kind == "w":
                continue  # glibc/libstdc++ (versioned) or weak
            if not name.startswith(("slurm_", "spank_")):
                stray.append(name)
        self.assertEqual(stray, [], "symbols nothing will provide when Slurm loads the plugin")

    def test_needs_only_the_c_and_cxx_runtimes(self):
        out = subprocess.run(["readelf", "-d", str(plugin_path())], check=True,
                             capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
        self.assertTrue(needed)
        self.assertEqual([lib for lib in needed if not ALLOWED_LIBS.match(lib)], [])

    def test_cxx_runtime_is_linked_in(self):
        # Loading libstdc++.so costs about 0.8 ms in every srun and every
        # slurmstepd (both C programs); linked in, what the plugin uses of it
        # loads in a fraction of that, and the jail's own libstdc++ never matters.
        out = subprocess.run(["readelf", "-d", str(plugin_path())], check=True,
                             capture_output=True, text=True).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
        self.assertEqual([lib for lib in needed if lib.startswith(("libstdc++", "libgcc_s"))],
                         [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
