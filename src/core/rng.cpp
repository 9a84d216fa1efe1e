#include "core/rng.h"

#include <cmath>

namespace nvfp4lm {
namespace {
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Rng::reseed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& word : state_) {
    x += 0x9e3779b97f4a7c15ull;
    word = mix64(x);
  }
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = rotl(state_[3], 45);
  return result;
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

uint64_t Rng::below(uint64_t bound) {
  // Lemire's rejection on the top bits.
  uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t r = next_u64();
    if (r >= threshold) return r % bound;
  }
}

float Rng::normal() {
  // u1 in (0, 1] so log is finite.
  float u1 = (static_cast<float>(next_u64() >> 40) + 1.0f) * (1.0f / 16777216.0f);
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

}  // namespace nvfp4lm
