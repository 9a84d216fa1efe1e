// Helpers for the parity and stress tests (tests/tools, tests/cli): a small Qwen3 with a chat tokenizer (the
// 512-token fixture tokenizer, so logits rows are short and every run is fast), quantized on request, and the
// corruption parity must catch: one E4M3 block scale of a ModelOpt weight changed in the file.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/modelopt.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/synth_model.h"

namespace nvfp4lm::test {

// small_test_config (512 tokens, 2 layers, hidden 64) with the fixture tokenizer, in dir / name.
inline fs::path synth_chat_model(const TempDir& dir, const std::string& name, uint64_t seed = 11) {
  SynthOptions options = synth_options(seed);
  options.tokenizer_dir = fixture_path("tiny-tokenizer");
  const fs::path out = dir / name;
  synth_model(small_test_config(false), out, options);
  return out;
}

// `source` quantized to `format` in dir / name.
inline fs::path quantize_to(const fs::path& source, const TempDir& dir, const std::string& name, ModelFormat format) {
  QuantizeOptions options;
  options.format = format;
  quantize_model(*open_model(source), dir / name, options);
  return dir / name;
}

// Replaces the first block scale of `weight` (a ModelOpt NVFP4 weight in dir/model.safetensors) with 0x7E (448, the
// largest E4M3 value; 0x38 = 1 when it already was 448): those 16 weights grow by orders of magnitude.
inline void corrupt_block_scale(const fs::path& dir, const std::string& weight) {
  const fs::path file = dir / "model.safetensors";
  uint64_t offset = 0;
  uint8_t old_byte = 0;
  {
    const auto reader = SafetensorsFile::open(file);
    const SafetensorsEntry* entry = reader->find(modelopt_names(weight).weight_scale);
    ASSERT_NE(entry, nullptr) << weight << " has no weight_scale in " << file;
    offset = entry->offset;
    old_byte = *reader->bytes_of(*entry);
  }
  std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(stream) << file;
  stream.seekp(static_cast<std::streamoff>(offset));
  const char byte = static_cast<char>(old_byte == 0x7E ? 0x38 : 0x7E);
  stream.write(&byte, 1);
  ASSERT_TRUE(stream) << file;
}

}  // namespace nvfp4lm::test
