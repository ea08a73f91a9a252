#include "oci_image.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <rapidjson/document.h>

namespace kubesim::oci {

namespace fs = std::filesystem;

namespace {

bool IsLowerComponentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
         c == '/';
}

bool IsHex(const std::string& s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Status InvalidFormat(const std::string& image, const std::string& why) {
  return Status::InvalidArgument(
      fmt::format("invalid reference format: {} (image \"{}\")", why, image));
}

std::vector<std::string> Strings(const rapidjson::Value& object, const char* key) {
  std::vector<std::string> out;
  auto it = object.FindMember(key);
  if (it == object.MemberEnd() || !it->value.IsArray())
    return out;
  for (const auto& v : it->value.GetArray()) {
    if (v.IsString())
      out.emplace_back(v.GetString());
  }
  return out;
}

std::string String(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it != object.MemberEnd() && it->value.IsString() ? it->value.GetString() : "";
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::NotFound(fmt::format("reading {}: {}", path.string(), std::strerror(errno)));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<rapidjson::Document> ReadJson(const fs::path& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok())
    return text.status();
  rapidjson::Document doc;
  if (doc.Parse(text->c_str()).HasParseError() || !doc.IsObject())
    return Status::InvalidArgument(fmt::format("{} is not a JSON object", path.string()));
  return doc;
}

fs::path BlobPath(const std::string& layout, const std::string& digest) {
  const size_t colon = digest.find(':');
  return fs::path(layout) / "blobs" / digest.substr(0, colon) / digest.substr(colon + 1);
}

// The repository names of the store's layouts: relative path, less a last "oci".
std::vector<std::pair<std::string, std::string>> Layouts(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;  // (normalized repository, layout)
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() > 6) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_directory(ec) || !fs::exists(it->path() / "oci-layout", ec) ||
        !fs::exists(it->path() / "index.json", ec))
      continue;
    it.disable_recursion_pending();
    fs::path rel = fs::relative(it->path(), dir, ec);
    if (rel.filename() == "oci")
      rel = rel.parent_path();
    if (rel.empty())
      continue;
    Result<ImageReference> ref = NormalizeReference(rel.string());
    if (ref.ok())
      out.emplace_back(ref->repository, it->path().string());
  }
  return out;
}

// The manifest of index.json that `ref` names: (digest, a tag naming it).
Result<std::pair<std::string, std::string>> FindManifest(const std::string& layout,
                                                         const ImageReference& ref) {
  Result<rapidjson::Document> index = ReadJson(fs::path(layout) / "index.json");
  if (!index.ok())
    return index.status();
  auto manifests = index->FindMember("manifests");
  if (manifests == index->MemberEnd() || !manifests->value.IsArray())
    return Status::InvalidArgument(fmt::format("{}/index.json has no manifests", layout));
  std::string digest_tag;  // a tag of the digest asked for (umoci unpacks by tag)
  bool digest_seen = false;
  for (const auto& m : manifests->value.GetArray()) {
    const std::string digest = String(m, "digest");
    std::string name;
    if (auto a = m.FindMember("annotations"); a != m.MemberEnd() && a->value.IsObject())
      name = String(a->value, "org.opencontainers.image.ref.name");
    if (!ref.digest.empty()) {
      if (digest == ref.digest) {
        digest_seen = true;
        if (!name.empty() && (ref.tag.empty() || name == ref.tag || digest_tag.empty()))
          digest_tag = name;
      }
      continue;
    }
    if (name == ref.tag)
      return std::make_pair(digest, name);
  }
  if (digest_seen && !digest_tag.empty())
    return std::make_pair(ref.digest, digest_tag);
  return Status::NotFound(fmt::format("{}: not found", ref.String()));
}

}  // namespace

std::string ImageReference::String() const {
  std::string out = repository;
  if (!tag.empty())
    out += ":" + tag;
  if (!digest.empty())
    out += "@" + digest;
  return out;
}

Result<ImageReference> NormalizeReference(const std::string& image) {
  if (image.empty())
    return InvalidFormat(image, "repository name must have at least one component");
  ImageReference ref;
  std::string name = image;
  if (const size_t at = name.find('@'); at != std::string::npos) {
    ref.digest = name.substr(at + 1);
    name = name.substr(0, at);
    if (ref.digest.rfind("sha256:", 0) != 0 || ref.digest.size() != 7 + 64 ||
        !IsHex(ref.digest.substr(7)))
      return InvalidFormat(image, "the digest must be sha256: and 64 lowercase hex digits");
  }
  const size_t slash = name.rfind('/');
  if (const size_t colon = name.rfind(':');
      colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    ref.tag = name.substr(colon + 1);
    name = name.substr(0, colon);
    if (ref.tag.empty() || ref.tag.size() > 128)
      return InvalidFormat(image, "a tag has 1 to 128 characters");
  }
  if (name.size() == 64 && IsHex(name))
    return InvalidFormat(image, "cannot specify 64-byte hexadecimal strings");
  std::string domain = "docker.io", path = name;
  const size_t first = name.find('/');
  if (first != std::string::npos) {
    const std::string head = name.substr(0, first);
    const bool lower = std::none_of(head.begin(), head.end(), ::isupper);
    if (head.find_first_of(".:") != std::string::npos || head == "localhost" || !lower) {
      domain = head == "index.docker.io" ? "docker.io" : head;
      path = name.substr(first + 1);
    }
  }
  if (domain == "docker.io" && path.find('/') == std::string::npos)
    path = "library/" + path;
  if (path.empty() || path.front() == '/' || path.back() == '/' ||
      !std::all_of(path.begin(), path.end(), IsLowerComponentChar))
    return InvalidFormat(image, fmt::format("repository name ({}) must be lowercase", path));
  ref.repository = domain + "/" + path;
  if (ref.tag.empty() && ref.digest.empty())
    ref.tag = "latest";
  return ref;
}

