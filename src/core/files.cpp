#include "core/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.h"
#include "core/logging.h"
#include "core/publish.h"

namespace nvfp4lm {

fs::path real_path(const fs::path& path) {
  std::error_code ec;
  fs::path result = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::absolute(path).lexically_normal() : result;
}

bool is_within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

namespace {

// `target`: real_path(output).
void check_inputs(const fs::path& output, const fs::path& target, std::string_view what,
                  const std::vector<GuardedInput>& inputs, bool overwrite) {
  for (const GuardedInput& input : inputs) {
    if (input.path.empty()) continue;
    const fs::path read = real_path(input.path);
    if (is_within(read, target)) {
      NVFP4LM_FAIL("refusing to write {} {}: it {} {} {}, which this command reads{}; choose another path", what,
                   output.string(), read == target ? "is" : "contains", input.what, input.path.string(),
                   overwrite ? " (--overwrite does not change that)" : "");
    }
    NVFP4LM_CHECK(input.may_hold_outputs || !is_within(target, read),
                  "refusing to write {} {}: it lies inside {} {}, which this command reads; choose a path outside it",
                  what, output.string(), input.what, input.path.string());
  }
}

void check_writable(const fs::path& output, const fs::path& target, std::string_view what) {
  std::error_code ec;
  // Writable now, not only after hours of training: the nearest existing directory above the output must take a
  // new entry (a read-only file system, a directory without write permission).
  fs::path existing = target.parent_path();
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.root_path())
    existing = existing.parent_path();
  if (existing.empty()) return;
  // Creating a file is the only test that sees everything (a read-only mount, permissions, ACLs, a file system
  // like /proc that takes no new files even from root); the probe is removed at once.
  // O_EXCL on a fresh name: the probe is never a file someone else has.
  fs::path probe;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    probe = temporary_sibling(existing / ".nvfp4lm-write-test");
    fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    NVFP4LM_FAIL("cannot write {} {}: {} is not writable ({}); choose a writable location", what, output.string(),
                 existing.string(), std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

void guard_output(const fs::path& output, std::string_view what, const std::vector<GuardedInput>& inputs,
                  bool overwrite, OutputKind kind) {
  NVFP4LM_CHECK(!output.empty(), "{} is empty: name the file or directory to write", what);
  const fs::path target = real_path(output);
  check_inputs(output, target, what, inputs, overwrite);
  check_replaceable(output, what, kind, overwrite);
  check_writable(output, target, what);
}

void guard_output_location(const fs::path& output, std::string_view what, const std::vector<GuardedInput>& inputs) {
  NVFP4LM_CHECK(!output.empty(), "{} is empty: name the file or directory to write", what);
  const fs::path target = real_path(output);
  check_inputs(output, target, what, inputs, /*overwrite=*/false);
  check_writable(output, target, what);
}

DirectoryLock::DirectoryLock(const fs::path& dir) : dir_(dir) {
  std::error_code ec;
  created_ = fs::create_directories(dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create the directory {}: {}", dir.string(), ec.message());
  const fs::path lock_path = dir / kDirectoryLockFileName;
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  lock_file_created_ = fd_ >= 0;
  if (fd_ < 0 && errno == EEXIST) fd_ = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  NVFP4LM_CHECK(fd_ >= 0, "cannot create the lock file {}: {}", lock_path.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    char text[32] = {};
    const ssize_t got = ::pread(fd_, text, sizeof text - 1, 0);
    ::close(fd_);
    fd_ = -1;
    NVFP4LM_CHECK(saved != EWOULDBLOCK,
                  "{} is in use by pid {} (another nvfp4lm process); wait for it to finish or "
                  "choose another directory",
                  dir.string(), got > 0 ? std::string(text, static_cast<size_t>(got)) : "?");
    NVFP4LM_FAIL("cannot lock {}: {}", lock_path.string(), std::strerror(saved));
  }
  // Our pid, for the message of the process that finds the directory locked.
  const std::string pid = std::to_string(::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t wrote = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

void remove_directory_if_unused(const fs::path& dir) {
  std::error_code ec;
  bool only_lock = true;
  for (fs::directory_iterator it(dir, ec), end; only_lock && !ec && it != end; it.increment(ec))
    only_lock = it->path().filename() == kDirectoryLockFileName;
  if (only_lock && !ec) {
    fs::remove(dir / kDirectoryLockFileName, ec);
    fs::remove(dir, ec);
  }
}

void DirectoryLock::release_and_remove_if_unused() {
  if (fd_ < 0) return;
  if (created_) {
    remove_directory_if_unused(dir_);
  } else if (lock_file_created_) {
    // A directory that was there before (a person's, refused by the run): left as it was found, without the lock
    // file, removed while still held (a process opening it now finds it locked or gone, never a second lock).
    ::unlink((dir_ / kDirectoryLockFileName).c_str());
  }
  ::close(fd_);
  fd_ = -1;
}

void fsync_path(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  NVFP4LM_CHECK(fd >= 0, "cannot open {} to sync it: {}", path.string(), std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  // Some file systems refuse fsync on directories (EINVAL); the data files were synced already.
  NVFP4LM_CHECK(rc == 0 || saved == EINVAL, "fsync of {} failed: {}", path.string(), std::strerror(saved));
}

InputFd open_input_file(const fs::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  NVFP4LM_CHECK(fd >= 0, "cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int saved = errno;
    ::close(fd);
    NVFP4LM_FAIL("cannot stat {}: {}", path.string(), std::strerror(saved));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(info.st_mode)    ? "a directory"
                       : S_ISFIFO(info.st_mode) ? "a FIFO (named pipe)"
                       : S_ISCHR(info.st_mode)  ? "a character device"
                       : S_ISBLK(info.st_mode)  ? "a block device"
                       : S_ISSOCK(info.st_mode) ? "a socket"
                                                : "not a regular file";
    NVFP4LM_FAIL("{} is {}; expected a regular file", path.string(), kind);
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) {
    ::close(fd);
    NVFP4LM_FAIL("{} has {} bytes, more than the {} bytes such a file may have; is it the right file?", path.string(),
                 size, max_bytes);
  }
  // Regular files never block; reads should wait for the disk as usual.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return {fd, size};
}

std::string read_text_file(const fs::path& path, uint64_t max_bytes) {
  const InputFd input = open_input_file(path, max_bytes);
  std::string text;
  try {
    text.resize(static_cast<size_t>(input.size));
    size_t done = 0;
    // The size from fstat bounds the read: a file that grows meanwhile is read as it was when opened.
    while (done < text.size()) {
      const ssize_t got = ::read(input.fd, text.data() + done, text.size() - done);
      if (got < 0 && errno == EINTR) continue;
      NVFP4LM_CHECK(got >= 0, "reading {} failed: {}", path.string(), std::strerror(errno));
      if (got == 0) break;  // shrank while open: keep what is there
      done += static_cast<size_t>(got);
    }
    text.resize(done);
  } catch (...) {
    ::close(input.fd);
    throw;
  }
  ::close(input.fd);
  return text;
}

std::string local_time_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return stamp;
}

fs::path create_fresh_directory(const fs::path& base) {
  std::error_code ec;
  if (base.has_parent_path()) fs::create_directories(base.parent_path(), ec);
  NVFP4LM_CHECK(!ec, "cannot create {}: {}", base.parent_path().string(), ec.message());
  for (int n = 1; n <= 10000; ++n) {
    const fs::path dir = n == 1 ? base : fs::path(base.string() + "-" + std::to_string(n));
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    NVFP4LM_CHECK(errno == EEXIST, "cannot create {}: {}", dir.string(), std::strerror(errno));
  }
  NVFP4LM_FAIL("cannot create {}: it and {}-2 ... {}-10000 all exist (remove old ones)", base.string(), base.string(),
               base.string());
}

ScratchDirectory::ScratchDirectory(std::string_view purpose, const fs::path& parent) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  const fs::path base = parent.empty() ? fs::temp_directory_path(ec) : parent;
  NVFP4LM_CHECK(!ec, "no temporary directory for {}: {} (set TMPDIR)", purpose, ec.message());
  fs::create_directories(base, ec);
  NVFP4LM_CHECK(!ec, "cannot create {}: {}", base.string(), ec.message());
  // mkdir claims a name nothing has: the temp directory is shared, and an entry of this name may be another user's
  // or another process's (a pid reused since): it is never removed, a later number is taken.
  for (int attempt = 0;; ++attempt) {
    path_ = base / fmt::format("nvfp4lm-{}-{}-{}", purpose, ::getpid(), counter++);
    if (::mkdir(path_.c_str(), 0700) == 0) break;
    NVFP4LM_CHECK(errno == EEXIST && attempt < 1000, "cannot create the scratch directory {}: {}", path_.string(),
                  std::strerror(errno));
  }
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace nvfp4lm
