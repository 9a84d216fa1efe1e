// Shared memory of one emulated thread block, and the checks on every access to it (compute-sanitizer's memcheck,
// racecheck and initcheck, for shared memory):
//  - layout: the launch's dynamic shared memory at offset 0 (1 KiB aligned), each static __shared__ variable
//    (NVFP4LM_SHARED) placed after it when a thread first reaches its declaration, 64-byte red zones between them
//    and after the last; everything poisoned (0xFF: NaN as a float) when the block starts or the variable is placed;
//  - bounds: an access that touches a red zone or bytes past the last allocation is out of bounds (a GPU would
//    read a neighbour or fault);
//  - races: per byte, the last writer and a reader since the last __syncthreads. A write after another thread's
//    read or write, or a read after another thread's write, with no __syncthreads between them (and, for two lanes
//    of one warp, no warp-level synchronisation either) is a race;
//  - initialisation: reading a byte no thread of the block has written (cp.async counts as a write) is an error.
// The kernels' own loads and stores reach access() through the memory-access hooks of memory_check.cpp (the
// emulated .cu files are compiled with -fsanitize=thread instrumentation and no TSan runtime); cp.async and
// ldmatrix report theirs from the block runner. NVFP4LM_EMU_CHECK chooses the checks (settings.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4lm::emu {

// A static __shared__ variable of some kernel: one per declaration (and template instantiation).
struct SharedSite {
  size_t bytes;
  size_t alignment;
  const char* name;
};

// H100 and B200 (compute capability 9.0, 10.0): 227 KiB of shared memory per block with the opt-in attribute; SM
// 12.x (RTX PRO / RTX 50, the GB10): a 100 KiB carveout an SM (the toolkit's cuda_occupancy.h, "case 12"), 99 KiB a
// block; 48 KiB without the attribute and for static variables everywhere. kSharedPerBlockOptin is the most any
// arch allows (the block's shared-memory window); shared_per_block_optin() what the presented arch does.
inline constexpr size_t kSharedPerBlockOptin = 232448;
inline constexpr size_t kSharedPerBlockOptinSm12x = 101376;
inline constexpr size_t kSharedPerBlockDefault = 49152;
size_t shared_per_block_optin();
inline constexpr size_t kStaticSharedLimit = 49152;

// Who accesses: a thread of the block and how far it has synchronised with its warp (see BlockRunner).
struct SharedAccessor {
  int thread = 0;  // linear index in the block
  int warp = 0;
  uint32_t warp_sync = 0;
};

struct SharedAccessProblem {
  enum class Kind { None, OutOfBounds, Uninitialised, Race } kind = Kind::None;
  size_t offset = 0;         // the first offending byte
  int other_thread = -1;     // Race: the thread whose access conflicts
  bool other_wrote = false;  // Race: whether that access was a write
};

class SharedMemory {
 public:
  SharedMemory();
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  // A new block: `dynamic_bytes` of dynamic shared memory, no static variables, no access history.
  void begin_block(size_t dynamic_bytes);
  unsigned char* base() const { return base_; }
  // Bytes from base() a shared address may reach (allocations, red zones, slack): the hooks' quick range test.
  size_t span() const { return span_; }
  // Places (or finds) static variable `site` in this block; returns its offset, or SIZE_MAX with `error` set.
  size_t place_static(const SharedSite& site, std::string& error);
  // One past the last allocated byte: where cp.async / ldmatrix addresses must stay below.
  size_t used() const { return used_; }

  // Records an access of `bytes` at `offset` by `who` in barrier phase `phase` (the count of barriers the block
  // has passed); returns the first thing wrong with it. The caller decides which kinds it reports.
  SharedAccessProblem access(const SharedAccessor& who, size_t offset, size_t bytes, bool write, uint32_t phase);
  // "static 'tile_amax' + 12", "dynamic shared memory + 0x40", "the red zone after static 'total'", ...
  std::string describe(size_t offset) const;

 private:
  struct Shadow {
    int16_t writer;  // thread that last wrote the byte; kNeverWritten, kUnallocated
    int16_t reader;  // a thread that read it since its phase began, or -1
    uint32_t write_phase, read_phase;
    uint32_t write_sync, read_sync;
  };
  void mark(size_t offset, size_t bytes, int16_t writer);

  unsigned char* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  unsigned char* base_ = nullptr;
  size_t span_ = 0;
  size_t dynamic_bytes_ = 0;
  size_t used_ = 0;          // end of the last allocation
  size_t static_bytes_ = 0;  // sum of static sizes (the 48 KiB rule)
  size_t high_water_ = 0;    // shadow bytes that may hold history from earlier blocks
  std::vector<std::pair<const SharedSite*, size_t>> statics_;
  std::vector<Shadow> shadow_;
};

}  // namespace nvfp4lm::emu
