#include "train/optim/grad_clip.h"

#include <algorithm>
#include <cmath>
#include <vector>

#if NVFP4LM_HAS_CUDA
#include "train/optim/cuda/optim_kernels.h"
#endif

namespace nvfp4lm {
namespace {

// Chunks are the unit of parallel work and of the fixed summation order.
constexpr int64_t kChunkElements = 1 << 16;

struct Chunk {
  const float* data;
  int64_t count;
};

double sum_of_squares(const float* data, int64_t count) {
  // Eight independent accumulators let the adds pipeline; the order is still fixed.
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const double g = data[i + k];
      acc[k] += g * g;
    }
  }
  for (; i < count; ++i) {
    const double g = data[i];
    acc[0] += g * g;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The device every gradient is on (CPU when there are none); an Error when they are not all on one.
Device gradient_device(std::span<const Parameter> parameters) {
  if (parameters.empty()) return Device::cpu();
  const Device device = parameters.front().grad.device();
  for (const Parameter& parameter : parameters) {
    check_parameter(parameter);
    NVFP4LM_CHECK(parameter.grad.device() == device,
                  "gradient norm: parameter {} has its gradient on {} but {} on {}; all gradients must be on one "
                  "device",
                  parameter.name, parameter.grad.device().str(), parameters.front().name, device.str());
  }
  return device;
}

}  // namespace

std::vector<double> grad_square_partials(std::span<const Parameter> parameters) {
  std::vector<Chunk> chunks;
  for (const Parameter& parameter : parameters) {
    NVFP4LM_ASSERT(parameter.grad.device().is_cpu(), "grad_square_partials: {} has its gradient on {}", parameter.name,
                   parameter.grad.device().str());
    const float* grad = parameter.grad.data<float>();
    const int64_t n = parameter.grad.numel();
    for (int64_t begin = 0; begin < n; begin += kChunkElements) {
      chunks.push_back({grad + begin, std::min(kChunkElements, n - begin)});
    }
  }
  std::vector<double> partial(chunks.size());
  const int64_t chunk_count = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (chunk_count > 1)
  for (int64_t c = 0; c < chunk_count; ++c) {
    partial[static_cast<size_t>(c)] =
        sum_of_squares(chunks[static_cast<size_t>(c)].data, chunks[static_cast<size_t>(c)].count);
  }
  return partial;
}

double sum_in_order(std::span<const double> partials) {
  double total = 0;
  for (double p : partials) total += p;
  return total;
}

namespace {

#if NVFP4LM_HAS_CUDA
// Partials of every gradient into one device buffer, one final pass, one read back (cuda/optim_kernels.h).
double sum_squares_cuda(std::span<const Parameter> parameters, Device device) {
  int64_t partial_count = 0;
  for (const Parameter& parameter : parameters)
    partial_count += cuda::sum_of_squares_partial_count(parameter.grad.numel());
  Tensor scratch = Tensor::empty({partial_count + 1}, DType::I64, device);  // doubles: the partials, then the total
  double* partials = static_cast<double*>(scratch.raw());
  int64_t offset = 0;
  for (const Parameter& parameter : parameters) {
    const int64_t n = parameter.grad.numel();
    cuda::sum_of_squares_partials(static_cast<const float*>(parameter.grad.raw()), n, partials + offset);
    offset += cuda::sum_of_squares_partial_count(n);
  }
  return cuda::sum_of_squares_total(partials, partial_count, partials + partial_count);
}
#endif

}  // namespace

double grad_sum_of_squares(std::span<const Parameter> parameters) {
  const Device device = gradient_device(parameters);
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) return sum_squares_cuda(parameters, device);
#endif
  NVFP4LM_ASSERT(device.is_cpu(), "grad_norm: gradients on {} in a build without CUDA", device.str());
  return sum_in_order(grad_square_partials(parameters));
}

double grad_norm(std::span<const Parameter> parameters) { return std::sqrt(grad_sum_of_squares(parameters)); }

float clip_coefficient(double norm, double max_norm) {
  NVFP4LM_ASSERT(std::isfinite(norm), "clip coefficient of a non-finite norm");
  if (max_norm <= 0) return 1.0f;
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

ClipResult clip_grad_norm(std::span<Parameter> parameters, double max_norm) {
  ClipResult result;
  result.norm = grad_norm(parameters);
  result.finite = std::isfinite(result.norm);
  if (!result.finite) return result;
  result.coefficient = clip_coefficient(result.norm, max_norm);
  if (result.coefficient == 1.0f) return result;
  const float coefficient = result.coefficient;
  for (Parameter& parameter : parameters) {
#if NVFP4LM_HAS_CUDA
    if (parameter.grad.device().is_cuda()) {
      cuda::scale_in_place(static_cast<float*>(parameter.grad.raw()), parameter.grad.numel(), coefficient);
      continue;
    }
#endif
    float* grad = parameter.grad.data<float>();
    const int64_t n = parameter.grad.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i) grad[i] *= coefficient;
  }
  return result;
}

}  // namespace nvfp4lm
