// CUDA twin of ops/sampling.h as raw-pointer launchers (ops/sampling.cpp checks and dispatches). One CTA of 1024
// threads per row of logits (F32, row stride `row_stride` elements); ids I32 [rows]; uniforms F32 [rows]; all on
// the current device, on cuda::stream(). Same definitions as the CPU reference, bit for bit except where
// expf differs from the host's exp in the last place.
#pragma once

#include <cstdint>

namespace nvfp4lm::cuda {

void sample_argmax(const float* logits, int64_t row_stride, int64_t rows, int64_t vocab, int32_t* ids);

void sample_top_k_top_p(const float* logits, int64_t row_stride, int64_t rows, int64_t vocab, const float* uniforms,
                        float temperature, int64_t top_k, float top_p, int32_t* ids);

}  // namespace nvfp4lm::cuda
