// Shape checks and device dispatch for ops/cross_entropy.h, and the host side of the CUDA twin: the chunk loop
// over target rows that drives the lm_head GEMMs (public gemm(), cuBLASLt on CUDA) and the kernels of
// ops/cuda/cross_entropy.h (the scheme and why it chunks rows is described there).
#include "ops/cross_entropy.h"

#include "ops/cpu/bf16_linear.h"
#include "ops/cpu/cross_entropy.h"
#include "ops/dispatch.h"
#include "ops/gemm.h"

#if NVFP4LM_HAS_CUDA
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ops/cuda/cross_entropy.h"
#include "ops/cuda/embedding.h"
#include "ops/cuda/input_errors.h"
#include "ops/cuda/loss_targets.h"
#include "ops/cuda/tensor_rows.h"
#include "ops/elementwise.h"
#endif

namespace nvfp4lm {

#if NVFP4LM_HAS_CUDA
namespace cuda {

// The default budget: ~1770 BF16 rows of a 151936-token vocabulary (see ops/cuda/cross_entropy.h).
constexpr size_t kDefaultLogitsBytes = size_t(512) << 20;

size_t lm_head_logits_budget_bytes() {
  const char* text = std::getenv("NVFP4LM_CE_LOGITS_BYTES");
  if (text == nullptr || *text == '\0') return kDefaultLogitsBytes;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  NVFP4LM_CHECK(end != nullptr && *end == '\0' && value > 0,
                "NVFP4LM_CE_LOGITS_BYTES='{}' is not a positive number of bytes", text);
  return static_cast<size_t>(value);
}

LossTargetRows compact_loss_targets(const Tensor& targets, int64_t vocab, const char* loss) {
  const int64_t rows = targets.dim(0);
  const Tensor host_targets = targets.to(Device::cpu());
  throw_pending_input_errors();  // e.g. a bad token id seen by this step's embedding kernel
  const int32_t* target = rows > 0 ? host_targets.data<int32_t>() : nullptr;
  std::vector<int32_t> active, source_row(static_cast<size_t>(rows), -1), active_targets;
  for (int64_t i = 0; i < rows; ++i) {
    if (target[i] == kIgnoreIndex) continue;
    NVFP4LM_CHECK(target[i] >= 0 && target[i] < vocab,
                  "{}: target token {} at position {} is outside the vocabulary [0, {}) (use {} to ignore a position)",
                  loss, target[i], i, vocab, kIgnoreIndex);
    source_row[static_cast<size_t>(i)] = static_cast<int32_t>(active.size());
    active.push_back(static_cast<int32_t>(i));
    active_targets.push_back(target[i]);
  }
  LossTargetRows out;
  out.rows = rows;
  out.tokens = static_cast<int64_t>(active.size());
  if (out.tokens == 0) return out;
  std::vector<int32_t> packed(active);
  packed.insert(packed.end(), source_row.begin(), source_row.end());
  packed.insert(packed.end(), active_targets.begin(), active_targets.end());
  out.index = Tensor::from_ints(packed, Shape{static_cast<int64_t>(packed.size())}).to(targets.device());
  const auto* index_data = static_cast<const int32_t*>(out.index.raw());
  out.active = index_data;
  out.source_row = index_data + out.tokens;
  out.targets = index_data + out.tokens + rows;
  out.host_active = std::move(active);
  return out;
}

Tensor active_rows(const Tensor& matrix, const LossTargetRows& compact, const char* what) {
  if (compact.all_active()) return matrix;
  Tensor out = Tensor::empty({compact.tokens, matrix.dim(1)}, matrix.dtype(), matrix.device());
  gather_rows(compact.active, device_matrix(matrix, what), device_matrix(out, what), nullptr);
  return out;
}

}  // namespace cuda

namespace {

CrossEntropyResult cuda_lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                              float grad_scale, Tensor* dhidden, Tensor* dweight,
                                              const CrossEntropyTokens& extras) {
  const DType dtype = hidden.dtype();
  const Device device = hidden.device();
  NVFP4LM_ASSERT(lm_head.dtype() == dtype && (dtype == DType::BF16 || dtype == DType::F32),
                 "lm_head_cross_entropy on CUDA: hidden {} and lm_head {} must share one dtype, BF16 or F32",
                 hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->dtype() == DType::BF16 || dhidden->dtype() == DType::F32,
                 "lm_head_cross_entropy on CUDA: dhidden {} must be BF16 or F32", dhidden->str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->dtype() == DType::F32,
                 "lm_head_cross_entropy on CUDA: dweight {} must be F32 (a parameter gradient)", dweight->str());
  (void)cuda::device_int32(targets, "lm_head_cross_entropy targets");
  const int64_t hidden_dim = hidden.dim(1), vocab = lm_head.dim(0);

  const cuda::LossTargetRows compact = cuda::compact_loss_targets(targets, vocab, "cross-entropy");
  CrossEntropyResult result;
  result.tokens = compact.tokens;
  if (extras.losses != nullptr) fill(*extras.losses, 0.f);
  if (result.tokens == 0) {
    if (dhidden != nullptr) fill(*dhidden, 0.f);
    return result;
  }
  // Per-token gradient scales, compacted like the rows (one upload; the host already waited for the targets).
  Tensor active_scales;
  if (extras.scales != nullptr) {
    const Tensor host = extras.scales->to(Device::cpu());
    std::vector<float> values(compact.host_active.size());
    for (size_t i = 0; i < values.size(); ++i) values[i] = host.data<float>()[compact.host_active[i]];
    active_scales = Tensor::from_floats(values, Shape{static_cast<int64_t>(values.size())}).to(device);
  }
  const int64_t tokens = result.tokens;
  const bool all_active = compact.all_active();
  // The hidden rows with a target, compacted (unless that is all of them).
  const Tensor h = cuda::active_rows(hidden, compact, "lm_head_cross_entropy hidden");
  Tensor dh;
  if (dhidden != nullptr) dh = all_active ? *dhidden : Tensor::empty({tokens, hidden_dim}, dhidden->dtype(), device);

  const int64_t ld = cuda::cross_entropy_logits_ld(vocab);
  const int64_t row_bytes = ld * static_cast<int64_t>(dtype_bytes(dtype));
  const int64_t max_rows = std::max<int64_t>(1, static_cast<int64_t>(cuda::lm_head_logits_budget_bytes()) / row_bytes);
  const int64_t chunks = (tokens + max_rows - 1) / max_rows;
  const int64_t chunk_rows = (tokens + chunks - 1) / chunks;  // balanced chunks
  Tensor logits = Tensor::empty({chunk_rows, ld}, dtype, device);
  Tensor row_loss = Tensor::empty({tokens}, DType::F32, device);
  Tensor row_correct = Tensor::empty({tokens}, DType::I32, device);
  const bool want_grad = dhidden != nullptr || dweight != nullptr;

  for (int64_t first = 0; first < tokens; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, tokens - first);
    const Tensor h_chunk = h.narrow(0, first, count);
    Tensor z = logits.narrow(0, 0, count).narrow(1, 0, vocab);
    gemm(h_chunk, false, lm_head, true, z);
    cuda::cross_entropy_rows(z.raw(), dtype, count, vocab, compact.targets + first, grad_scale,
                             active_scales.defined() ? static_cast<const float*>(active_scales.raw()) + first : nullptr,
                             want_grad, static_cast<float*>(row_loss.raw()) + first,
                             static_cast<int32_t*>(row_correct.raw()) + first);
    if (dhidden != nullptr) {
      Tensor dh_chunk = dh.narrow(0, first, count);
      gemm(z, false, lm_head, false, dh_chunk);
    }
    if (dweight != nullptr) gemm(z, true, h_chunk, false, *dweight, 1.f, 1.f);
  }
  if (dhidden != nullptr && !all_active) {
    cuda::expand_rows(cuda::device_matrix(dh, "lm_head_cross_entropy compacted dhidden"), compact.source_row,
                      cuda::device_matrix(*dhidden, "lm_head_cross_entropy dhidden"));
  }

