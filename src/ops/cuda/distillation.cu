// Kernel of the CUDA fused distillation loss (see distillation.h). distillation_rows: one block per row pair, three
// passes over the student's and the teacher's logits (the later ones hit L2 for most of the ~300 KB rows):
//   1. the first maximum and its index of each row;
//   2. the sums Σ exp(z - max), Σ exp((z - max) / τ), Σ exp((t - max) / τ), hence both log-sum-exps at τ and the
//      student's at 1;
//   3. KL = Σ p (log p - log q) and, with want_grad, the gradient written over z.
// distillation_topk_rows: the same three passes over the student's row alone, against the teacher's top K (a cache of
// `nvfp4lm distill-cache`): the row's K tokens sorted into shared memory first, so that "is v one of the K" is a
// binary search (<= 8 steps), and pass 1 and 2 keep the maximum and sum of the tokens outside the K as well.
// The same steps as the CPU reference (ops/cpu/distillation.cpp), with block reductions that are fixed trees, so
// results are reproducible run to run.
#include <climits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "core/cuda/reduce.cuh"
#include "ops/cuda/cross_entropy.h"
#include "ops/cuda/distillation.h"
#include "ops/cuda/kernel_common.cuh"

namespace nvfp4lm::cuda {
namespace {

using namespace kernels;

constexpr int kRowThreads = 512;
constexpr int kRowWarps = kRowThreads / 32;

struct RowMax {
  float value;
  int index;
};

// The larger, the first index on ties (torch.argmax); NaN never compares greater.
__device__ __forceinline__ RowMax merge(RowMax a, RowMax b) {
  return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
}

__device__ __forceinline__ RowMax shuffle_xor(const RowMax& m, int offset) {
  return {__shfl_xor_sync(kFullMask, m.value, offset), __shfl_xor_sync(kFullMask, m.index, offset)};
}

// Block-wide merge; every thread receives the result. `scratch`: kRowWarps entries of shared memory.
__device__ __forceinline__ RowMax block_max(RowMax m, RowMax* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) m = merge(m, shuffle_xor(m, offset));
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) scratch[warp] = m;
  __syncthreads();
  m = scratch[0];
  for (int w = 1; w < kRowWarps; ++w) m = merge(m, scratch[w]);
  __syncthreads();  // scratch may be reused right after
  return m;
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    distillation_rows_kernel(T* student, const T* teacher, int64_t vocab, int64_t ld, const int32_t* targets, float tau,
                             float weight, float grad_scale, bool want_grad, DistillationRowsOut out) {
  NVFP4LM_SHARED(RowMax[kRowWarps], max_scratch);
  NVFP4LM_SHARED(double[32], sum_scratch);
  NVFP4LM_SHARED(float[4], shared_lse);  // student at τ, student at 1, teacher at τ
  T* z = student + static_cast<int64_t>(blockIdx.x) * ld;
  const T* t = teacher + static_cast<int64_t>(blockIdx.x) * ld;
  const int32_t target = targets[blockIdx.x];
  const float inv_tau = 1.0f / tau;
  const int64_t stride = int64_t{kRowThreads} * kChunk;

  // Pass 1: maxima and first argmaxes (indices ascending within a thread).
  RowMax z_max{-INFINITY, INT_MAX}, t_max{-INFINITY, INT_MAX};
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < vocab; col += stride) {
    float zv[kChunk], tv[kChunk];
    load_chunk(z, col, ld, true, zv);  // rows are padded to ld (a multiple of 8): the chunk is in bounds
    load_chunk(t, col, ld, true, tv);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      if (col + k >= vocab) continue;
      z_max = merge(z_max, RowMax{zv[k], static_cast<int>(col + k)});
      t_max = merge(t_max, RowMax{tv[k], static_cast<int>(col + k)});
    }
  }
  z_max = block_max(z_max, max_scratch);
  t_max = block_max(t_max, max_scratch);

  // Pass 2: the three sums of exponentials.
  double z_sum = 0.0, z_tau_sum = 0.0, t_tau_sum = 0.0;
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < vocab; col += stride) {
    float zv[kChunk], tv[kChunk];
    load_chunk(z, col, ld, true, zv);
    load_chunk(t, col, ld, true, tv);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      if (col + k >= vocab) continue;
      z_sum += __expf(zv[k] - z_max.value);
      z_tau_sum += __expf((zv[k] - z_max.value) * inv_tau);
      t_tau_sum += __expf((tv[k] - t_max.value) * inv_tau);
    }
  }
  z_sum = block_sum(z_sum, sum_scratch);
  z_tau_sum = block_sum(z_tau_sum, sum_scratch);
  t_tau_sum = block_sum(t_tau_sum, sum_scratch);
  if (threadIdx.x == 0) {
    shared_lse[0] = static_cast<float>(static_cast<double>(z_max.value) * inv_tau + log(z_tau_sum));
    shared_lse[1] = static_cast<float>(static_cast<double>(z_max.value) + log(z_sum));
    shared_lse[2] = static_cast<float>(static_cast<double>(t_max.value) * inv_tau + log(t_tau_sum));
    out.ce[blockIdx.x] = shared_lse[1] - to_float(z[target]);  // read before pass 3 overwrites the row
    out.correct[blockIdx.x] = z_max.index == target ? 1 : 0;
    out.agree[blockIdx.x] = z_max.index == t_max.index ? 1 : 0;
  }
  __syncthreads();
  const float q_lse = shared_lse[0], lse = shared_lse[1], t_lse = shared_lse[2];
  const float offset = q_lse - t_lse;

  // Pass 3: KL, and the gradient over z (padding columns 0).
  const float kl_scale = grad_scale * weight * tau, ce_scale = grad_scale * (1.0f - weight);
  double kl = 0.0;
  const int64_t end = want_grad ? ld : vocab;
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < end; col += stride) {
    float zv[kChunk], tv[kChunk];
    load_chunk(z, col, ld, true, zv);
    load_chunk(t, col, ld, true, tv);
#pragma unroll
    for (int k = 0; k < kChunk; ++k) {
      const int64_t j = col + k;
      if (j >= vocab) {
        zv[k] = 0.f;
        continue;
      }
      const float p = __expf(tv[k] * inv_tau - t_lse);
      kl += static_cast<double>(p) * ((tv[k] - zv[k]) * inv_tau + offset);
      if (want_grad) {
        const float q = __expf(zv[k] * inv_tau - q_lse);
        const float softmax = __expf(zv[k] - lse);
        zv[k] = kl_scale * (q - p) + ce_scale * softmax - (j == target ? ce_scale : 0.f);
      }
    }
    if (want_grad) store_chunk(z, col, ld, true, zv);
  }
  kl = block_sum(kl, sum_scratch);
  if (threadIdx.x == 0) out.kl[blockIdx.x] = static_cast<float>(kl);
}

