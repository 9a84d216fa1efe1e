#include "train/optim/adamw.h"

#if NVFP4LM_HAS_CUDA
#include "train/optim/cuda/optim_kernels.h"
#endif

namespace nvfp4lm {

AdamW::AdamW(std::span<const Parameter> parameters, const AdamWOptions& options) : Optimizer(parameters, options) {
  moments_.reserve(slots().size());
  for (const Slot& slot : slots()) {
    moments_.push_back(
        {Tensor::zeros(slot.shape, DType::F32, device()), Tensor::zeros(slot.shape, DType::F32, device())});
  }
}

std::vector<NamedTensor> AdamW::state_tensors() const {
  std::vector<NamedTensor> tensors;
  tensors.reserve(2 * moments_.size());
  for (size_t i = 0; i < moments_.size(); ++i) {
    tensors.push_back({slots()[i].name + ".exp_avg", moments_[i].exp_avg});
    tensors.push_back({slots()[i].name + ".exp_avg_sq", moments_[i].exp_avg_sq});
  }
  return tensors;
}

void AdamW::update(size_t slot_index, Parameter& parameter, const AdamWScalars& scalars, uint64_t rounding_seed,
                   ElementRange range, AmaxAccumulator* amax) {
  const bool is_bf16 = parameter.value.dtype() == DType::BF16;
  void* master = parameter.value.raw();
#if NVFP4LM_HAS_CUDA
  if (parameter.value.device().is_cuda()) {  // the state is on the same device (Optimizer checks)
    const size_t master_bytes = is_bf16 ? 2 : 4;
    cuda::adamw_step(static_cast<char*>(master) + range.begin * master_bytes, is_bf16,
                     static_cast<const float*>(parameter.grad.raw()) + range.begin,
                     static_cast<float*>(moments_[slot_index].exp_avg.raw()) + range.begin,
                     static_cast<float*>(moments_[slot_index].exp_avg_sq.raw()) + range.begin, range.count, scalars,
                     rounding_seed, static_cast<uint64_t>(range.begin), amax);
    return;
  }
#endif
  const float* grad = parameter.grad.data<float>();
  float* exp_avg = moments_[slot_index].exp_avg.data<float>();
  float* exp_avg_sq = moments_[slot_index].exp_avg_sq.data<float>();
  const int64_t end = range.begin + range.count;
  const bool threaded = range.count > 32768;
  float stored_amax = 0.0f;  // of the master values stored (AmaxAccumulator's rules), exact in any thread order
  unsigned long long first_bad = kNoNonFinite;  // lowest index of a non-finite value
#pragma omp parallel for schedule(static) if (threaded) reduction(max : stored_amax) reduction(min : first_bad)
  for (int64_t i = range.begin; i < end; ++i) {
    const float updated = adamw_update(load_master(master, is_bf16, i), grad[i], exp_avg[i], exp_avg_sq[i], scalars);
    fold_magnitude(store_master(master, is_bf16, i, updated, rounding_seed), static_cast<unsigned long long>(i),
                   stored_amax, first_bad);
  }
  if (amax != nullptr) fold_into(*amax, stored_amax, first_bad);
}

}  // namespace nvfp4lm
