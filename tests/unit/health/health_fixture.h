// Shared by the health tests: a temporary directory and a scripted fake NVML.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "k8sbridge/health/config.h"

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/k8sbridge-health-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    auto p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

// A config whose NVML is the fake, scripted with `script` (JSON).
struct FakeNvml {
  TempDir dir;
  k8sbridge::health::HealthConfig config;
  explicit FakeNvml(const std::string& script) {
    setenv("FAKE_NVML_SCRIPT", dir.Write("fake-nvml.json", script).c_str(), 1);
    const char* lib = std::getenv("FAKE_NVML_LIB");
    config.nvml_library = lib ? lib : "libnvidia-ml.so.1";
    config.kmsg_path = (dir.path / "no-kmsg").string();
    config.check_ib = false;
    config.check_timeout = std::chrono::seconds(5);
  }
};

// One healthy H100-like device; `overrides` replace or add members (raw JSON values).
using Overrides = std::map<std::string, std::string>;
inline std::string Device(const Overrides& overrides = {}, int bus = 0x3b) {
  std::map<std::string, std::string> fields = {
      {"name", "\"NVIDIA H100\""},
      {"bus", std::to_string(bus)},
      {"ecc_uncorrected", "0"},
      {"retired_pending", "false"},
      {"remap", "{\"corr\":0,\"unc\":0,\"pending\":false,\"failure\":false}"},
      {"nvlink", "[true,true,true,true]"},
      {"throttle", "1"},
      {"pcie", "{\"width\":16,\"max_width\":16,\"gen\":5,\"max_gen\":5}"},
  };
  for (const auto& [k, v] : overrides)
    fields[k] = v;
  std::string d = "{";
  for (const auto& [k, v] : fields)
    d += (d.size() > 1 ? "," : "") + ("\"" + k + "\":" + v);
  return d + "}";
}
