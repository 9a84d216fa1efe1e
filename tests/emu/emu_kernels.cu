// See emu_kernels.h. Written as ordinary CUDA, compiled for the emulated device like the library's kernels.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/grid_stride.h"
#include "core/cuda/launch.h"
#include "emu/emu_kernels.h"
#include "ops/cuda/ptx.h"

namespace nvfp4lm::emu_test {
namespace {

using cuda::stream;
using namespace cuda;  // the PTX helpers of ops/cuda/ptx.h

// Device buffer of T, copied back on request.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t count) : count_(count) {
    NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) {
    NVFP4LM_CUDA_CHECK(
        cudaMemcpyAsync(data_, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice, stream()));
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  std::vector<T> read() const {
    std::vector<T> out(count_);
    NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(out.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost, stream()));
    NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(stream()));
    return out;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

// ---- warp collectives ---------------------------------------------------------------------------------------

template <typename T>
__device__ T shuffle_by(Shuffle mode, unsigned mask, T value, int arg, int width) {
  switch (mode) {
    case Shuffle::Idx:
      return __shfl_sync(mask, value, arg, width);
    case Shuffle::Up:
      return __shfl_up_sync(mask, value, static_cast<unsigned>(arg), width);
    case Shuffle::Down:
      return __shfl_down_sync(mask, value, static_cast<unsigned>(arg), width);
    default:
      return __shfl_xor_sync(mask, value, arg, width);
  }
}

__global__ void shuffle_kernel(Shuffle mode, int arg, int width, const unsigned* masks, unsigned calling, int* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (((calling >> lane) & 1u) == 0) {
    out[lane] = -1;
    return;
  }
  out[lane] = shuffle_by(mode, masks[lane], 1000 + lane, arg, width);
}

__global__ void shuffle_u64_kernel(Shuffle mode, int arg, int width, uint64_t* out) {
  const int lane = static_cast<int>(threadIdx.x);
  out[lane] = shuffle_by<uint64_t>(mode, 0xFFFFFFFFu, (uint64_t{1} << 40) | static_cast<uint64_t>(lane), arg, width);
}

__global__ void vote_kernel(const int* values, unsigned mask, VoteResult* out) {
  const int lane = static_cast<int>(threadIdx.x);
  if (((mask >> lane) & 1u) == 0) return;
  const int v = values[lane];
  VoteResult r;
  r.ballot = __ballot_sync(mask, v != 0);
  r.any = __any_sync(mask, v != 0);
  r.all = __all_sync(mask, v != 0);
  r.match_any = __match_any_sync(mask, v);
  r.match_all = __match_all_sync(mask, v, &r.match_all_predicate);
  r.reduce_add = __reduce_add_sync(mask, static_cast<unsigned>(v));
  r.reduce_min = __reduce_min_sync(mask, static_cast<unsigned>(v));
  r.reduce_max = __reduce_max_sync(mask, static_cast<unsigned>(v));
  r.reduce_min_signed = __reduce_min_sync(mask, v);
  out[lane] = r;
}

// ---- blocks -------------------------------------------------------------------------------------------------

__global__ void barrier_kernel(int exit_from, int* out) {
  NVFP4LM_SHARED(int[1024], slots);
  const int t = static_cast<int>(threadIdx.x);
  if (t >= exit_from) {
    out[t] = -1;
    return;
  }
  slots[t] = t;
  __syncthreads();
  out[t] = slots[(t + 1) % exit_from];
}

__global__ void order_kernel(int* out) {
  NVFP4LM_SHARED(int, counter);
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) counter = 0;
  __syncthreads();
  out[t] = atomicAdd(&counter, 1);
  const int peer = __shfl_sync(0xFFFFFFFFu, t, 0);
  out[64 + t] = atomicAdd(&counter, 1) + 0 * peer;
}

__global__ void poison_kernel(uint32_t* out) {
  NVFP4LM_SHARED(uint32_t[4], fixed);
  NVFP4LM_DYNAMIC_SHARED(uint32_t, dynamic);
  out[0] = fixed[threadIdx.x];
  out[1] = dynamic[threadIdx.x];
}

