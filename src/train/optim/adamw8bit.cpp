#include "train/optim/adamw8bit.h"

#include <algorithm>
#include <cmath>

#include "train/optim/moment_quant.h"
#include "train/optim/stochastic_rounding.h"

#if NVFP4LM_HAS_CUDA
#include "train/optim/cuda/optim_kernels.h"
#endif

namespace nvfp4lm {

AdamW8bit::AdamW8bit(std::span<const Parameter> parameters, const AdamWOptions& options)
    : Optimizer(parameters, options) {
  moments_.reserve(slots().size());
  for (const Slot& slot : slots()) {
    const Shape blocks({moment_block_count(slot.shape.numel())});
    // Code 0 decodes to 0 in both maps, so zero-filled state is the zero moment.
    moments_.push_back({Tensor::zeros(slot.shape, DType::I8, device()), Tensor::zeros(blocks, DType::F32, device()),
                        Tensor::zeros(slot.shape, DType::U8, device()), Tensor::zeros(blocks, DType::F32, device())});
  }
}

std::vector<NamedTensor> AdamW8bit::state_tensors() const {
  std::vector<NamedTensor> tensors;
  tensors.reserve(4 * moments_.size());
  for (size_t i = 0; i < moments_.size(); ++i) {
    const std::string& name = slots()[i].name;
    tensors.push_back({name + ".exp_avg.q8", moments_[i].exp_avg_codes});
    tensors.push_back({name + ".exp_avg.absmax", moments_[i].exp_avg_absmax});
    tensors.push_back({name + ".exp_avg_sq_sqrt.q8", moments_[i].exp_avg_sq_sqrt_codes});
    tensors.push_back({name + ".exp_avg_sq_sqrt.absmax", moments_[i].exp_avg_sq_sqrt_absmax});
  }
  return tensors;
}

nlohmann::json AdamW8bit::describe() const {
  nlohmann::json description = Optimizer::describe();
  description["block_size"] = kMomentBlockSize;
  return description;
}

int64_t AdamW8bit::chunk_alignment() const { return kMomentBlockSize; }

void AdamW8bit::update(size_t slot_index, Parameter& parameter, const AdamWScalars& scalars, uint64_t rounding_seed,
                       ElementRange range, AmaxAccumulator* amax) {
  NVFP4LM_ASSERT(range.begin % kMomentBlockSize == 0, "AdamW8bit: a chunk starts at element {}, inside a block",
                 range.begin);
  const int64_t n = range.begin + range.count;  // the blocks of the range end here
  const int64_t first_block = range.begin / kMomentBlockSize;
  const int64_t blocks = moment_block_count(n);
  const bool is_bf16 = parameter.value.dtype() == DType::BF16;
  void* master = parameter.value.raw();
  QuantizedMoments& state = moments_[slot_index];
  // Independent rounding streams for the two moments (the master weight uses rounding_seed itself).
  const uint64_t m_seed = derive_rounding_seed(rounding_seed, 1);
  const uint64_t s_seed = derive_rounding_seed(rounding_seed, 2);
#if NVFP4LM_HAS_CUDA
  if (parameter.value.device().is_cuda()) {  // the state is on the same device (Optimizer checks)
    const cuda::Moments8bit moments{static_cast<int8_t*>(state.exp_avg_codes.raw()) + range.begin,
                                    static_cast<float*>(state.exp_avg_absmax.raw()) + first_block,
                                    static_cast<uint8_t*>(state.exp_avg_sq_sqrt_codes.raw()) + range.begin,
                                    static_cast<float*>(state.exp_avg_sq_sqrt_absmax.raw()) + first_block};
    const size_t master_bytes = is_bf16 ? 2 : 4;
    cuda::adamw8bit_step(static_cast<char*>(master) + range.begin * master_bytes, is_bf16,
                         static_cast<const float*>(parameter.grad.raw()) + range.begin, moments, range.count, scalars,
                         {rounding_seed, m_seed, s_seed}, static_cast<uint64_t>(range.begin), amax);
    return;
  }
#endif
  const float* grad = parameter.grad.data<float>();
  int8_t* m_codes = state.exp_avg_codes.data<int8_t>();
  float* m_absmax = state.exp_avg_absmax.data<float>();
  uint8_t* s_codes = state.exp_avg_sq_sqrt_codes.data<uint8_t>();
  float* s_absmax = state.exp_avg_sq_sqrt_absmax.data<float>();
  const bool threaded = blocks - first_block > 64;
  float stored_amax = 0.0f;  // of the master values stored (AmaxAccumulator's rules), exact in any thread order
  unsigned long long first_bad = kNoNonFinite;  // lowest index of a non-finite value
#pragma omp parallel for schedule(static) if (threaded) reduction(max : stored_amax) reduction(min : first_bad)
  for (int64_t block = first_block; block < blocks; ++block) {
    const int64_t begin = block * kMomentBlockSize;
    const int64_t count = std::min(kMomentBlockSize, n - begin);
    float exp_avg[kMomentBlockSize];
    float exp_avg_sq_sqrt[kMomentBlockSize];
    dequantize_signed_block(m_codes + begin, count, m_absmax[block], exp_avg);
    dequantize_unsigned_block(s_codes + begin, count, s_absmax[block], exp_avg_sq_sqrt);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = begin + j;
      float exp_avg_sq = mul_rn(exp_avg_sq_sqrt[j], exp_avg_sq_sqrt[j]);  // the kernel's ops
      const float updated = adamw_update(load_master(master, is_bf16, i), grad[i], exp_avg[j], exp_avg_sq, scalars);
      exp_avg_sq_sqrt[j] = sqrt_rn(exp_avg_sq);
      fold_magnitude(store_master(master, is_bf16, i, updated, rounding_seed), static_cast<unsigned long long>(i),
                     stored_amax, first_bad);
    }
    const auto first = static_cast<uint64_t>(begin);
    quantize_signed_block(exp_avg, count, m_codes + begin, &m_absmax[block], m_seed, first);
    quantize_unsigned_block(exp_avg_sq_sqrt, count, s_codes + begin, &s_absmax[block], s_seed, first);
  }
  if (amax != nullptr) fold_into(*amax, stored_amax, first_bad);
}

}  // namespace nvfp4lm
