// Comparing the logits of two inference paths position by position, and the tolerances `parity` and `stress kv`
// judge them by — stated here once.
//
// The measure: max |Δlogit| over every compared position and vocabulary entry, against a bound of
// tolerance x max |reference logit| (over the same positions). Relative to the logits' own scale, so one tolerance
// serves a tiny random model (logits of order 0.5) and Qwen3-4B (order 30). A NaN or inf in either side fails at
// any tolerance. Top-1 agreement and the first position where the argmaxes differ are reported, not judged: paths
// that round differently may legitimately flip a near tie.
//
// Tolerance classes, with the defaults (relative max |Δlogit| measured on `synth --preset tiny` (2 layers) and `small`
// (8 layers), NVFP4, in bench/NOTES.md; the defaults leave room for the error's growth to 36 layers and a margin):
//   identical         0: the same kernels on the same weights and inputs (CUDA graph vs eager decode, a model vs its
//                     lossless .dat / ModelOpt copy), bit for bit;
//   fp32              1e-4 (measured 3e-7 tiny, 8.5e-7 small): the same weights in fp32 through other kernels or
//                     summation orders (KV-cache decode vs full forward, dense vs NVFP4 dequant-gemm on the CPU);
//   bf16-weights      5e-2 (measured 2e-3 tiny, 6.8e-3 small): the weights rounded to BF16 (the BF16 copy of a model
//                     whose tensor scales are not 1; at tensor scale 1 the copy is exact), fp32 compute;
//   bf16-activations  1e-1 (measured 4.2e-3 tiny, 1.2e-2 small, emulated CUDA): CUDA (bf16 activations, fp32
//                     accumulation) against the CPU, or two CUDA kernel paths;
//   other             fp32's: a second model given by the user (parity --other), expected to hold the same weights;
//                     raise it to compare models that differ on purpose;
//   requantized       5e-1 (measured 2.8e-2 tiny, 1.0e-1 small, where the top-1 of random models' near ties flips):
//                     an NVFP4 model's weights quantized again as QAT quantizes its masters (one tensor scale per fused
//                     group, amax / (6 * 448), instead of the stored one), so each E4M3 block scale moves by up to
//                     half its step (6 %) (parity's train-export vs reference). Loose: it catches a broken
//                     requantization (a wrong block order, a lost scale), not the rounding;
//   baseline          fp32's: a path now against the same path in a baseline file (parity --baseline): the same build
//                     gives 0, another build's kernels move fp32 rounding; raise it to follow a model as it trains;
//   w4a4-activations  5e-1 (measured 1.1e-1 on the tiny fixture and on `synth` small, emulated CUDA vs the CPU): a W4A4
//                     checkpoint on paths whose activations round differently before they are quantized to NVFP4
//                     (bf16 on CUDA, fp32 on the CPU). A 2^-9 difference moves a value across an E2M1 rounding
//                     boundary (a step of 1/6 to 1/3 of its block's largest value) or a block across an E4M3 scale
//                     step, so W4A4 amplifies bf16-activations' differences; loose like requantized.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace nvfp4lm {

enum class ToleranceClass {
  Identical,
  Fp32,
  Bf16Weights,
  Bf16Activations,
  Int8Activations,
  Other,
  Requantized,
  Baseline,
  W4a4Activations
};
inline constexpr int kToleranceClasses = 9;

std::string_view tolerance_class_name(ToleranceClass tolerance_class);  // "identical", "fp32", ...

class LogitTolerances {
 public:
  LogitTolerances();  // the defaults (see above)
  double of(ToleranceClass tolerance_class) const { return values_[static_cast<size_t>(tolerance_class)]; }
  void set(ToleranceClass tolerance_class, double value);
  // "CLASS=VALUE" (--tolerance), VALUE a finite number >= 0; UsageError naming the classes otherwise.
  void set_from_text(std::string_view assignment);
  // "identical 0, fp32 0.0001, ..."
  std::string describe() const;

 private:
  std::array<double, kToleranceClasses> values_{};
};

struct LogitDiff {
  int64_t positions = 0;
  double max_abs_diff = 0;                   // max |logits - reference|
  int64_t max_diff_position = 0;             // where it is
  double max_abs_reference = 0;              // max |reference|
  bool non_finite = false;                   // a NaN or inf on either side
  int64_t top1_agree = 0;                    // positions whose argmax over the candidate ids agree
  int64_t first_divergence = -1;             // first position whose argmaxes differ (-1: none)
  int32_t token = -1, reference_token = -1;  // the two argmaxes there

  double bound(double tolerance) const { return tolerance * max_abs_reference; }
  bool within(double tolerance) const { return !non_finite && max_abs_diff <= bound(tolerance); }
};

// The same measure taken one position at a time, so that logits can be compared as they are produced and dropped:
// after rows 0..T-1 (position = row index) it equals compare_logits of the [T, V] tensors.
class LogitDiffAccumulator {
 public:
  void add_row(const float* logits, const float* reference, int64_t vocab, int64_t candidates);
  const LogitDiff& diff() const { return diff_; }

 private:
  LogitDiff diff_;
};

// logits and reference: F32 [T, V] (any device; compared on the CPU). Argmaxes look at ids [0, candidates) only
// (the tokenizer's ids; the lowest id wins a tie). Positions are row indices.
LogitDiff compare_logits(const Tensor& logits, const Tensor& reference, int64_t candidates);

}  // namespace nvfp4lm