__global__ void atomic_kernel(unsigned long long* count, float* sum) {
  atomicAdd(count, 1ull);
  atomicAdd(sum, 0.5f);
}

// ---- tensor-core instructions ---------------------------------------------------------------------------------

// Fragments from the PTX layout (groupID g = lane / 4, threadID_in_group c = lane % 4), low half = lower index.
__device__ uint32_t pair(const uint16_t* m, int row, int col, int ld) {
  return static_cast<uint32_t>(m[row * ld + col]) | (static_cast<uint32_t>(m[row * ld + col + 1]) << 16);
}

__global__ void mma_kernel(const uint16_t* a, const uint16_t* b_transposed, const float* c, float* d_ldmatrix,
                           float* d_registers, uint32_t* a_ldmatrix, uint32_t* a_layout) {
  NVFP4LM_SHARED(uint16_t[16 * 16], a_tile);
  NVFP4LM_SHARED(uint16_t[16 * 16], b_tile);  // rows 0..7: B transposed ([n][k]); rows 8..15 zero
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32) {
    a_tile[i] = a[i];
    b_tile[i] = i < 128 ? b_transposed[i] : uint16_t{0};
  }
  __syncwarp();
  uint32_t frag[4];
  ldmatrix_x4(frag, smem_address(a_tile + (lane & 15) * 16 + (lane >> 4) * 8));
  uint32_t bfrag[4];  // matrices: n rows 0..7 x k 0..7, rows 8..15 (zero) x k 0..7, n 0..7 x k 8..15, zero
  ldmatrix_x4(bfrag, smem_address(b_tile + (((lane >> 3) & 1) * 8 + (lane & 7)) * 16 + (lane >> 4) * 8));
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)];
  mma_bf16(acc, frag, bfrag[0], bfrag[2]);
  for (int i = 0; i < 4; ++i) d_ldmatrix[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = acc[i];
  for (int i = 0; i < 4; ++i) a_ldmatrix[lane * 4 + i] = frag[i];

  const uint32_t layout[4] = {pair(a, g, 2 * t, 16), pair(a, g + 8, 2 * t, 16), pair(a, g, 2 * t + 8, 16),
                              pair(a, g + 8, 2 * t + 8, 16)};
  const uint32_t b0 = pair(b_transposed, g, 2 * t, 16), b1 = pair(b_transposed, g, 2 * t + 8, 16);
  for (int i = 0; i < 4; ++i) acc[i] = c[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)];
  mma_bf16(acc, layout, b0, b1);
  for (int i = 0; i < 4; ++i) d_registers[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = acc[i];
  for (int i = 0; i < 4; ++i) a_layout[lane * 4 + i] = layout[i];
}

// Lane l: registers from in[l] (a0..a3, b0, b1, scale-a-data, scale-b-data) and c[l], D to out[l].
__global__ void mma_fp4_kernel(const uint32_t* in, const float* c, uint16_t thread_id_a, uint16_t thread_id_b,
                               float* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const uint32_t* r = in + 8 * lane;
  const uint32_t a[4] = {r[0], r[1], r[2], r[3]};
  const uint32_t b[2] = {r[4], r[5]};
  float d[4] = {c[4 * lane], c[4 * lane + 1], c[4 * lane + 2], c[4 * lane + 3]};
  mma_fp4(d, a, b, r[6], thread_id_a, r[7], thread_id_b);
  for (int i = 0; i < 4; ++i) out[4 * lane + i] = d[i];
}

__global__ void ldmatrix_trans_kernel(const uint16_t* tile, uint32_t* out) {
  NVFP4LM_SHARED(uint16_t[16 * 16], shared_tile);
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 256; i += 32) shared_tile[i] = tile[i];
  __syncwarp();
  uint32_t r[4];
  // Matrix m = lane / 8 takes rows 8 (m & 1) .. of column block 8 (m >> 1).
  ldmatrix_x4_trans(r, smem_address(shared_tile + (((lane >> 3) & 1) * 8 + (lane & 7)) * 16 + (lane >> 4) * 8));
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

