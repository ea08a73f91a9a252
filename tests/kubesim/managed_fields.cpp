#include "managed_fields.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "patch.h"

namespace kubesim {

namespace {

using Kind = PathElement::Kind;

// stripmeta.go: fields the server sets are nobody's.
bool ServerOwned(const FieldPath& parent, const std::string& name) {
  if (parent.empty())
    return name == "apiVersion" || name == "kind";
  if (parent.size() != 1 || parent[0].text != "metadata")
    return false;
  static const std::set<std::string> meta = {
      "name",       "namespace",     "uid",      "resourceVersion",   "creationTimestamp",
      "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"};
  return meta.count(name) != 0;
}

void WalkObject(const rapidjson::Value& object, FieldPath& path, FieldSet& out);

void WalkList(const rapidjson::Value& list, const std::string& field, FieldPath& path,
              FieldSet& out) {
  std::string key = MergeKeyOf(field);
  bool keyed = !key.empty() && !list.Empty();
  for (const auto& e : list.GetArray())
    keyed = keyed && e.IsObject() && e.HasMember(key.c_str());
  if (keyed) {
    for (const auto& e : list.GetArray()) {
      path.push_back({Kind::kKey, fmt::format("{{\"{}\":{}}}", key, ToJson(e[key.c_str()]))});
      out.insert(path);
      WalkObject(e, path, out);
      path.pop_back();
    }
    return;
  }
  if (IsSetList(field) && !list.Empty()) {
    for (const auto& e : list.GetArray()) {
      path.push_back({Kind::kValue, ToJson(e)});
      out.insert(path);
      path.pop_back();
    }
    return;
  }
  out.insert(path);  // an atomic list is one field
}

void WalkObject(const rapidjson::Value& object, FieldPath& path, FieldSet& out) {
  for (const auto& m : object.GetObject()) {
    std::string name(m.name.GetString(), m.name.GetStringLength());
    if (ServerOwned(path, name))
      continue;
    path.push_back({Kind::kField, name});
    if (m.value.IsObject() && !m.value.ObjectEmpty())
      WalkObject(m.value, path, out);
    else if (m.value.IsArray())
      WalkList(m.value, name, path, out);
    else
      out.insert(path);
    path.pop_back();
  }
}

// The one member of a key element's JSON ({"name":"c"}).
std::pair<std::string, std::unique_ptr<rapidjson::Document>> KeyOf(const PathElement& e) {
  auto parsed = ParseJson(e.text);
  if (!parsed.ok() || !(*parsed)->IsObject() || (*parsed)->MemberCount() != 1)
    return {"", nullptr};
  std::string name = (*parsed)->MemberBegin()->name.GetString();
  return {name, std::move(*parsed)};
}

rapidjson::Value* Step(rapidjson::Value& cur, const PathElement& e) {
  if (e.kind == Kind::kField) {
    if (!cur.IsObject())
      return nullptr;
    auto it = cur.FindMember(e.text.c_str());
    return it == cur.MemberEnd() ? nullptr : &it->value;
  }
  if (!cur.IsArray())
    return nullptr;
  if (e.kind == Kind::kIndex) {
    size_t i = std::strtoul(e.text.c_str(), nullptr, 10);
    return i < cur.Size() ? &cur[static_cast<rapidjson::SizeType>(i)] : nullptr;
  }
  auto [key, doc] = e.kind == Kind::kKey ? KeyOf(e) : std::make_pair(std::string(), nullptr);
  for (auto& item : cur.GetArray()) {
    if (e.kind == Kind::kValue && ToJson(item) == e.text)
      return &item;
    if (e.kind == Kind::kKey && doc != nullptr && item.IsObject() && item.HasMember(key.c_str()) &&
        item[key.c_str()] == (*doc)[key.c_str()])
      return &item;
  }
  return nullptr;
}

rapidjson::Value* ValueAt(rapidjson::Value& root, const FieldPath& path, size_t length) {
  rapidjson::Value* cur = &root;
  for (size_t i = 0; i < length && cur != nullptr; ++i)
    cur = Step(*cur, path[i]);
  return cur;
}

const rapidjson::Value* ValueAt(const rapidjson::Value& root, const FieldPath& path) {
  return ValueAt(const_cast<rapidjson::Value&>(root), path, path.size());
}

void RemoveAt(rapidjson::Value& root, const FieldPath& path) {
  rapidjson::Value* parent = ValueAt(root, path, path.size() - 1);
  if (parent == nullptr)
    return;
  const PathElement& last = path.back();
  if (last.kind == Kind::kField) {
    if (parent->IsObject())
      parent->RemoveMember(last.text.c_str());
    return;
  }
  rapidjson::Value* item = Step(*parent, last);
  if (item != nullptr)
    parent->Erase(item);
}

struct Entry {
  std::string manager;
  std::string operation;
  std::string api_version;
  std::string time;
  std::string subresource;
  FieldSet fields;
};

std::vector<Entry> ReadEntries(const rapidjson::Value& object) {
  std::vector<Entry> entries;
  const rapidjson::Value* list = Find(object, "metadata.managedFields");
  if (list == nullptr || !list->IsArray())
    return entries;
  for (const auto& e : list->GetArray()) {
    Entry entry{GetString(e, "manager"), GetString(e, "operation"),   GetString(e, "apiVersion"),
                GetString(e, "time"),    GetString(e, "subresource"), {}};
    const rapidjson::Value* fields = Find(e, "fieldsV1");
    if (fields != nullptr)
      entry.fields = FieldsV1ToSet(*fields);
    if (!entry.manager.empty())
      entries.push_back(std::move(entry));
  }
  return entries;
}

void WriteEntries(rapidjson::Document& object, const std::vector<Entry>& entries) {
  auto& a = object.GetAllocator();
  rapidjson::Value list(rapidjson::kArrayType);
  for (const Entry& e : entries) {
    rapidjson::Value v(rapidjson::kObjectType);
    v.AddMember("manager", rapidjson::Value(e.manager.c_str(), a), a);
    v.AddMember("operation", rapidjson::Value(e.operation.c_str(), a), a);
    v.AddMember("apiVersion", rapidjson::Value(e.api_version.c_str(), a), a);
    v.AddMember("time", rapidjson::Value(e.time.c_str(), a), a);
    v.AddMember("fieldsType", "FieldsV1", a);
    v.AddMember("fieldsV1", SetToFieldsV1(e.fields, a), a);
    if (!e.subresource.empty())
      v.AddMember("subresource", rapidjson::Value(e.subresource.c_str(), a), a);
    list.PushBack(v, a);
  }
  if (entries.empty()) {
    if (object.HasMember("metadata") && object["metadata"].IsObject())
      object["metadata"].RemoveMember("managedFields");
    return;
  }
  SetMember(object, "metadata.managedFields", std::move(list));
}

Entry& EntryFor(std::vector<Entry>& entries, const WriteContext& context, const char* operation) {
  for (Entry& e : entries) {
    if (e.manager == context.manager && e.operation == operation &&
        e.subresource == context.subresource)
      return e;
  }
  entries.push_back(
      Entry{context.manager, operation, context.api_version, "", context.subresource, {}});
  return entries.back();
}

bool HasPrefix(const FieldPath& path, const FieldPath& prefix) {
  return path.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
}

// conflict.go's printManager.
std::string PrintManager(const Entry& e) {
  std::string out = fmt::format("\"{}\"", e.manager);
  if (!e.subresource.empty())
    out += fmt::format(" with subresource \"{}\"", e.subresource);
  if (e.operation == "Update")
    out += " using " + e.api_version;
  return out;
}

// conflict.go's getConflictMessage.
std::string ConflictMessage(const std::vector<std::pair<const Entry*, FieldPath>>& conflicts) {
  if (conflicts.size() == 1) {
    return fmt::format("Apply failed with 1 conflict: conflict with {}: {}",
                       PrintManager(*conflicts[0].first), PathString(conflicts[0].second));
  }
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> by_manager;
  std::map<std::pair<std::string, std::string>, const Entry*> entries;
  for (const auto& [entry, path] : conflicts) {
    auto id = std::make_pair(entry->manager, entry->operation + entry->subresource);
    by_manager[id].push_back(PathString(path));
    entries[id] = entry;
  }
  std::string lines;
  for (const auto& [id, paths] : by_manager) {
    lines +=
        fmt::format("{}conflicts with {}:", lines.empty() ? "" : "\n", PrintManager(*entries[id]));
    for (const auto& p : paths)
      lines += "\n- " + p;
  }
  return fmt::format("Apply failed with {} conflicts: {}", conflicts.size(), lines);
}

void DropEmpty(std::vector<Entry>& entries, const Entry* keep) {
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const Entry& e) { return &e != keep && e.fields.empty(); }),
                entries.end());
}

}  // namespace

