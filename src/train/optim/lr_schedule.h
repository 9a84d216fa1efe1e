// Learning-rate schedules: linear warmup, then constant, linear or cosine decay to peak_lr * min_lr_ratio.
//
// `step` is the 0-based index of the optimizer update the rate is for (the first update is step 0):
//   warmup   (step < W):  lr = peak * (step + 1) / W         (no wasted step at lr 0; step W - 1 is at peak)
//   decay    (step >= W): progress = min(1, (step - W) / max(1, T - W))
//                         constant: f = 1;  linear: f = 1 - progress;  cosine: f = (1 + cos(pi * progress)) / 2
//                         lr = peak * (min_lr_ratio + (1 - min_lr_ratio) * f)
// with W = warmup_steps and T = total_steps (the decay reaches its floor at step T, as in Hugging Face's
// schedules; steps past T stay at the floor). lr_at is a pure function of (schedule, step), so a resumed run
// needs only the step.
#pragma once

#include <cstdint>
#include <string_view>

namespace nvfp4lm {

enum class LrDecay { Constant, Linear, Cosine };

struct LrSchedule {
  LrDecay decay = LrDecay::Cosine;
  double peak_lr = 1e-5;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // required (> 0, >= warmup_steps) for linear and cosine decay
  double min_lr_ratio = 0.0;
};

// Error naming the field when a value is out of range.
void check_lr_schedule(const LrSchedule& schedule);

double lr_at(const LrSchedule& schedule, int64_t step);

// "constant" | "linear" | "cosine"; Error lists them otherwise.
LrDecay parse_lr_decay(std::string_view name);
std::string_view lr_decay_name(LrDecay decay);

}  // namespace nvfp4lm
