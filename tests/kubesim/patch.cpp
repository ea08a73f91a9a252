#include "patch.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "store.h"

namespace kubesim {

void ApplyMergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                     rapidjson::Document::AllocatorType& alloc) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, alloc);
    return;
  }
  if (!target.IsObject())
    target.SetObject();
  for (auto& m : patch.GetObject()) {
    auto it = target.FindMember(m.name);
    if (m.value.IsNull()) {
      if (it != target.MemberEnd())
        target.RemoveMember(it);
      continue;
    }
    if (it == target.MemberEnd()) {
      rapidjson::Value v(rapidjson::kObjectType);
      ApplyMergePatch(v, m.value, alloc);
      target.AddMember(rapidjson::Value(m.name, alloc), v, alloc);
    } else {
      ApplyMergePatch(it->value, m.value, alloc);
    }
  }
}

// ---- JSON patch ----------------------------------------------------------------------

namespace {

Result<std::vector<std::string>> SplitPointer(const std::string& pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty())
    return tokens;
  if (pointer[0] != '/') {
    return Status::InvalidArgument(fmt::format("JSON pointer \"{}\" must start with /", pointer));
  }
  size_t start = 1;
  while (true) {
    size_t slash = pointer.find('/', start);
    std::string raw =
        pointer.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    std::string token;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
        token += raw[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        token += raw[i];
      }
    }
    tokens.push_back(token);
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  return tokens;
}

std::optional<size_t> ArrayIndex(const std::string& token, size_t size, bool allow_end) {
  if (token == "-")
    return allow_end ? std::optional<size_t>(size) : std::nullopt;
  if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  size_t i = std::strtoull(token.c_str(), nullptr, 10);
  if (i > size || (!allow_end && i == size))
    return std::nullopt;
  return i;
}

rapidjson::Value* Resolve(rapidjson::Value& root, const std::vector<std::string>& tokens,
                          size_t count) {
  rapidjson::Value* cur = &root;
  for (size_t i = 0; i < count; ++i) {
    if (cur->IsObject()) {
      auto it = cur->FindMember(tokens[i].c_str());
      if (it == cur->MemberEnd())
        return nullptr;
      cur = &it->value;
    } else if (cur->IsArray()) {
      auto idx = ArrayIndex(tokens[i], cur->Size(), false);
      if (!idx)
        return nullptr;
      cur = &(*cur)[static_cast<rapidjson::SizeType>(*idx)];
    } else {
      return nullptr;
    }
  }
  return cur;
}

