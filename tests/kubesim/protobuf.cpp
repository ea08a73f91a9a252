#include "protobuf.h"

#include <map>
#include <set>

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <functional>

namespace kubesim {

namespace {

using k8sbridge::Status;

constexpr std::string_view kMagic{"k8s\0", 4};

// One field of a protobuf message: its number and either a varint or bytes.
struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t varint = 0;
  std::string_view bytes;
};

// Reads a message field by field (only what a proto2 message of strings, ints,
// bools and sub-messages needs).
class Reader {
 public:
  explicit Reader(std::string_view data, std::string_view what) : data_(data), what_(what) {}
  bool done() const { return pos_ >= data_.size(); }

  Result<Field> Next() {
    auto key = Varint();
    if (!key.ok())
      return key.status();
    Field f;
    f.number = static_cast<uint32_t>(*key >> 3);
    f.wire_type = static_cast<uint32_t>(*key & 7);
    switch (f.wire_type) {
      case 0: {
        auto v = Varint();
        if (!v.ok())
          return v.status();
        f.varint = *v;
        return f;
      }
      case 1:
      case 5:
        return Skip(f, f.wire_type == 1 ? 8 : 4);
      case 2: {
        auto length = Varint();
        if (!length.ok())
          return length.status();
        return Skip(f, *length);
      }
      default:
        return Status::InvalidArgument(
            fmt::format("{}: field {} has wire type {}, which protobuf 2 messages do not use",
                        what_, f.number, f.wire_type));
    }
  }

 private:
  Result<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size())
        return Status::InvalidArgument(fmt::format("{}: truncated varint", what_));
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0)
        return value;
    }
    return Status::InvalidArgument(fmt::format("{}: varint longer than 10 bytes", what_));
  }
  Result<Field> Skip(Field f, uint64_t length) {
    if (length > data_.size() - pos_) {
      return Status::InvalidArgument(
          fmt::format("{}: field {} is {} bytes long, but only {} are left", what_, f.number,
                      length, data_.size() - pos_));
    }
    f.bytes = data_.substr(pos_, length);
    pos_ += length;
    return f;
  }

  std::string_view data_, what_;
  size_t pos_ = 0;
};

// Calls `on(field)` for each field of `data`; stops at the first error.
template <typename On>
Status ForEachField(std::string_view data, std::string_view what, On on) {
  Reader r(data, what);
  while (!r.done()) {
    auto f = r.Next();
    if (!f.ok())
      return f.status();
    if (Status s = on(*f); !s.ok())
      return s;
  }
  return Status::Ok();
}

// ObjectMeta: name 1, namespace 3 (the rest is not what an eviction is about).
Status ReadMetadata(std::string_view data, ProtobufEviction& e) {
  return ForEachField(data, "Eviction.metadata", [&](const Field& f) {
    if (f.wire_type == 2 && f.number == 1)
      e.name = f.bytes;
    else if (f.wire_type == 2 && f.number == 3)
      e.ns = f.bytes;
    return Status::Ok();
  });
}

// DeleteOptions: gracePeriodSeconds 1, preconditions 2 {uid 1, resourceVersion 2},
// orphanDependents 3, propagationPolicy 4, dryRun 5 (repeated).
Status ReadDeleteOptions(std::string_view data, ProtobufEviction& e) {
  return ForEachField(data, "Eviction.deleteOptions", [&](const Field& f) {
    if (f.wire_type == 0 && f.number == 1) {
      e.grace_period_seconds = static_cast<int64_t>(f.varint);
    } else if (f.wire_type == 2 && f.number == 2) {
      return ForEachField(f.bytes, "Eviction.deleteOptions.preconditions", [&](const Field& p) {
        if (p.wire_type == 2 && p.number == 1)
          e.precondition_uid = p.bytes;
        else if (p.wire_type == 2 && p.number == 2)
          e.precondition_resource_version = p.bytes;
        return Status::Ok();
      });
    } else if (f.wire_type == 0 && f.number == 3) {
      e.orphan_dependents = f.varint != 0;
    } else if (f.wire_type == 2 && f.number == 4) {
      e.propagation_policy = f.bytes;
    } else if (f.wire_type == 2 && f.number == 5) {
      e.dry_run.emplace_back(f.bytes);
    }
    return Status::Ok();
  });
}

