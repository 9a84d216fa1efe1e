// Helpers for the io tests (errors are checked with common/test_util.h's expect_error): small model configs and
// synthesised models of them, byte comparison, hand-made safetensors / .dat files for bad-input tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>

#include "common/test_util.h"
#include "core/error.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/synth_model.h"

namespace nvfp4lm::test {

// A small Qwen3 shape with a small vocabulary: fast to synthesize, every projection a multiple of 16.
inline Qwen3Config small_test_config(bool tied = true) {
  Qwen3Config c = qwen3_preset("tiny");
  c.vocab_size = 512;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.tie_word_embeddings = tied;
  return c;
}

inline std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

// A safetensors file from a header text and raw data (no validation: for bad-input tests).
inline void write_raw_safetensors(const fs::path& path, const std::string& header, const std::string& data) {
  write_file(path, le64(header.size()) + header + data);
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.nbytes() != b.nbytes()) return false;
  // An empty tensor's raw() may be null, and memcmp(nullptr, ..., 0) is undefined (UBSan halts on it).
  return a.nbytes() == 0 || std::memcmp(a.contiguous().raw(), b.contiguous().raw(), a.nbytes()) == 0;
}

// synth without the bundled tokenizer (the small vocabulary is not Qwen3's).
inline SynthOptions synth_options(uint64_t seed = 5) {
  SynthOptions options;
  options.seed = seed;
  options.bundled_tokenizer = false;
  return options;
}

// A synthesised small_test_config model in dir/name.
inline fs::path synth_small(const TempDir& dir, const std::string& name, bool tied = true, uint64_t seed = 5) {
  const fs::path out = dir / name;
  synth_model(small_test_config(tied), out, synth_options(seed));
  return out;
}

}  // namespace nvfp4lm::test