__global__ void cp_async_kernel(const uint32_t* words, bool zero_fill, uint32_t* out) {
  NVFP4LM_DYNAMIC_SHARED(uint32_t, staged);
  const int t = static_cast<int>(threadIdx.x);  // thread t copies words 4t .. 4t + 3
  cp_async_16(smem_address(staged + 4 * t), words + 4 * t, !zero_fill);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  const int n = static_cast<int>(blockDim.x) * 4;
  for (int i = 0; i < 4; ++i) out[4 * t + i] = staged[(4 * t + i + 4) % n];  // a neighbour's copy
}

// ---- misuse ---------------------------------------------------------------------------------------------------

__global__ void misuse_kernel(Misuse kind, int* out) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  NVFP4LM_DYNAMIC_SHARED(unsigned char, arena);
  switch (kind) {
    case Misuse::LaneOutsideItsMask:
      out[t] = __shfl_sync(0x0000FFFFu, t, 0);  // lanes 16..31 are not in the mask
      break;
    case Misuse::ShuffleWidthNotPowerOfTwo:
      out[t] = __shfl_xor_sync(0xFFFFFFFFu, t, 1, 12);
      break;
    case Misuse::DivergentBarrier:
      if (t < 32) {
        __syncthreads();
      } else {
        __syncthreads();
      }
      break;
    case Misuse::Deadlock:
      if (t == 5) __syncthreads();
      out[t] = __shfl_sync(0xFFFFFFFFu, t, 0);
      break;
    case Misuse::LaneMismatch:
      out[t] = lane < 16 ? __shfl_sync(0xFFFFFFFFu, t, 0) : static_cast<int>(__ballot_sync(0xFFFFFFFFu, t & 1));
      break;
    case Misuse::MmaAfterLanesExited: {
      if (lane >= 16) return;
      float d[4] = {0, 0, 0, 0};
      const uint32_t a[4] = {0, 0, 0, 0};
      mma_bf16(d, a, 0, 0);
      out[t] = static_cast<int>(d[0]);
      break;
    }
    case Misuse::LdmatrixMisaligned: {
      for (int i = 0; i < 32; ++i) arena[32 * lane + i] = 0;  // initialised: only the address is wrong
      __syncwarp();
      uint32_t r[4];
      ldmatrix_x4(r, smem_address(arena + 16 * lane + (lane == 7 ? 4 : 0)));
      out[t] = static_cast<int>(r[0]);
      break;
    }
    case Misuse::CpAsyncPastSharedMemory:
      cp_async_16(smem_address(arena + 1024 + 16 * t), out, true);  // the launch has 1 KiB
      cp_async_commit();
      cp_async_wait_all();
      break;
    case Misuse::SharedRace: {
      NVFP4LM_SHARED(int[64], cells);
      cells[t] = t;
      __syncthreads();
      cells[(t + 33) % 64] = -t;  // another thread's cell, which it reads below: no barrier between
      out[t] = cells[t];
      break;
    }
    case Misuse::SharedOutOfBounds: {
      NVFP4LM_SHARED(int[8], small);
      small[t] = t;
      break;
    }
    case Misuse::SharedUninitialised: {
      NVFP4LM_SHARED(int[4], never);
      out[t] = never[t % 4];
      break;
    }
    case Misuse::CpAsyncReadBeforeBarrier: {
      auto* words = reinterpret_cast<int*>(arena);
      words[t] = 0;
      __syncthreads();
      cp_async_4(smem_address(words + t), out + t, true);
      cp_async_commit();
      cp_async_wait_all();
      out[t] = words[(t + 32) % 64];  // the other warp's copy: its wait is no barrier for this thread
      break;
    }
    default:
      break;
  }
}

