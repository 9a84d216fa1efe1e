// CPU reference of ops/sampling.h: the definitions computed directly (nth_element for the k-th largest value, a
// sort of the top-k survivors for top-p, exact integer sums of the fixed-point weights). Rows are independent.
#include "ops/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "core/numeric.h"

namespace nvfp4lm::cpu {
namespace {

constexpr float kFixedOne = 1099511627776.0f;  // 2^40
constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

int32_t argmax_row(const float* row, int64_t vocab) {
  float best = kMinusInfinity;
  int64_t best_id = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (row[i] > best || (best_id < 0 && row[i] == best)) {  // NaN compares false: never chosen
      best = row[i];
      best_id = i;
    }
  }
  return static_cast<int32_t>(std::max<int64_t>(best_id, 0));
}

int32_t sample_row(const float* row, int64_t vocab, float u, const TopKTopP& options) {
  std::vector<float> z(static_cast<size_t>(vocab));
  float max_z = kMinusInfinity;
  for (int64_t i = 0; i < vocab; ++i) {
    const float value = row[i] / options.temperature;
    z[static_cast<size_t>(i)] = std::isnan(value) ? kMinusInfinity : value;
    max_z = std::max(max_z, z[static_cast<size_t>(i)]);
  }
  if (max_z == kMinusInfinity) return 0;
  std::vector<uint32_t> keys(static_cast<size_t>(vocab));
  std::vector<uint64_t> weights(static_cast<size_t>(vocab));
  for (size_t i = 0; i < keys.size(); ++i) {
    keys[i] = sampling_key(z[i]);
    weights[i] = sampling_weight(z[i], max_z);
  }
  auto mass_from = [&](uint32_t threshold) {
    uint64_t mass = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] >= threshold) mass += weights[i];
    return mass;
  };

  uint32_t threshold = 0;
  if (options.top_k > 0 && options.top_k < vocab) {
    std::vector<uint32_t> sorted = keys;
    const auto kth = sorted.begin() + (options.top_k - 1);
    std::nth_element(sorted.begin(), kth, sorted.end(), std::greater<>());
    threshold = *kth;
  }
  if (options.top_p < 1.f) {
    const uint64_t kept_mass = mass_from(threshold);
    const auto target = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(static_cast<double>(options.top_p) * static_cast<double>(kept_mass))));
    std::vector<std::pair<uint32_t, uint64_t>> candidates;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] >= threshold) candidates.emplace_back(keys[i], weights[i]);
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    uint64_t cumulative = 0;
    for (const auto& [key, weight] : candidates) {
      cumulative += weight;
      if (cumulative >= target) {
        threshold = key;  // every token with this key is kept (ties)
        break;
      }
    }
  }
  const uint64_t mass = mass_from(threshold);
  uint64_t r = static_cast<uint64_t>(std::floor(static_cast<double>(u) * static_cast<double>(mass)));
  if (r >= mass) r = mass - 1;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] < threshold) continue;
    cumulative += weights[i];
    if (cumulative > r) return static_cast<int32_t>(i);
  }
  return 0;  // unreachable: the running sum reaches mass > r
}

}  // namespace

uint32_t sampling_key(float z) {
  const uint32_t bits = float_bits(z);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

uint64_t sampling_weight(float z, float max_z) {
  if (z == max_z) return uint64_t{1} << 40;
  return static_cast<uint64_t>(std::nearbyint(std::exp(z - max_z) * kFixedOne));
}

void sample_argmax(const Tensor& logits, Tensor& ids) {
  const auto* data = static_cast<const float*>(logits.raw());
  auto* out = static_cast<int32_t*>(ids.raw());
  for (int64_t b = 0; b < logits.dim(0); ++b) out[b] = argmax_row(data + b * logits.stride(0), logits.dim(1));
}

void sample_top_k_top_p(const Tensor& logits, const Tensor& uniforms, const TopKTopP& options, Tensor& ids) {
  const auto* data = static_cast<const float*>(logits.raw());
  const auto* u = static_cast<const float*>(uniforms.raw());
  auto* out = static_cast<int32_t*>(ids.raw());
  for (int64_t b = 0; b < logits.dim(0); ++b)
    out[b] = sample_row(data + b * logits.stride(0), logits.dim(1), u[b], options);
}

}  // namespace nvfp4lm::cpu
