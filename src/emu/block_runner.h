// Runs one thread block of an emulated kernel launch on the calling OS thread: one fiber per CUDA thread that is
// running or waiting (fiber.h), a scheduler that picks the next runnable thread by the chosen Schedule, and
// everything threads of one block share or wait for:
//  - __syncthreads: one barrier; threads that exited do not hold it (as on sm_70+). All threads waiting at it
//    must have reached the same source line (a barrier in divergent code is undefined on a GPU: a fault here);
//  - warp collectives (warp_collectives.h): a lane posts its operands and waits until every non-exited lane of
//    its mask has posted the same operation with the same mask; the lane that completes the set computes all
//    results, wakes the others and, like them, waits for the schedule to pick it again;
//  - shared memory (shared_memory.h): placement, poison, and the bounds, race and initialisation checks of every
//    access: the kernels' own loads and stores (through memory_check.cpp), cp.async writes and ldmatrix reads;
//  - cp.async: each thread queues its copies; they happen at the latest legal moment (its cp.async.wait_group,
//    or its exit), so a read that is not ordered after the wait and a barrier sees poison.
// Faults (a lane outside its own mask, an invalid ldmatrix or cp.async address, a shared-memory race, a deadlock,
// ...) stop the block: the faulting fiber jumps back to the scheduler, every fiber of the block is reset, and run()
// returns the message naming the kernel, the block and the thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "emu/device_memory.h"
#include "emu/fiber.h"
#include "emu/global_race_check.h"
#include "emu/settings.h"
#include "emu/shared_memory.h"
#include "emu/thread_context.h"
#include "emu/warp_collectives.h"

namespace nvfp4lm::emu {

// The per-launch facts every block of it needs.
struct BlockPlan {
  const char* kernel_name = "?";
  dim3 grid_dim, block_dim;
  size_t dynamic_shared_bytes = 0;
  void (*invoke)(const void* closure) = nullptr;  // runs the kernel body as the current thread
  const void* closure = nullptr;
  Schedule schedule = Schedule::WarpSerial;
};

class BlockRunner {
 public:
  BlockRunner();
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // The runner of the calling OS thread (made on first use).
  static BlockRunner& of_this_thread();

  // Runs block `block_idx` to its end. Returns false and sets `fault` when a thread faulted.
  bool run(const BlockPlan& plan, uint3 block_idx, std::string& fault);

  // ---- called by device code of a thread of this runner (device_api.h) ----
  void syncthreads(ThreadContext& thread, const char* file, int line);
  const WarpResult& collective(ThreadContext& thread, const WarpPost& post);
  void* static_shared(ThreadContext& thread, const SharedSite& site);
  void* dynamic_shared() { return shared_.base(); }
  uint32_t shared_address(ThreadContext& thread, const void* pointer);
  void cp_async(ThreadContext& thread, uint32_t shared_dst, const void* global_src, int copy_bytes, int source_bytes);
  void cp_async_commit(ThreadContext& thread);
  void cp_async_wait(ThreadContext& thread, int groups_left_pending);
  [[noreturn]] void fault(ThreadContext& thread, const std::string& message);
  // A load or store of the kernel's own code (memory_check.cpp): checked if it is in this block's shared memory
  // or in device memory (global_race_check.h). Atomic and volatile accesses come as GlobalAccess::Atomic.
  void on_access(ThreadContext& thread, const void* address, size_t bytes, GlobalAccess kind, const void* code) {
    const size_t offset = static_cast<size_t>(static_cast<const unsigned char*>(address) - shared_.base());
    if (offset < shared_.span()) {
      if (kind != GlobalAccess::Atomic) check_shared(thread, offset, bytes, kind == GlobalAccess::Write, code);
    } else if (global_race_check_active && in_device_span(address)) {
      check_global(thread, address, bytes, kind, code);
    }
  }

  // For the SIGSEGV reporter (fault.cpp): "kernel K block (..) thread (..)", and what a faulting address is if it
  // belongs to this runner (the shared-memory guard, a thread's stack guard).
  std::string where(const ThreadContext& thread) const;
  std::string describe_address(const void* address) const;

 private:
  enum class Status : uint8_t { NotStarted, Runnable, Running, Waiting, Exited, Faulted };
  enum class Wait : uint8_t { None, Barrier, Warp };
  struct CpAsync {
    uint32_t dst;
    int copy_bytes, source_bytes;
    const void* src;
    int64_t group;  // -1 until committed
  };
  struct Thread : ThreadContext {
    Status status = Status::NotStarted;
    Wait wait = Wait::None;
    Fiber* fiber = nullptr;
    WarpPost post;
    WarpResult result;
    std::vector<CpAsync> copies;
    int64_t committed_groups = 0;
    uint32_t warp_sync = 0;  // grows at every warp collective the lane completes with others (shared_memory.h)
  };
  struct Warp {
    unsigned present = 0;  // lanes that exist (a partial last warp has fewer)
    unsigned exited = 0;
    unsigned pending = 0;  // lanes waiting in a collective
  };

  static void fiber_main(Fiber& fiber);
  void execute(Thread& thread);
  void exited(Thread& thread);
  void step(Thread& thread);
  void wait(Thread& thread);
  void release_barrier();
  bool try_complete(int warp_index, const WarpPost& post);
  void complete_copies(Thread& thread, int64_t up_to_group);
  void check_shared(ThreadContext& thread, size_t offset, size_t bytes, bool write, const void* code);
  void check_global(ThreadContext& thread, const void* address, size_t bytes, GlobalAccess kind, const void* code);
  void run_round_robin();
  void run_warp_serial(bool reverse);
  std::string deadlock_report() const;
  std::string thread_name(const ThreadContext& thread) const;
  Thread& lane_thread(int warp, int lane) { return threads_[static_cast<size_t>(warp * 32 + lane)]; }

  const BlockPlan* plan_ = nullptr;
  std::vector<Thread> threads_;
  std::vector<Warp> warps_;
  int live_ = 0;
  int barrier_waiting_ = 0;
  uint64_t barrier_releases_ = 0;
  const char* barrier_file_ = nullptr;
  int barrier_line_ = 0;
  bool faulted_ = false;
  std::string fault_message_;
  FiberPool fibers_;

  SharedMemory shared_;
};

}  // namespace nvfp4lm::emu
