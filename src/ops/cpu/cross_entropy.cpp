// CPU fused lm_head + cross-entropy. Per chunk of up to kCrossEntropyChunkRows non-ignored tokens:
//   gather their hidden rows -> logits [c, V] = h · Wᵀ (sgemm) -> per row max / argmax / log-sum-exp and the
//   loss -> in place, logits become dlogits = grad_scale * (softmax - onehot) -> dh = dlogits · W (scattered
//   back to dhidden) and dW += dlogitsᵀ · h (sgemm, beta = 1).
// Only the chunk's logits exist at any time. Per-row losses are summed in row order in double, so the loss
// does not depend on the thread count.
#include "ops/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/gemm.h"
#include "ops/cpu/vector_math.h"
#include "ops/cpu/views.h"
#include "ops/cpu/x86/levels.h"

namespace nvfp4lm::cpu {
namespace {

struct RowLoss {
  double loss;
  bool correct;
};

// One row of logits: the loss -log softmax(z)[target] and whether argmax (first maximal index, like
// torch.argmax) is the target; with want_grad, z becomes grad_scale * (softmax(z) - onehot(target)).
[[gnu::always_inline]] inline RowLoss softmax_row(float* z, int64_t vocab, int32_t target, float grad_scale,
                                                  bool want_grad) {
  float max_logit = z[0];
#pragma omp simd reduction(max : max_logit)
  for (int64_t j = 0; j < vocab; ++j) max_logit = std::max(max_logit, z[j]);
  int64_t best = 0;
  while (best + 1 < vocab && z[best] != max_logit) ++best;  // bounded: NaN logits never compare equal
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < vocab; ++j) sum += exp_vectorizable(z[j] - max_logit);
  const double log_sum_exp = max_logit + std::log(sum);
  const RowLoss row{log_sum_exp - z[target], best == target};
  if (want_grad) {
    const float lse = static_cast<float>(log_sum_exp);
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) z[j] = grad_scale * exp_vectorizable(z[j] - lse);
    z[target] -= grad_scale;
  }
  return row;
}

// The row kernel compiled per x86-64 level (ops/cpu/x86/levels.h).
using SoftmaxRowFn = RowLoss (*)(float*, int64_t, int32_t, float, bool);

const KernelFamily<SoftmaxRowFn>& cross_entropy_family() {
  static const KernelFamily<SoftmaxRowFn> family(
      "cross-entropy", level_variants<SoftmaxRowFn>([]<KernelLevel L>() { return kernel_at<softmax_row, L>(); }));
  return family;
}

}  // namespace

const KernelFamilyInfo& cross_entropy_kernel_family() { return cross_entropy_family(); }

void gather_target_rows(const MatrixF32& from, const int64_t* index, int64_t count, Tensor& to) {
  float* out = to.data<float>();
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(out + r * from.cols, from.row(index[r]), static_cast<size_t>(from.cols) * sizeof(float));
}

std::vector<int64_t> active_target_rows(const int32_t* target, int64_t rows, int64_t vocab, const MatrixF32* dhidden,
                                        const char* loss) {
  std::vector<int64_t> active;
  for (int64_t i = 0; i < rows; ++i) {
    if (target[i] == kIgnoreIndex) {
      if (dhidden != nullptr) std::fill_n(dhidden->row(i), dhidden->cols, 0.f);
      continue;
    }
    NVFP4LM_CHECK(target[i] >= 0 && target[i] < vocab,
                  "{}: target token {} at position {} is outside the vocabulary [0, {}) (use {} to ignore a position)",
                  loss, target[i], i, vocab, kIgnoreIndex);
    active.push_back(i);
  }
  return active;
}

CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight,
                                         const CrossEntropyTokens& tokens) {
  const MatrixF32 hid = as_matrix(hidden, "lm_head_cross_entropy hidden");
  const int32_t* target = int32_data(targets, "lm_head_cross_entropy targets");
  const int64_t rows = hid.rows, hidden_dim = hid.cols, vocab = lm_head.dim(0);
  MatrixF32 dhid;
  if (dhidden != nullptr) dhid = as_matrix(*dhidden, "lm_head_cross_entropy dhidden");
  if (dweight != nullptr) (void)as_matrix(*dweight, "lm_head_cross_entropy dweight");  // layout check

  const std::vector<int64_t> active =
      active_target_rows(target, rows, vocab, dhidden != nullptr ? &dhid : nullptr, "cross-entropy");
  const float* token_scale = tokens.scales != nullptr ? tokens.scales->data<float>() : nullptr;
  float* token_loss = nullptr;
  if (tokens.losses != nullptr) {
    token_loss = tokens.losses->data<float>();
    std::fill_n(token_loss, rows, 0.f);
  }
  CrossEntropyResult result;
  result.tokens = static_cast<int64_t>(active.size());
  if (active.empty()) return result;

  const bool want_grad = dhidden != nullptr || dweight != nullptr;
  const int64_t chunk_rows = std::min<int64_t>(kCrossEntropyChunkRows, result.tokens);
  Tensor h_chunk = Tensor::empty({chunk_rows, hidden_dim}, DType::F32);
  Tensor logits = Tensor::empty({chunk_rows, vocab}, DType::F32);
  Tensor dh_chunk = dhidden != nullptr ? Tensor::empty({chunk_rows, hidden_dim}, DType::F32) : Tensor();
  std::vector<double> row_loss(static_cast<size_t>(chunk_rows));
  std::vector<char> row_correct(static_cast<size_t>(chunk_rows));

  for (int64_t first = 0; first < result.tokens; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, result.tokens - first);
    const int64_t* chunk_index = active.data() + first;
    Tensor h = h_chunk.narrow(0, 0, count);
    Tensor z = logits.narrow(0, 0, count);
    gather_target_rows(hid, chunk_index, count, h);
    cpu::gemm(h, false, lm_head, true, z, 1.f, 0.f);

    float* z_data = z.data<float>();
    const SoftmaxRowFn softmax_row_variant = cross_entropy_family().chosen().kernels;
#pragma omp parallel for schedule(static) if (count * vocab > 65536)
    for (int64_t r = 0; r < count; ++r) {
      const float scale = token_scale != nullptr ? grad_scale * token_scale[chunk_index[r]] : grad_scale;
      const RowLoss row = softmax_row_variant(z_data + r * vocab, vocab, target[chunk_index[r]], scale, want_grad);
      row_loss[static_cast<size_t>(r)] = row.loss;
      row_correct[static_cast<size_t>(r)] = row.correct;
    }
    for (int64_t r = 0; r < count; ++r) {
      result.loss_sum += row_loss[static_cast<size_t>(r)];
      result.correct += row_correct[static_cast<size_t>(r)];
      if (token_loss != nullptr) token_loss[chunk_index[r]] = static_cast<float>(row_loss[static_cast<size_t>(r)]);
    }
    if (dhidden != nullptr) {
      Tensor dh = dh_chunk.narrow(0, 0, count);
      cpu::gemm(z, false, lm_head, false, dh, 1.f, 0.f);
      const float* dh_data = dh.data<float>();
      for (int64_t r = 0; r < count; ++r) {
        std::memcpy(dhid.row(chunk_index[r]), dh_data + r * hidden_dim,
                    static_cast<size_t>(hidden_dim) * sizeof(float));
      }
    }
    if (dweight != nullptr) cpu::gemm(z, true, h, false, *dweight, 1.f, 1.f);
  }
  return result;
}

}  // namespace nvfp4lm::cpu
