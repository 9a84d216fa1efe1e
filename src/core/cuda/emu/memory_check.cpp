// The memory-access hooks of the emulated .cu files. They are compiled with g++'s -fsanitize=thread
// instrumentation but linked without the ThreadSanitizer runtime: these definitions take its place. Every load and
// store the compiler could not prove private becomes a call here; an access from a running emulated CUDA thread
// that falls in its block's shared memory goes to BlockRunner::on_access (bounds, race and initialisation checks,
// shared_memory.h), everything else (host code of the .cu files, global memory, the stack) returns at once.
// Atomic operations are performed as asked (sequentially consistent) and not checked: atomics do not race.
#include <cstddef>
#include <cstdint>

#include "core/cuda/emu/block_runner.h"
#include "core/cuda/emu/thread_context.h"

namespace {

using nvfp4lm::emu::current_thread;

inline void access(const void* address, size_t bytes, bool write, const void* code) {
  nvfp4lm::emu::ThreadContext* thread = current_thread;
  if (thread != nullptr) [[unlikely]]
    thread->block->on_access(*thread, address, bytes, write, code);
}

}  // namespace

#define NVFP4LM_EMU_ACCESS(name, bytes, write) \
  void name(void* address) { access(address, bytes, write, __builtin_return_address(0)); }

extern "C" {

void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}

NVFP4LM_EMU_ACCESS(__tsan_read1, 1, false)
NVFP4LM_EMU_ACCESS(__tsan_read2, 2, false)
NVFP4LM_EMU_ACCESS(__tsan_read4, 4, false)
NVFP4LM_EMU_ACCESS(__tsan_read8, 8, false)
NVFP4LM_EMU_ACCESS(__tsan_read16, 16, false)
NVFP4LM_EMU_ACCESS(__tsan_write1, 1, true)
NVFP4LM_EMU_ACCESS(__tsan_write2, 2, true)
NVFP4LM_EMU_ACCESS(__tsan_write4, 4, true)
NVFP4LM_EMU_ACCESS(__tsan_write8, 8, true)
NVFP4LM_EMU_ACCESS(__tsan_write16, 16, true)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read2, 2, false)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read4, 4, false)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read8, 8, false)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_read16, 16, false)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write2, 2, true)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write4, 4, true)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write8, 8, true)
NVFP4LM_EMU_ACCESS(__tsan_unaligned_write16, 16, true)
NVFP4LM_EMU_ACCESS(__tsan_volatile_read1, 1, false)
NVFP4LM_EMU_ACCESS(__tsan_volatile_read2, 2, false)
NVFP4LM_EMU_ACCESS(__tsan_volatile_read4, 4, false)
NVFP4LM_EMU_ACCESS(__tsan_volatile_read8, 8, false)
NVFP4LM_EMU_ACCESS(__tsan_volatile_read16, 16, false)
NVFP4LM_EMU_ACCESS(__tsan_volatile_write1, 1, true)
NVFP4LM_EMU_ACCESS(__tsan_volatile_write2, 2, true)
NVFP4LM_EMU_ACCESS(__tsan_volatile_write4, 4, true)
NVFP4LM_EMU_ACCESS(__tsan_volatile_write8, 8, true)
NVFP4LM_EMU_ACCESS(__tsan_volatile_write16, 16, true)

void __tsan_read_range(void* address, unsigned long bytes) {
  access(address, bytes, false, __builtin_return_address(0));
}
void __tsan_write_range(void* address, unsigned long bytes) {
  access(address, bytes, true, __builtin_return_address(0));
}
void __tsan_vptr_read(void**) {}
void __tsan_vptr_update(void**, void*) {}

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // extern "C"

// The atomic entry points, for every width the compiler may call: the operation itself, sequentially consistent.
#define NVFP4LM_EMU_ATOMICS(bits, T)                                                                                 \
  extern "C" T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  extern "C" void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  extern "C" T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                             \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                            \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                            \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                            \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                             \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                                \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                            \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                           \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                              \
  }                                                                                                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                 \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
  }                                                                                                                  \
  extern "C" int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                   \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                           \
  }                                                                                                                  \
  extern "C" T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                       \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                                \
    return c;                                                                                                        \
  }

NVFP4LM_EMU_ATOMICS(8, char)
NVFP4LM_EMU_ATOMICS(16, short)
NVFP4LM_EMU_ATOMICS(32, int)
NVFP4LM_EMU_ATOMICS(64, long)
