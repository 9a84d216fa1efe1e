#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace nvfp4lm {

void check_output_path(const fs::path& path, bool overwrite) {
  std::error_code ec;
  if (fs::exists(path, ec) && !overwrite) {
    NVFP4LM_FAIL("output {} already exists; choose another name or pass --overwrite to replace it", path.string());
  }
}

fs::path temporary_sibling(const fs::path& path) {
  fs::path p = path;
  if (p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.parent_path() / (p.filename().string() + ".tmp-" + std::to_string(::getpid()));
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

void commit_rename(const fs::path& tmp, const fs::path& final_path) {
  fs::path target = final_path;
  if (target.filename().empty()) target = target.parent_path();
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    // rename() cannot replace a non-empty directory: move the old one aside first.
    fs::path old = target.parent_path() / (target.filename().string() + ".old-" + std::to_string(::getpid()));
    fs::rename(target, old, ec);
    NVFP4LM_CHECK(!ec, "cannot move {} aside to replace it: {}", target.string(), ec.message());
    fs::rename(tmp, target, ec);
    NVFP4LM_CHECK(!ec, "cannot rename {} to {}: {}", tmp.string(), target.string(), ec.message());
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp, target, ec);
    NVFP4LM_CHECK(!ec, "cannot rename {} to {}: {}", tmp.string(), target.string(), ec.message());
  }
  fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  fsync_path(parent);
}

void write_file_atomic(const fs::path& path, std::string_view contents) {
  fs::path tmp = temporary_sibling(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    NVFP4LM_CHECK(out.good(), "cannot create {}: {}", tmp.string(), std::strerror(errno));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    NVFP4LM_CHECK(out.good(), "writing {} failed (disk full?)", tmp.string());
  }
  fsync_path(tmp);
  commit_rename(tmp, path);
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  NVFP4LM_CHECK(in.good(), "cannot open {}: {}", path.string(), std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  NVFP4LM_CHECK(!in.bad(), "reading {} failed", path.string());
  return buffer.str();
}

std::string local_time_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return stamp;
}

}  // namespace nvfp4lm
