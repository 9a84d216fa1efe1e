// See shared_memory.h.
#include "emu/shared_memory.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "emu/settings.h"

namespace nvfp4lm::emu {
namespace {

constexpr unsigned char kSharedMemoryPoison = 0xFF;
constexpr size_t kRedZone = 64;
constexpr size_t kSlack = 8192;  // room for red zones and alignment beyond the H100 limit
constexpr int16_t kNeverWritten = -1;
constexpr int16_t kUnallocated = -2;

size_t align_up(size_t value, size_t alignment) { return (value + alignment - 1) / alignment * alignment; }

}  // namespace

size_t shared_per_block_optin() { return settings().arch >= 120 ? kSharedPerBlockOptinSm12x : kSharedPerBlockOptin; }

SharedMemory::SharedMemory() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  span_ = align_up(kSharedPerBlockOptin + kSlack, page);
  mapping_bytes_ = span_ + page;  // a guard page after the span
  void* mapping = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  NVFP4LM_CHECK(mapping != MAP_FAILED, "emulated CUDA: cannot map shared memory: {}", std::strerror(errno));
  mapping_ = static_cast<unsigned char*>(mapping);
  base_ = mapping_;
  NVFP4LM_CHECK(mprotect(mapping_ + span_, page, PROT_NONE) == 0,
                "emulated CUDA: cannot protect the shared memory guard: {}", std::strerror(errno));
  shadow_.assign(span_, Shadow{kUnallocated, -1, 0, 0, 0, 0});
}

SharedMemory::~SharedMemory() { munmap(mapping_, mapping_bytes_); }

void SharedMemory::mark(size_t offset, size_t bytes, int16_t writer) {
  std::fill(shadow_.begin() + static_cast<ptrdiff_t>(offset), shadow_.begin() + static_cast<ptrdiff_t>(offset + bytes),
            Shadow{writer, -1, 0, 0, 0, 0});
}

void SharedMemory::begin_block(size_t dynamic_bytes) {
  mark(0, high_water_, kUnallocated);
  statics_.clear();
  static_bytes_ = 0;
  dynamic_bytes_ = dynamic_bytes;
  used_ = dynamic_bytes;
  std::memset(base_, kSharedMemoryPoison, dynamic_bytes);
  mark(0, dynamic_bytes, kNeverWritten);
  high_water_ = dynamic_bytes;
}

size_t SharedMemory::place_static(const SharedSite& site, std::string& error) {
  for (const auto& [placed, offset] : statics_)
    if (placed == &site) return offset;
  if (static_bytes_ + site.bytes > kStaticSharedLimit) {
    error = fmt::format("static shared memory of the kernel exceeds {} bytes with '{}' ({} bytes)", kStaticSharedLimit,
                        site.name, site.bytes);
    return SIZE_MAX;
  }
  if (dynamic_bytes_ + static_bytes_ + site.bytes > shared_per_block_optin()) {
    error = fmt::format(
        "static '{}' ({} bytes) with {} bytes of dynamic and {} of other static shared memory "
        "exceeds the block's {} bytes",
        site.name, site.bytes, dynamic_bytes_, static_bytes_, shared_per_block_optin());
    return SIZE_MAX;
  }
  const size_t offset = align_up(used_ + kRedZone, std::max<size_t>(site.alignment, 16));
  NVFP4LM_ASSERT(offset + site.bytes + kRedZone <= span_, "emulated shared memory slack exhausted");
  std::memset(base_ + offset, kSharedMemoryPoison, site.bytes);
  mark(offset, site.bytes, kNeverWritten);
  statics_.emplace_back(&site, offset);
  static_bytes_ += site.bytes;
  used_ = offset + site.bytes;
  high_water_ = std::max(high_water_, used_);
  return offset;
}

SharedAccessProblem SharedMemory::access(const SharedAccessor& who, size_t offset, size_t bytes, bool write,
                                         uint32_t phase) {
  SharedAccessProblem problem;
  if (offset + bytes > span_) {
    problem.kind = SharedAccessProblem::Kind::OutOfBounds;
    problem.offset = offset;
    return problem;
  }
  // Two lanes of one warp are ordered when the later one has synchronised with its warp since the earlier access.
  auto ordered = [&](int other, uint32_t other_sync) { return other / 32 == who.warp && who.warp_sync > other_sync; };
  Shadow before_previous{}, after_previous{};
  for (size_t i = offset; i < offset + bytes; ++i) {
    Shadow& s = shadow_[i];
    // Most accesses cover bytes with one history: then this byte fares as the previous one did.
    if (i > offset && std::memcmp(&s, &before_previous, sizeof(Shadow)) == 0) {
      s = after_previous;
      continue;
    }
    before_previous = s;
    if (s.writer == kUnallocated) {
      if (problem.kind == SharedAccessProblem::Kind::None) problem = {SharedAccessProblem::Kind::OutOfBounds, i};
      after_previous = s;
      continue;
    }
    if (problem.kind == SharedAccessProblem::Kind::None) {
      if (s.writer >= 0 && s.writer != who.thread && s.write_phase == phase && !ordered(s.writer, s.write_sync)) {
        problem = {SharedAccessProblem::Kind::Race, i, s.writer, true};
      } else if (write && s.reader >= 0 && s.reader != who.thread && s.read_phase == phase &&
                 !ordered(s.reader, s.read_sync)) {
        problem = {SharedAccessProblem::Kind::Race, i, s.reader, false};
      } else if (!write && s.writer == kNeverWritten) {
        problem = {SharedAccessProblem::Kind::Uninitialised, i};
      }
    }
    if (write) {
      s.writer = static_cast<int16_t>(who.thread);
      s.write_phase = phase;
      s.write_sync = who.warp_sync;
      s.reader = -1;
    } else if (s.reader < 0 || s.read_phase != phase) {
      s.reader = static_cast<int16_t>(who.thread);
      s.read_phase = phase;
      s.read_sync = who.warp_sync;
    }
    after_previous = s;
  }
  return problem;
}

std::string SharedMemory::describe(size_t offset) const {
  if (offset < dynamic_bytes_) return fmt::format("dynamic shared memory + {:#x}", offset);
  const std::pair<const SharedSite*, size_t>* before = nullptr;
  for (const auto& entry : statics_) {
    if (offset >= entry.second && offset < entry.second + entry.first->bytes)
      return fmt::format("static '{}' + {:#x}", entry.first->name, offset - entry.second);
    if (entry.second + entry.first->bytes <= offset && (before == nullptr || entry.second > before->second))
      before = &entry;
  }
  if (before != nullptr)
    return fmt::format("{} bytes past static '{}' ({} bytes)", offset - before->second - before->first->bytes,
                       before->first->name, before->first->bytes);
  return fmt::format("{} bytes past the {} bytes of dynamic shared memory", offset - dynamic_bytes_, dynamic_bytes_);
}

}  // namespace nvfp4lm::emu