std::string PathString(const FieldPath& path) {
  std::string out;
  for (const PathElement& e : path) {
    switch (e.kind) {
      case Kind::kField:
        out += "." + e.text;
        break;
      case Kind::kKey: {
        auto [name, doc] = KeyOf(e);
        out += doc == nullptr ? "[" + e.text + "]"
                              : fmt::format("[{}={}]", name, ToJson((*doc)[name.c_str()]));
        break;
      }
      case Kind::kValue:
        out += "[=" + e.text + "]";
        break;
      case Kind::kIndex:
        out += "[" + e.text + "]";
        break;
    }
  }
  return out;
}

FieldSet FieldsOf(const rapidjson::Value& object) {
  FieldSet out;
  FieldPath path;
  if (object.IsObject())
    WalkObject(object, path, out);
  return out;
}

namespace {

void DecodeFields(const rapidjson::Value& node, FieldPath& path, FieldSet& out) {
  if (!node.IsObject())
    return;
  for (const auto& m : node.GetObject()) {
    std::string key(m.name.GetString(), m.name.GetStringLength());
    if (key == ".") {
      out.insert(path);
      continue;
    }
    if (key.size() < 2 || key[1] != ':')
      continue;
    static const std::map<char, Kind> kinds = {
        {'f', Kind::kField}, {'k', Kind::kKey}, {'v', Kind::kValue}, {'i', Kind::kIndex}};
    auto kind = kinds.find(key[0]);
    if (kind == kinds.end())
      continue;
    path.push_back({kind->second, key.substr(2)});
    if (m.value.IsObject() && m.value.ObjectEmpty())
      out.insert(path);
    else
      DecodeFields(m.value, path, out);
    path.pop_back();
  }
}

struct Node {
  bool self = false;
  std::map<PathElement, Node> children;
};

rapidjson::Value Encode(const Node& node, rapidjson::Document::AllocatorType& a) {
  rapidjson::Value v(rapidjson::kObjectType);
  if (node.self && !node.children.empty())
    v.AddMember(".", rapidjson::Value(rapidjson::kObjectType), a);
  static const char prefixes[] = {'f', 'k', 'v', 'i'};
  for (const auto& [element, child] : node.children) {
    std::string key = std::string(1, prefixes[static_cast<int>(element.kind)]) + ":" + element.text;
    v.AddMember(rapidjson::Value(key.c_str(), a), Encode(child, a), a);
  }
  return v;
}

}  // namespace

