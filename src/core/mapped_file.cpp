#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/files.h"

namespace nvfp4lm {

std::shared_ptr<MappedFile> MappedFile::open(const fs::path& path, Options options) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  const InputFd input = open_input_file(path, options.max_bytes);  // refuses FIFOs and devices without blocking
  file->fd_ = input.fd;
  file->size_ = input.size;
  if (file->size_ > 0) {
    void* map =
        ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE | (options.populate ? MAP_POPULATE : 0), file->fd_, 0);
    NVFP4LM_CHECK(map != MAP_FAILED, "cannot map {} ({} bytes): {}", path.string(), file->size_, std::strerror(errno));
    file->data_ = static_cast<uint8_t*>(map);
  }
  return file;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read_at(uint64_t offset, void* dst, uint64_t bytes) const {
  NVFP4LM_CHECK(offset <= size_ && bytes <= size_ - offset,
                "{}: read of {} bytes at offset {} is past the end ({} bytes)", path_.string(), bytes, offset, size_);
  auto* out = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    NVFP4LM_CHECK(got > 0, "{}: read at offset {} failed: {}", path_.string(), offset,
                  got < 0 ? std::strerror(errno) : "unexpected end of file (was it truncated while open?)");
    out += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
}

void MappedFile::drop_pages(uint64_t offset, uint64_t bytes) const {
  if (!data_ || bytes == 0 || offset >= size_) return;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;
  const uint64_t end = std::min(size_, offset + std::min(bytes, size_ - offset));
  // Advice only: failure changes nothing about correctness, so it is ignored.
  ::madvise(data_ + begin, end - begin, MADV_DONTNEED);
}

// ---- OutputFile ----------------------------------------------------------------------------------------------

namespace {
constexpr size_t kBufferBytes = size_t{4} << 20;
}

OutputFile::OutputFile(fs::path final_path, bool overwrite)
    : final_path_(std::move(final_path)), overwrite_(overwrite) {
  remove_stale_temporaries(final_path_);  // what a killed writer of this path left
  fd_ = create_temporary_file(final_path_, temporary_path_);
  buffer_.resize(kBufferBytes);
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) {
    std::error_code ec;
    fs::remove(temporary_path_, ec);
  }
}

void OutputFile::write_fully(const uint8_t* data, uint64_t bytes) {
  while (bytes > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    const ssize_t put = ::write(fd_, data, chunk);
    if (put < 0 && errno == EINTR) continue;
    NVFP4LM_CHECK(put > 0, "writing {} failed: {}", final_path_.string(),
                  put < 0 ? std::strerror(errno) : "no progress (disk full?)");
    data += put;
    bytes -= static_cast<uint64_t>(put);
  }
}

void OutputFile::flush() {
  if (buffered_ == 0) return;
  write_fully(buffer_.data(), buffered_);
  buffered_ = 0;
}

void OutputFile::write(const void* data, uint64_t bytes) {
  NVFP4LM_ASSERT(fd_ >= 0 && !committed_, "write to a closed output file {}", final_path_.string());
  const auto* in = static_cast<const uint8_t*>(data);
  position_ += bytes;
  if (buffered_ + bytes <= buffer_.size()) {
    if (bytes) std::memcpy(buffer_.data() + buffered_, in, static_cast<size_t>(bytes));
    buffered_ += static_cast<size_t>(bytes);
    return;
  }
  flush();
  if (bytes >= buffer_.size()) {
    write_fully(in, bytes);  // large pieces go straight through
  } else {
    std::memcpy(buffer_.data(), in, static_cast<size_t>(bytes));
    buffered_ = static_cast<size_t>(bytes);
  }
}

void OutputFile::commit() {
  NVFP4LM_ASSERT(fd_ >= 0 && !committed_, "commit of a closed output file {}", final_path_.string());
  flush();
  NVFP4LM_CHECK(::fsync(fd_) == 0, "writing {} failed: fsync: {}", final_path_.string(), std::strerror(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  NVFP4LM_CHECK(rc == 0, "writing {} failed: close: {}", final_path_.string(), std::strerror(errno));
  publish(temporary_path_, final_path_, OutputKind::File, overwrite_, "output");
  committed_ = true;
}

}  // namespace nvfp4lm
