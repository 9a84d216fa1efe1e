// Device-side token selection (ops/sampling.h), one CTA of 1024 threads per row of logits.
//  - argmax_kernel: (value, id) reduction, lowest id on ties, NaN ignored.
//  - sample_kernel: the top-k / top-p thresholds by radix select over order-preserving 32-bit keys of
//    z = logit / temperature, 8 bits per pass from the top: each pass builds a 256-bin histogram of the keys
//    that match the digits chosen so far (counts, and masses = sums of the 2^40 fixed-point weights) and picks
//    the bin where the running count (top-k) or mass (top-p) from the top reaches what is still needed. Four
//    passes give the exact threshold key and the exact kept mass. Histogram updates are aggregated per warp
//    (lanes with the same bin add once; 64-bit masses summed as two exact 32-bit halves with redux.sync), so
//    a row whose keys crowd into one bin does not serialize on shared-memory atomics. The draw is a block-wide
//    inclusive scan of the kept weights in id order.
//  Passes over the row (each re-reads the logits, which stay in L2): 1 (max) + 4 (top-k) + 4 (top-p) + 1 (draw),
//  fewer when top-k or top-p is off. Integer sums make the result independent of the summation order.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/sampling.h"

namespace nvfp4lm::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kBins = 256;
constexpr float kFixedOne = 1099511627776.0f;  // 2^40

// ---- argmax ------------------------------------------------------------------------------------------------

struct Best {
  float value;
  int id;
};

__device__ __forceinline__ Best better(Best a, Best b) {
  return (b.value > a.value || (b.value == a.value && b.id < a.id)) ? b : a;
}

__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* logits, int64_t row_stride, int vocab, int32_t* ids) {
  NVFP4LM_SHARED(Best[kWarps], warp_best);
  const float* row = logits + blockIdx.x * row_stride;
  Best best{-INFINITY, INT_MAX};
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) best = better(best, Best{row[i], i});
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Best other{__shfl_xor_sync(kFullMask, best.value, offset), __shfl_xor_sync(kFullMask, best.id, offset)};
    best = better(best, other);
  }
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) best = better(best, warp_best[w]);
    ids[blockIdx.x] = best.id == INT_MAX ? 0 : best.id;
  }
}

// ---- top-k / top-p -----------------------------------------------------------------------------------------

__device__ __forceinline__ float scaled(const float* row, int i, float temperature) {
  const float z = row[i] / temperature;
  return isnan(z) ? -INFINITY : z;
}

__device__ __forceinline__ uint32_t order_key(float z) {
  const uint32_t bits = __float_as_uint(z);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ unsigned long long weight(float z, float max_z) {
  if (z == max_z) return 1ull << 40;
  return __float2ull_rn(expf(z - max_z) * kFixedOne);
}

struct Selection {
  uint32_t prefix, mask;          // digits chosen so far (key & mask == prefix)
  unsigned long long need;        // count or mass still needed from the remaining bins
  unsigned long long mass_above;  // mass of the kept keys above the current prefix
  unsigned long long kept_mass;   // after the last pass: mass of keys >= threshold
};

struct SampleShared {
  int count[kBins];
  unsigned long long mass[kBins];
  unsigned long long warp_totals[kWarps];
  float warp_max[kWarps];
  Selection selection;
  int found[2];
};

// 256-bin histogram of the keys >= lower that match the selection's digits, by digit at `shift`.
__device__ void histogram(const float* row, int vocab, float temperature, float max_z, uint32_t lower, uint32_t prefix,
                          uint32_t mask, int shift, SampleShared& shared) {
  for (int b = static_cast<int>(threadIdx.x); b < kBins; b += kThreads) {
    shared.count[b] = 0;
    shared.mass[b] = 0;
  }
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int base = 0; base < vocab; base += kThreads) {  // uniform trip count: the warp votes below need it
    const int i = base + static_cast<int>(threadIdx.x);
    bool take = false;
    uint32_t bin = 0;
    unsigned long long w = 0;
    if (i < vocab) {
      const float z = scaled(row, i, temperature);
      const uint32_t key = order_key(z);
      take = key >= lower && (key & mask) == prefix;
      bin = (key >> shift) & 0xFFu;
      w = weight(z, max_z);
    }
    unsigned pending = __ballot_sync(kFullMask, take);
    const unsigned peers = __match_any_sync(kFullMask, take ? bin : 0x100u);
    while (pending != 0) {
      const int leader = __ffs(pending) - 1;
      const unsigned group = __shfl_sync(kFullMask, peers, leader) & pending;
      const bool in_group = (group >> lane) & 1u;
      // w <= 2^40: halves of at most 20 bits sum exactly in 32 bits over a warp.
      const unsigned low = __reduce_add_sync(kFullMask, in_group ? static_cast<unsigned>(w & 0xFFFFFu) : 0u);
      const unsigned high = __reduce_add_sync(kFullMask, in_group ? static_cast<unsigned>(w >> 20) : 0u);
      if (lane == leader) {
        atomicAdd(&shared.count[bin], __popc(group));
        atomicAdd(&shared.mass[bin], (static_cast<unsigned long long>(high) << 20) + low);
      }
      pending &= ~group;
    }
  }
  __syncthreads();
}