FieldSet FieldsV1ToSet(const rapidjson::Value& fields_v1) {
  FieldSet out;
  FieldPath path;
  DecodeFields(fields_v1, path, out);
  return out;
}

rapidjson::Value SetToFieldsV1(const FieldSet& set, rapidjson::Document::AllocatorType& alloc) {
  Node root;
  for (const FieldPath& path : set) {
    Node* cur = &root;
    for (const PathElement& e : path)
      cur = &cur->children[e];
    cur->self = true;
  }
  return Encode(root, alloc);
}

void TrackUpdate(const rapidjson::Value* before, rapidjson::Document& after,
                 const WriteContext& context) {
  if (context.manager.empty())
    return;
  const rapidjson::Value* old_list = before ? Find(*before, "metadata.managedFields") : nullptr;
  const rapidjson::Value* new_list = Find(after, "metadata.managedFields");
  if (new_list != nullptr && (old_list == nullptr || *new_list != *old_list))
    return;  // the client wrote managedFields itself: they stay as sent
  FieldSet old_fields = before ? FieldsOf(*before) : FieldSet{};
  FieldSet changed;
  for (const FieldPath& p : FieldsOf(after)) {
    const rapidjson::Value* was = before ? ValueAt(*before, p) : nullptr;
    if (was == nullptr || (p.back().kind != Kind::kKey && *was != *ValueAt(after, p)))
      changed.insert(p);
    old_fields.erase(p);
  }
  const FieldSet& removed = old_fields;  // what remains was in `before` only
  if (changed.empty() && removed.empty())
    return;
  std::vector<Entry> entries = before ? ReadEntries(*before) : std::vector<Entry>{};
  Entry& mine = EntryFor(entries, context, "Update");
  for (Entry& e : entries) {
    for (const FieldPath& p : removed)
      e.fields.erase(p);
    if (&e == &mine)
      continue;
    for (const FieldPath& p : changed)
      e.fields.erase(p);
  }
  mine.fields.insert(changed.begin(), changed.end());
  mine.time = context.now;
  mine.api_version = context.api_version;
  DropEmpty(entries, nullptr);
  WriteEntries(after, entries);
}

