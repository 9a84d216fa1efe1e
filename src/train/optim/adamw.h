// AdamW with fp32 moments (torch.optim.AdamW semantics; the element math is in adamw_math.h).
// State per parameter: "<name>.exp_avg" and "<name>.exp_avg_sq", F32, the parameter's shape:
// 8 bytes per parameter element.
#pragma once

#include <vector>

#include "train/optim/optimizer.h"

namespace nvfp4lm {

class AdamW final : public Optimizer {
 public:
  AdamW(std::span<const Parameter> parameters, const AdamWOptions& options = {});

  std::string_view kind() const override { return "adamw"; }
  std::vector<NamedTensor> state_tensors() const override;

 private:
  void update(size_t slot_index, Parameter& parameter, const AdamWScalars& scalars, uint64_t rounding_seed,
              ElementRange range, AmaxAccumulator* amax) override;

  struct Moments {
    Tensor exp_avg;
    Tensor exp_avg_sq;
  };
  std::vector<Moments> moments_;  // by slot
};

}  // namespace nvfp4lm
