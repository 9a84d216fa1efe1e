// The language-model head fused with a distillation loss: the student's token distribution is trained towards a
// frozen teacher's on the same positions (quantization-aware distillation, as NVIDIA ModelOpt's QAD: the NVFP4
// student against its BF16 base), forward and backward in one call, never holding whole [N, V] logits (the CPU works
// through ~64 tokens at a time, like the fused cross-entropy of ops/cross_entropy.h).
//   z = hidden · lm_headᵀ (student),  t = teacher_hidden · teacher_lm_headᵀ (teacher),  τ = temperature,
//   p = softmax(t / τ),  q = softmax(z / τ),   KL_i = Σ_v p_v (log p_v - log q_v)   (KL(teacher ‖ student))
//   CE_i = -log softmax(z)[target_i]                                                    (τ = 1, as training's CE)
//   loss_i = weight · τ² · KL_i + (1 - weight) · CE_i
// τ² keeps the KL term's gradients the same size whatever the temperature (Hinton et al. 2015; ModelOpt's
// LogitsDistillationLoss scales by it too). dloss_i/dz_v = weight · τ · (q_v - p_v) + (1 - weight) · (softmax(z)_v -
// [v = target_i]). Positions whose target is kIgnoreIndex (-100) carry no loss and get no lm_head work, exactly as
// in cross-entropy: the distilled tokens are those the data marks for training. Gradients are those of grad_scale ·
// Σ loss_i: dhidden is overwritten (ignored rows 0), dweight accumulated (+=); the teacher gets none.
// Sums are taken per row in double and added in row order, so results do not depend on the thread count.
// The teacher's hidden size may differ from the student's (a larger teacher); the vocabularies must be the same.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace nvfp4lm {

struct DistillationSettings {
  float temperature = 1.0f;  // τ > 0
  float weight = 1.0f;       // share of τ²·KL in the loss, in [0, 1]; the rest is cross-entropy with the targets
};

struct DistillationResult {
  double loss_sum = 0.0;  // Σ loss_i over the non-ignored tokens
  double kl_sum = 0.0;    // Σ KL_i (at τ, unscaled)
  double ce_sum = 0.0;    // Σ CE_i
  int64_t tokens = 0;     // non-ignored tokens
  int64_t correct = 0;    // tokens whose student argmax (first on ties) is the target
  int64_t agree = 0;      // tokens whose student and teacher argmax (first on ties) are the same token
};

// hidden [N, H], lm_head [V, H], teacher_hidden [N, Ht], teacher_lm_head [V, Ht], targets I32 [N]. dhidden ([N, H])
// and dweight ([V, H]) are optional as in lm_head_cross_entropy. A target outside [0, V) other than -100 is an
// Error (it comes from data); a bad temperature or weight is an internal error (the options check them).
DistillationResult lm_head_distillation(const Tensor& hidden, const Tensor& lm_head, const Tensor& teacher_hidden,
                                        const Tensor& teacher_lm_head, const Tensor& targets,
                                        const DistillationSettings& settings, float grad_scale, Tensor* dhidden,
                                        Tensor* dweight);

// ---- distillation from a precomputed teacher (`nvfp4lm distill-cache`) --------------------------------------------
// The teacher's distribution at τ kept as its top K tokens and the mass of all the others, for the trained tokens
// only (those whose target is not -100), in row order:
//   ids       I32 [M, K]  the K most likely tokens, by probability descending (ties: the lower id first), distinct
//   log_probs F32 [M, K]  log p_v at τ of each
//   log_rest  F32 [M]     log of the probability outside the K (-inf when nothing is left)
// The loss then compares the two distributions over K + 1 outcomes, the K tokens and "any other token":
//   KL_i = Σ_k p_k (log p_k - log q_k) + r (log r - log q_rest),  q_rest = Σ_{v ∉ K} q_v,  r = exp(log_rest)
// which is the full KL(p ‖ q) when r = 0 and otherwise a lower bound of it (the student's tail is only held to the
// teacher's tail mass, not to its shape). dτ²KL/dz_v = τ (q_v - p_v) for v in K and τ q_v (1 - r / q_rest) outside.
// CE, the counts and grad_scale are as in lm_head_distillation; agree compares the student's argmax with ids[i, 0].
struct TeacherTopK {
  Tensor ids, log_probs, log_rest;

  bool defined() const { return ids.defined(); }
  int64_t rows() const { return ids.defined() ? ids.dim(0) : 0; }
  int64_t k() const { return ids.defined() ? ids.dim(1) : 0; }
  TeacherTopK to(Device device) const { return {ids.to(device), log_probs.to(device), log_rest.to(device)}; }
};

// The largest K a cache may keep (the CUDA kernel holds a row's K tokens in shared memory).
inline constexpr int64_t kMaxTeacherTopK = 256;

// hidden [N, H], lm_head [V, H], targets I32 [N] with M entries other than -100, `teacher` on the same device with
// M rows and ids in [0, V). dhidden / dweight as in lm_head_distillation.
DistillationResult lm_head_distillation_topk(const Tensor& hidden, const Tensor& lm_head, const TeacherTopK& teacher,
                                             const Tensor& targets, const DistillationSettings& settings,
                                             float grad_scale, Tensor* dhidden, Tensor* dweight);

// The teacher's side of a cache, on the host: for each row of F32 CPU `logits` [M, V], the top `k` tokens at
// `temperature` into out (CPU tensors of M rows, allocated here), in double.
TeacherTopK select_teacher_top_k(const Tensor& logits, int64_t k, float temperature);

}  // namespace nvfp4lm
