// See publish.h.
#include "core/publish.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE (glibc 2.28+)
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <random>

#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"

namespace nvfp4lm {
namespace {

// "dir/" names the same thing as "dir"; rename and the sibling names need the last component.
fs::path without_trailing_separator(const fs::path& path) {
  return path.has_filename() || !path.has_parent_path() ? path : path.parent_path();
}

fs::path parent_or_dot(const fs::path& path) { return path.has_parent_path() ? path.parent_path() : fs::path("."); }

constexpr std::string_view kPartialInfix = ".nvfp4lm-partial-";
constexpr std::string_view kReplacedInfix = ".nvfp4lm-replaced-";
constexpr size_t kTagDigits = 16;

// "<path><infix><pid>-<16 random hex digits>": a name no person picks, fresh at each call.
fs::path tagged_sibling(const fs::path& path, std::string_view infix) {
  static thread_local std::mt19937_64 random(std::random_device{}() ^
                                             (static_cast<uint64_t>(std::random_device{}()) << 32));
  const fs::path p = without_trailing_separator(path);
  return p.parent_path() / fmt::format("{}{}{}-{:016x}", p.filename().string(), infix, ::getpid(), random());
}

// The pid of a sibling named "<name>.nvfp4lm-partial-<pid>-<16 hex digits>" of the output `name`; nullopt when the
// name is not of that form.
std::optional<pid_t> partial_sibling_pid(std::string_view child, std::string_view name) {
  if (!child.starts_with(name)) return std::nullopt;
  std::string_view tail = child.substr(name.size());
  if (!tail.starts_with(kPartialInfix)) return std::nullopt;
  tail.remove_prefix(kPartialInfix.size());
  const size_t dash = tail.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 9) return std::nullopt;
  const std::string_view digits = tail.substr(0, dash), tag = tail.substr(dash + 1);
  if (digits.find_first_not_of("0123456789") != std::string_view::npos || tag.size() != kTagDigits ||
      tag.find_first_not_of("0123456789abcdef") != std::string_view::npos)
    return std::nullopt;
  return static_cast<pid_t>(std::stol(std::string(digits)));
}

std::optional<struct stat> lstat_path(const fs::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) return info;
  NVFP4LM_CHECK(errno == ENOENT || errno == ENOTDIR, "cannot inspect {}: {}", path.string(), std::strerror(errno));
  return std::nullopt;
}

const char* file_type_name(mode_t mode) {
  return S_ISREG(mode)    ? "a regular file"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISLNK(mode)  ? "a symbolic link"
         : S_ISFIFO(mode) ? "a FIFO (named pipe)"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "a special file";
}

// Why the directory `dir` is not one nvfp4lm could have written as a model or a LoRA adapter (empty, or config.json
// or adapter_config.json and nothing but regular files); empty when it is one.
std::string foreign_directory_reason(const fs::path& dir) {
  bool empty = true, has_config = false;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    empty = false;
    const std::optional<struct stat> entry = lstat_path(it->path());
    if (entry && !S_ISREG(entry->st_mode))
      return fmt::format("it holds {}, {}", it->path().filename().string(), file_type_name(entry->st_mode));
    has_config = has_config || it->path().filename() == "config.json" || it->path().filename() == "adapter_config.json";
  }
  if (ec) return fmt::format("it cannot be listed ({})", ec.message());
  return empty || has_config
             ? std::string()
             : std::string("it holds no config.json, so it is not a model (nor adapter_config.json: not an adapter)");
}

// The Error of an output that exists (checked before writing, or found by the publishing step).
[[noreturn]] void fail_exists(const fs::path& path, std::string_view what) {
  NVFP4LM_FAIL("{} {} already exists; choose another name or pass --overwrite to replace it", what, path.string());
}

// errno values of a file system (or kernel) that does not implement a renameat2 flag.
bool refuses_rename_flags(int error) { return error == EINVAL || error == ENOSYS || error == ENOTSUP; }

