// How the emulated CUDA device behaves, read once from the environment (see docs/cuda-emulation.md):
//   NVFP4LM_EMU_SCHEDULE  warp-serial (default) | round-robin | reverse   order in which a block's threads run
//   NVFP4LM_EMU_WORKERS   N (default 1)          OS threads that run the blocks of one launch concurrently
//   NVFP4LM_EMU_STREAM    deferred (default) | sync   when stream work runs: at the next synchronisation, or at once
//   NVFP4LM_EMU_STACK_KIB K (default 64)         stack of each emulated CUDA thread
//   NVFP4LM_EMU_DEVICE_GIB G                     device memory the emulated GPU reports (default: 3/4 of the RAM)
//   NVFP4LM_EMU_DEVICES   1 (default) | 0         0: no device at all (tests of nvfp4lm's no-GPU paths)
//   NVFP4LM_EMU_CHECK     all (default) | none | a list of bounds,races,init,global   the memory checks: shared
//                         memory's (shared_memory.h) and races between blocks in global memory (global_race_check.h)
//   NVFP4LM_EMU_GRID_CAP  N (default: none)     grid-stride launches use at most N blocks (core/cuda/grid_stride.h),
//                         so every grid-stride loop runs several iterations in tests of ordinary sizes
//   NVFP4LM_EMU_ARCH      sm_90 (default) | sm_100 | sm_120 | sm_121   the GPU the device presents itself as: its
//                         compute capability (cudaGetDeviceProperties, cudaDeviceGetAttribute) and the
//                         architecture-specific instructions it runs (mma kind::mxf4nvf4 only on sm_120 / sm_121,
//                         as only an sm_120a / sm_121a image has it): how the tests run the Blackwell dispatch
// A value that cannot be parsed is an error that names the variable, not a silent default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nvfp4lm::emu {

// Which runnable CUDA thread of a block runs next. Threads only ever switch at a barrier, a warp collective or
// their exit, so each schedule is one legal interleaving; the three differ in which races they expose.
enum class Schedule {
  // Every thread in index order runs to its next switch point, over and over: warps advance together.
  RoundRobin,
  // The lowest warp with a runnable lane runs until none of its lanes can run (all wait at __syncthreads or have
  // exited), then the next warp: one warp races ahead of the others up to the barrier, as a fast warp does on a
  // GPU. Exposes missing barriers that round-robin hides.
  WarpSerial,
  // WarpSerial from the highest warp and lane down, blocks in reverse order: exposes code that assumes warp 0 or
  // block 0 runs first.
  Reverse,
};

enum class StreamMode {
  Deferred,  // stream work runs when the host synchronises (like a GPU that is still busy): exposes missing syncs
  Sync,      // stream work runs inside the call that enqueues it (easier to debug)
};

struct Checks {
  bool bounds = true;  // shared-memory accesses outside every allocation
  bool races = true;   // shared-memory accesses of two threads with no barrier between them
  bool init = true;    // reads of shared memory no thread has written
  bool global = true;  // global memory touched by two blocks of one launch, one of them with a plain store
};

struct Settings {
  Schedule schedule = Schedule::WarpSerial;
  int workers = 1;
  StreamMode stream_mode = StreamMode::Deferred;
  size_t stack_bytes = size_t(64) << 10;
  size_t device_bytes = 0;  // reported total device memory
  int devices = 1;          // 0 or 1
  Checks checks;
  int64_t grid_cap = 0;  // 0: grid-stride launches take as many blocks as they ask for
  int arch = 90;         // compute capability x 10: 90, 100, 120, 121
};

// The settings of this process (parsed on first use; throws nvfp4lm::Error on a bad value).
const Settings& settings();
// The same object, for the emulator's own tests, which change the schedule or stream mode between launches.
Settings& settings_for_testing();
std::string_view schedule_name(Schedule schedule);
// "sm_90", "sm_121", ... for an arch of Settings.
std::string arch_name(int arch);
// One line for logs and `diagnose`: "schedule warp-serial, 1 worker, deferred streams".
std::string describe_settings();

}  // namespace nvfp4lm::emu
