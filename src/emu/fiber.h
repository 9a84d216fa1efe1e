// Fibers for emulated CUDA threads: Boost.Context's fcontext (a register save and a stack switch, ~25 ns) on
// stacks of our own, mmap'd with a PROT_NONE guard page below each so an overflow faults instead of corrupting a
// neighbour (the fault handler names it, fault.h).
//
// A fiber is a worker, not a CUDA thread: it runs one thread's kernel body to its end, then goes back to its
// pool and can start the next thread on the same, still-warm stack. A thread that never blocks therefore costs
// one switch in and one out; only threads that wait at a barrier or a warp collective keep a fiber each.
// Fibers never move between OS threads (every pool belongs to one), so thread_local state stays valid in them.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace nvfp4lm::emu {

class Fiber {
 public:
  using Entry = void (*)(Fiber&);

  // `color` shifts the top of the stack (see fiber.cpp) and is usually the fiber's index in its pool.
  Fiber(size_t stack_bytes, Entry entry, size_t color = 0);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // From the scheduler: run the fiber until it calls suspend() (or, fresh, from the top of entry).
  void resume();
  // From inside the fiber: back to whoever called resume().
  void suspend();
  // Forget where the fiber stopped: the next resume() starts entry again from the top on a clean stack. Frames
  // that were live are dropped without unwinding (emulated kernels hold no resources); used after a fault.
  void restart();

  // True when `address` lies in this fiber's guard page (for the fault handler: a stack overflow).
  bool guard_contains(const void* address) const;

  void* user = nullptr;  // what the entry function works on (the emulator's thread record)

 private:
  static void trampoline(void* transfer);

  Entry entry_;
  unsigned char* mapping_ = nullptr;  // guard page, then the stack
  size_t mapping_bytes_ = 0;
  size_t guard_bytes_ = 0;
  size_t top_offset_ = 0;
  void* context_ = nullptr;  // the suspended fiber (fcontext_t)
  void* caller_ = nullptr;   // the scheduler while the fiber runs
};

// Idle fibers of one OS thread, reused last-in first-out (the most recently used stack is warm in cache).
class FiberPool {
 public:
  FiberPool(size_t stack_bytes, Fiber::Entry entry) : stack_bytes_(stack_bytes), entry_(entry) {}
  Fiber* acquire();
  void release(Fiber* fiber);
  // Every fiber ever made by this pool, idle or not (for the fault handler).
  const std::vector<std::unique_ptr<Fiber>>& all() const { return all_; }

 private:
  size_t stack_bytes_;
  Fiber::Entry entry_;
  std::vector<std::unique_ptr<Fiber>> all_;
  std::vector<Fiber*> idle_;
};

}  // namespace nvfp4lm::emu