// runtime.Unknown: typeMeta 1 {apiVersion 1, kind 2}, raw 2, contentEncoding 3,
// contentType 4.
struct Unknown {
  std::string api_version, kind, content_encoding, content_type;
  std::string_view raw;
};
Result<Unknown> ReadUnknown(std::string_view data) {
  Unknown u;
  Status s = ForEachField(data, "runtime.Unknown", [&](const Field& f) {
    if (f.wire_type != 2)
      return Status::Ok();
    if (f.number == 1) {
      return ForEachField(f.bytes, "runtime.Unknown.typeMeta", [&](const Field& t) {
        if (t.wire_type == 2 && t.number == 1)
          u.api_version = t.bytes;
        else if (t.wire_type == 2 && t.number == 2)
          u.kind = t.bytes;
        return Status::Ok();
      });
    }
    if (f.number == 2)
      u.raw = f.bytes;
    else if (f.number == 3)
      u.content_encoding = f.bytes;
    else if (f.number == 4)
      u.content_type = f.bytes;
    return Status::Ok();
  });
  if (!s.ok())
    return s;
  return u;
}

// The magic, then a runtime.Unknown without a content encoding.
Result<Unknown> ReadEnvelope(std::string_view body) {
  if (!body.starts_with(kMagic)) {
    return Status::InvalidArgument(
        "the protobuf body does not start with the magic bytes \"k8s\\0\" of a Kubernetes "
        "protobuf object");
  }
  auto unknown = ReadUnknown(body.substr(kMagic.size()));
  if (!unknown.ok())
    return unknown.status();
  if (!unknown->content_encoding.empty()) {
    return Status::InvalidArgument(fmt::format(
        "runtime.Unknown.contentEncoding \"{}\" is not supported", unknown->content_encoding));
  }
  return unknown;
}

using Json = rapidjson::Document;

rapidjson::Value JsonString(std::string_view s, Json::AllocatorType& a) {
  return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// A JSON string of `bytes` in base64, as the JSON form of a protobuf `bytes` field.
std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size())
      n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size())
      n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// One entry of a protobuf map<string, string|bytes> (key 1, value 2) into `object`.
Status ReadMapEntry(std::string_view entry, std::string_view what, bool bytes_value,
                    rapidjson::Value& object, Json::AllocatorType& a) {
  std::string_view key, value;
  Status s = ForEachField(entry, what, [&](const Field& f) {
    if (f.wire_type == 2 && f.number == 1)
      key = f.bytes;
    else if (f.wire_type == 2 && f.number == 2)
      value = f.bytes;
    return Status::Ok();
  });
  if (!s.ok())
    return s;
  if (!object.IsObject())
    object.SetObject();
  object.RemoveMember(JsonString(key, a));
  object.AddMember(JsonString(key, a), JsonString(bytes_value ? Base64(value) : value, a), a);
  return Status::Ok();
}

void AddMemberTo(rapidjson::Value& object, const char* name, rapidjson::Value value,
                 Json::AllocatorType& a) {
  if (!object.HasMember(name))
    object.AddMember(rapidjson::StringRef(name), rapidjson::Value(rapidjson::kObjectType), a);
  object[name] = std::move(value);
}

rapidjson::Value& ObjectMember(rapidjson::Value& object, const char* name, Json::AllocatorType& a) {
  if (!object.HasMember(name))
    object.AddMember(rapidjson::StringRef(name), rapidjson::Value(rapidjson::kObjectType), a);
  return object[name];
}

// ObjectMeta (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto): name 1,
// generateName 2, namespace 3, labels 11, annotations 12, finalizers 14; what a client
// sets on a create (the rest is the server's).
Status ReadObjectMeta(std::string_view data, rapidjson::Value& meta, Json::AllocatorType& a) {
  meta.SetObject();
  return ForEachField(data, "metadata", [&](const Field& f) -> Status {
    if (f.wire_type != 2)
      return Status::Ok();
    switch (f.number) {
      case 1:
        AddMemberTo(meta, "name", JsonString(f.bytes, a), a);
        return Status::Ok();
      case 2:
        AddMemberTo(meta, "generateName", JsonString(f.bytes, a), a);
        return Status::Ok();
      case 3:
        AddMemberTo(meta, "namespace", JsonString(f.bytes, a), a);
        return Status::Ok();
      case 11:
        return ReadMapEntry(f.bytes, "metadata.labels", false, ObjectMember(meta, "labels", a), a);
      case 12:
        return ReadMapEntry(f.bytes, "metadata.annotations", false,
                            ObjectMember(meta, "annotations", a), a);
      case 14:
        if (!meta.HasMember("finalizers"))
          meta.AddMember("finalizers", rapidjson::Value(rapidjson::kArrayType), a);
        meta["finalizers"].PushBack(JsonString(f.bytes, a), a);
        return Status::Ok();
      default:
        return Status::Ok();
    }
  });
}

