// Scores of next-token predictions from F32 logit rows on the host, for `nvfp4lm eval` (tools/eval.h): the
// cross-entropy of the target, whether the argmax is the target, and against a reference model's row of the same
// position the KL divergence and whether both have the same argmax.
//
// Definitions (natural log, every sum in double):
//   log p(v)  = z_v - lse(z),  lse(z) = m + log sum_v exp(z_v - m),  m = max_v z_v
//   loss      = -log p(target)
//   argmax    = the first index of the largest logit (NaN never wins)
//   KL        = KL(P_ref || P_model) = sum_v p_ref(v) * (log p_ref(v) - log p_model(v)): the divergence of the model's
//               distribution from the reference's, the direction llama.cpp's KL-divergence statistics use
//               (reference = the unquantized model whose distribution the quantized one should reproduce).
// Identical rows give KL = 0 exactly: both log-softmaxes are the same doubles, so every term is 0.
// Rows are scored in parallel and accumulated in row order, so the totals do not depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace nvfp4lm {

struct RowScore {
  double loss = 0;
  int32_t argmax = 0;
  double reference_loss = 0;  // with a reference row
  int32_t reference_argmax = 0;
  double kl = 0;
};

// One row of `vocab` logits; reference may be null.
RowScore score_row(const float* logits, const float* reference, int64_t vocab, int32_t target);

struct ScoreTotals {
  int64_t tokens = 0;
  double loss_sum = 0;
  int64_t correct = 0;
  // With a reference:
  double reference_loss_sum = 0;
  int64_t reference_correct = 0;
  double kl_sum = 0;
  int64_t top1_agreement = 0;    // rows where both argmaxes are equal
  std::vector<float> kl_values;  // per token, for the median / p99 / max
};

// Adds the rows whose target is not kIgnoreIndex (-100). logits (and reference, when given): [rows, vocab]
// contiguous; targets: [rows] in [0, vocab) or -100 (Error naming the row otherwise).
void add_row_scores(const float* logits, const float* reference, int64_t rows, int64_t vocab, const int32_t* targets,
                    ScoreTotals& totals);

// The value below which `fraction` of the values lie (nearest rank); 0 for an empty list.
double quantile(std::vector<float> values, double fraction);

}  // namespace nvfp4lm
