// Kernels that test the emulated CUDA device itself (emu_kernels.cu), behind plain C++ functions: each runs one
// small launch through the CUDA runtime API and returns what the threads computed, or how the launch ended.
// Only built in the emulated build (NVFP4LM_CUDA=EMULATE); test_emulator.cpp states what each must give.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4lm::emu_test {

// ---- warp collectives (one warp) ------------------------------------------------------------------------------

enum class Shuffle { Idx, Up, Down, Xor };

// Lane l holds 1000 + l and, if it is in `calling_lanes`, calls the shuffle with `arg` (source lane, delta or lane
// mask), `width` and mask `lane_masks[l]`. Returns each lane's result (-1 for lanes that did not call).
std::vector<int> shuffle(Shuffle mode, int arg, int width, const std::vector<unsigned>& lane_masks,
                         unsigned calling_lanes);
// The same with a 64-bit value per lane (1 << 40 | l), full mask: CUDA shuffles it as two 32-bit halves.
std::vector<uint64_t> shuffle_u64(Shuffle mode, int arg, int width);

struct VoteResult {
  unsigned ballot = 0;
  int any = 0, all = 0;
  unsigned match_any = 0, match_all = 0;
  int match_all_predicate = 0;
  unsigned reduce_add = 0, reduce_min = 0, reduce_max = 0;
  int reduce_min_signed = 0;
};
// Lanes in `mask` call every vote / match / reduce with value values[l] (predicate: value != 0).
std::vector<VoteResult> votes(const std::vector<int>& values, unsigned mask);

// ---- blocks ---------------------------------------------------------------------------------------------------

// A block of `threads`; threads >= exit_from return at once, the others write their index to shared memory, meet at
// __syncthreads and read their neighbour's (index + 1, wrapping within those that stayed).
std::vector<int> barrier_with_exits(int threads, int exit_from);

// The order threads ran in, as tickets from a shared counter: each of 64 threads takes one ticket, meets its warp
// in a __shfl_sync, takes a second. Returns [first tickets..., second tickets...].
std::vector<int> execution_order();

// What shared memory holds before anyone writes it: the first word of a static and of the dynamic shared array,
// and what a fresh cudaMalloc holds. (Run with the initialisation check off: such a read is an error otherwise.)
struct Poison {
  uint32_t static_shared = 0, dynamic_shared = 0, device_memory = 0;
};
Poison poison();

// Every thread of `blocks` blocks of 256 adds 1 to one counter with atomicAdd, and 0.5f to a float one.
struct AtomicCounts {
  unsigned long long count = 0;
  float sum = 0;
};
AtomicCounts atomic_counts(int blocks);

// ---- tensor-core instructions ---------------------------------------------------------------------------------

// One mma.sync.m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X (NVFP4 x NVFP4, UE4M3 scales): lane l brings the
// registers of `lanes` (what the test packed, in whatever layout it believes), the launch returns every lane's D, or
// how it ended when the emulator refused it (a fault is cleared with cudaDeviceReset before returning).
struct Fp4MmaLanes {
  uint32_t a[32][4] = {};
  uint32_t b[32][2] = {};
  uint32_t scale_a[32] = {}, scale_b[32] = {};
  float c[32][4] = {};
  uint16_t thread_id_a = 0, thread_id_b = 0;
};
struct Fp4MmaOutcome {
  float d[32][4] = {};
  int error = 0;  // cudaError_t
  std::string message;
};
Fp4MmaOutcome run_mma_fp4(const Fp4MmaLanes& lanes);

// D = A B + C for A 16x16 and B 16x8 as BF16 bits (row-major), C 16x8 float: mma.sync fed with fragments built
// from A and B by ldmatrix (A, and B stored transposed) and, separately, by the PTX layout from registers.
struct MmaResult {
  std::vector<float> d_from_ldmatrix;  // 16 x 8
  std::vector<float> d_from_registers;
  std::vector<uint32_t> a_fragments_ldmatrix, a_fragments_layout;  // 32 lanes x 4
};
MmaResult mma(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<float>& c);

// ldmatrix .x4 .trans of a 16x16 BF16 tile stored row-major (rows as addresses): each lane's 4 registers.
std::vector<uint32_t> ldmatrix_transposed(const std::vector<uint16_t>& tile);

// cp.async of 16 bytes (src-size 16 or 0) then wait and barrier: the shared bytes as each thread saw them.
std::vector<uint32_t> cp_async_roundtrip(const std::vector<uint32_t>& words, bool zero_fill);

// ---- misuse: how the launch ends ------------------------------------------------------------------------------

