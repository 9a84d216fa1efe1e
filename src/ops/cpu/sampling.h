// CPU reference of ops/sampling.h (the definitions there, computed directly: sorting, exact integer sums).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/sampling.h"

namespace nvfp4lm::cpu {

void sample_argmax(const Tensor& logits, Tensor& ids);
void sample_top_k_top_p(const Tensor& logits, const Tensor& uniforms, const TopKTopP& options, Tensor& ids);

// The pieces of the definition, exposed for tests. z: the row divided by the temperature (NaN -> -inf).
uint64_t sampling_weight(float z, float max_z);  // round(exp(z - max_z) * 2^40); 2^40 when z == max_z
// Order-preserving key of a float (larger float, larger key).
uint32_t sampling_key(float z);

}  // namespace nvfp4lm::cpu
