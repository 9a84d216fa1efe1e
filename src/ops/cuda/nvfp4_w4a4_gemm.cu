// The SM 12.x NVFP4 x NVFP4 GEMM (nvfp4_w4a4_gemm.h): block-scaled FP4 mma.sync, fp32 accumulators, BF16 out.
//
// Work split: a CTA of 4 warps owns a 64 x 64 tile of y (64 rows of x by 64 weight rows), its warps 2 x 2 tiles of
// 32 x 32: two 16-row mma tiles of x by four 8-column mma tiles of w, 8 mma a step of 64 k. The CTAs walk the
// output tiles grid-stride (weight tiles fastest, so CTAs running together share their rows of x).
//
// Fragments straight from global memory (the PTX ISA's layouts, ptx.h; no shuffles, no shared memory): with
// g = lane / 4, t = lane % 4 and k0 the step's first k,
//   A register r (rows of x):      8 codes of row g + 8 (r % 2), k = k0 + 8 t + 32 (r / 2) + j in nibble j: the 4
//                                  bytes at codes[row][(k0 + 8 t + 32 (r / 2)) / 2], as NVFP4 packs them (element 2i
//                                  in the low nibble, the ISA's "low to high") — one 32-bit load;
//   B register r (rows of w):      8 codes of w row g, k = k0 + 8 t + 32 r + j: likewise;
//   scale-a-data (thread-id-a 0):  lanes with t = 0 / 1 give the 4 scales (byte q: k0 + 16 q ..) of x row g / g + 8;
//   scale-b-data (thread-id-b 0):  lanes with t = 0 give w row g's;
//   D register i:                  y row g + 8 (i / 2), column 2 t + i % 2.
// Rows past m or n and k past the last block read as code 0 with scale 0, so ragged edges need no other case (k is
// a multiple of 16, so a group of 8 codes is wholly inside or outside).
//
// A first kernel, for correctness on the emulated device and a baseline on a GB10: no shared-memory staging or
// software pipelining yet (each byte of x is read by the 2 warps of its CTA row from L1, each byte of w by 2 warps
// likewise); bench/NOTES.md has the prediction and what to measure.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/cuda/grid_stride.h"
#include "core/cuda/launch.h"
#include "ops/cuda/nvfp4_w4a4_gemm.h"
#include "ops/cuda/ptx.h"

namespace nvfp4lm::cuda {
namespace w4a4 {

constexpr int kThreads = 128;      // 4 warps, 2 x 2
constexpr int kTileM = 64;         // rows of x a CTA owns
constexpr int kTileN = 64;         // weight rows a CTA owns
constexpr int kWarpM = 32;         // a warp's rows of x: 2 mma tiles of 16
constexpr int kWarpN = 32;         // a warp's weight rows: 4 mma tiles of 8
constexpr int kStepK = 64;         // k of one mma
constexpr int kBlocksPerStep = 4;  // scale blocks of 16 in a step
constexpr int kMaxDevices = 64;

struct Params {
  const uint8_t* x_codes;
  const uint8_t* x_scales;
  const uint8_t* w_codes;
  const uint8_t* w_scales;
  int64_t m, n, k;
  int64_t tiles_n, tiles;
  float alpha;
  uint16_t* y;
  int64_t y_stride;
};

// 8 codes (one mma register) of `row` from k (a multiple of 8), 0 past the matrix.
__device__ __forceinline__ uint32_t load_codes(const uint8_t* codes, int64_t rows, int64_t k_total, int64_t row,
                                               int64_t k) {
  if (row >= rows || k >= k_total) return 0u;
  return *reinterpret_cast<const uint32_t*>(codes + row * (k_total / 2) + k / 2);
}

// The 4 scale bytes of `row` for the step at k0 (byte q: block k0 / 16 + q), 0 past the matrix.
__device__ __forceinline__ uint32_t load_scales(const uint8_t* scales, int64_t rows, int64_t k_total, int64_t row,
                                                int64_t k0) {
  if (row >= rows) return 0u;
  const int64_t blocks = k_total / 16, first = k0 / 16;
  const uint8_t* at = scales + row * blocks + first;
  uint32_t word = 0;
#pragma unroll
  for (int q = 0; q < kBlocksPerStep; ++q)
    if (first + q < blocks) word |= static_cast<uint32_t>(at[q]) << (8 * q);
  return word;
}

__global__ void __launch_bounds__(kThreads) nvfp4_w4a4_gemm_kernel(Params p) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    const int64_t m0 = (tile / p.tiles_n) * kTileM + (warp / 2) * kWarpM;
    const int64_t n0 = (tile % p.tiles_n) * kTileN + (warp % 2) * kWarpN;
    float acc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;

