// Terms for the ordered-sum tests of train/dist/: values over 24 binary orders of magnitude, so that adding them in
// another order gives other bits; a pure function of (term index, element), the same in every rank and process.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace nvfp4lm::test {

inline std::vector<float> dist_term(int64_t n, uint64_t index) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double u = counter_uniform(index * 7919 + 13, static_cast<uint64_t>(i));
    const double magnitude = std::exp2(std::floor(24.0 * counter_uniform(index * 7919 + 14, static_cast<uint64_t>(i))));
    values[static_cast<size_t>(i)] = static_cast<float>((2.0 * u - 1.0) * magnitude);
  }
  return values;
}

// One process: terms 0 .. count-1 added one after the other.
inline std::vector<float> dist_sequential_sum(int64_t n, int count) {
  std::vector<float> sum(static_cast<size_t>(n), 0.0f);
  for (int t = 0; t < count; ++t) {
    const std::vector<float> values = dist_term(n, static_cast<uint64_t>(t));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += values[i];
  }
  return sum;
}

}  // namespace nvfp4lm::test
