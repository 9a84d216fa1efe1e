// RopeTable, the cos/sin computation shared by both devices (done on the host in fp32, exactly as Hugging
// Face's Qwen3RotaryEmbedding does), shape checks, and the device dispatch for ops/rope.h.
#include "ops/rope.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "ops/cpu/rope.h"
#include "ops/dispatch.h"

#if NVFP4LM_HAS_CUDA
#include "ops/cuda/input_errors.h"
#include "ops/cuda/rope.h"
#include "ops/cuda/tensor_rows.h"
#endif

namespace nvfp4lm {
namespace {

// cos/sin rows for `count` positions (positions[n], or n when positions is null) as two F32 [count, D/2]
// CPU tensors.
void fill_angles(int64_t head_dim, float theta, const int32_t* positions, int64_t count, Tensor& cos_out,
                 Tensor& sin_out) {
  const std::vector<float> inv_freq = rope_inv_freq(head_dim, theta);
  const int64_t half = head_dim / 2;
  cos_out = Tensor::empty({count, half}, DType::F32);
  sin_out = Tensor::empty({count, half}, DType::F32);
  float* c = cos_out.numel() > 0 ? cos_out.data<float>() : nullptr;
  float* s = sin_out.numel() > 0 ? sin_out.data<float>() : nullptr;
#pragma omp parallel for schedule(static) if (count * half > 4096)
  for (int64_t n = 0; n < count; ++n) {
    const float position = static_cast<float>(positions != nullptr ? positions[n] : n);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = position * inv_freq[static_cast<size_t>(i)];  // fp32 product, like HF's fp32 matmul
      c[n * half + i] = std::cos(angle);
      s[n * half + i] = std::sin(angle);
    }
  }
}

void check_rope(const Tensor& x, const Tensor& positions, int64_t head_dim, const char* op) {
  NVFP4LM_ASSERT((x.rank() == 3 || x.rank() == 4) && x.dim(-1) == head_dim && head_dim % 2 == 0,
                 "{}: x {} must be [N, H, D] or [B, T, H, D] with D = {} (even)", op, x.str(), head_dim);
  NVFP4LM_ASSERT(positions.dtype() == DType::I32 && positions.numel() * x.dim(-2) * head_dim == x.numel(),
                 "{}: positions {} do not give one position per token of {}", op, positions.str(), x.str());
}

// The one device dispatch of the op (tables and per-call angles both end here).
void rotate(Tensor& x, const Tensor* positions, const Tensor& cos, const Tensor& sin, bool inverse, const char* op) {
  [[maybe_unused]] const Device device = common_device(op, {&x, positions, &cos, &sin});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda()) {
    // Positions are checked by the kernel, reported here at the next call (ops/cuda/rope.h).
    cuda::throw_pending_input_errors();
    NVFP4LM_ASSERT(x.dtype() == DType::F32 || x.dtype() == DType::BF16, "{} on CUDA: x {} must be F32 or BF16", op,
                   x.str());
    NVFP4LM_ASSERT(
        cos.dtype() == DType::F32 && sin.dtype() == DType::F32 && cos.is_contiguous() && sin.is_contiguous() &&
            cos.shape() == sin.shape() && cos.rank() == 2 && cos.dim(1) == x.dim(-1) / 2,
        "{} on CUDA: cos {} / sin {} must be contiguous F32 [P, {}]", op, cos.str(), sin.str(), x.dim(-1) / 2);
    const int32_t* pos = positions != nullptr ? cuda::device_int32(*positions, "rope positions") : nullptr;
    if (pos != nullptr) cuda::set_input_error_limit(cuda::InputErrorKind::RopePosition, cos.dim(0));
    cuda::rope_rotate(cuda::device_rows(x, 2, op), x.dim(-2), x.dim(-1), pos, static_cast<const float*>(cos.raw()),
                      static_cast<const float*>(sin.raw()), cos.dim(0), inverse);
    return;
  }
#endif
  cpu::rope_rotate(x, positions, cos, sin, inverse);
}

void rope_with_table(Tensor& x, const Tensor& positions, const RopeTable& table, bool inverse, const char* op) {
  check_rope(x, positions, table.head_dim(), op);
  rotate(x, &positions, table.cos(), table.sin(), inverse, op);
}

void rope_with_theta(Tensor& x, const Tensor& positions, float theta, bool inverse, const char* op) {
  check_rope(x, positions, x.dim(-1), op);
  NVFP4LM_ASSERT(positions.device().is_cpu() && positions.is_contiguous(), "{}: positions {} must be on the CPU", op,
                 positions.str());
  Tensor cos, sin;
  fill_angles(x.dim(-1), theta, positions.numel() > 0 ? positions.data<int32_t>() : nullptr, positions.numel(), cos,
              sin);
  Tensor cos_dev = cos.to(x.device()), sin_dev = sin.to(x.device());
  rotate(x, nullptr, cos_dev, sin_dev, inverse, op);
}

}  // namespace

int64_t rope_table_positions(int64_t positions) {
  constexpr int64_t kMinPositions = 4096;
  return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max(positions, kMinPositions))));
}

std::vector<float> rope_inv_freq(int64_t head_dim, float theta) {
  // HF: 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D)), all in fp32.
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta, exponent);
  }
  return inv_freq;
}

RopeTable::RopeTable(int64_t head_dim, float theta, int64_t max_positions, Device device)
    : head_dim_(head_dim), theta_(theta), max_positions_(max_positions) {
  NVFP4LM_ASSERT(head_dim > 0 && head_dim % 2 == 0 && max_positions >= 0,
                 "RopeTable: head_dim {} must be even and positive, max_positions {} >= 0", head_dim, max_positions);
  fill_angles(head_dim, theta, nullptr, max_positions, cos_, sin_);
  cos_ = cos_.to(device);
  sin_ = sin_.to(device);
}

void rope_forward(Tensor& x, const Tensor& positions, const RopeTable& table) {
  rope_with_table(x, positions, table, false, "rope_forward");
}

void rope_backward(Tensor& dx, const Tensor& positions, const RopeTable& table) {
  rope_with_table(dx, positions, table, true, "rope_backward");
}

void rope_forward(Tensor& x, const Tensor& positions, float theta) {
  rope_with_theta(x, positions, theta, false, "rope_forward");
}

void rope_backward(Tensor& dx, const Tensor& positions, float theta) {
  rope_with_theta(dx, positions, theta, true, "rope_backward");
}

}  // namespace nvfp4lm