Status Remove(rapidjson::Value& root, const std::string& path, rapidjson::Value* removed,
              rapidjson::Document::AllocatorType& alloc) {
  auto tokens = SplitPointer(path);
  if (!tokens.ok())
    return tokens.status();
  if (tokens->empty())
    return Status::InvalidArgument("cannot remove the whole document");
  rapidjson::Value* parent = Resolve(root, *tokens, tokens->size() - 1);
  const std::string& last = tokens->back();
  if (parent != nullptr && parent->IsObject()) {
    auto it = parent->FindMember(last.c_str());
    if (it != parent->MemberEnd()) {
      if (removed != nullptr)
        removed->CopyFrom(it->value, alloc);
      parent->RemoveMember(it);
      return Status::Ok();
    }
  } else if (parent != nullptr && parent->IsArray()) {
    auto idx = ArrayIndex(last, parent->Size(), false);
    if (idx) {
      if (removed != nullptr)
        removed->CopyFrom((*parent)[static_cast<rapidjson::SizeType>(*idx)], alloc);
      parent->Erase(parent->Begin() + *idx);
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(
      fmt::format("unable to remove nonexistent key: {}: missing value", path));
}

Status Add(rapidjson::Value& root, const std::string& path, rapidjson::Value value,
           rapidjson::Document::AllocatorType& alloc, bool replace) {
  auto tokens = SplitPointer(path);
  if (!tokens.ok())
    return tokens.status();
  if (tokens->empty()) {
    root = value;
    return Status::Ok();
  }
  rapidjson::Value* parent = Resolve(root, *tokens, tokens->size() - 1);
  const std::string& last = tokens->back();
  if (parent != nullptr && parent->IsObject()) {
    auto it = parent->FindMember(last.c_str());
    if (it != parent->MemberEnd()) {
      it->value = value;
      return Status::Ok();
    }
    if (replace) {
      return Status::InvalidArgument(
          fmt::format("replace operation does not apply: doc is missing key: {}", path));
    }
    parent->AddMember(rapidjson::Value(last.c_str(), alloc), value, alloc);
    return Status::Ok();
  }
  if (parent != nullptr && parent->IsArray()) {
    auto idx = ArrayIndex(last, parent->Size(), !replace);
    if (idx) {
      if (replace) {
        (*parent)[static_cast<rapidjson::SizeType>(*idx)] = value;
        return Status::Ok();
      }
      parent->PushBack(rapidjson::Value(), alloc);
      for (size_t i = parent->Size() - 1; i > *idx; --i) {
        (*parent)[static_cast<rapidjson::SizeType>(i)] =
            (*parent)[static_cast<rapidjson::SizeType>(i - 1)];
      }
      (*parent)[static_cast<rapidjson::SizeType>(*idx)] = value;
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(fmt::format("{} operation does not apply: doc is missing path: {}",
                                             replace ? "replace" : "add", path));
}

}  // namespace

Status ApplyJsonPatch(rapidjson::Document& target, const rapidjson::Value& patch) {
  auto& alloc = target.GetAllocator();
  if (!patch.IsArray())
    return Status::InvalidArgument("a JSON patch must be a JSON array");
  for (const auto& op_value : patch.GetArray()) {
    std::string op = GetString(op_value, "op");
    std::string path = GetString(op_value, "path");
    if (!op_value.IsObject() || op.empty() || !op_value.HasMember("path")) {
      return Status::InvalidArgument("every JSON patch operation needs \"op\" and \"path\"");
    }
    Status s;
    if (op == "add" || op == "replace") {
      if (!op_value.HasMember("value")) {
        return Status::InvalidArgument(fmt::format("{} operation needs a value", op));
      }
      s = Add(target, path, rapidjson::Value(op_value["value"], alloc), alloc, op == "replace");
    } else if (op == "remove") {
      s = Remove(target, path, nullptr, alloc);
    } else if (op == "move" || op == "copy") {
      std::string from = GetString(op_value, "from");
      rapidjson::Value value;
      if (op == "move") {
        s = Remove(target, from, &value, alloc);
      } else {
        auto tokens = SplitPointer(from);
        if (!tokens.ok())
          return tokens.status();
        rapidjson::Value* src = Resolve(target, *tokens, tokens->size());
        if (src == nullptr) {
          return Status::InvalidArgument(fmt::format("copy from missing path: {}", from));
        }
        value.CopyFrom(*src, alloc);
      }
      if (s.ok())
        s = Add(target, path, std::move(value), alloc, false);
    } else if (op == "test") {
      auto tokens = SplitPointer(path);
      if (!tokens.ok())
        return tokens.status();
      rapidjson::Value* at = Resolve(target, *tokens, tokens->size());
      const rapidjson::Value* want = op_value.HasMember("value") ? &op_value["value"] : nullptr;
      if (at == nullptr || want == nullptr || !(*at == *want)) {
        return Status::Conflict(fmt::format("testing value {} failed: test failed", path));
      }
    } else {
      return Status::InvalidArgument(fmt::format("unexpected JSON patch operation \"{}\"", op));
    }
    if (!s.ok())
      return s;
  }
  return Status::Ok();
}

// ---- strategic merge patch -----------------------------------------------------------

namespace {

// Merge keys of the lists kubesim's kinds have, by field name (Kubernetes declares them
// per Go field with patchMergeKey; the names below do not collide in these kinds).
const std::map<std::string, std::string>& MergeKeys() {
  static const std::map<std::string, std::string> keys = {
      {"containers", "name"},          {"initContainers", "name"},
      {"ephemeralContainers", "name"}, {"env", "name"},
      {"ports", "containerPort"},      {"volumes", "name"},
      {"volumeMounts", "mountPath"},   {"volumeDevices", "devicePath"},
      {"conditions", "type"},          {"addresses", "type"},
      {"imagePullSecrets", "name"},    {"ownerReferences", "uid"},
      {"hostAliases", "ip"},           {"resourceClaims", "name"},
      {"containerStatuses", "name"},   {"initContainerStatuses", "name"},
  };
  return keys;
}

bool IsPrimitiveMergeList(const std::string& field) {
  return field == "finalizers";
}

Status MergeList(const std::string& field, rapidjson::Value& target, const rapidjson::Value& patch,
                 rapidjson::Document::AllocatorType& alloc) {
  auto key_it = MergeKeys().find(field);
  if (IsPrimitiveMergeList(field)) {
    if (!target.IsArray())
      target.SetArray();
    for (const auto& v : patch.GetArray()) {
      bool present = false;
      for (const auto& t : target.GetArray())
        present = present || t == v;
      if (!present)
        target.PushBack(rapidjson::Value(v, alloc), alloc);
    }
    return Status::Ok();
  }
  if (key_it == MergeKeys().end()) {
    target.CopyFrom(patch, alloc);  // atomic list
    return Status::Ok();
  }
  std::string key = key_it->second;
  // A Service's ports merge on "port", a container's on "containerPort": the same
  // field name, told apart by the elements.
  if (field == "ports" && !patch.Empty() && patch[0].IsObject() &&
      !patch[0].HasMember("containerPort") && patch[0].HasMember("port"))
    key = "port";
  // {"$patch":"replace"} inside the list replaces it with the other elements.
  for (const auto& v : patch.GetArray()) {
    if (v.IsObject() && GetString(v, "$patch") == "replace") {
      rapidjson::Value replaced(rapidjson::kArrayType);
      for (const auto& e : patch.GetArray()) {
        if (&e != &v)
          replaced.PushBack(rapidjson::Value(e, alloc), alloc);
      }
      target = replaced;
      return Status::Ok();
    }
  }
  if (!target.IsArray())
    target.SetArray();
  for (const auto& v : patch.GetArray()) {
    if (!v.IsObject() || !v.HasMember(key.c_str())) {
      return Status::InvalidArgument(fmt::format(
          "strategic merge patch: an element of {} lacks its merge key \"{}\"", field, key));
    }
    const rapidjson::Value& id = v[key.c_str()];
    rapidjson::Value* match = nullptr;
    rapidjson::SizeType match_index = 0;
    for (rapidjson::SizeType i = 0; i < target.Size(); ++i) {
      if (target[i].IsObject() && target[i].HasMember(key.c_str()) &&
          target[i][key.c_str()] == id) {
        match = &target[i];
        match_index = i;
      }
    }
    std::string directive = GetString(v, "$patch");
    if (directive == "delete") {
      if (match != nullptr)
        target.Erase(target.Begin() + match_index);
      continue;
    }
    if (match == nullptr) {
      rapidjson::Value fresh(rapidjson::kObjectType);
      Status s = ApplyStrategicMergePatch(fresh, v, alloc);
      if (!s.ok())
        return s;
      target.PushBack(fresh, alloc);
    } else {
      Status s = ApplyStrategicMergePatch(*match, v, alloc);
      if (!s.ok())
        return s;
    }
  }
  return Status::Ok();
}

// $retainKeys: the map keeps only the listed keys (kubectl sends it for fields with the
// retainKeys strategy, e.g. a volume switching its source).
Status RetainKeys(rapidjson::Value& target, const rapidjson::Value& patch) {
  auto keys = patch.FindMember("$retainKeys");
  if (keys == patch.MemberEnd())
    return Status::Ok();
  if (!keys->value.IsArray())
    return Status::InvalidArgument("strategic merge patch: $retainKeys must be a list");
  std::set<std::string> kept;
  for (const auto& k : keys->value.GetArray()) {
    if (k.IsString())
      kept.insert(k.GetString());
  }
  for (auto it = target.MemberBegin(); it != target.MemberEnd();) {
    if (kept.count(it->name.GetString()) == 0)
      it = target.EraseMember(it);
    else
      ++it;
  }
  return Status::Ok();
}

}  // namespace

Status ApplyStrategicMergePatch(rapidjson::Value& target, const rapidjson::Value& patch,
                                rapidjson::Document::AllocatorType& alloc) {
  if (!patch.IsObject()) {
    target.CopyFrom(patch, alloc);
    return Status::Ok();
  }
  std::string directive = GetString(patch, "$patch");
  if (directive == "replace") {
    target.SetObject();
    for (auto& m : patch.GetObject()) {
      std::string name = m.name.GetString();
      if (name == "$patch")
        continue;
      target.AddMember(rapidjson::Value(m.name, alloc), rapidjson::Value(m.value, alloc), alloc);
    }
    return Status::Ok();
  }
  if (directive == "delete") {
    target.SetNull();
    return Status::Ok();
  }
  if (!target.IsObject())
    target.SetObject();
  for (auto& m : patch.GetObject()) {
    std::string name = m.name.GetString();
    if (name == "$patch" || name == "$retainKeys" || name.rfind("$setElementOrder/", 0) == 0) {
      continue;
    }
    if (name.rfind("$deleteFromPrimitiveList/", 0) == 0) {
      std::string field = name.substr(std::string("$deleteFromPrimitiveList/").size());
      auto it = target.FindMember(field.c_str());
      if (it != target.MemberEnd() && it->value.IsArray() && m.value.IsArray()) {
        rapidjson::Value kept(rapidjson::kArrayType);
        for (auto& e : it->value.GetArray()) {
          bool doomed = false;
          for (const auto& d : m.value.GetArray())
            doomed = doomed || d == e;
          if (!doomed)
            kept.PushBack(rapidjson::Value(e, alloc), alloc);
        }
        it->value = kept;
      }
      continue;
    }
    auto it = target.FindMember(m.name);
    if (m.value.IsNull()) {
      if (it != target.MemberEnd())
        target.RemoveMember(it);
      continue;
    }
    if (it == target.MemberEnd()) {
      target.AddMember(rapidjson::Value(m.name, alloc), rapidjson::Value(rapidjson::kNullType),
                       alloc);
      it = target.FindMember(m.name);
      if (m.value.IsObject())
        it->value.SetObject();
    }
    Status s;
    if (m.value.IsArray()) {
      s = MergeList(name, it->value, m.value, alloc);
    } else if (m.value.IsObject()) {
      s = ApplyStrategicMergePatch(it->value, m.value, alloc);
      if (s.ok() && it->value.IsNull())
        target.RemoveMember(it);
    } else {
      it->value.CopyFrom(m.value, alloc);
    }
    if (!s.ok())
      return s;
  }
  return RetainKeys(target, patch);
}

// ---- YAML ----------------------------------------------------------------------------

namespace {

void ScalarToJson(const YAML::Node& node, rapidjson::Value& out,
                  rapidjson::Document::AllocatorType& alloc) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "?") {  // plain scalar: apply the core schema
    if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
      out.SetNull();
      return;
    }
    if (s == "true" || s == "True" || s == "TRUE") {
      out.SetBool(true);
      return;
    }
    if (s == "false" || s == "False" || s == "FALSE") {
      out.SetBool(false);
      return;
    }
    char* end = nullptr;
    size_t digits_from = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (s.size() > digits_from &&
        s.find_first_not_of("0123456789", digits_from) == std::string::npos) {
      errno = 0;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (errno == 0) {
        out.SetInt64(i);
        return;
      }
    }
    if (s.find_first_not_of("0123456789.eE+-") == std::string::npos &&
        s.find_first_of("0123456789") != std::string::npos) {
      double d = std::strtod(s.c_str(), &end);
      if (end != nullptr && *end == '\0' && std::isfinite(d)) {
        out.SetDouble(d);
        return;
      }
    }
  }
  out.SetString(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), alloc);
}

