// The memory-access hooks of the emulated .cu files. They are compiled with g++'s -fsanitize=thread
// instrumentation but linked without the ThreadSanitizer runtime: these definitions take its place. Every load and
// store the compiler could not prove private becomes a call here. An access from a running emulated CUDA thread goes
// to BlockRunner::on_access: in its block's shared memory, to the bounds, race and initialisation checks
// (shared_memory.h); in device memory, to the race check between blocks (global_race_check.h); anything else (the
// thread's stack, the kernel's arguments) returns at once, as do accesses of host code. Atomic operations are
// performed as asked (sequentially consistent) and reported to the global check as atomics.
#include <cstddef>
#include <cstdint>

#include "emu/block_runner.h"
#include "emu/thread_context.h"

namespace {

using nvfp4lm::emu::current_thread;

using nvfp4lm::emu::GlobalAccess;

inline void access(const void* address, size_t bytes, GlobalAccess kind, const void* code) {
  nvfp4lm::emu::ThreadContext* thread = current_thread;
  if (thread != nullptr) [[unlikely]]
    thread->block->on_access(*thread, address, bytes, kind, code);
}

constexpr GlobalAccess kRead = GlobalAccess::Read;
constexpr GlobalAccess kWrite = GlobalAccess::Write;
// Volatile accesses are how CUDA code spelled relaxed atomics before <cuda/atomic>: communication between blocks
// (flags, "first error" slots), so the global check treats them as atomics; in shared memory they are checked as
// plain loads and stores.
inline void volatile_access(const void* address, size_t bytes, bool write, const void* code) {
  nvfp4lm::emu::ThreadContext* thread = current_thread;
  if (thread == nullptr) [[likely]]
    return;
  const GlobalAccess kind =
      nvfp4lm::emu::in_device_span(address) ? GlobalAccess::Atomic : (write ? GlobalAccess::Write : GlobalAccess::Read);
  thread->block->on_access(*thread, address, bytes, kind, code);
}

// An atomic operation of `bytes` at `address` by the running emulated thread (global memory: the race check).
inline void atomic_access(const volatile void* address, size_t bytes) {
  nvfp4lm::emu::ThreadContext* thread = current_thread;
  if (thread != nullptr) [[unlikely]]
    thread->block->on_access(*thread, const_cast<const void*>(address), bytes, GlobalAccess::Atomic,
                             __builtin_return_address(0));
}

}  // namespace

#define NVFP4LM_EMU_ACCESS(name, bytes, kind) \
  void name(void* address) { access(address, bytes, kind, __builtin_return_address(0)); }
#define NVFP4LM_EMU_VOLATILE_ACCESS(name, bytes, write) \
  void name(void* address) { volatile_access(address, bytes, write, __builtin_return_address(0)); }

extern "C" {

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}

NVFP4LM_EMU_ACCESS(__tsan_read1, 1, kRead)
NVFP4LM_EMU_ACCESS(__tsan_read2, 2, kRead)
NVFP4LM_EMU_ACCESS(__tsan_read4, 4, kRead)
NVFP4LM_EMU_ACCESS(__tsan_read8, 8, kRead)
NVFP4LM_EMU_ACCESS(__tsan_read16, 16, kRead)
NVFP4LM_EMU_ACCESS(__tsan_write1, 1, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_write2, 2, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_write4, 4, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_write8, 8, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_write16, 16, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read2, 2, kRead)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read4, 4, kRead)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read8, 8, kRead)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read16, 16, kRead)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write2, 2, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write4, 4, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write8, 8, kWrite)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write16, 16, kWrite)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_read1, 1, false)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_read2, 2, false)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_read4, 4, false)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_read8, 8, false)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_read16, 16, false)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_write1, 1, true)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_write2, 2, true)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_write4, 4, true)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_write8, 8, true)
NVFP4LM_EMU_VOLATILE_ACCESS(__tsan_volatile_write16, 16, true)

void __tsan_read_range(void* address, unsigned long bytes) {
  access(address, bytes, kRead, __builtin_return_address(0));
}
void __tsan_write_range(void* address, unsigned long bytes) {
  access(address, bytes, kWrite, __builtin_return_address(0));
}
void __tsan_vptr_read(void**) {}
void __tsan_vptr_update(void**, void*) {}

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"

// The atomic entry points, for every width the compiler may call: the operation itself, sequentially consistent,
// after telling the global race check (atomics never race with each other, but do with plain accesses).
#define NVFP4LM_EMU_ATOMIC(bits, T, result, name, params, body) \
  extern "C" result __tsan_atomic##bits##_##name params {       \
    atomic_access(a, bits / 8);                                 \
    body;                                                       \
  }
#define NVFP4LM_EMU_ATOMICS(bits, T)                                                                             \
  NVFP4LM_EMU_ATOMIC(bits, T, T, load, (const volatile T* a, int), return __atomic_load_n(a, __ATOMIC_SEQ_CST))  \
  NVFP4LM_EMU_ATOMIC(bits, T, void, store, (volatile T * a, T v, int), __atomic_store_n(a, v, __ATOMIC_SEQ_CST)) \
  NVFP4LM_EMU_ATOMIC(bits, T, T, exchange, (volatile T * a, T v, int),                                           \
                     return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST))                                         \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_add, (volatile T * a, T v, int),                                          \
                     return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST))                                          \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_sub, (volatile T * a, T v, int),                                          \
                     return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST))                                          \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_and, (volatile T * a, T v, int),                                          \
                     return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST))                                          \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_or, (volatile T * a, T v, int),                                           \
                     return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST))                                           \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_xor, (volatile T * a, T v, int),                                          \
                     return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST))                                          \
  NVFP4LM_EMU_ATOMIC(bits, T, T, fetch_nand, (volatile T * a, T v, int),                                         \
                     return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST))                                         \
  NVFP4LM_EMU_ATOMIC(bits, T, int, compare_exchange_strong, (volatile T * a, T * c, T v, int, int),              \
                     return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))     \
  NVFP4LM_EMU_ATOMIC(bits, T, int, compare_exchange_weak, (volatile T * a, T * c, T v, int, int),                \
                     return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))      \
  NVFP4LM_EMU_ATOMIC(bits, T, T, compare_exchange_val, (volatile T * a, T c, T v, int, int),                     \
                     __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
                     return c)

NVFP4LM_EMU_ATOMICS(8, char)
NVFP4LM_EMU_ATOMICS(16, short)
NVFP4LM_EMU_ATOMICS(32, int)
NVFP4LM_EMU_ATOMICS(64, long)