__global__ void big_shared_kernel(int* out) {
  NVFP4LM_DYNAMIC_SHARED(int, big);
  big[threadIdx.x] = 1;
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void write_past_kernel(int* data) { data[64] = 1; }  // the buffer has 64 ints

__global__ void write_value_kernel(int* data, int value) { *data = value; }

__global__ void increment_kernel(int* counter) { *counter += 1; }

__global__ void copy_value_kernel(const int* from, int* to) { *to = *from; }

// ---- blocks of one launch and global memory -------------------------------------------------------------------

constexpr int kPatternBlocks = 4, kPatternThreads = 32;

// data: kPatternBlocks * kPatternThreads ints of input (cell i holds i); out: as many ints, zeroed; words: 4 ints,
// zeroed.
__global__ void global_pattern_kernel(GlobalPattern pattern, const int* data, int* out, int* words) {
  const int t = static_cast<int>(threadIdx.x), b = static_cast<int>(blockIdx.x);
  const int cell = b * kPatternThreads + t;
  switch (pattern) {
    case GlobalPattern::PlainMaxOfBlocks:
      if (t == 0 && data[cell] + 1 > words[0]) words[0] = data[cell] + 1;
      break;
    case GlobalPattern::AddIntoOneRow:
      out[t] += data[cell];
      break;
    case GlobalPattern::ReadNeighbourBlocksWrite:
      if (t == 0) {
        out[b] = b + 1;
        words[b] = out[(b + 1) % kPatternBlocks];
      }
      break;
    case GlobalPattern::PlainReadOfAtomicCounter:
      if (t == 0) {
        atomicAdd(&words[0], 1);
        out[b] = words[0];
      }
      break;
    case GlobalPattern::DisjointWritesSharedInput: {
      int sum = 0;
      for (int i = 0; i < kPatternBlocks * kPatternThreads; ++i) sum += data[i];
      out[cell] = sum + t;
      break;
    }
    case GlobalPattern::AtomicsFromEveryBlock:
      atomicAdd(&words[0], 1);
      atomicMax(&words[1], data[cell]);
      break;
    case GlobalPattern::OwnBytesReadBack:
      out[cell] = data[cell] * 2;
      __syncthreads();
      out[b * kPatternThreads + (t + 1) % kPatternThreads] += 1;
      break;
    case GlobalPattern::FencedLastBlockReduces: {
      NVFP4LM_SHARED(int, ticket);
      if (t == 0) {
        out[b] = data[cell];
        __threadfence();
        ticket = atomicAdd(&words[0], 1);
      }
      __syncthreads();
      if (ticket == kPatternBlocks - 1 && t == 0) {
        int total = 0;
        for (int i = 0; i < kPatternBlocks; ++i) total += out[i];
        words[1] = total;
      }
      break;
    }
    case GlobalPattern::VolatileFirstErrorSlot: {
      volatile int* slot = words;
      if (t == 0 && *slot == 0) *slot = b + 1;
      break;
    }
  }
}

constexpr int kStrideItems = 64 * 256;

// Each iteration: the block's threads stage their items in shared memory, meet, and write a neighbour's item
// doubled; the barrier at the end keeps the next iteration's staging from overwriting what others still read.
__global__ void grid_stride_reuse_kernel(const int* in, int* out, int items, bool barrier_at_loop_end) {
  NVFP4LM_SHARED(int[256], staged);
  const int t = static_cast<int>(threadIdx.x);
  for (int base = static_cast<int>(blockIdx.x) * 256; base < items; base += static_cast<int>(gridDim.x) * 256) {
    staged[t] = in[base + t];
    __syncthreads();
    out[base + (t + 1) % 256] = 2 * staged[(t + 1) % 256];
    if (barrier_at_loop_end) __syncthreads();
  }
}

}  // namespace

