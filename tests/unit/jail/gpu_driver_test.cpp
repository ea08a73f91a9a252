#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "k8sbridge/jail/gpu_driver.h"
#include "recording_logger.h"
#include "test_dir.h"

namespace jail = k8sbridge::jail;

namespace {

void Touch(const std::string& path) {
  std::ofstream(path) << "x";
}

void Link(const std::string& target, const std::string& path) {
  BOOST_REQUIRE(::symlink(target.c_str(), path.c_str()) == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_driver)

BOOST_AUTO_TEST_CASE(the_driver_files_are_told_by_name) {
  for (const char* name :
       {"libcuda.so", "libcuda.so.1", "libcuda.so.550.54.15", "libnvidia-ml.so.1",
        "libnvidia-ptxjitcompiler.so.550.54.15", "libcudadebugger.so.1", "libnvcuvid.so.1",
        "libGLX_nvidia.so.0", "libEGL_nvidia.so.0", "nvidia-smi", "nvidia-persistenced"})
    BOOST_TEST(jail::IsGpuDriverFileName(name), name);
  // The CUDA toolkit's own libraries come with the job's software, not the driver.
  for (const char* name : {"libcudart.so.12", "libcublas.so.12", "libnvidia-foo", "libc.so.6",
                           "nvidia-smi.bak", "libGLX_mesa.so.0", "libnvrtc.so.12"})
    BOOST_TEST(!jail::IsGpuDriverFileName(name), name);
}

BOOST_AUTO_TEST_CASE(the_runtimes_files_are_found_by_the_names_tasks_load) {
  jail::testing::TestDir d;
  std::string lib = d / "lib";
  std::string bin = d / "bin";
  std::filesystem::create_directories(lib);
  std::filesystem::create_directories(bin);
  // What the NVIDIA container toolkit leaves: the versioned files bound in, the
  // sonames ldconfig linked to them.
  Touch(lib + "/libcuda.so.550.54.15");
  Link("libcuda.so.550.54.15", lib + "/libcuda.so.1");
  Touch(lib + "/libnvidia-ml.so.550.54.15");
  Link("libnvidia-ml.so.550.54.15", lib + "/libnvidia-ml.so.1");
  Link("libnvidia-ml.so.1", lib + "/libnvidia-ml.so");
  Link("libnvidia-gone.so.1", lib + "/libnvidia-nvvm.so.4");         // dangling: left out
  std::filesystem::create_directories(lib + "/libnvidia-dir.so.1");  // not a file
  Touch(lib + "/libc.so.6");
  Touch(bin + "/nvidia-smi");
  Touch(bin + "/sh");

  std::vector<std::string> want = {
      bin + "/nvidia-smi",      lib + "/libcuda.so.1",      lib + "/libcuda.so.550.54.15",
      lib + "/libnvidia-ml.so", lib + "/libnvidia-ml.so.1", lib + "/libnvidia-ml.so.550.54.15"};
  std::sort(want.begin(), want.end());
  std::vector<std::string> found = jail::FindGpuDriverFiles({lib, bin, d / "missing"});
  BOOST_TEST(found == want, boost::test_tools::per_element());

  // Added to the preparation once, after the libraries an administrator named.
  jail::PrepareConfig config;
  config.gpu_libs = {lib + "/libcuda.so.1"};
  k8sbridge::RecordingLogger log;
  jail::AddGpuDriverFiles(config, {lib, bin}, log);
  BOOST_TEST(config.gpu_libs.size() == want.size());
  BOOST_TEST(config.gpu_libs.front() == lib + "/libcuda.so.1");
  BOOST_TEST(std::count(config.gpu_libs.begin(), config.gpu_libs.end(), lib + "/libcuda.so.1") ==
             1);
}

BOOST_AUTO_TEST_CASE(a_root_without_a_driver_adds_nothing) {
  jail::testing::TestDir d;
  jail::PrepareConfig config;
  k8sbridge::RecordingLogger log;
  jail::AddGpuDriverFiles(config, {d.path()}, log);
  BOOST_TEST(config.gpu_libs.empty());
}

BOOST_AUTO_TEST_SUITE_END()
