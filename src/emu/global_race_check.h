// The global-memory race check of the emulated device: the blocks of one launch run in an order CUDA leaves
// undefined (and concurrently on a GPU), so two blocks touching the same bytes of device memory, at least one of
// them with a plain store, make the result depend on that order. With one worker the emulator runs blocks one
// after another, and such a kernel passes every schedule by luck; this check records, per byte of device memory
// and per launch, who touched it, and reports the second block:
//  - a plain write to bytes another block of the launch read or wrote (plain or atomic);
//  - a plain read of bytes another block wrote with a plain store (unless that block executed __threadfence(),
//    the publication fence of the "last block reduces" pattern) or updated atomically;
//  - an atomic on bytes another block accessed with plain loads or stores.
// Atomic operations (and volatile accesses, CUDA's older spelling of relaxed atomics) by any number of blocks do not
// race with each other. Accesses inside one block are the shared-memory checker's business for shared memory and
// nobody's for global memory (a block orders its own threads with __syncthreads; the check does not model
// intra-block global-memory ordering).
//
// Shadow: 4 bytes per byte of device memory (state and block), in a reservation parallel to the device range
// (device_memory.h) that is committed only for allocated pages, plus a launch epoch per 4 KiB page, so a page's
// shadow is cleared when a launch first touches it instead of at every launch. The check runs when
// NVFP4LM_EMU_CHECK includes "global" (the default) and launches run on one worker (NVFP4LM_EMU_WORKERS=1, the
// default): with several workers, blocks of a launch run concurrently and the shadow would race itself.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace nvfp4lm::emu {

enum class GlobalAccess : uint8_t { Read, Write, Atomic };

struct GlobalAccessProblem {
  bool race = false;
  uintptr_t address = 0;     // the first byte that races
  uint32_t other_block = 0;  // linear index of the block whose access conflicts (when not several)
  bool several_blocks = false;
  GlobalAccess other = GlobalAccess::Read;  // what that block (those blocks) did
};

// Whether the running launch is checked (set by global_race_check_begin_launch).
extern bool global_race_check_active;

// A new launch: new epoch, no fences, and whether the check runs for it.
void global_race_check_begin_launch();

// Records `bytes` accessed at `address` (device memory: in_device_span(address)) by block `block` (linear index)
// and returns the first conflict with another block of the launch.
GlobalAccessProblem global_race_check_access(uint32_t block, const void* address, size_t bytes, GlobalAccess kind);

// Device pages [start, start + bytes) were mapped (an allocation) or are about to be unmapped (its free): the shadow
// of exactly those pages is committed or dropped. Called by device_memory.cpp under its lock.
void global_race_check_pages(uintptr_t start, size_t bytes, bool mapped);

// __threadfence() by a thread of block `block`: its earlier plain stores become readable by other blocks.
void global_race_check_fence(uint32_t block);

// One line for `diagnose` and logs: "on", "off (NVFP4LM_EMU_CHECK)", "off (2 workers)", ...
std::string global_race_check_state();

}  // namespace nvfp4lm::emu
