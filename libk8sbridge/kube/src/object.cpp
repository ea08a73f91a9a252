#include "k8sbridge/kube/object.h"

#include <optional>

#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <fmt/format.h>

namespace k8sbridge::kube {

namespace {
// Kubernetes sends no deeper documents than this; deeper input is hostile.
constexpr rapidjson::ParseFlag kParseFlags = rapidjson::kParseIterativeFlag;

rapidjson::Pointer MakePointer(std::string_view pointer) {
  return rapidjson::Pointer(pointer.data(), pointer.size());
}
}  // namespace

Object::Object() : doc_(std::make_shared<rapidjson::Document>()) {
  doc_->SetObject();
}

Result<Object> Object::Parse(std::string_view json) {
  auto doc = std::make_shared<rapidjson::Document>();
  doc->Parse<kParseFlags>(json.data(), json.size());
  if (doc->HasParseError()) {
    return Status::InvalidArgument(fmt::format("invalid JSON at offset {}: {}",
                                               doc->GetErrorOffset(),
                                               rapidjson::GetParseError_En(doc->GetParseError())));
  }
  if (!doc->IsObject())
    return Status::InvalidArgument("JSON document is not an object");
  return Object(std::move(doc));
}

Object Object::FromValue(const rapidjson::Value& value) {
  auto doc = std::make_shared<rapidjson::Document>();
  doc->CopyFrom(value, doc->GetAllocator());
  if (!doc->IsObject())
    doc->SetObject();
  return Object(std::move(doc));
}

std::string Object::ToJson() const {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  doc_->Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

rapidjson::Document& Object::mutable_json() {
  if (doc_.use_count() > 1) {
    auto copy = std::make_shared<rapidjson::Document>();
    copy->CopyFrom(*doc_, copy->GetAllocator());
    doc_ = std::move(copy);
  }
  return *doc_;
}

std::string Object::Key() const {
  std::string ns = Namespace();
  return ns.empty() ? Name() : ns + "/" + Name();
}

namespace {

// One reference token of a JSON pointer, unescaped ("~1" is '/', "~0" is '~') into
// `scratch` when it needs it; nullopt for another '~' sequence (an invalid pointer).
std::optional<std::string_view> Unescaped(std::string_view raw, std::string& scratch) {
  if (raw.find('~') == std::string_view::npos)
    return raw;
  scratch.clear();
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '~') {
      scratch += raw[i];
      continue;
    }
    if (i + 1 == raw.size() || (raw[i + 1] != '0' && raw[i + 1] != '1'))
      return std::nullopt;
    scratch += raw[++i] == '0' ? '~' : '/';
  }
  return std::string_view(scratch);
}

// `token` as an array index (digits, no leading zero), else nullopt.
std::optional<size_t> ArrayIndex(std::string_view token) {
  if (token.empty() || token.size() > 9 || (token.size() > 1 && token[0] == '0'))
    return std::nullopt;
  size_t index = 0;
  for (char c : token) {
    if (c < '0' || c > '9')
      return std::nullopt;
    index = index * 10 + static_cast<size_t>(c - '0');
  }
  return index;
}

}  // namespace

// Walks the pointer's tokens down the document without a rapidjson::Pointer, which
// allocates and parses its tokens on every call: the sync daemon reads a few fields
// of each of 10,000 pods and nodes on every pass. Same answers as rapidjson's Get.
const rapidjson::Value* Object::Find(std::string_view pointer) const {
  if (pointer.empty() || pointer[0] != '/') {
    auto p = MakePointer(pointer);  // "" (the whole document) and URI fragments
    return p.IsValid() ? p.Get(*doc_) : nullptr;
  }
  const rapidjson::Value* v = doc_.get();
  std::string scratch;
  for (size_t pos = 1;;) {
    const size_t end = pointer.find('/', pos);
    const auto token = Unescaped(pointer.substr(pos, end - pos), scratch);
    if (!token)
      return nullptr;
    if (v->IsObject()) {
      const rapidjson::Value name(rapidjson::StringRef(token->data(), token->size()));
      auto m = v->FindMember(name);
      if (m == v->MemberEnd())
        return nullptr;
      v = &m->value;
    } else if (auto index = ArrayIndex(*token); v->IsArray() && index && *index < v->Size()) {
      v = &(*v)[static_cast<rapidjson::SizeType>(*index)];
    } else {
      return nullptr;
    }
    if (end == std::string_view::npos)
      return v;
    pos = end + 1;
  }
}

