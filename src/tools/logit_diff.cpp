// See logit_diff.h.
#include "tools/logit_diff.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "core/error.h"
#include "core/number_text.h"

namespace nvfp4lm {
namespace {

constexpr std::array<std::string_view, kToleranceClasses> kNames = {
    "identical", "fp32",        "bf16-weights", "bf16-activations", "int8-activations",
    "other",     "requantized", "baseline",     "w4a4-activations"};

// Index of the largest of row[0, candidates) (the lowest on ties; NaN never wins).
int32_t row_argmax(const float* row, int64_t candidates) {
  int64_t best = 0;
  for (int64_t i = 1; i < candidates; ++i)
    if (row[i] > row[best] || (std::isnan(row[best]) && !std::isnan(row[i]))) best = i;
  return static_cast<int32_t>(best);
}

}  // namespace

std::string_view tolerance_class_name(ToleranceClass tolerance_class) {
  return kNames[static_cast<size_t>(tolerance_class)];
}

LogitTolerances::LogitTolerances() {
  set(ToleranceClass::Identical, 0.0);
  set(ToleranceClass::Fp32, 1e-4);
  set(ToleranceClass::Bf16Weights, 5e-2);
  set(ToleranceClass::Bf16Activations, 1e-1);
  set(ToleranceClass::Int8Activations, 1e-1);
  set(ToleranceClass::Other, of(ToleranceClass::Fp32));
  set(ToleranceClass::Requantized, 5e-1);
  set(ToleranceClass::Baseline, of(ToleranceClass::Fp32));
  set(ToleranceClass::W4a4Activations, 5e-1);
}

void LogitTolerances::set(ToleranceClass tolerance_class, double value) {
  NVFP4LM_ASSERT(std::isfinite(value) && value >= 0, "tolerance {}", value);
  values_[static_cast<size_t>(tolerance_class)] = value;
}

void LogitTolerances::set_from_text(std::string_view assignment) {
  const size_t equals = assignment.find('=');
  const std::string_view name = assignment.substr(0, equals);
  const auto it = std::find(kNames.begin(), kNames.end(), name);
  if (equals == std::string_view::npos || it == kNames.end()) {
    throw UsageError(fmt::format("--tolerance '{}': expected CLASS=VALUE with CLASS one of {}", assignment,
                                 fmt::join(kNames, ", ")));
  }
  std::string problem;
  const std::optional<double> value = parse_number<double>(assignment.substr(equals + 1), {0.0, 1e6}, problem);
  if (!value) throw UsageError(fmt::format("--tolerance {}: the value {}", assignment, problem));
  set(static_cast<ToleranceClass>(it - kNames.begin()), *value);
}

std::string LogitTolerances::describe() const {
  std::string text;
  for (int i = 0; i < kToleranceClasses; ++i)
    text +=
        fmt::format("{}{} {:g}", i == 0 ? "" : ", ", kNames[static_cast<size_t>(i)], values_[static_cast<size_t>(i)]);
  return text;
}

void LogitDiffAccumulator::add_row(const float* logits, const float* reference, int64_t vocab, int64_t candidates) {
  NVFP4LM_ASSERT(candidates >= 1 && candidates <= vocab, "compare_logits: {} candidates of {}", candidates, vocab);
  const int64_t t = diff_.positions++;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!std::isfinite(logits[v]) || !std::isfinite(reference[v])) {
      diff_.non_finite = true;
      continue;
    }
    const double delta = std::fabs(static_cast<double>(logits[v]) - reference[v]);
    if (delta > diff_.max_abs_diff) {
      diff_.max_abs_diff = delta;
      diff_.max_diff_position = t;
    }
    diff_.max_abs_reference = std::max(diff_.max_abs_reference, std::fabs(static_cast<double>(reference[v])));
  }
  const int32_t token = row_argmax(logits, candidates), reference_token = row_argmax(reference, candidates);
  if (token == reference_token) {
    ++diff_.top1_agree;
  } else if (diff_.first_divergence < 0) {
    diff_.first_divergence = t;
    diff_.token = token;
    diff_.reference_token = reference_token;
  }
}

LogitDiff compare_logits(const Tensor& logits, const Tensor& reference, int64_t candidates) {
  NVFP4LM_ASSERT(logits.rank() == 2 && logits.shape() == reference.shape() && logits.dtype() == DType::F32 &&
                     reference.dtype() == DType::F32,
                 "compare_logits: {} vs {}", logits.str(), reference.str());
  const Tensor a = logits.to(Device::cpu()).contiguous(), b = reference.to(Device::cpu()).contiguous();
  const int64_t positions = a.dim(0), vocab = a.dim(1);
  LogitDiffAccumulator accumulator;
  for (int64_t t = 0; t < positions; ++t)
    accumulator.add_row(a.data<float>() + t * vocab, b.data<float>() + t * vocab, vocab, candidates);
  return accumulator.diff();
}

}  // namespace nvfp4lm