// Position of token v among the row's K tokens sorted ascending, or -1.
__device__ __forceinline__ int top_position(const int32_t* sorted, int k, int64_t v) {
  int lo = 0, hi = k;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (sorted[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < k && sorted[lo] == v ? lo : -1;
}

template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    distillation_topk_rows_kernel(T* student, int64_t vocab, int64_t ld, const int32_t* targets,
                                  TeacherTopKRows teacher, float tau, float weight, float grad_scale, bool want_grad,
                                  DistillationRowsOut out) {
  NVFP4LM_SHARED(RowMax[kRowWarps], max_scratch);
  NVFP4LM_SHARED(double[32], sum_scratch);
  NVFP4LM_SHARED(float[4], shared_lse);  // student at τ, student at 1, the student's tokens outside the K at τ
  NVFP4LM_SHARED(int32_t[kMaxTopKTokens], sorted_ids);
  NVFP4LM_SHARED(float[kMaxTopKTokens], sorted_p);  // p of sorted_ids[i], at τ
  T* z = student + static_cast<int64_t>(blockIdx.x) * ld;
  const int k = teacher.k;
  const int32_t* ids = teacher.ids + static_cast<int64_t>(blockIdx.x) * k;
  const float* log_p = teacher.log_probs + static_cast<int64_t>(blockIdx.x) * k;
  const float log_rest = teacher.log_rest[blockIdx.x];
  const int32_t target = targets[blockIdx.x];
  const float inv_tau = 1.0f / tau;
  const int64_t stride = int64_t{kRowThreads} * kChunk;

  // The K tokens in ascending order (they are distinct): each one's rank is the number of smaller ones.
  if (static_cast<int>(threadIdx.x) < k) {
    const int32_t id = ids[threadIdx.x];
    int rank = 0;
    for (int j = 0; j < k; ++j) rank += ids[j] < id ? 1 : 0;
    sorted_ids[rank] = id;
    sorted_p[rank] = __expf(log_p[threadIdx.x]);
  }
  __syncthreads();

  // Pass 1: the maximum and first argmax of the row, and the maximum outside the K.
  RowMax z_max{-INFINITY, INT_MAX}, tail_max{-INFINITY, INT_MAX};
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < vocab; col += stride) {
    float zv[kChunk];
    load_chunk(z, col, ld, true, zv);
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (col + c >= vocab) continue;
      z_max = merge(z_max, RowMax{zv[c], static_cast<int>(col + c)});
      if (top_position(sorted_ids, k, col + c) < 0)
        tail_max = merge(tail_max, RowMax{zv[c], static_cast<int>(col + c)});
    }
  }
  z_max = block_max(z_max, max_scratch);
  tail_max = block_max(tail_max, max_scratch);

  // Pass 2: Σ exp(z - max), Σ exp((z - max) / τ), Σ_{v ∉ K} exp((z_v - tail max) / τ).
  double z_sum = 0.0, z_tau_sum = 0.0, tail_sum = 0.0;
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < vocab; col += stride) {
    float zv[kChunk];
    load_chunk(z, col, ld, true, zv);
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (col + c >= vocab) continue;
      z_sum += __expf(zv[c] - z_max.value);
      z_tau_sum += __expf((zv[c] - z_max.value) * inv_tau);
      if (top_position(sorted_ids, k, col + c) < 0) tail_sum += __expf((zv[c] - tail_max.value) * inv_tau);
    }
  }
  z_sum = block_sum(z_sum, sum_scratch);
  z_tau_sum = block_sum(z_tau_sum, sum_scratch);
  tail_sum = block_sum(tail_sum, sum_scratch);
  if (threadIdx.x == 0) {
    shared_lse[0] = static_cast<float>(static_cast<double>(z_max.value) * inv_tau + log(z_tau_sum));
    shared_lse[1] = static_cast<float>(static_cast<double>(z_max.value) + log(z_sum));
    // -inf when the K are the whole vocabulary.
    shared_lse[2] =
        tail_sum > 0.0 ? static_cast<float>(static_cast<double>(tail_max.value) * inv_tau + log(tail_sum)) : -INFINITY;
    out.ce[blockIdx.x] = shared_lse[1] - to_float(z[target]);  // read before pass 3 overwrites the row
    out.correct[blockIdx.x] = z_max.index == target ? 1 : 0;
    out.agree[blockIdx.x] = z_max.index == ids[0] ? 1 : 0;
  }
  __syncthreads();
  const float q_lse = shared_lse[0], lse = shared_lse[1], tail_lse = shared_lse[2];
  const bool has_rest = __expf(log_rest) > 0.f;

  // KL over the K + 1 outcomes, from the K logits (read before pass 3 overwrites them).
  double kl = 0.0;
  if (static_cast<int>(threadIdx.x) < k) {
    const float lp = log_p[threadIdx.x];
    kl = static_cast<double>(__expf(lp)) * (lp - (to_float(z[ids[threadIdx.x]]) * inv_tau - q_lse));
  }
  if (threadIdx.x == 0 && has_rest) kl += static_cast<double>(__expf(log_rest)) * (log_rest - (tail_lse - q_lse));
  kl = block_sum(kl, sum_scratch);
  if (threadIdx.x == 0) out.kl[blockIdx.x] = static_cast<float>(kl);
  if (!want_grad) return;

  // Pass 3: the gradient over z (padding columns 0). Outside the K the teacher's share of v is
  // q_v · r / q_rest = exp(z_v / τ - tail_lse + log r).
  const float kl_scale = grad_scale * weight * tau, ce_scale = grad_scale * (1.0f - weight);
  const float rest_shift = log_rest - tail_lse;
  for (int64_t col = int64_t{threadIdx.x} * kChunk; col < ld; col += stride) {
    float zv[kChunk];
    load_chunk(z, col, ld, true, zv);
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int64_t j = col + c;
      if (j >= vocab) {
        zv[c] = 0.f;
        continue;
      }
      const int top = top_position(sorted_ids, k, j);
      const float q = __expf(zv[c] * inv_tau - q_lse);
      const float teacher_p = top >= 0 ? sorted_p[top] : (has_rest ? __expf(zv[c] * inv_tau + rest_shift) : 0.f);
      const float softmax = __expf(zv[c] - lse);
      zv[c] = kl_scale * (q - teacher_p) + ce_scale * softmax - (j == target ? ce_scale : 0.f);
    }
    store_chunk(z, col, ld, true, zv);
  }
}

