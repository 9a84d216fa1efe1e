// Checks and device dispatch for ops/sampling.h.
#include "ops/sampling.h"

#include <cmath>

#include "ops/cpu/sampling.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/sampling.h"
#endif

namespace nvfp4lm {
namespace {

void check_rows(const char* op, const Tensor& logits, const Tensor& ids) {
  NVFP4LM_ASSERT(logits.dtype() == DType::F32 && logits.rank() == 2 && (logits.dim(1) == 1 || logits.stride(1) == 1),
                 "{}: logits {} must be F32 [B, V] with unit inner stride", op, logits.str());
  NVFP4LM_ASSERT(logits.dim(1) > 0 && logits.dim(1) < (int64_t{1} << 31), "{}: vocabulary of {} entries", op,
                 logits.dim(1));
  NVFP4LM_ASSERT(ids.dtype() == DType::I32 && ids.rank() == 1 && ids.dim(0) == logits.dim(0) && ids.is_contiguous(),
                 "{}: ids {} must be contiguous I32 [{}]", op, ids.str(), logits.dim(0));
}

}  // namespace

void sample_argmax(const Tensor& logits, Tensor& ids) {
  check_rows("sample_argmax", logits, ids);
  [[maybe_unused]] const Device device = common_device("sample_argmax", {&logits, &ids});
  if (logits.dim(0) == 0) return;
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    cuda::sample_argmax(static_cast<const float*>(logits.raw()), logits.stride(0), logits.dim(0), logits.dim(1),
                        static_cast<int32_t*>(ids.raw()));
    return;
  }
#endif
  cpu::sample_argmax(logits, ids);
}

void sample_top_k_top_p(const Tensor& logits, const Tensor& uniforms, const TopKTopP& options, Tensor& ids) {
  check_rows("sample_top_k_top_p", logits, ids);
  NVFP4LM_ASSERT(uniforms.dtype() == DType::F32 && uniforms.rank() == 1 && uniforms.dim(0) == logits.dim(0) &&
                     uniforms.is_contiguous(),
                 "sample_top_k_top_p: uniforms {} must be contiguous F32 [{}]", uniforms.str(), logits.dim(0));
  NVFP4LM_CHECK(std::isfinite(options.temperature) && options.temperature > 0.f,
                "sampling: temperature must be > 0 (greedy decoding is argmax), got {}", options.temperature);
  NVFP4LM_CHECK(options.top_k >= 0, "sampling: top-k must be >= 0 (0 = off), got {}", options.top_k);
  NVFP4LM_CHECK(options.top_p > 0.f && options.top_p <= 1.f, "sampling: top-p must be in (0, 1] (1 = off), got {}",
                options.top_p);
  [[maybe_unused]] const Device device = common_device("sample_top_k_top_p", {&logits, &uniforms, &ids});
  if (logits.dim(0) == 0) return;
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    cuda::sample_top_k_top_p(static_cast<const float*>(logits.raw()), logits.stride(0), logits.dim(0), logits.dim(1),
                             static_cast<const float*>(uniforms.raw()), options.temperature, options.top_k,
                             options.top_p, static_cast<int32_t*>(ids.raw()));
    return;
  }
#endif
  cpu::sample_top_k_top_p(logits, uniforms, options, ids);
}

}  // namespace nvfp4lm