// Removes the replaced output, now at `old` (ours since it was checked and swapped out); failure only costs space.
void remove_replaced(const fs::path& old, OutputKind kind) {
  std::error_code ec;
  if (kind == OutputKind::Directory) {
    fs::remove_all(old, ec);
  } else {
    fs::remove(old, ec);
  }
  if (ec) log::warn("could not remove {}, the output it replaced: {}", old.string(), ec.message());
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// link(staged, final_path) then unlink(staged): 0 when done, EEXIST when final_path exists, -1 when the file system
// has no hard links.
int link_then_unlink(const fs::path& staged, const fs::path& final_path) {
  if (::link(staged.c_str(), final_path.c_str()) != 0) {
    const int error = errno;
    if (error == EEXIST) return EEXIST;
    if (error == EPERM || error == ENOTSUP || error == ENOSYS || error == EMLINK) return -1;
    NVFP4LM_FAIL("cannot link {} to {}: {}", staged.string(), final_path.string(), std::strerror(error));
  }
  ::unlink(staged.c_str());  // if this fails, the owner of `staged` removes the second name
  return 0;
}

// publish_new without the final fsync.
bool publish_absent(const fs::path& staged, const fs::path& final_path, OutputKind kind) {
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0) return true;
  const int error = errno;
  if (error == EEXIST) return false;
  NVFP4LM_CHECK(refuses_rename_flags(error), "cannot rename {} to {}: {}", staged.string(), final_path.string(),
                std::strerror(error));
  if (kind == OutputKind::File) {
    const int linked = link_then_unlink(staged, final_path);
    if (linked >= 0) return linked == 0;
  }
  // Neither renameat2 flags nor hard links (some network and FUSE file systems): a check, then rename. Not atomic:
  // an output created between the two is replaced when it is a file or an empty directory.
  if (lstat_path(final_path)) return false;
  if (::rename(staged.c_str(), final_path.c_str()) == 0) return true;
  const int rename_error = errno;
  if (rename_error == EEXIST || rename_error == ENOTEMPTY || rename_error == EISDIR || rename_error == ENOTDIR)
    return false;
  NVFP4LM_FAIL("cannot rename {} to {}: {}", staged.string(), final_path.string(), std::strerror(rename_error));
}

// publish with overwrite, once final_path was found to hold `existing` (checked replaceable).
void replace_existing(const fs::path& staged, const fs::path& final_path, OutputKind kind, std::string_view what,
                      const struct stat& existing) {
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
    // `staged` now names what was at final_path: removed only when it is what was checked.
    const std::optional<struct stat> old = lstat_path(staged);
    if (old && same_file(*old, existing)) return remove_replaced(staged, kind);
    const bool restored = ::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0;
    NVFP4LM_FAIL("{} {} was replaced by another process while this one was replacing it; {}", what, final_path.string(),
                 restored ? "it is left as that process wrote it"
                          : fmt::format("what that process wrote is now {}", staged.string()));
  }
  const int error = errno;
  NVFP4LM_CHECK(refuses_rename_flags(error), "cannot replace {} with {}: {}", final_path.string(), staged.string(),
                std::strerror(error));
  if (kind == OutputKind::File) {
    // rename() replaces a file atomically, and fails on a directory rather than removing it.
    NVFP4LM_CHECK(::rename(staged.c_str(), final_path.c_str()) == 0, "cannot replace {} with {}: {}",
                  final_path.string(), staged.string(), std::strerror(errno));
    return;
  }
  // No RENAME_EXCHANGE: the old directory moves aside under a fresh name, then the new one moves in; a crash in
  // between leaves the old one there, for the user (no later writer removes it: it is the user's old output).
  const fs::path aside = tagged_sibling(final_path, kReplacedInfix);
  NVFP4LM_CHECK(
      ::renameat2(AT_FDCWD, final_path.c_str(), AT_FDCWD, aside.c_str(), RENAME_NOREPLACE) == 0 ||
          (refuses_rename_flags(errno) && !lstat_path(aside) && ::rename(final_path.c_str(), aside.c_str()) == 0),
      "cannot move {} aside to replace it: {}", final_path.string(), std::strerror(errno));
  const std::optional<struct stat> moved = lstat_path(aside);
  if (!moved || !same_file(*moved, existing) || ::rename(staged.c_str(), final_path.c_str()) != 0) {
    const int saved = errno;
    const bool restored = ::renameat2(AT_FDCWD, aside.c_str(), AT_FDCWD, final_path.c_str(), RENAME_NOREPLACE) == 0 ||
                          (refuses_rename_flags(errno) && ::rename(aside.c_str(), final_path.c_str()) == 0);
    NVFP4LM_FAIL("cannot replace {} {}: {}{}", what, final_path.string(),
                 moved && same_file(*moved, existing) ? std::strerror(saved) : "it changed while being replaced",
                 restored ? "" : fmt::format("; what was there is now {}", aside.string()));
  }
  remove_replaced(aside, kind);
}

}  // namespace