std::vector<int> shuffle(Shuffle mode, int arg, int width, const std::vector<unsigned>& lane_masks,
                         unsigned calling_lanes) {
  const DeviceArray<unsigned> masks(lane_masks);
  DeviceArray<int> out(32);
  NVFP4LM_LAUNCH(shuffle_kernel, 1, 32, 0)(mode, arg, width, masks.get(), calling_lanes, out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

std::vector<uint64_t> shuffle_u64(Shuffle mode, int arg, int width) {
  DeviceArray<uint64_t> out(32);
  NVFP4LM_LAUNCH(shuffle_u64_kernel, 1, 32, 0)(mode, arg, width, out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

std::vector<VoteResult> votes(const std::vector<int>& values, unsigned mask) {
  const DeviceArray<int> in(values);
  DeviceArray<VoteResult> out(32);
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, 32 * sizeof(VoteResult), stream()));
  NVFP4LM_LAUNCH(vote_kernel, 1, 32, 0)(in.get(), mask, out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

std::vector<int> barrier_with_exits(int threads, int exit_from) {
  DeviceArray<int> out(static_cast<size_t>(threads));
  NVFP4LM_LAUNCH(barrier_kernel, 1, threads, 0)(exit_from, out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

std::vector<int> execution_order() {
  DeviceArray<int> out(128);
  NVFP4LM_LAUNCH(order_kernel, 1, 64, 0)(out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

Poison poison() {
  DeviceArray<uint32_t> out(2);
  NVFP4LM_LAUNCH(poison_kernel, 1, 1, 64)(out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  const std::vector<uint32_t> words = out.read();
  const DeviceArray<uint32_t> fresh(1);
  return Poison{words[0], words[1], fresh.read()[0]};
}

AtomicCounts atomic_counts(int blocks) {
  DeviceArray<unsigned long long> count(1);
  DeviceArray<float> sum(1);
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), stream()));
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(sum.get(), 0, sizeof(float), stream()));
  NVFP4LM_LAUNCH(atomic_kernel, blocks, 256, 0)(count.get(), sum.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return AtomicCounts{count.read()[0], sum.read()[0]};
}

MmaResult mma(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, const std::vector<float>& c) {
  std::vector<uint16_t> b_transposed(16 * 8);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) b_transposed[n * 16 + k] = b[k * 8 + n];
  const DeviceArray<uint16_t> da(a), db(b_transposed);
  const DeviceArray<float> dc(c);
  DeviceArray<float> d_ldmatrix(128), d_registers(128);
  DeviceArray<uint32_t> a_ldmatrix(128), a_layout(128);
  NVFP4LM_LAUNCH(mma_kernel, 1, 32, 0)
  (da.get(), db.get(), dc.get(), d_ldmatrix.get(), d_registers.get(), a_ldmatrix.get(), a_layout.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return MmaResult{d_ldmatrix.read(), d_registers.read(), a_ldmatrix.read(), a_layout.read()};
}

std::vector<uint32_t> ldmatrix_transposed(const std::vector<uint16_t>& tile) {
  const DeviceArray<uint16_t> in(tile);
  DeviceArray<uint32_t> out(128);
  NVFP4LM_LAUNCH(ldmatrix_trans_kernel, 1, 32, 0)(in.get(), out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

std::vector<uint32_t> cp_async_roundtrip(const std::vector<uint32_t>& words, bool zero_fill) {
  const DeviceArray<uint32_t> in(words);
  DeviceArray<uint32_t> out(words.size());
  const auto threads = static_cast<unsigned>(words.size() / 4);
  NVFP4LM_LAUNCH(cp_async_kernel, 1, threads, words.size() * 4)(in.get(), zero_fill, out.get());
  NVFP4LM_CUDA_CHECK_LAUNCH();
  return out.read();
}

Fp4MmaOutcome run_mma_fp4(const Fp4MmaLanes& lanes) {
  std::vector<uint32_t> registers(32 * 8);
  std::vector<float> c(32 * 4);
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) registers[static_cast<size_t>(8 * lane + i)] = lanes.a[lane][i];
    registers[static_cast<size_t>(8 * lane + 4)] = lanes.b[lane][0];
    registers[static_cast<size_t>(8 * lane + 5)] = lanes.b[lane][1];
    registers[static_cast<size_t>(8 * lane + 6)] = lanes.scale_a[lane];
    registers[static_cast<size_t>(8 * lane + 7)] = lanes.scale_b[lane];
    for (int i = 0; i < 4; ++i) c[static_cast<size_t>(4 * lane + i)] = lanes.c[lane][i];
  }
  const DeviceArray<uint32_t> in(registers);
  const DeviceArray<float> accumulators(c);
  DeviceArray<float> out(32 * 4);
  NVFP4LM_LAUNCH(mma_fp4_kernel, 1, 32, 0)(in.get(), accumulators.get(), lanes.thread_id_a, lanes.thread_id_b,
                                          out.get());
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream());
  Fp4MmaOutcome outcome;
  outcome.error = static_cast<int>(status);
  outcome.message = cudaGetErrorString(status);
  if (status != cudaSuccess) {
    cudaDeviceReset();  // the emulator's reset: the sticky error goes, allocations stay
    cudaGetLastError();
    return outcome;
  }
  const std::vector<float> d = out.read();
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) outcome.d[lane][i] = d[static_cast<size_t>(4 * lane + i)];
  return outcome;
}

Outcome misuse(Misuse kind) {
  Outcome outcome;
  int* out = nullptr;
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&out), 1024 * sizeof(int)));
  cudaError_t status = cudaSuccess;
  if (kind == Misuse::TooMuchDynamicShared) {
    NVFP4LM_LAUNCH(big_shared_kernel, 1, 32, 64 << 10)(out);
    status = cudaGetLastError();
  } else if (kind == Misuse::HostPointerCopy) {
    int host[4] = {};
    int other[4] = {};
    status = cudaMemcpyAsync(other, host, sizeof(host), cudaMemcpyDeviceToHost, stream());
  } else {
    const bool two_warps = kind == Misuse::DivergentBarrier || kind == Misuse::Deadlock || kind == Misuse::SharedRace ||
                           kind == Misuse::CpAsyncReadBeforeBarrier;
    const unsigned threads = two_warps ? 64 : 32;
    NVFP4LM_LAUNCH(misuse_kernel, 1, threads, 1024)(kind, out);
    status = cudaGetLastError();
    if (status == cudaSuccess) status = cudaStreamSynchronize(stream());
  }
  outcome.error = static_cast<int>(status);
  outcome.message = cudaGetErrorString(status);
  void* probe = nullptr;
  const cudaError_t later = cudaMalloc(&probe, 16);
  outcome.sticky = later != cudaSuccess && later == status;
  if (later == cudaSuccess) cudaFree(probe);
  cudaDeviceReset();  // the emulator's reset: the sticky error goes, allocations stay
  cudaGetLastError();
  cudaFree(out);
  return outcome;
}

void write_past_device_allocation() {
  int* data = nullptr;
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data), 64 * sizeof(int)));
  NVFP4LM_LAUNCH(write_past_kernel, 1, 1, 0)(data);
  cudaStreamSynchronize(stream());
}