Status ServerSideApply(rapidjson::Document& live, const rapidjson::Value& config, bool force,
                       const WriteContext& context, std::vector<ApplyConflict>* causes) {
  std::vector<Entry> entries = ReadEntries(live);
  FieldSet applied = FieldsOf(config);
  rapidjson::Document merged;
  merged.CopyFrom(live, merged.GetAllocator());
  if (Status s = ApplyStrategicMergePatch(merged, config, merged.GetAllocator()); !s.ok())
    return s;
  Entry& mine = EntryFor(entries, context, "Apply");
  std::vector<std::pair<const Entry*, FieldPath>> conflicts;
  for (const Entry& e : entries) {
    if (&e == &mine)
      continue;
    for (const FieldPath& p : e.fields) {
      if (p.empty() || p.back().kind == Kind::kKey || applied.count(p) == 0)
        continue;
      const rapidjson::Value* was = ValueAt(live, p);
      const rapidjson::Value* will = ValueAt(merged, p);
      if (was != nullptr && will != nullptr && *was != *will)
        conflicts.emplace_back(&e, p);
    }
  }
  if (!conflicts.empty() && !force) {
    for (const auto& [entry, path] : conflicts) {
      if (causes != nullptr)
        causes->push_back({"conflict with " + PrintManager(*entry), PathString(path)});
    }
    return Status::Conflict(ConflictMessage(conflicts));
  }
  for (const auto& [entry, path] : conflicts)
    const_cast<Entry*>(entry)->fields.erase(path);
  // Fields this manager applied before and no longer applies go, unless others own them.
  for (auto it = mine.fields.rbegin(); it != mine.fields.rend(); ++it) {
    if (applied.count(*it) != 0)
      continue;
    bool shared = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
      return &e != &mine && std::any_of(e.fields.begin(), e.fields.end(),
                                        [&](const FieldPath& p) { return HasPrefix(p, *it); });
    });
    if (!shared)
      RemoveAt(merged, *it);
  }
  mine.fields = applied;
  mine.time = context.now;
  mine.api_version = context.api_version;
  DropEmpty(entries, &mine);
  WriteEntries(merged, entries);
  live.Swap(merged);
  return Status::Ok();
}

}  // namespace kubesim
