// See int8_lm_head.h.
#include "ops/int8_lm_head.h"

#include <vector>

#include "core/error.h"
#include "ops/cpu/int8_weight_dot.h"
#include "ops/cpu/nvfp4_int8_dot.h"
#include "ops/cpu/row_groups.h"
#include "ops/cpu/views.h"

namespace nvfp4lm {

bool Int8LmHead::supported(const Tensor& table) {
  return (table.dtype() == DType::BF16 || table.dtype() == DType::F32) && table.rank() == 2 && table.is_contiguous() &&
         table.device().is_cpu() && table.dim(1) % 16 == 0;
}

Int8LmHead::Int8LmHead(const Tensor& table) {
  NVFP4LM_CHECK(supported(table),
                "Int8LmHead: the table {} must be a contiguous BF16 or F32 CPU matrix with whole blocks of 16 columns",
                table.str());
  weights_ = std::make_unique<cpu::Int8Weights>(
      cpu::quantize_int8_weights(table.raw(), table.dtype() == DType::BF16, table.dim(0), table.dim(1), table.dim(1)));
}

Int8LmHead::~Int8LmHead() = default;

int64_t Int8LmHead::vocab() const { return weights_->rows; }
int64_t Int8LmHead::hidden() const { return weights_->cols; }
uint64_t Int8LmHead::bytes() const { return weights_->bytes(); }

void Int8LmHead::logits(const Tensor& hidden, Tensor& logits) const {
  const cpu::MatrixF32 x = cpu::as_matrix(hidden, "int8 lm_head hidden");
  const cpu::MatrixF32 y = cpu::as_matrix(logits, "int8 lm_head logits");
  NVFP4LM_ASSERT(x.cols == weights_->cols && y.cols == weights_->rows && x.rows == y.rows,
                 "Int8LmHead::logits: hidden {} · [{}, {}]ᵀ -> logits {}", hidden.str(), weights_->rows, weights_->cols,
                 logits.str());
  const std::vector<cpu::Int8Activations>& quantized = cpu::quantize_int8_rows(x);
  const cpu::Int8WeightDotFamily::Variant& variant = cpu::int8_weight_dot_family().chosen();
  const cpu::Int8Weights& w = *weights_;
  cpu::run_row_groups_of(
      x.rows, [&](int64_t i) -> const cpu::Int8Activations* { return &quantized[static_cast<size_t>(i)]; }, y, w.rows,
      w.cols, w.padded_cols + w.padded_cols / 8,
      [&](int64_t first, int64_t last, const cpu::Int8Activations* const* x_rows, float* const* y_rows, int n) {
        cpu::int8_weight_dot_rows(variant, w, first, last, x_rows, y_rows, n);
      });
}

}  // namespace nvfp4lm