void NodeToJson(const YAML::Node& node, rapidjson::Value& out,
                rapidjson::Document::AllocatorType& alloc) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out.SetObject();
      for (auto it = node.begin(); it != node.end(); ++it) {
        rapidjson::Value v;
        NodeToJson(it->second, v, alloc);
        std::string key = it->first.Scalar();
        out.AddMember(rapidjson::Value(key.c_str(), alloc), v, alloc);
      }
      break;
    case YAML::NodeType::Sequence:
      out.SetArray();
      for (const auto& e : node) {
        rapidjson::Value v;
        NodeToJson(e, v, alloc);
        out.PushBack(v, alloc);
      }
      break;
    case YAML::NodeType::Scalar:
      ScalarToJson(node, out, alloc);
      break;
    default:
      out.SetNull();
  }
}

}  // namespace

Result<std::unique_ptr<rapidjson::Document>> YamlToJson(const std::string& yaml) {
  try {
    YAML::Node node = YAML::Load(yaml);
    auto doc = std::make_unique<rapidjson::Document>();
    NodeToJson(node, *doc, doc->GetAllocator());
    return doc;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("invalid YAML: {}", e.what()));
  }
}

Result<std::vector<std::unique_ptr<rapidjson::Document>>> YamlDocumentsToJson(
    const std::string& yaml) {
  try {
    std::vector<std::unique_ptr<rapidjson::Document>> out;
    for (const YAML::Node& node : YAML::LoadAll(yaml)) {
      auto doc = std::make_unique<rapidjson::Document>();
      NodeToJson(node, *doc, doc->GetAllocator());
      out.push_back(std::move(doc));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("invalid YAML: {}", e.what()));
  }
}

std::string MergeKeyOf(const std::string& field) {
  auto it = MergeKeys().find(field);
  return it == MergeKeys().end() ? "" : it->second;
}

bool IsSetList(const std::string& field) {
  return IsPrimitiveMergeList(field);
}

}  // namespace kubesim
