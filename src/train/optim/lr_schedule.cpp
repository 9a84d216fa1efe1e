#include "train/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace nvfp4lm {

void check_lr_schedule(const LrSchedule& s) {
  NVFP4LM_CHECK(std::isfinite(s.peak_lr) && s.peak_lr > 0, "learning rate {} must be positive and finite", s.peak_lr);
  NVFP4LM_CHECK(s.warmup_steps >= 0, "warmup steps {} must be non-negative", s.warmup_steps);
  NVFP4LM_CHECK(s.min_lr_ratio >= 0 && s.min_lr_ratio <= 1, "min lr ratio {} must be in [0, 1]", s.min_lr_ratio);
  if (s.decay != LrDecay::Constant) {
    NVFP4LM_CHECK(s.total_steps > 0, "{} decay needs the total number of steps (got {})", lr_decay_name(s.decay),
                  s.total_steps);
    NVFP4LM_CHECK(s.warmup_steps <= s.total_steps, "warmup steps ({}) exceed the total steps ({})", s.warmup_steps,
                  s.total_steps);
  }
}

double lr_at(const LrSchedule& s, int64_t step) {
  NVFP4LM_ASSERT(step >= 0, "lr_at step {}", step);
  if (step < s.warmup_steps) {
    return s.peak_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  }
  if (s.decay == LrDecay::Constant) return s.peak_lr;
  const double span = static_cast<double>(std::max<int64_t>(1, s.total_steps - s.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - s.warmup_steps) / span);
  const double factor =
      s.decay == LrDecay::Linear ? 1.0 - progress : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return s.peak_lr * (s.min_lr_ratio + (1.0 - s.min_lr_ratio) * factor);
}

LrDecay parse_lr_decay(std::string_view name) {
  if (name == "constant") return LrDecay::Constant;
  if (name == "linear") return LrDecay::Linear;
  if (name == "cosine") return LrDecay::Cosine;
  NVFP4LM_FAIL("unknown learning-rate schedule \"{}\"; choose constant, linear or cosine", name);
}

std::string_view lr_decay_name(LrDecay decay) {
  switch (decay) {
    case LrDecay::Constant:
      return "constant";
    case LrDecay::Linear:
      return "linear";
    case LrDecay::Cosine:
      return "cosine";
  }
  return "?";
}

}  // namespace nvfp4lm