bool Object::Has(std::string_view pointer) const {
  return Find(pointer) != nullptr;
}

std::string Object::String(std::string_view pointer) const {
  const auto* v = Find(pointer);
  if (!v || !v->IsString())
    return "";
  return std::string(v->GetString(), v->GetStringLength());
}

std::optional<int64_t> Object::Int(std::string_view pointer) const {
  const auto* v = Find(pointer);
  if (!v || !v->IsInt64())
    return std::nullopt;
  return v->GetInt64();
}

std::optional<bool> Object::Bool(std::string_view pointer) const {
  const auto* v = Find(pointer);
  if (!v || !v->IsBool())
    return std::nullopt;
  return v->GetBool();
}

std::map<std::string, std::string> Object::StringMap(std::string_view pointer) const {
  std::map<std::string, std::string> out;
  const auto* v = Find(pointer);
  if (!v || !v->IsObject())
    return out;
  for (const auto& m : v->GetObject()) {
    if (m.value.IsString()) {
      out.emplace(std::string(m.name.GetString(), m.name.GetStringLength()),
                  std::string(m.value.GetString(), m.value.GetStringLength()));
    }
  }
  return out;
}

void Object::SetString(std::string_view pointer, std::string_view value) {
  auto& doc = mutable_json();
  MakePointer(pointer).Set(
      doc, rapidjson::Value(value.data(), static_cast<rapidjson::SizeType>(value.size()),
                            doc.GetAllocator()));
}

void Object::SetInt(std::string_view pointer, int64_t value) {
  auto& doc = mutable_json();
  MakePointer(pointer).Set(doc, rapidjson::Value(static_cast<int64_t>(value)));
}

void Object::SetBool(std::string_view pointer, bool value) {
  auto& doc = mutable_json();
  MakePointer(pointer).Set(doc, rapidjson::Value(value));
}

bool Object::SetJson(std::string_view pointer, std::string_view json) {
  rapidjson::Document parsed;
  parsed.Parse<kParseFlags>(json.data(), json.size());
  if (parsed.HasParseError())
    return false;
  auto& doc = mutable_json();
  rapidjson::Value copy(parsed, doc.GetAllocator());
  MakePointer(pointer).Set(doc, copy);
  return true;
}

void Object::Remove(std::string_view pointer) {
  MakePointer(pointer).Erase(mutable_json());
}

std::string PointerEscape(std::string_view segment) {
  std::string out;
  for (char c : segment) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string StringMember(const rapidjson::Value* object, std::string_view name) {
  if (object == nullptr || !object->IsObject())
    return "";
  const rapidjson::Value key(rapidjson::StringRef(name.data(), name.size()));
  auto it = object->FindMember(key);
  if (it == object->MemberEnd() || !it->value.IsString())
    return "";
  return std::string(it->value.GetString(), it->value.GetStringLength());
}

namespace {
std::string ConditionOf(const Object& o, std::string_view type) {
  const auto* conds = rapidjson::Pointer("/status/conditions").Get(o.json());
  if (!conds || !conds->IsArray())
    return "";
  for (const auto& c : conds->GetArray()) {
    if (StringMember(&c, "type") != type)
      continue;
    if (std::string status = StringMember(&c, "status"); !status.empty())
      return status;
  }
  return "";
}
}  // namespace

std::string pod::ConditionStatus(const Object& o, std::string_view type) {
  return ConditionOf(o, type);
}
std::string node::ConditionStatus(const Object& o, std::string_view type) {
  return ConditionOf(o, type);
}

}  // namespace k8sbridge::kube