// The fields of one kind after its metadata (field 1), from k8s.io/api/core/v1/
// generated.proto: each field number to what it reads into the JSON object.
using FieldReader = std::function<Status(const Field&, Json&)>;

Status MapField(const Field& f, Json& doc, const char* name, bool bytes_value) {
  auto& a = doc.GetAllocator();
  return ReadMapEntry(f.bytes, name, bytes_value, ObjectMember(doc, name, a), a);
}

Status StringField(const Field& f, Json& doc, const char* name) {
  AddMemberTo(doc, name, JsonString(f.bytes, doc.GetAllocator()), doc.GetAllocator());
  return Status::Ok();
}

Status BoolField(const Field& f, Json& doc, const char* name) {
  AddMemberTo(doc, name, rapidjson::Value(f.varint != 0), doc.GetAllocator());
  return Status::Ok();
}

// ConfigMap: data 2 (map<string,string>), binaryData 3 (map<string,bytes>), immutable 4.
Status ConfigMapField(const Field& f, Json& doc) {
  if (f.number == 2 && f.wire_type == 2)
    return MapField(f, doc, "data", false);
  if (f.number == 3 && f.wire_type == 2)
    return MapField(f, doc, "binaryData", true);
  if (f.number == 4 && f.wire_type == 0)
    return BoolField(f, doc, "immutable");
  return Status::Ok();
}

// Secret: data 2 (map<string,bytes>), type 3, stringData 4 (map<string,string>),
// immutable 5.
Status SecretField(const Field& f, Json& doc) {
  if (f.number == 2 && f.wire_type == 2)
    return MapField(f, doc, "data", true);
  if (f.number == 3 && f.wire_type == 2)
    return StringField(f, doc, "type");
  if (f.number == 4 && f.wire_type == 2)
    return MapField(f, doc, "stringData", false);
  if (f.number == 5 && f.wire_type == 0)
    return BoolField(f, doc, "immutable");
  return Status::Ok();
}

// Namespace: spec 2 {finalizers 1 (repeated)}; status 3 is the server's.
Status NamespaceField(const Field& f, Json& doc) {
  if (f.number != 2 || f.wire_type != 2)
    return Status::Ok();
  auto& a = doc.GetAllocator();
  rapidjson::Value& spec = ObjectMember(doc, "spec", a);
  return ForEachField(f.bytes, "Namespace.spec", [&](const Field& s) {
    if (s.number == 1 && s.wire_type == 2) {
      if (!spec.HasMember("finalizers"))
        spec.AddMember("finalizers", rapidjson::Value(rapidjson::kArrayType), a);
      spec["finalizers"].PushBack(JsonString(s.bytes, a), a);
    }
    return Status::Ok();
  });
}

Result<std::string> ObjectAsJson(const Unknown& unknown, const FieldReader& read_field) {
  Json doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("apiVersion", JsonString(unknown.api_version, a), a);
  doc.AddMember("kind", JsonString(unknown.kind, a), a);
  Status s = ForEachField(unknown.raw, unknown.kind, [&](const Field& f) -> Status {
    if (f.number == 1 && f.wire_type == 2)
      return ReadObjectMeta(f.bytes, ObjectMember(doc, "metadata", a), a);
    return read_field(f, doc);
  });
  if (!s.ok())
    return s;
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  doc.Accept(w);
  return std::string(buf.GetString(), buf.GetSize());
}

// The messages of the authentication, authorization and RBAC kinds (and
// ServiceAccount) that kubectl sends as protobuf, from k8s.io/api/{core,rbac,
// authorization,authentication}/v1/generated.proto, read by a table of their fields.
// Types: 's' string, 'S' repeated string, 'b' bool, 'i' int64, 'm' message, 'M'
// repeated message, 'p' map<string,string>, 'o' ObjectMeta.
struct ProtoField {
  uint32_t number;
  const char* json;
  char type;
  const char* message;
};

using ProtoMessageTable = std::map<std::string, std::vector<ProtoField>>;