enum class Misuse {
  LaneOutsideItsMask,         // __shfl_sync whose mask does not name the calling lane
  ShuffleWidthNotPowerOfTwo,  // width 12
  DivergentBarrier,           // half the block at one __syncthreads, half at another
  Deadlock,                   // a lane waits in a shuffle for a lane that waits at __syncthreads
  LaneMismatch,               // half a warp in __shfl_sync, the other half in __ballot_sync, one full mask
  MmaAfterLanesExited,        // mma.sync with half the warp gone
  LdmatrixMisaligned,         // a row address that is not 16-byte aligned
  CpAsyncPastSharedMemory,    // cp.async into bytes past the dynamic shared memory
  TooMuchDynamicShared,       // 64 KiB of dynamic shared memory without the attribute
  HostPointerCopy,            // cudaMemcpy device-to-host from a host pointer
  SharedRace,                 // each thread reads its neighbour's shared cell with no barrier after the writes
  SharedOutOfBounds,          // a static shared int[8] indexed up to 31
  SharedUninitialised,        // a static shared array read before anyone writes it
  CpAsyncReadBeforeBarrier,   // a thread reads another's cp.async data after its own wait, with no barrier
};
struct Outcome {
  int error = 0;        // cudaError_t of the launch (or of the synchronisation that reported it)
  std::string message;  // cudaGetErrorString of it
  bool sticky = false;  // whether a later cudaMalloc fails with the same error
};
// Runs the misuse, then clears a sticky error with cudaDeviceReset so the next test starts clean.
Outcome misuse(Misuse kind);

// A kernel writes one int past the end of a 256-byte device buffer: the process dies with a report on stderr.
void write_past_device_allocation();

// ---- blocks of one launch and global memory (4 blocks of 32 threads) -------------------------------------------

enum class GlobalPattern {
  // races: the result depends on the order of the blocks
  PlainMaxOfBlocks,          // thread 0 of each block: if (v > *max) *max = v (a plain compare-and-store)
  AddIntoOneRow,             // each block adds its row into the same output row, non-atomically
  ReadNeighbourBlocksWrite,  // block b writes cell b, then reads cell b + 1
  PlainReadOfAtomicCounter,  // each block atomicAdds to a counter, then reads it with a plain load
  // not races
  DisjointWritesSharedInput,  // every block reads the whole input, writes only its own cells
  AtomicsFromEveryBlock,      // atomicAdd and atomicMax of every thread into two words
  OwnBytesReadBack,           // each block writes its cells, __syncthreads, reads them back
  FencedLastBlockReduces,     // partials + __threadfence + atomic ticket; the last block sums the partials
  VolatileFirstErrorSlot,     // every block stores into one volatile slot (the "first error" record)
};
// Runs the pattern on zeroed buffers; like misuse(), reports how the launch ended and resets a sticky error.
Outcome global_pattern(GlobalPattern pattern);

// The number of blocks grid_stride_blocks() picks for 64 * 256 items of 256 per block (64, or NVFP4LM_EMU_GRID_CAP),
// and whether a grid-stride kernel over those items, each block reusing one shared scratch per iteration, wrote
// every item correctly. `barrier_at_loop_end` false drops the barrier before the next iteration overwrites the
// scratch: a race the shared-memory check sees only when a block runs more than one iteration.
struct GridStrideRun {
  unsigned blocks = 0;
  bool all_items_right = false;
  Outcome outcome;
};
GridStrideRun grid_stride_reuse(bool barrier_at_loop_end);

// ---- streams and graphs ---------------------------------------------------------------------------------------

// A kernel writes 42; a device-to-host copy into pinned memory follows on the stream. The host value before and
// after cudaStreamSynchronize.
struct DeferredCopy {
  int before_sync = 0, after_sync = 0;
};
DeferredCopy deferred_copy();

struct CaptureResult {
  int sync_in_capture = 0;  // cudaStreamSynchronize inside a capture
  int end_invalidated = 0;  // cudaStreamEndCapture after it
  bool graph_null = false;
  int pageable_copy_in_capture = 0;  // a device-to-host copy into pageable memory inside a capture
  size_t nodes = 0;                  // of a valid capture: a kernel and a memset
  int counter_after_replays = 0;     // the kernel adds 1 per replay; 3 replays
  int memset_value = 0;              // what the captured memset wrote
};
CaptureResult capture();

// A memset on the legacy default stream, then a kernel that reads the memory on a non-blocking stream (unordered
// with it) and on a blocking one (ordered after it): what each kernel read (0: the old value, else the memset's).
struct StreamOrder {
  int non_blocking = 0, blocking = 0;
};
StreamOrder stream_order();

}  // namespace nvfp4lm::emu_test
