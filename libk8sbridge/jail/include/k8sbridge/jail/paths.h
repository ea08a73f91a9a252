// Safe path handling for the jail: the jail root's ownership and mode, and path
// resolution that can never leave the jail.
//
// A mount target is resolved with openat2(RESOLVE_BENEATH) from a descriptor of
// the jail root, and the mount is then made onto /proc/self/fd/N. A symlink that
// points out of the jail (absolute, or through "..") makes the resolution fail
// instead of redirecting a root-owned bind onto the host, and nothing can swap a
// path component between the check and the mount.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "k8sbridge/status.h"

namespace k8sbridge::jail {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // "/proc/self/fd/N": the path mount(2) takes for a resolved descriptor.
  std::string ProcPath() const;

 private:
  int fd_ = -1;
};

// The jail root must be an existing directory owned by `owner` (root in
// production) and writable by nobody else: otherwise a user could plant files
// that every job on every node would trust. The same holds for its parents
// (CheckTrustedParents) and for its etc/ and usr/ when it has them: a user who
// can rename any of them can swap the whole tree.
Status CheckJailRoot(const std::string& jail, uid_t owner = 0);

// Every directory above `path` (absolute), from / down, must be a real
// directory (not a symlink), owned by root or `owner`, and not writable by its
// group or others unless it is sticky like /tmp: there only the owner of an
// entry can rename it, and the entry below is checked too. `what` names the
// path in messages ("spank_jail option tmp_base").
Status CheckTrustedParents(const std::string& path, uid_t owner, std::string_view what);

// `path` itself: an existing directory, not a symlink, owned by `owner` and
// writable by nobody else.
Status CheckTrustedDir(const std::string& path, uid_t owner, std::string_view what);

// openat2(2) (glibc 2.36 has no wrapper), retried on EAGAIN.
int OpenAt2(int dirfd, const char* path, uint64_t flags, uint64_t resolve);

// Opens a host path (absolute) as O_PATH without following any symlink or
// /proc magic link on the way (openat2 RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS):
// a bind source under a directory a user can write cannot be swapped for a
// link to the pod's root or another job's /tmp. `what` names it in messages.
Result<UniqueFd> OpenHostPath(const std::string& path, std::string_view what);

// Binds the tree at `source_fd` onto `target_fd` (both O_PATH is fine): a
// detached copy is made with open_tree(OPEN_TREE_CLONE), made read-only with
// mount_setattr(MOUNT_ATTR_RDONLY) before it is attached when `read_only`, and
// attached with move_mount. `recursive` takes the submounts along, and then
// read-only applies to every one of them too (AT_RECURSIVE). The error is
// the failing call and its errno; the caller adds what was bound where.
Status BindTree(int source_fd, int target_fd, bool recursive, bool read_only);

// Opens the jail root (O_PATH, following symlinks in the host path to it).
Result<UniqueFd> OpenJailRoot(const std::string& jail);

// Resolves `path` (absolute inside the jail, or relative to it) beneath the jail
// root descriptor and returns an O_PATH descriptor of it. Fails with
// PermissionDenied when the path resolves through a symlink out of the jail,
// NotFound when it does not exist. `jail_name` only feeds messages.
Result<UniqueFd> OpenBeneath(int jail_fd, std::string_view path, std::string_view jail_name);

// Like OpenBeneath, but creates missing directories (mode 0755, owned by the
// caller) on the way; the last component is made a directory when
// `last_is_file` is false, an empty file otherwise. Used for mount points the
// jail does not have yet. Concurrent callers are safe (EEXIST is success).
Result<UniqueFd> MakePathBeneath(int jail_fd, std::string_view path, bool last_is_file,
                                 std::string_view jail_name);

// Reads a whole (small) file.
Result<std::string> ReadFile(const std::string& path);

}  // namespace k8sbridge::jail