  Tensor sums = Tensor::empty({2 * static_cast<int64_t>(sizeof(double))}, DType::U8, device);
  cuda::cross_entropy_sums(static_cast<const float*>(row_loss.raw()), static_cast<const int32_t*>(row_correct.raw()),
                           tokens, static_cast<double*>(sums.raw()));
  const Tensor host_sums = sums.to(Device::cpu());  // the second synchronisation: the result
  double values[2];
  std::memcpy(values, host_sums.raw(), sizeof(values));
  result.loss_sum = values[0];
  result.correct = std::llround(values[1]);
  if (extras.losses != nullptr) {  // each active row's loss back in its place
    const Tensor host_loss = row_loss.to(Device::cpu());
    std::vector<float> all(static_cast<size_t>(compact.rows), 0.f);
    for (size_t i = 0; i < compact.host_active.size(); ++i)
      all[static_cast<size_t>(compact.host_active[i])] = host_loss.data<float>()[i];
    extras.losses->copy_from(Tensor::from_floats(all, Shape{compact.rows}));
  }
  return result;
}

}  // namespace
#endif

CrossEntropyResult lm_head_cross_entropy(const Tensor& hidden, const Tensor& lm_head, const Tensor& targets,
                                         float grad_scale, Tensor* dhidden, Tensor* dweight,
                                         const CrossEntropyTokens& tokens) {
  NVFP4LM_ASSERT(hidden.rank() == 2 && lm_head.rank() == 2 && hidden.dim(1) == lm_head.dim(1),
                 "lm_head_cross_entropy: hidden {} must be [N, H] and lm_head {} [V, H]", hidden.str(), lm_head.str());
  NVFP4LM_ASSERT(targets.dtype() == DType::I32 && targets.rank() == 1 && targets.dim(0) == hidden.dim(0),
                 "lm_head_cross_entropy: targets {} must be I32 [{}]", targets.str(), hidden.dim(0));
  NVFP4LM_ASSERT(dhidden == nullptr || dhidden->shape() == hidden.shape(),
                 "lm_head_cross_entropy: dhidden {} vs hidden {}", dhidden->str(), hidden.str());
  NVFP4LM_ASSERT(dweight == nullptr || dweight->shape() == lm_head.shape(),
                 "lm_head_cross_entropy: dweight {} vs lm_head {}", dweight->str(), lm_head.str());
  for (const Tensor* t : {tokens.scales, static_cast<const Tensor*>(tokens.losses)})
    NVFP4LM_ASSERT(t == nullptr ||
                       (t->dtype() == DType::F32 && t->rank() == 1 && t->dim(0) == hidden.dim(0) && t->is_contiguous()),
                   "lm_head_cross_entropy: token scales / losses {} must be contiguous F32 [{}]", t->str(),
                   hidden.dim(0));
  [[maybe_unused]] const Device device = common_device(
      "lm_head_cross_entropy", {&hidden, &lm_head, &targets, dhidden, dweight, tokens.scales, tokens.losses});
#if NVFP4LM_HAS_CUDA
  if (device.is_cuda())
    return cuda_lm_head_cross_entropy(hidden, lm_head, targets, grad_scale, dhidden, dweight, tokens);
#endif
  return cpu::lm_head_cross_entropy(hidden, lm_head, targets, grad_scale, dhidden, dweight, tokens);
}

void lm_head_logits(const Tensor& hidden, const Tensor& lm_head, Tensor& logits, LinearRows rows, CpuMatmul matmul) {
  if (lm_head.device().is_cpu() && lm_head.dtype() == DType::BF16) {
    Tensor out = flatten_rows(logits, "lm_head_logits logits");
    cpu::bf16_linear_forward(flatten_rows(hidden, "lm_head_logits hidden"), lm_head, out, rows != LinearRows::Batch,
                             matmul);
    return;
  }
  linear_forward(hidden, lm_head, logits, rows);
}

}  // namespace nvfp4lm
