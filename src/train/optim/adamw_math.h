// The AdamW update of one element, shared by the fp32-state and the 8-bit-state optimizers (and meant for
// their CUDA twins), written as torch.optim.AdamW (PyTorch 1.13, single-tensor path) computes it:
//
//   g     = grad * grad_multiplier              (clipping and accumulation scale, applied first)
//   p     = p * (1 - lr * weight_decay)         (decoupled decay; weight_decay = 0 for non-decayed params)
//   m     = m * beta1 + (1 - beta1) * g
//   v     = v * beta2 + (1 - beta2) * g * g
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p     = p + (-lr / (1 - beta1^t)) * m / denom
//
// Scalars (bias corrections, step size, 1 - beta) are computed in double on the host and rounded to float
// once, as PyTorch does with Python floats; the element math is fp32 with the operation order above.
// Every operation is rounded on its own (unfused_math.h): the CPU build never contracts a*b+c into an FMA and nvcc
// would, so written this way the CUDA kernels (cuda/optim_kernels.cu) produce the same bits as the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/numeric.h"  // NVFP4LM_HD
#include "train/optim/unfused_math.h"

namespace nvfp4lm {

struct AdamWScalars {
  float decay = 1.0f;  // 1 - lr * weight_decay
  float beta1 = 0.9f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.95f;
  float one_minus_beta2 = 0.05f;
  float step_size = 0.0f;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float grad_multiplier = 1.0f;
};

// `step` is t, the 1-based index of the update being made.
inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
                                  float grad_multiplier) {
  AdamWScalars s;
  const double t = static_cast<double>(step);
  s.decay = static_cast<float>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.eps = static_cast<float>(eps);
  s.grad_multiplier = grad_multiplier;
  return s;
}

// Updates the moments in place and returns the new parameter value.
NVFP4LM_HD float adamw_update(float param, float grad, float& exp_avg, float& exp_avg_sq, const AdamWScalars& s) {
  const float g = mul_rn(grad, s.grad_multiplier);
  param = mul_rn(param, s.decay);
  exp_avg = add_rn(mul_rn(exp_avg, s.beta1), mul_rn(s.one_minus_beta1, g));
  exp_avg_sq = add_rn(mul_rn(exp_avg_sq, s.beta2), mul_rn(mul_rn(s.one_minus_beta2, g), g));
  const float denom = add_rn(div_rn(sqrt_rn(exp_avg_sq), s.bias_correction2_sqrt), s.eps);
  return add_rn(param, div_rn(mul_rn(-s.step_size, exp_avg), denom));  // torch addcdiv: self + (value * t1) / t2
}

}  // namespace nvfp4lm
