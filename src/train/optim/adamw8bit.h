// AdamW with block-wise 8-bit moments (the state of the <= 24 GiB GPU memory mode). The update is the same fp32
// element math as AdamW (adamw_math.h): per block of kMomentBlockSize elements the moments are decoded, updated in
// fp32 and re-encoded with fresh block maxima (moment_quant.h). The CPU loop is the reference; CUDA parameters take
// cuda/optim_kernels.h's adamw8bit_step, which writes the same bits. State per parameter, keyed by name:
//   "<name>.exp_avg.q8"            I8,  parameter shape   first moment codes
//   "<name>.exp_avg.absmax"        F32, [blocks]          first moment block maxima
//   "<name>.exp_avg_sq_sqrt.q8"    U8,  parameter shape   sqrt(second moment) codes
//   "<name>.exp_avg_sq_sqrt.absmax" F32, [blocks]         sqrt(second moment) block maxima
// = 2 bytes per element + 8 bytes per 256 elements (~2.03 bytes per parameter, vs 8 for fp32 moments).
//
// Codes are re-drawn with stochastic rounding every step (unbiased; see moment_quant.h for why), seeded from the
// optimizer seed, the step and the parameter's name like the bf16 master rounding, so runs are reproducible.
#pragma once

#include <vector>

#include "train/optim/optimizer.h"

namespace nvfp4lm {

class AdamW8bit final : public Optimizer {
 public:
  AdamW8bit(std::span<const Parameter> parameters, const AdamWOptions& options = {});

  std::string_view kind() const override { return "adamw8bit"; }
  std::vector<NamedTensor> state_tensors() const override;
  nlohmann::json describe() const override;

 private:
  void update(size_t slot_index, Parameter& parameter, const AdamWScalars& scalars, uint64_t rounding_seed,
              ElementRange range, AmaxAccumulator* amax) override;
  int64_t chunk_alignment() const override;

  struct QuantizedMoments {
    Tensor exp_avg_codes;           // I8
    Tensor exp_avg_absmax;          // F32 [blocks]
    Tensor exp_avg_sq_sqrt_codes;   // U8
    Tensor exp_avg_sq_sqrt_absmax;  // F32 [blocks]
  };
  std::vector<QuantizedMoments> moments_;  // by slot
};

}  // namespace nvfp4lm
