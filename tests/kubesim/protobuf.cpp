#include "protobuf.h"

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

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

}  // namespace

Result<ProtobufEviction> DecodeEvictionProtobuf(std::string_view body) {
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
  if (unknown->kind != "Eviction" || unknown->api_version != "policy/v1") {
    return Status::InvalidArgument(
        fmt::format("the protobuf body holds {} {}, not a policy/v1 Eviction", unknown->api_version,
                    unknown->kind));
  }
  ProtobufEviction e;
  e.api_version = unknown->api_version;
  e.kind = unknown->kind;
  Status s = ForEachField(unknown->raw, "Eviction", [&](const Field& f) {
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

}  // namespace kubesim