// ServiceAccount and the RBAC kinds.
ProtoMessageTable ObjectMessages() {
  return {
      {"ServiceAccount",
       {{1, "metadata", 'o', ""},
        {2, "secrets", 'M', "ObjectReference"},
        {3, "imagePullSecrets", 'M', "LocalObjectReference"},
        {4, "automountServiceAccountToken", 'b', ""}}},
      {"ObjectReference",
       {{1, "kind", 's', ""},
        {2, "namespace", 's', ""},
        {3, "name", 's', ""},
        {4, "uid", 's', ""},
        {5, "apiVersion", 's', ""},
        {6, "resourceVersion", 's', ""},
        {7, "fieldPath", 's', ""}}},
      {"LocalObjectReference", {{1, "name", 's', ""}}},
      {"Role", {{1, "metadata", 'o', ""}, {2, "rules", 'M', "PolicyRule"}}},
      {"ClusterRole",
       {{1, "metadata", 'o', ""},
        {2, "rules", 'M', "PolicyRule"},
        {3, "aggregationRule", 'm', "AggregationRule"}}},
      {"AggregationRule", {{1, "clusterRoleSelectors", 'M', "LabelSelector"}}},
      {"LabelSelector",
       {{1, "matchLabels", 'p', ""}, {2, "matchExpressions", 'M', "LabelSelectorRequirement"}}},
      {"LabelSelectorRequirement",
       {{1, "key", 's', ""}, {2, "operator", 's', ""}, {3, "values", 'S', ""}}},
      {"PolicyRule",
       {{1, "verbs", 'S', ""},
        {2, "apiGroups", 'S', ""},
        {3, "resources", 'S', ""},
        {4, "resourceNames", 'S', ""},
        {5, "nonResourceURLs", 'S', ""}}},
      {"RoleBinding",
       {{1, "metadata", 'o', ""}, {2, "subjects", 'M', "Subject"}, {3, "roleRef", 'm', "RoleRef"}}},
      {"ClusterRoleBinding",
       {{1, "metadata", 'o', ""}, {2, "subjects", 'M', "Subject"}, {3, "roleRef", 'm', "RoleRef"}}},
      {"Subject",
       {{1, "kind", 's', ""},
        {2, "apiGroup", 's', ""},
        {3, "name", 's', ""},
        {4, "namespace", 's', ""}}},
      {"RoleRef", {{1, "apiGroup", 's', ""}, {2, "kind", 's', ""}, {3, "name", 's', ""}}},
  };
}

// The access reviews, SelfSubjectReview and TokenRequest.
ProtoMessageTable ReviewMessages() {
  return {
      {"SelfSubjectAccessReview",
       {{1, "metadata", 'o', ""}, {2, "spec", 'm', "SelfSubjectAccessReviewSpec"}}},
      {"SelfSubjectAccessReviewSpec",
       {{1, "resourceAttributes", 'm', "ResourceAttributes"},
        {2, "nonResourceAttributes", 'm', "NonResourceAttributes"}}},
      {"SubjectAccessReview",
       {{1, "metadata", 'o', ""}, {2, "spec", 'm', "SubjectAccessReviewSpec"}}},
      {"LocalSubjectAccessReview",
       {{1, "metadata", 'o', ""}, {2, "spec", 'm', "SubjectAccessReviewSpec"}}},
      {"SubjectAccessReviewSpec",
       {{1, "resourceAttributes", 'm', "ResourceAttributes"},
        {2, "nonResourceAttributes", 'm', "NonResourceAttributes"},
        {3, "user", 's', ""},
        {4, "groups", 'S', ""},
        {6, "uid", 's', ""}}},
      {"ResourceAttributes",
       {{1, "namespace", 's', ""},
        {2, "verb", 's', ""},
        {3, "group", 's', ""},
        {4, "version", 's', ""},
        {5, "resource", 's', ""},
        {6, "subresource", 's', ""},
        {7, "name", 's', ""}}},
      {"NonResourceAttributes", {{1, "path", 's', ""}, {2, "verb", 's', ""}}},
      {"SelfSubjectRulesReview",
       {{1, "metadata", 'o', ""}, {2, "spec", 'm', "SelfSubjectRulesReviewSpec"}}},
      {"SelfSubjectRulesReviewSpec", {{1, "namespace", 's', ""}}},
      {"SelfSubjectReview", {{1, "metadata", 'o', ""}}},
      {"TokenRequest", {{1, "metadata", 'o', ""}, {2, "spec", 'm', "TokenRequestSpec"}}},
      {"TokenRequestSpec",
       {{1, "audiences", 'S', ""},
        {4, "expirationSeconds", 'i', ""},
        {3, "boundObjectRef", 'm', "BoundObjectReference"}}},
      {"BoundObjectReference",
       {{1, "kind", 's', ""},
        {2, "apiVersion", 's', ""},
        {3, "name", 's', ""},
        {4, "uid", 's', ""}}},
  };
}