Outcome global_pattern(GlobalPattern pattern) {
  constexpr int cells = kPatternBlocks * kPatternThreads;
  std::vector<int> input(cells);
  for (int i = 0; i < cells; ++i) input[i] = i;
  const DeviceArray<int> data(input);
  DeviceArray<int> out(cells), words(4);
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(out.get(), 0, cells * sizeof(int), stream()));
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(words.get(), 0, 4 * sizeof(int), stream()));
  NVFP4LM_LAUNCH(global_pattern_kernel, kPatternBlocks, kPatternThreads, 0)
  (pattern, data.get(), out.get(), words.get());
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream());
  Outcome outcome;
  outcome.error = static_cast<int>(status);
  outcome.message = cudaGetErrorString(status);
  outcome.sticky = status != cudaSuccess;
  cudaDeviceReset();
  cudaGetLastError();
  return outcome;
}

GridStrideRun grid_stride_reuse(bool barrier_at_loop_end) {
  std::vector<int> input(kStrideItems);
  for (int i = 0; i < kStrideItems; ++i) input[i] = i;
  const DeviceArray<int> in(input);
  DeviceArray<int> out(kStrideItems);
  GridStrideRun run;
  run.blocks = grid_stride_blocks(kStrideItems, 256);
  NVFP4LM_LAUNCH(grid_stride_reuse_kernel, run.blocks, 256, 0)(in.get(), out.get(), kStrideItems, barrier_at_loop_end);
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaStreamSynchronize(stream());
  run.outcome.error = static_cast<int>(status);
  run.outcome.message = cudaGetErrorString(status);
  if (status == cudaSuccess) {
    const std::vector<int> result = out.read();
    run.all_items_right = true;
    for (int i = 0; i < kStrideItems; ++i) run.all_items_right = run.all_items_right && result[i] == 2 * i;
  }
  cudaDeviceReset();
  cudaGetLastError();
  return run;
}

