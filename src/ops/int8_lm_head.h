// The CPU decode step's lm_head under CpuMatmul::Int8Activations (ops/cpu_matmul.h): a BF16 (or F32) table (the tied
// embedding a CPU model keeps as stored) copied once to int8 with a scale per 16 values (ops/cpu/int8_weight_dot.h:
// 0.44 GB instead of 0.78 for Qwen3-4B, the largest single read of a token) and multiplied by int8 activations in
// integer dot products. The BF16 table stays for the embedding lookups (one row a token) and the prefill's
// many-row products; only decode-sized calls (few rows, or rows computed independently) take this copy.
#pragma once

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace nvfp4lm {

namespace cpu {
struct Int8Weights;
}

class Int8LmHead {
 public:
  // Whether `table` can be copied: a contiguous BF16 or F32 CPU matrix [V, H], H a multiple of 16.
  static bool supported(const Tensor& table);
  // Quantizes a supported table (OpenMP threads).
  explicit Int8LmHead(const Tensor& table);
  ~Int8LmHead();
  Int8LmHead(const Int8LmHead&) = delete;
  Int8LmHead& operator=(const Int8LmHead&) = delete;

  int64_t vocab() const;
  int64_t hidden() const;
  uint64_t bytes() const;  // the int8 values and their scales
  // logits [N, V] = hidden [N, H] · tableᵀ, F32 CPU (hidden may be row-strided); each row on its own, so a row's
  // logits do not depend on N.
  void logits(const Tensor& hidden, Tensor& logits) const;

 private:
  std::unique_ptr<cpu::Int8Weights> weights_;
};

}  // namespace nvfp4lm
