// The F# predecessor's guard (`run-script-with-guard.fsx --gpu-limit-gb 108 --gpu-over-secs 0 --gpu-poll-secs 0.5`),
// inside the process: it watches the GPU's memory as the driver reports it, not only what nvfp4lm's tensors hold —
// the CUDA context, cuBLAS workspaces, the caching allocator's free blocks and fragmentation, and (as the predecessor's
// total_gpu_mem did) other processes on the same GPU — and stops the run when it stays over the limit.
//
// Readings (GiB = 2^30 bytes, the predecessor's limit x 1024 MiB): the device's memory in use (cudaMemGetInfo: total
// - free; on the emulated device, what it has allocated), and on a GPU whose memory is the host's (an integrated one:
// the DGX Spark's GB10, Jetson; NVML reports "Not Supported" there) the process's resident memory too. The guard trips
// when a reading is over the limit for `over_seconds` (0: at once, the predecessor's immediate mode), checked every
// `poll_seconds` by a thread of its own, and at once after every fresh device allocation (so that a run growing past
// the limit is stopped at the allocation that took it there, whatever the polling).
//
// Tripped, the guard does what a failure does: the next device allocation of the process and the trainer's next step
// throw an Error saying what was over (the reading, the limit, for how long); the run's last checkpoint is kept
// (train: --resume continues from it) and the exit status is non-zero. Host allocations go on (they may sit in
// OpenMP regions, which an exception cannot leave; a checkpoint being written finishes). A process that has not stopped
// kGraceSeconds after the trip (stuck where nothing allocates) is ended with exit status 124, as the predecessor's
// guard did.
// `--max-memory` stays the in-process limit on what nvfp4lm's tensors hold (core/memory.h).
#pragma once

#include <memory>
#include <string>

#include "core/device.h"

namespace nvfp4lm {

struct MemoryGuardOptions {
  double limit_gib = 0;       // --gpu-limit-gb; 0: no guard
  double over_seconds = 0;    // --gpu-over-secs
  double poll_seconds = 0.5;  // --gpu-poll-secs (at least 0.05, as the predecessor's)
};

// Checks the values (Error naming the flag).
void check_memory_guard_options(const MemoryGuardOptions& options);

// One guard at a time, for the life of the object (process-wide: the allocator's check is global).
class MemoryGuard {
 public:
  inline static constexpr double kGraceSeconds = 10;
  // Error when `device` is not a CUDA device (the CPU has no GPU memory to guard: use --max-memory) or a guard is
  // active already.
  MemoryGuard(Device device, const MemoryGuardOptions& options);
  ~MemoryGuard();
  MemoryGuard(const MemoryGuard&) = delete;
  MemoryGuard& operator=(const MemoryGuard&) = delete;

  // "memory guard: cuda:0 in use as the driver reports it, limit --gpu-limit-gb 108 GiB, over for 0 s, polled every
  // 0.5 s and after every new device allocation": for the command's set-up lines.
  std::string description() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Whether the active guard has tripped, and what it says (one line).
bool memory_guard_tripped();
std::string memory_guard_message();
// Throws Error(memory_guard_message()) when tripped: called by MemoryTracker::reserve (device allocations) and the
// trainer's loop.
void check_memory_guard();
// After a fresh device allocation on cuda:`index` (core/cuda/runtime.cpp): reads the device at once and trips in
// immediate mode (over_seconds 0). Cheap when no guard is active.
void memory_guard_after_device_allocation(int index);

}  // namespace nvfp4lm