DeferredCopy deferred_copy() {
  int* device = nullptr;
  int* host = nullptr;
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), sizeof(int), cudaHostAllocDefault));
  *host = 0;
  NVFP4LM_LAUNCH(write_value_kernel, 1, 1, 0)(device, 42);
  NVFP4LM_CUDA_CHECK_LAUNCH();
  NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(host, device, sizeof(int), cudaMemcpyDeviceToHost, stream()));
  DeferredCopy result;
  result.before_sync = *static_cast<volatile int*>(host);
  NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(stream()));
  result.after_sync = *host;
  NVFP4LM_CUDA_CHECK(cudaFreeHost(host));
  NVFP4LM_CUDA_CHECK(cudaFree(device));
  return result;
}

CaptureResult capture() {
  CaptureResult result;
  int* counter = nullptr;
  int* filled = nullptr;
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counter), sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&filled), sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(int), stream()));
  const cudaStream_t s = stream();

  // A synchronisation inside the capture invalidates it.
  cudaGraph_t graph = nullptr;
  NVFP4LM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  NVFP4LM_LAUNCH(increment_kernel, 1, 1, 0)(counter);
  result.sync_in_capture = static_cast<int>(cudaStreamSynchronize(s));
  result.end_invalidated = static_cast<int>(cudaStreamEndCapture(s, &graph));
  result.graph_null = graph == nullptr;
  cudaGetLastError();

  // So does a copy into pageable host memory.
  int pageable = 0;
  NVFP4LM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  result.pageable_copy_in_capture =
      static_cast<int>(cudaMemcpyAsync(&pageable, counter, sizeof(int), cudaMemcpyDeviceToHost, s));
  cudaStreamEndCapture(s, &graph);
  cudaGetLastError();

  // A valid capture replays its kernel (with the arguments of the capture) and its memset.
  NVFP4LM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  NVFP4LM_LAUNCH(increment_kernel, 1, 1, 0)(counter);
  NVFP4LM_CUDA_CHECK(cudaMemsetAsync(filled, 0x01, sizeof(int), s));
  NVFP4LM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  NVFP4LM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &result.nodes));
  cudaGraphExec_t exec = nullptr;
  NVFP4LM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) NVFP4LM_CUDA_CHECK(cudaGraphLaunch(exec, s));
  NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(s));  // cudaMemcpy (legacy stream) does not wait for a non-blocking one
  NVFP4LM_CUDA_CHECK(cudaMemcpy(&result.counter_after_replays, counter, sizeof(int), cudaMemcpyDeviceToHost));
  NVFP4LM_CUDA_CHECK(cudaMemcpy(&result.memset_value, filled, sizeof(int), cudaMemcpyDeviceToHost));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(counter);
  cudaFree(filled);
  return result;
}

StreamOrder stream_order() {
  int* value = nullptr;
  int* seen = nullptr;
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&value), sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&seen), 2 * sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaMemset(value, 0, sizeof(int)));
  NVFP4LM_CUDA_CHECK(cudaMemset(seen, 0, 2 * sizeof(int)));
  cudaStream_t streams[2] = {nullptr, nullptr};
  NVFP4LM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[0], cudaStreamNonBlocking));
  NVFP4LM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[1], cudaStreamDefault));
  for (int i = 0; i < 2; ++i) {
    // A memset on the legacy default stream, then a kernel that reads it on another stream.
    NVFP4LM_CUDA_CHECK(cudaMemsetAsync(value, 0x01 + i, sizeof(int), nullptr));
    NVFP4LM_LAUNCH_ON(copy_value_kernel, 1, 1, 0, streams[i])(value, seen + i);
    NVFP4LM_CUDA_CHECK_LAUNCH();
  }
  NVFP4LM_CUDA_CHECK(cudaDeviceSynchronize());
  int host[2] = {};
  NVFP4LM_CUDA_CHECK(cudaMemcpy(host, seen, sizeof(host), cudaMemcpyDeviceToHost));
  for (cudaStream_t s : streams) NVFP4LM_CUDA_CHECK(cudaStreamDestroy(s));
  cudaFree(value);
  cudaFree(seen);
  return StreamOrder{host[0], host[1]};
}

}  // namespace nvfp4lm::emu_test