// Thread 0: picks the digit at `shift` from the histogram (by count or by mass) and updates the selection.
__device__ void choose_digit(SampleShared& shared, int shift, bool by_mass) {
  Selection& s = shared.selection;
  unsigned long long above_count = 0, above_mass = 0;
  int chosen = 0;
  for (int b = kBins - 1; b >= 0; --b) {
    const unsigned long long here = by_mass ? shared.mass[b] : static_cast<unsigned long long>(shared.count[b]);
    const unsigned long long above = by_mass ? above_mass : above_count;
    if (above + here >= s.need) {
      chosen = b;
      break;
    }
    above_count += static_cast<unsigned long long>(shared.count[b]);
    above_mass += shared.mass[b];
  }
  s.need -= by_mass ? above_mass : above_count;
  s.mass_above += above_mass;
  s.prefix |= static_cast<uint32_t>(chosen) << shift;
  s.mask |= 0xFFu << shift;
  s.kept_mass = s.mass_above + shared.mass[chosen];  // meaningful after the last digit
}

// Radix select over four 8-bit digits among keys >= lower; returns the threshold key, sets kept_mass.
__device__ uint32_t select_threshold(const float* row, int vocab, float temperature, float max_z, uint32_t lower,
                                     unsigned long long need, bool by_mass, SampleShared& shared) {
  __syncthreads();  // everyone has read the previous selection's results
  if (threadIdx.x == 0) shared.selection = Selection{0u, 0u, need, 0ull, 0ull};
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t prefix = shared.selection.prefix, mask = shared.selection.mask;
    histogram(row, vocab, temperature, max_z, lower, prefix, mask, shift, shared);  // ends with a barrier
    if (threadIdx.x == 0) choose_digit(shared, shift, by_mass);
    __syncthreads();
  }
  return shared.selection.prefix;
}

// Inclusive scan of one value per thread over the block; `total` gets the block's sum.
__device__ unsigned long long block_scan(unsigned long long value, unsigned long long& total, SampleShared& shared) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long other = __shfl_up_sync(kFullMask, value, offset);
    if (lane >= offset) value += other;
  }
  if (lane == 31) shared.warp_totals[warp] = value;
  __syncthreads();
  unsigned long long before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const unsigned long long t = shared.warp_totals[w];
    if (w < warp) before += t;
    all += t;
  }
  __syncthreads();
  total = all;
  return value + before;
}

