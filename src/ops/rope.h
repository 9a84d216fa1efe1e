// Rotary position embedding, rotate-half (NeoX / Hugging Face Qwen3) form, applied in place.
// For x [N, H, D] (or [B, T, H, D]; leading dims may have any strides, each token's [H, D] contiguous) and
// positions I32 [N] (or [B, T]), every head of token n is rotated by the angles of position p = positions[n]:
//   inv_freq[i] = 1 / theta^(2i / D)  (fp32, computed as HF does),  angle = p * inv_freq[i]  (fp32),
//   x1' = x1 cos - x2 sin,   x2' = x2 cos + x1 sin      for x1 = x[:D/2], x2 = x[D/2:], i < D/2.
// The backward is the inverse rotation (the op is orthogonal), also in place on the gradient.
// Op conventions (shared by ops/*.h): outputs are allocated by the caller; backward ops OVERWRITE activation
// gradients (=) and ACCUMULATE parameter gradients (+=); CPU tensors are F32; shape / dtype / device mismatches
// are internal errors (NVFP4LM_ASSERT).
// Positions come from the model (bounded by the context it was set up for); one outside a RopeTable is an
// Error naming the table size, since a prompt may be too long.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace nvfp4lm {

// cos/sin of every (position, frequency) pair for positions [0, max_positions), built once and reused by
// every layer: F32 [max_positions, D/2] on `device`. Building costs max_positions * D/2 sincos.
class RopeTable {
 public:
  RopeTable(int64_t head_dim, float theta, int64_t max_positions, Device device = Device::cpu());

  int64_t head_dim() const { return head_dim_; }
  float theta() const { return theta_; }
  int64_t max_positions() const { return max_positions_; }
  const Tensor& cos() const { return cos_; }
  const Tensor& sin() const { return sin_; }

 private:
  int64_t head_dim_;
  float theta_;
  int64_t max_positions_;
  Tensor cos_;
  Tensor sin_;
};

// The size of table to build for `positions` positions: a power of two of at least 4096, so that a table grown as
// sequences lengthen is rebuilt a few times, not once per step.
int64_t rope_table_positions(int64_t positions);

// inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim / 2, in fp32 as Hugging Face computes it.
std::vector<float> rope_inv_freq(int64_t head_dim, float theta);

void rope_forward(Tensor& x, const Tensor& positions, const RopeTable& table);
void rope_backward(Tensor& dx, const Tensor& positions, const RopeTable& table);
// Without a table: computes cos/sin for the positions of this call (N * D/2 sincos on the host) — for tests
// and one-off calls; a model should keep a RopeTable. positions must be on the CPU here.
void rope_forward(Tensor& x, const Tensor& positions, float theta);
void rope_backward(Tensor& dx, const Tensor& positions, float theta);

}  // namespace nvfp4lm
