// See eval_split.h.
#include "data/eval_split.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nvfp4lm {

bool held_out_at(size_t index, double fraction) {
  return std::floor(static_cast<double>(index + 1) * fraction) > std::floor(static_cast<double>(index) * fraction);
}

std::vector<Sample> hold_out_samples(std::vector<Sample>& samples, double fraction, size_t group) {
  NVFP4LM_CHECK(std::isfinite(fraction) && fraction > 0 && fraction <= 0.5,
                "--eval-split must be a fraction in (0, 0.5], got {}", fraction);
  NVFP4LM_ASSERT(group >= 1 && samples.size() % group == 0, "{} samples in groups of {}", samples.size(), group);
  std::vector<Sample> kept, held_out;
  const size_t groups = samples.size() / group;
  for (size_t i = 0; i < groups; ++i) {
    const bool hold = held_out_at(i, fraction);
    for (size_t k = 0; k < group; ++k) (hold ? held_out : kept).push_back(std::move(samples[i * group + k]));
  }
  NVFP4LM_CHECK(!held_out.empty(),
                "--eval-split {} of {} training {} holds out none; use a larger fraction (at least {:.3g}) or "
                "--eval-data FILE",
                fraction, groups, group == 1 ? "samples" : "pairs",
                1.0 / static_cast<double>(std::max<size_t>(groups, 1)));
  NVFP4LM_CHECK(!kept.empty(), "--eval-split {} leaves no sample to train on", fraction);
  samples = std::move(kept);
  return held_out;
}

}  // namespace nvfp4lm
