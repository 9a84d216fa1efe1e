// A random-initialised Qwen3 model in Hugging Face layout (config.json, generation_config.json,
// model.safetensors, sharded with an index above max_shard_bytes), for tests and benchmarks of any shape.
// Values follow HF's init: linear and embedding weights N(0, init_std^2) (embed_tokens and lm_head
// N(0, embedding_std^2) when that is set), norm weights 1 + N(0, norm_noise^2)
// (HF uses exactly 1; the noise makes tests notice a norm applied wrongly). Every element is a pure function of
// (seed, weight name, element index): a counter-based hash (core/rng.h) fed to Box-Muller, so the output is
// identical for any thread count and chunking, and generation runs in parallel (OpenMP) chunk by chunk
// with bounded memory. When the vocabulary is the Qwen3 tokenizer's (151936) and the bundled tokenizer is found
// (models/qwen3-tokenizer beside the executable's build tree or the source tree), or a tokenizer directory is
// given, tokenizer.json and tokenizer_config.json are copied along.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/files.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "io/model_writer.h"

namespace nvfp4lm {

inline constexpr int64_t kQwen3TokenizerVocab = 151936;

struct SynthOptions {
  uint64_t seed = 0;
  DType dtype = DType::BF16;  // BF16 or F32
  bool overwrite = false;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  std::optional<fs::path> tokenizer_dir;  // explicit tokenizer to copy (any vocab size)
  bool bundled_tokenizer = true;          // look for models/qwen3-tokenizer when vocab == 151936
  float init_std = 0.02f;
  // embed_tokens and lm_head: 0 means init_std. A trained model's head spreads its logits over tens of nats where a
  // 0.02 head gives about ±1, so a base for adapter training (which leaves the head frozen) needs a wider one.
  float embedding_std = 0;
  float norm_noise = 0.1f;
};

struct SynthReport {
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;
  size_t shards = 0;
  std::optional<fs::path> tokenizer_from;
};

SynthReport synth_model(const Qwen3Config& config, const fs::path& out, const SynthOptions& options);

// The value synth writes (before rounding to the stored dtype) for element `index` of weight `name`.
float synth_value(const SynthOptions& options, const std::string& name, bool norm, int64_t index);

// A model that lives only in memory: load() generates each weight as F32, element for element the values
// `nvfp4lm synth --seed seed --dtype f32` writes (synth_value), so a preset needs no disk (bench train, tests).
// `name` stands in for a path in messages ("preset:small").
std::unique_ptr<ModelFiles> random_model_files(const Qwen3Config& config, const std::string& name, uint64_t seed = 0);

// models/qwen3-tokenizer next to the executable's tree (../models, ../../models) or in the source tree
// (NVFP4LM_SOURCE_DIR), the first that has tokenizer.json.
std::optional<fs::path> find_bundled_tokenizer();

}  // namespace nvfp4lm
