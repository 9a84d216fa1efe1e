// See eval_split.h.
#include "data/eval_split.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nvfp4lm {

std::vector<Sample> hold_out_samples(std::vector<Sample>& samples, double fraction) {
  NVFP4LM_CHECK(std::isfinite(fraction) && fraction > 0 && fraction <= 0.5,
                "--eval-split must be a fraction in (0, 0.5], got {}", fraction);
  std::vector<Sample> kept, held_out;
  for (size_t i = 0; i < samples.size(); ++i) {
    const bool hold = std::floor(static_cast<double>(i + 1) * fraction) > std::floor(static_cast<double>(i) * fraction);
    (hold ? held_out : kept).push_back(std::move(samples[i]));
  }
  NVFP4LM_CHECK(!held_out.empty(),
                "--eval-split {} of {} training samples holds out none; use a larger fraction (at least {:.3g}) or "
                "--eval-data FILE",
                fraction, samples.size(), 1.0 / static_cast<double>(std::max<size_t>(samples.size(), 1)));
  NVFP4LM_CHECK(!kept.empty(), "--eval-split {} leaves no sample to train on", fraction);
  samples = std::move(kept);
  return held_out;
}

}  // namespace nvfp4lm
