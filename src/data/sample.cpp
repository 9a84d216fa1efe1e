// See sample.h for the target alignment.
#include "data/sample.h"

#include "core/error.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm {

void write_next_token_targets(const Sample& sample, std::span<int32_t> targets) {
  const size_t n = sample.ids.size();
  NVFP4LM_ASSERT(sample.train_mask.size() == n && targets.size() == n, "mask {} / targets {} for {} ids",
                 sample.train_mask.size(), targets.size(), n);
  for (size_t t = 0; t + 1 < n; ++t) targets[t] = sample.train_mask[t + 1] ? sample.ids[t + 1] : kIgnoreIndex;
  if (n > 0) targets[n - 1] = kIgnoreIndex;
}

std::vector<int32_t> next_token_targets(const Sample& sample) {
  std::vector<int32_t> targets(sample.ids.size());
  write_next_token_targets(sample, targets);
  return targets;
}

int64_t trained_token_count(const Sample& sample) {
  int64_t count = 0;
  for (size_t t = 1; t < sample.train_mask.size(); ++t) count += sample.train_mask[t] ? 1 : 0;
  return count;
}

}  // namespace nvfp4lm