// One block an SM at least: with the default (2 blocks of 1024 an SM where the SM holds 2048 threads) ptxas limits
// it to 32 registers and spills 80 bytes on sm_100a; with 1, 58-62 registers and no spills on sm_90a, sm_100a and
// sm_121a (bench/NOTES.md, issue 47).
__global__ void __launch_bounds__(kThreads, 1)
    sample_kernel(const float* logits, int64_t row_stride, int vocab, const float* uniforms, float temperature,
                  int top_k, float top_p, int32_t* ids) {
  NVFP4LM_SHARED(SampleShared, shared);
  const float* row = logits + blockIdx.x * row_stride;

  // Pass 1: the largest z.
  float max_z = -INFINITY;
  for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads)
    max_z = fmaxf(max_z, scaled(row, i, temperature));
  max_z = block_max(max_z, shared.warp_max);
  if (max_z == -INFINITY) {
    if (threadIdx.x == 0) ids[blockIdx.x] = 0;
    return;
  }

  // Top-k, then top-p: the threshold key and the mass at or above it.
  uint32_t threshold = 0;
  unsigned long long kept_mass = 0;
  bool have_mass = false;
  if (top_k > 0 && top_k < vocab) {
    threshold =
        select_threshold(row, vocab, temperature, max_z, 0u, static_cast<unsigned long long>(top_k), false, shared);
    kept_mass = shared.selection.kept_mass;
    have_mass = true;
  }
  if (!have_mass || top_p < 1.f) {
    // The mass at or above the top-k threshold (everything without top-k): a plain sum.
    unsigned long long mass = 0, total = 0;
    if (!have_mass) {
      for (int base = 0; base < vocab; base += kThreads) {
        const int i = base + static_cast<int>(threadIdx.x);
        const unsigned long long w = i < vocab ? weight(scaled(row, i, temperature), max_z) : 0ull;
        block_scan(w, total, shared);
        mass += total;
      }
      kept_mass = mass;
    }
    if (top_p < 1.f) {
      const double wanted = ceil(static_cast<double>(top_p) * static_cast<double>(kept_mass));
      const unsigned long long need = wanted < 1.0 ? 1ull : static_cast<unsigned long long>(wanted);
      threshold = select_threshold(row, vocab, temperature, max_z, threshold, need, true, shared);
      kept_mass = shared.selection.kept_mass;
    }
  }

  // The draw: the id, in id order, where the running kept mass first exceeds r.
  unsigned long long r = static_cast<unsigned long long>(
      floor(static_cast<double>(uniforms[blockIdx.x]) * static_cast<double>(kept_mass)));
  if (r >= kept_mass) r = kept_mass - 1;
  if (threadIdx.x == 0) shared.found[0] = shared.found[1] = -1;
  __syncthreads();
  unsigned long long offset = 0;
  int chosen = -1;
  for (int base = 0, parity = 0; base < vocab && chosen < 0; base += kThreads, parity ^= 1) {
    const int i = base + static_cast<int>(threadIdx.x);
    unsigned long long w = 0;
    if (i < vocab) {
      const float z = scaled(row, i, temperature);
      if (order_key(z) >= threshold) w = weight(z, max_z);
    }
    unsigned long long total = 0;
    const unsigned long long inclusive = offset + block_scan(w, total, shared);
    if (w > 0 && inclusive > r && inclusive - w <= r) shared.found[parity] = i;
    __syncthreads();
    chosen = shared.found[parity];  // the other slot is written next, behind block_scan's barriers
    offset += total;
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = chosen < 0 ? 0 : chosen;
}

}  // namespace

void sample_argmax(const float* logits, int64_t row_stride, int64_t rows, int64_t vocab, int32_t* ids) {
  NVFP4LM_LAUNCH(argmax_kernel, static_cast<unsigned int>(rows), kThreads, 0)
  (logits, row_stride, static_cast<int>(vocab), ids);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void sample_top_k_top_p(const float* logits, int64_t row_stride, int64_t rows, int64_t vocab, const float* uniforms,
                        float temperature, int64_t top_k, float top_p, int32_t* ids) {
  const int k = top_k >= vocab ? 0 : static_cast<int>(top_k);
  NVFP4LM_LAUNCH(sample_kernel, static_cast<unsigned int>(rows), kThreads, 0)
  (logits, row_stride, static_cast<int>(vocab), uniforms, temperature, k, top_p, ids);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
