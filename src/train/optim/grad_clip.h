// Global gradient norm and clipping with torch.nn.utils.clip_grad_norm_ semantics:
//   norm = sqrt(sum over all parameters and elements of grad^2)
//   coefficient = min(1, max_norm / (norm + 1e-6));  grads *= coefficient
// The norm is accumulated in double in fixed-size chunks combined in a fixed order, so it is the same bits
// for any number of threads (needed for bit-identical resume). It is returned before clipping, for logging.
// Gradients on CUDA are summed on the device (cuda/optim_kernels.h), also in double over fixed tiles in a fixed tree:
// the same bits on every run, within ~1e-15 relative of the CPU value (a different summation order). All gradients
// must be on one device (an Error otherwise).
//
// A non-finite norm (an inf or NaN gradient) is reported, never "clipped": the caller decides whether to skip
// the step or stop (DESIGN.md §7), and gradients are left as they are.
//
// The cheap way for a training loop: norm = grad_norm(params); if finite, pass
// clip_coefficient(norm, max_norm) * accumulation_scale as Optimizer::step's grad_multiplier (no extra pass
// over the gradients). clip_grad_norm() scales the gradients in place, as torch does.
#pragma once

#include <span>
#include <vector>

#include "model/parameter.h"

namespace nvfp4lm {

// L2 norm of all gradients together.
double grad_norm(std::span<const Parameter> parameters);
// Its square, unrounded: sums over disjoint groups add up to the square of the norm over their union.
double grad_sum_of_squares(std::span<const Parameter> parameters);

// The CPU sum's terms: one partial sum of squares per chunk of 65,536 elements, parameter after parameter, so that
// adding them in order (sum_in_order) is grad_sum_of_squares of CPU gradients, bit for bit. A data-parallel step
// (train/dist/data_parallel.h) gathers every rank's partials and adds them in that order.
std::vector<double> grad_square_partials(std::span<const Parameter> parameters);
double sum_in_order(std::span<const double> partials);

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off). norm must be finite.
float clip_coefficient(double norm, double max_norm);

struct ClipResult {
  double norm = 0;           // before clipping
  float coefficient = 1.0f;  // what the gradients were multiplied by (1 when not finite)
  bool finite = true;
};

// Computes the norm and, when it is finite, multiplies every gradient by the clip coefficient.
ClipResult clip_grad_norm(std::span<Parameter> parameters, double max_norm);

}  // namespace nvfp4lm
