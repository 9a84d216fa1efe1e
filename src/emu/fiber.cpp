// See fiber.h.
#include "emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "emu/os_pages.h"

namespace nvfp4lm::emu {
namespace fc = boost::context::detail;

Fiber::Fiber(size_t stack_bytes, Entry entry, size_t color) : entry_(entry) {
  guard_bytes_ = page_bytes();
  const size_t stack = (stack_bytes + guard_bytes_ - 1) / guard_bytes_ * guard_bytes_;
  mapping_bytes_ = stack + guard_bytes_;
  void* mapping =
      mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  NVFP4LM_CHECK(mapping != MAP_FAILED, "emulated CUDA: cannot map a {} KiB thread stack: {}", stack >> 10,
                std::strerror(errno));
  mapping_ = static_cast<unsigned char*>(mapping);
  NVFP4LM_CHECK(mprotect(mapping_, guard_bytes_, PROT_NONE) == 0, "emulated CUDA: cannot protect a stack guard: {}",
                std::strerror(errno));
  // Stacks are page-aligned mappings of equal size, so without an offset the hot top of every fiber's stack
  // would fall in the same cache sets (a 64 KiB stride aliases in L1 and L2) and a block of 1024 threads would
  // thrash them at every switch. Shifting each top by a different multiple of 17 cache lines spreads them.
  top_offset_ = (color * 17 * 64) % std::min<size_t>(stack / 4, 64 << 10);
  restart();
}

Fiber::~Fiber() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

void Fiber::restart() {
  context_ = fc::make_fcontext(mapping_ + mapping_bytes_ - top_offset_, mapping_bytes_ - guard_bytes_ - top_offset_,
                               [](fc::transfer_t transfer) { trampoline(&transfer); });
}

void Fiber::trampoline(void* transfer_pointer) {
  auto* transfer = static_cast<fc::transfer_t*>(transfer_pointer);
  auto* self = static_cast<Fiber*>(transfer->data);
  self->caller_ = transfer->fctx;
  self->entry_(*self);
  // entry functions loop forever (a fiber that returned would have nowhere to go)
  std::abort();
}

void Fiber::resume() {
  const fc::transfer_t back = fc::jump_fcontext(context_, this);
  context_ = back.fctx;
}

void Fiber::suspend() {
  const fc::transfer_t back = fc::jump_fcontext(caller_, nullptr);
  caller_ = back.fctx;
}

bool Fiber::guard_contains(const void* address) const {
  const auto* p = static_cast<const unsigned char*>(address);
  return p >= mapping_ && p < mapping_ + guard_bytes_;
}

Fiber* FiberPool::acquire() {
  if (!idle_.empty()) {
    Fiber* fiber = idle_.back();
    idle_.pop_back();
    return fiber;
  }
  all_.push_back(std::make_unique<Fiber>(stack_bytes_, entry_, all_.size()));
  return all_.back().get();
}

void FiberPool::release(Fiber* fiber) { idle_.push_back(fiber); }

}  // namespace nvfp4lm::emu