Result<ImageConfig> ParseImageConfig(const std::string& json) {
  rapidjson::Document doc;
  if (doc.Parse(json.c_str()).HasParseError() || !doc.IsObject())
    return Status::InvalidArgument("the image configuration is not a JSON object");
  ImageConfig config;
  auto c = doc.FindMember("config");
  if (c == doc.MemberEnd() || !c->value.IsObject())
    return config;  // an image without a config: nothing to run by default
  config.entrypoint = Strings(c->value, "Entrypoint");
  config.cmd = Strings(c->value, "Cmd");
  config.env = Strings(c->value, "Env");
  config.working_dir = String(c->value, "WorkingDir");
  config.user = String(c->value, "User");
  config.stop_signal = String(c->value, "StopSignal");
  return config;
}

Result<StoredImage> ImageStore::Resolve(const ImageReference& ref) const {
  for (const auto& [repository, layout] : Layouts(dir_)) {
    if (repository != ref.repository)
      continue;
    Result<std::pair<std::string, std::string>> found = FindManifest(layout, ref);
    if (!found.ok())
      return found.status();
    StoredImage image;
    image.layout = layout;
    image.manifest_digest = found->first;
    image.tag = found->second;
    image.repository = repository;
    Result<rapidjson::Document> manifest = ReadJson(BlobPath(layout, image.manifest_digest));
    if (!manifest.ok())
      return manifest.status();
    auto config = manifest->FindMember("config");
    if (config == manifest->MemberEnd() || !config->value.IsObject())
      return Status::InvalidArgument(fmt::format("{}: manifest {} is no image manifest (an index?)",
                                                 layout, image.manifest_digest));
    Result<std::string> blob = ReadFile(BlobPath(layout, String(config->value, "digest")));
    if (!blob.ok())
      return blob.status();
    Result<ImageConfig> parsed = ParseImageConfig(*blob);
    if (!parsed.ok())
      return parsed.status().WithContext(layout);
    image.config = *parsed;
    return image;
  }
  return Status::NotFound(fmt::format("{}: not found", ref.String()));
}

Result<std::string> UnpackImage(const StoredImage& image, const std::string& cache_dir) {
  const std::string hex = image.manifest_digest.substr(image.manifest_digest.find(':') + 1);
  const fs::path bundle = fs::path(cache_dir) / hex;
  std::error_code ec;
  if (fs::exists(bundle / "rootfs", ec))
    return (bundle / "rootfs").string();
  fs::create_directories(cache_dir, ec);
  const fs::path partial = fs::path(cache_dir) / (hex + ".partial");
  fs::remove_all(partial, ec);
  Result<std::string> out =
      RunTool({"umoci", "unpack", "--image", image.layout + ":" + image.tag, partial.string()});
  if (!out.ok()) {
    fs::remove_all(partial, ec);
    return out.status().WithContext(fmt::format("unpacking {}", image.manifest_digest));
  }
  fs::rename(partial, bundle, ec);
  if (ec)
    return Status::IoError(fmt::format("renaming {}: {}", partial.string(), ec.message()));
  return (bundle / "rootfs").string();
}

std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream s(line);
    std::string field, point;
    for (int i = 0; i < 5 && s >> field; ++i)
      point = field;
    if (point == dir || point.rfind(dir + "/", 0) == 0)
      out.push_back(point);
  }
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

Result<std::string> RunTool(const std::vector<std::string>& argv) {
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (std::string& a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return Status::IoError(fmt::format("pipe: {}", std::strerror(errno)));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: kubesim is multi-threaded.
    dup2(null_fd, 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    close_range(3, ~0U, 0);
    execvp(cargs[0], cargs.data());
    _exit(127);
  }
  close(out[1]);
  if (null_fd >= 0)
    close(null_fd);
  if (pid < 0) {
    close(out[0]);
    return Status::IoError(fmt::format("fork: {}", std::strerror(errno)));
  }
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0)
      output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    while (!output.empty() && output.back() == '\n')
      output.pop_back();
    return Status::Internal(fmt::format("{} failed ({}): {}", argv[0],
                                        WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws),
                                        output));
  }
  return output;
}

}  // namespace kubesim::oci