const ProtoMessageTable& ProtoMessages() {
  static const ProtoMessageTable messages = [] {
    ProtoMessageTable all = ObjectMessages();
    all.merge(ReviewMessages());
    return all;
  }();
  return messages;
}

rapidjson::Value& ArrayMember(rapidjson::Value& object, const char* name, Json::AllocatorType& a) {
  if (!object.HasMember(name))
    object.AddMember(rapidjson::StringRef(name), rapidjson::Value(rapidjson::kArrayType), a);
  return object[name];
}

Status ReadTableMessage(std::string_view data, const std::string& type, rapidjson::Value& out,
                        Json::AllocatorType& a);

// One field of a table-read message into `out`.
Status ReadTableField(const Field& f, const ProtoField& spec, rapidjson::Value& out,
                      Json::AllocatorType& a) {
  bool length_delimited = f.wire_type == 2;
  switch (spec.type) {
    case 's':
      if (length_delimited)
        AddMemberTo(out, spec.json, JsonString(f.bytes, a), a);
      return Status::Ok();
    case 'S':
      if (length_delimited)
        ArrayMember(out, spec.json, a).PushBack(JsonString(f.bytes, a), a);
      return Status::Ok();
    case 'b':
      if (f.wire_type == 0)
        AddMemberTo(out, spec.json, rapidjson::Value(f.varint != 0), a);
      return Status::Ok();
    case 'i':
      if (f.wire_type == 0)
        AddMemberTo(out, spec.json, rapidjson::Value(static_cast<int64_t>(f.varint)), a);
      return Status::Ok();
    case 'p':
      return length_delimited
                 ? ReadMapEntry(f.bytes, spec.json, false, ObjectMember(out, spec.json, a), a)
                 : Status::Ok();
    case 'o':
      return length_delimited ? ReadObjectMeta(f.bytes, ObjectMember(out, spec.json, a), a)
                              : Status::Ok();
    case 'm':
      return length_delimited
                 ? ReadTableMessage(f.bytes, spec.message, ObjectMember(out, spec.json, a), a)
                 : Status::Ok();
    default: {  // 'M'
      if (!length_delimited)
        return Status::Ok();
      rapidjson::Value item(rapidjson::kObjectType);
      if (Status s = ReadTableMessage(f.bytes, spec.message, item, a); !s.ok())
        return s;
      ArrayMember(out, spec.json, a).PushBack(item, a);
      return Status::Ok();
    }
  }
}

Status ReadTableMessage(std::string_view data, const std::string& type, rapidjson::Value& out,
                        Json::AllocatorType& a) {
  const auto& fields = ProtoMessages().at(type);
  if (!out.IsObject())
    out.SetObject();
  return ForEachField(data, type, [&](const Field& f) -> Status {
    for (const auto& spec : fields) {
      if (spec.number == f.number)
        return ReadTableField(f, spec, out, a);
    }
    return Status::Ok();  // status and other server-side fields
  });
}