void check_replaceable(const fs::path& path, std::string_view what, OutputKind kind, bool overwrite) {
  const fs::path target = without_trailing_separator(path);
  const std::optional<struct stat> existing = lstat_path(target);
  if (!existing) return;
  if (!overwrite) fail_exists(path, what);
  if (kind == OutputKind::File) {
    NVFP4LM_CHECK(S_ISREG(existing->st_mode),
                  "{} {} is {}; --overwrite replaces a regular file only: remove it yourself or choose another name",
                  what, path.string(), file_type_name(existing->st_mode));
    return;
  }
  NVFP4LM_CHECK(S_ISDIR(existing->st_mode),
                "{} {} is {}; --overwrite replaces a model directory only: remove it yourself or choose another name",
                what, path.string(), file_type_name(existing->st_mode));
  const std::string foreign = foreign_directory_reason(target);
  NVFP4LM_CHECK(
      foreign.empty(),
      "{} {} is a directory nvfp4lm did not write ({}); --overwrite replaces a model directory only (config.json and "
      "files, or a LoRA adapter's adapter_config.json and files, or empty): remove it yourself or choose another name",
      what, path.string(), foreign);
}

fs::path temporary_sibling(const fs::path& path) { return tagged_sibling(path, kPartialInfix); }

int create_temporary_file(const fs::path& path, fs::path& temporary, bool read_back) {
  for (int attempt = 0;; ++attempt) {
    temporary = temporary_sibling(path);
    const int fd =
        ::open(temporary.c_str(), (read_back ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) return fd;
    NVFP4LM_CHECK(errno == EEXIST && attempt < 8, "cannot create {}: {}", temporary.string(), std::strerror(errno));
  }
}

void remove_stale_temporaries(const fs::path& path) {
  const fs::path p = without_trailing_separator(path);
  const std::string name = p.filename().string();
  std::error_code ec;
  fs::directory_iterator it(parent_or_dot(p), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string child = it->path().filename().string();
    const std::optional<pid_t> pid = partial_sibling_pid(child, name);
    if (!pid || *pid == ::getpid() || *pid <= 0 || ::kill(*pid, 0) == 0 || errno != ESRCH)
      continue;  // not a temporary of ours, or its process is alive, or not ours to judge
    const std::optional<struct stat> entry = lstat_path(it->path());
    if (!entry || entry->st_uid != ::geteuid()) continue;
    std::error_code remove_ec;
    if (S_ISREG(entry->st_mode)) {
      fs::remove(it->path(), remove_ec);
    } else if (S_ISDIR(entry->st_mode)) {
      // Only a directory holding the marker that names it: what StagedDirectory made.
      std::string marker;
      try {
        marker = read_text_file(it->path() / kPartialMarkerFileName);
      } catch (const Error&) {
        log::warn("left {}: named like a temporary of this program but without its marker", it->path().string());
        continue;
      }
      if (marker != child) {
        log::warn("left {}: its marker names {}", it->path().string(), marker.substr(0, 200));
        continue;
      }
      fs::remove_all(it->path(), remove_ec);
    } else {
      continue;
    }
    if (!remove_ec) log::info("removed {}, left by an interrupted write of process {}", it->path().string(), *pid);
  }
}

bool link_into_place(const fs::path& staged, const fs::path& final_path, std::string_view what) {
  const int linked = link_then_unlink(staged, final_path);
  if (linked == EEXIST) fail_exists(final_path, what);
  return linked == 0;
}

bool publish_new(const fs::path& staged, const fs::path& final_path, OutputKind kind) {
  const fs::path target = without_trailing_separator(final_path);
  if (!publish_absent(staged, target, kind)) return false;
  fsync_path(parent_or_dot(target));
  return true;
}

void publish(const fs::path& staged, const fs::path& path, OutputKind kind, bool overwrite, std::string_view what) {
  const fs::path final_path = without_trailing_separator(path);
  // With overwrite, what is there is looked at, then swapped out; if it vanishes or appears in between, look again.
  bool done = false;
  for (int attempt = 0; !done && attempt < 3; ++attempt) {
    const std::optional<struct stat> existing = lstat_path(final_path);
    if (!existing) {
      done = publish_absent(staged, final_path, kind);
      if (!done && !overwrite) fail_exists(path, what);
      continue;
    }
    if (!overwrite) fail_exists(path, what);
    check_replaceable(final_path, what, kind, /*overwrite=*/true);
    replace_existing(staged, final_path, kind, what, *existing);
    done = true;
  }
  NVFP4LM_CHECK(done, "{} {} kept appearing and disappearing while this process wrote it; nothing was replaced", what,
                path.string());
  fsync_path(parent_or_dot(final_path));
}

void write_file_atomic(const fs::path& path, std::string_view contents, bool overwrite) {
  remove_stale_temporaries(path);
  fs::path tmp;
  int fd = create_temporary_file(path, tmp);
  try {
    size_t done = 0;
    while (done < contents.size()) {
      const ssize_t put = ::write(fd, contents.data() + done, contents.size() - done);
      if (put < 0 && errno == EINTR) continue;
      NVFP4LM_CHECK(put > 0, "writing {} failed: {}", path.string(),
                    put < 0 ? std::strerror(errno) : "no progress (disk full?)");
      done += static_cast<size_t>(put);
    }
    NVFP4LM_CHECK(::fsync(fd) == 0, "writing {} failed: fsync: {}", path.string(), std::strerror(errno));
    const int closed = ::close(fd);
    fd = -1;
    NVFP4LM_CHECK(closed == 0, "writing {} failed: {}", path.string(), std::strerror(errno));
    publish(tmp, path, OutputKind::File, overwrite, "output");
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

StagedDirectory::StagedDirectory(fs::path final_path) : final_path_(without_trailing_separator(final_path)) {
  remove_stale_temporaries(final_path_);
  std::error_code ec;
  if (final_path_.has_parent_path()) {
    fs::create_directories(final_path_.parent_path(), ec);
    NVFP4LM_CHECK(!ec, "cannot create {}: {}", final_path_.parent_path().string(), ec.message());
  }
  for (int attempt = 0;; ++attempt) {
    path_ = temporary_sibling(final_path_);
    if (::mkdir(path_.c_str(), 0755) == 0) break;
    NVFP4LM_CHECK(errno == EEXIST && attempt < 8, "cannot create {}: {}", path_.string(), std::strerror(errno));
  }
  // The marker needs no temporary or fsync: lost in a crash, the directory is only left behind (never removed).
  const std::string name = path_.filename().string();
  const int fd = ::open((path_ / kPartialMarkerFileName).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool written = fd >= 0 && ::write(fd, name.data(), name.size()) == static_cast<ssize_t>(name.size());
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written) {
    fs::remove_all(path_, ec);
    NVFP4LM_FAIL("cannot write {}: {}", (path_ / kPartialMarkerFileName).string(), std::strerror(error));
  }
}

StagedDirectory::~StagedDirectory() {
  if (published_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void StagedDirectory::publish(bool overwrite, std::string_view what) {
  // The output must not carry the marker. Should this process die between here and the rename, the directory stays
  // (unmarked, so no later writer removes it): a leak, never a loss.
  NVFP4LM_CHECK(::unlink((path_ / kPartialMarkerFileName).c_str()) == 0 || errno == ENOENT, "cannot remove {}: {}",
                (path_ / kPartialMarkerFileName).string(), std::strerror(errno));
  nvfp4lm::publish(path_, final_path_, OutputKind::Directory, overwrite, what);
  published_ = true;
}

}  // namespace nvfp4lm