    for (int64_t k0 = 0; k0 < p.k; k0 += kStepK) {
      uint32_t a[2][4], scale_a[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int64_t row = m0 + 16 * i + g;
#pragma unroll
        for (int r = 0; r < 4; ++r)
          a[i][r] = load_codes(p.x_codes, p.m, p.k, row + 8 * (r % 2), k0 + 8 * t + 32 * (r / 2));
        // Lanes t = 0, 1 give rows g, g + 8 (thread-id-a 0); t = 2, 3 repeat them (not read by the mma).
        scale_a[i] = load_scales(p.x_scales, p.m, p.k, row + 8 * (t % 2), k0);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t row = n0 + 8 * j + g;
        const uint32_t b[2] = {load_codes(p.w_codes, p.n, p.k, row, k0 + 8 * t),
                               load_codes(p.w_codes, p.n, p.k, row, k0 + 8 * t + 32)};
        const uint32_t scale_b = load_scales(p.w_scales, p.n, p.k, row, k0);  // every lane: thread-id-b 0 reads t 0
#pragma unroll
        for (int i = 0; i < 2; ++i) mma_fp4(acc[i][j], a[i], b, scale_a[i], 0, scale_b, 0);
      }
    }

#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t row = m0 + 16 * i + g + 8 * (e / 2), column = n0 + 8 * j + 2 * t + e % 2;
          if (row < p.m && column < p.n)
            p.y[row * p.y_stride + column] = __bfloat16_as_ushort(__float2bfloat16_rn(acc[i][j][e] * p.alpha));
        }
  }
}

// Writes 1 where this image has the FP4 mma (ptx.h NVFP4LM_HAS_FP4_MMA for the architecture the driver loaded).
__global__ void fp4_mma_probe_kernel(int* has_fp4_mma) {
  if (threadIdx.x == 0) *has_fp4_mma = NVFP4LM_HAS_FP4_MMA;
}

// Per device: 0 not asked yet, 1 no, 2 yes (threads that ask at once both probe, with the same answer).
std::atomic<int> probed[kMaxDevices]{};

bool image_has_fp4_mma(int device) {
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && probed[device].load() != 0) return probed[device].load() == 2;
  int* flag = nullptr;
  int host = 0;
  NVFP4LM_CUDA_CHECK(cudaMalloc(&flag, sizeof(int)));
  NVFP4LM_LAUNCH(fp4_mma_probe_kernel, 1, 32, 0)(flag);
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaSuccess) {
    NVFP4LM_CUDA_CHECK(cudaMemcpyAsync(&host, flag, sizeof(int), cudaMemcpyDeviceToHost, stream()));
    NVFP4LM_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  NVFP4LM_CUDA_CHECK(cudaFree(flag));
  NVFP4LM_CUDA_CHECK(launched);
  if (cached) probed[device].store(host == 1 ? 2 : 1);
  return host == 1;
}

}  // namespace w4a4

bool nvfp4_w4a4_gemm_available(const char** why_not) {
  int device = 0, major = 0;
  NVFP4LM_CUDA_CHECK(cudaGetDevice(&device));
  NVFP4LM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const char* reason = nullptr;
  if (major != 12)
    reason =
        "the GPU is not Blackwell SM 12.x (the block-scaled FP4 mma.sync is sm_120a / sm_121a's; SM 10.x runs "
        "W4A4 through cuBLASLt, cuda/nvfp4-cublaslt-fp4)";
  else if (!w4a4::image_has_fp4_mma(device))
    reason =
        "this build has no sm_120a / sm_121a image (the driver loaded another architecture's code: rebuild with "
        "NVFP4LM_CUDA_ARCHS including 120a-real or 121a-real)";
  if (why_not) *why_not = reason;
  return reason == nullptr;
}

bool nvfp4_w4a4_gemm_supported(const Nvfp4W4a4Gemm& problem) {
  auto aligned4 = [](const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 4 == 0; };
  return problem.k > 0 && problem.k % 16 == 0 && problem.x.rows >= 0 && problem.w.rows >= 0 &&
         aligned4(problem.x.codes) && aligned4(problem.w.codes) && problem.y_row_stride >= problem.w.rows;
}

void nvfp4_w4a4_gemm(const Nvfp4W4a4Gemm& problem) {
  if (problem.x.rows == 0 || problem.w.rows == 0) return;
  w4a4::Params p{};
  p.x_codes = problem.x.codes;
  p.x_scales = problem.x.scales;
  p.w_codes = problem.w.codes;
  p.w_scales = problem.w.scales;
  p.m = problem.x.rows;
  p.n = problem.w.rows;
  p.k = problem.k;
  p.tiles_n = (p.n + w4a4::kTileN - 1) / w4a4::kTileN;
  p.tiles = ((p.m + w4a4::kTileM - 1) / w4a4::kTileM) * p.tiles_n;
  p.alpha = problem.alpha;
  p.y = static_cast<uint16_t*>(problem.y);
  p.y_stride = problem.y_row_stride;
  NVFP4LM_LAUNCH(w4a4::nvfp4_w4a4_gemm_kernel, grid_stride_blocks(p.tiles, 1), w4a4::kThreads, 0)(p);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