__global__ void distillation_sums_kernel(DistillationRowsOut rows_out, int64_t rows, double* sums) {
  NVFP4LM_SHARED(double[32], scratch);
  double kl = 0.0, ce = 0.0, correct = 0.0, agree = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    kl += rows_out.kl[i];
    ce += rows_out.ce[i];
    correct += rows_out.correct[i];
    agree += rows_out.agree[i];
  }
  kl = block_sum(kl, scratch);
  ce = block_sum(ce, scratch);
  correct = block_sum(correct, scratch);
  agree = block_sum(agree, scratch);
  if (threadIdx.x == 0) {
    sums[0] = kl;
    sums[1] = ce;
    sums[2] = correct;
    sums[3] = agree;
  }
}

}  // namespace

void distillation_rows(void* student_logits, const void* teacher_logits, DType dtype, int64_t rows, int64_t vocab,
                       const int32_t* targets, float temperature, float weight, float grad_scale, bool want_grad,
                       const DistillationRowsOut& out) {
  if (rows == 0) return;
  const int64_t ld = cross_entropy_logits_ld(vocab);
  const auto blocks = static_cast<unsigned>(rows);
  if (dtype == DType::F32) {
    NVFP4LM_LAUNCH(distillation_rows_kernel<float>, blocks, kRowThreads, 0)
    (static_cast<float*>(student_logits), static_cast<const float*>(teacher_logits), vocab, ld, targets, temperature,
     weight, grad_scale, want_grad, out);
  } else if (dtype == DType::BF16) {
    NVFP4LM_LAUNCH(distillation_rows_kernel<bf16>, blocks, kRowThreads, 0)
    (static_cast<bf16*>(student_logits), static_cast<const bf16*>(teacher_logits), vocab, ld, targets, temperature,
     weight, grad_scale, want_grad, out);
  } else {
    fail(cudaErrorInvalidValue, "distillation logits of a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void distillation_topk_rows(void* student_logits, DType dtype, int64_t rows, int64_t vocab, const int32_t* targets,
                            const TeacherTopKRows& teacher, float temperature, float weight, float grad_scale,
                            bool want_grad, const DistillationRowsOut& out) {
  if (rows == 0) return;
  if (teacher.k < 1 || teacher.k > kMaxTopKTokens) {
    fail(cudaErrorInvalidValue, "distillation_topk_rows: K outside [1, kMaxTopKTokens]", __FILE__, __LINE__);
  }
  const int64_t ld = cross_entropy_logits_ld(vocab);
  const auto blocks = static_cast<unsigned>(rows);
  if (dtype == DType::F32) {
    NVFP4LM_LAUNCH(distillation_topk_rows_kernel<float>, blocks, kRowThreads, 0)
    (static_cast<float*>(student_logits), vocab, ld, targets, teacher, temperature, weight, grad_scale, want_grad, out);
  } else if (dtype == DType::BF16) {
    NVFP4LM_LAUNCH(distillation_topk_rows_kernel<bf16>, blocks, kRowThreads, 0)
    (static_cast<bf16*>(student_logits), vocab, ld, targets, teacher, temperature, weight, grad_scale, want_grad, out);
  } else {
    fail(cudaErrorInvalidValue, "distillation logits of a dtype other than F32 / BF16", __FILE__, __LINE__);
  }
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

void distillation_sums(const DistillationRowsOut& rows_out, int64_t rows, double* sums) {
  NVFP4LM_LAUNCH(distillation_sums_kernel, 1, 1024, 0)(rows_out, rows, sums);
  NVFP4LM_CUDA_CHECK_LAUNCH();
}

}  // namespace nvfp4lm::cuda
