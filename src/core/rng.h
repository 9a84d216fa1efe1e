// Random numbers. Two kinds, both reproducible from a seed and identical on CPU and GPU:
//  - Rng: a sequential xoshiro256** generator for initialisation, shuffling and sampling; its whole state is
//    four u64 words, so checkpoints can save and restore it exactly.
//  - counter_uniform(seed, counter): a stateless hash for stochastic rounding and dropout-like uses, so
//    element i gets the same random number no matter which thread or kernel processes it.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/numeric.h"  // NVFP4LM_HD

namespace nvfp4lm {

// splitmix64 finalizer: a good 64-bit mixing function.
NVFP4LM_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a of a name: how a stream of random numbers is keyed by a tensor's name (synthesised weights, LoRA's A).
inline uint64_t name_hash(std::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

// Uniform in [0, 1) with 24 bits, from (seed, counter). Same value on host and device.
NVFP4LM_HD float counter_uniform(uint64_t seed, uint64_t counter) {
  uint64_t h = mix64(seed ^ mix64(counter));
  return static_cast<float>(static_cast<uint32_t>(h >> 40)) * (1.0f / 16777216.0f);
}

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  // Uniform in [0, 1) with 24 bits of randomness (exactly representable floats).
  float uniform();
  // Uniform integer in [0, bound) without modulo bias. bound > 0.
  uint64_t below(uint64_t bound);
  // Standard normal (Box-Muller; uses two uniforms per call, no cached second value, so the state
  // alone determines the stream).
  float normal();

  const State& state() const { return state_; }
  void set_state(const State& state) { state_ = state; }

 private:
  State state_{};
};

}  // namespace nvfp4lm
