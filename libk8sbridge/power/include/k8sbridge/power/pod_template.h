// The worker pod template of a node group: a YAML file holding either a
// PodTemplate object (kind: PodTemplate, template: {metadata, spec}) or a bare
// {metadata, spec} (kind Pod or none), as an admin would write for kubectl. It is
// read with yaml-cpp, converted to JSON once, and checked at config load so that
// a broken template stops the programs before any pod is touched.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <rapidjson/document.h>

#include "k8sbridge/status.h"

namespace k8sbridge::power {

struct PodTemplate {
  std::string file;
  // {"metadata": {...}, "spec": {...}}: what every worker pod of the group starts from.
  std::shared_ptr<const rapidjson::Document> pod;
  // Index in spec.containers of the container that runs the worker entrypoint: the
  // one named "slurmd", else the first.
  size_t worker_container = 0;
  // 16 hex digits: FNV-1a over the canonical JSON of `pod`. Equal templates (in
  // any YAML spelling) hash alike; any change to what a pod gets changes it.
  std::string hash;
};

// Errors name the file and the field ("worker.yaml: spec.containers[0].image: ...")
// and, for YAML syntax errors, the line and column.
Result<PodTemplate> ParsePodTemplate(std::string_view yaml, std::string_view file);
Result<PodTemplate> LoadPodTemplate(const std::string& path);

// YAML to JSON as kubectl reads it: quoted scalars stay strings; plain ones become
// null, booleans (true/false and YAML 1.1's yes/no/on/off), integers (a leading 0
// is octal, as in "defaultMode: 0400"; 0x hex) or floats when they read as such,
// else strings.
// Exposed for tests and for other YAML inputs.
Result<rapidjson::Document> YamlToJson(std::string_view yaml, std::string_view file);

}  // namespace k8sbridge::power