// The (apiVersion, kind) pairs read by the table.
bool TableReadable(const std::string& api_version, const std::string& kind) {
  static const std::set<std::pair<std::string, std::string>> kinds = {
      {"v1", "ServiceAccount"},
      {"rbac.authorization.k8s.io/v1", "Role"},
      {"rbac.authorization.k8s.io/v1", "ClusterRole"},
      {"rbac.authorization.k8s.io/v1", "RoleBinding"},
      {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding"},
      {"authorization.k8s.io/v1", "SelfSubjectAccessReview"},
      {"authorization.k8s.io/v1", "SubjectAccessReview"},
      {"authorization.k8s.io/v1", "LocalSubjectAccessReview"},
      {"authorization.k8s.io/v1", "SelfSubjectRulesReview"},
      {"authentication.k8s.io/v1", "SelfSubjectReview"},
      {"authentication.k8s.io/v1", "TokenRequest"},
  };
  return kinds.count({api_version, kind}) != 0;
}

Result<ProtobufEviction> EvictionOf(const Unknown& unknown) {
  if (unknown.kind != "Eviction" || unknown.api_version != "policy/v1") {
    return Status::InvalidArgument(
        fmt::format("the protobuf body holds {} {}, not a policy/v1 Eviction", unknown.api_version,
                    unknown.kind));
  }
  ProtobufEviction e;
  e.api_version = unknown.api_version;
  e.kind = unknown.kind;
  Status s = ForEachField(unknown.raw, "Eviction", [&](const Field& f) {
    if (f.wire_type == 2 && f.number == 1)
      return ReadMetadata(f.bytes, e);
    if (f.wire_type == 2 && f.number == 2)
      return ReadDeleteOptions(f.bytes, e);
    return Status::Ok();
  });
  if (!s.ok())
    return s;
  return e;
}

}  // namespace

Result<ProtobufEviction> DecodeEvictionProtobuf(std::string_view body) {
  auto unknown = ReadEnvelope(body);
  if (!unknown.ok())
    return unknown.status();
  return EvictionOf(*unknown);
}

// The Eviction inside an envelope already read.

std::string EvictionJson(const ProtobufEviction& e) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto str = [&](const char* key, const std::string& value) {
    w.Key(key);
    w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
  };
  w.StartObject();
  str("apiVersion", e.api_version);
  str("kind", e.kind);
  w.Key("metadata");
  w.StartObject();
  str("name", e.name);
  if (!e.ns.empty())
    str("namespace", e.ns);
  w.EndObject();
  w.Key("deleteOptions");
  w.StartObject();
  if (e.grace_period_seconds) {
    w.Key("gracePeriodSeconds");
    w.Int64(*e.grace_period_seconds);
  }
  if (!e.precondition_uid.empty() || !e.precondition_resource_version.empty()) {
    w.Key("preconditions");
    w.StartObject();
    if (!e.precondition_uid.empty())
      str("uid", e.precondition_uid);
    if (!e.precondition_resource_version.empty())
      str("resourceVersion", e.precondition_resource_version);
    w.EndObject();
  }
  if (e.orphan_dependents) {
    w.Key("orphanDependents");
    w.Bool(*e.orphan_dependents);
  }
  if (!e.propagation_policy.empty())
    str("propagationPolicy", e.propagation_policy);
  if (!e.dry_run.empty()) {
    w.Key("dryRun");
    w.StartArray();
    for (const std::string& d : e.dry_run)
      w.String(d.c_str(), static_cast<rapidjson::SizeType>(d.size()));
    w.EndArray();
  }
  w.EndObject();
  w.EndObject();
  return buf.GetString();
}

Result<std::string> ProtobufBodyAsJson(std::string_view body) {
  auto unknown = ReadEnvelope(body);
  if (!unknown.ok())
    return unknown.status();
  const std::string& kind = unknown->kind;
  if (unknown->api_version == "policy/v1" && kind == "Eviction") {
    auto eviction = EvictionOf(*unknown);
    if (!eviction.ok())
      return eviction.status();
    return EvictionJson(*eviction);
  }
  if (unknown->api_version == "v1" && kind == "ConfigMap")
    return ObjectAsJson(*unknown, ConfigMapField);
  if (unknown->api_version == "v1" && kind == "Secret")
    return ObjectAsJson(*unknown, SecretField);
  if (unknown->api_version == "v1" && kind == "Namespace")
    return ObjectAsJson(*unknown, NamespaceField);
  if (TableReadable(unknown->api_version, kind)) {
    Json doc(rapidjson::kObjectType);
    auto& a = doc.GetAllocator();
    doc.AddMember("apiVersion", JsonString(unknown->api_version, a), a);
    doc.AddMember("kind", JsonString(kind, a), a);
    if (Status s = ReadTableMessage(unknown->raw, kind, doc, a); !s.ok())
      return s;
    rapidjson::StringBuffer buf;
    rapidjson::Writer<rapidjson::StringBuffer> w(buf);
    doc.Accept(w);
    return std::string(buf.GetString(), buf.GetSize());
  }
  return k8sbridge::Status::NotFound(
      fmt::format("kubesim reads no protobuf {} {}", unknown->api_version, kind));
}

}  // namespace kubesim
