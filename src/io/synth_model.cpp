#include "io/synth_model.h"

#include <unistd.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "core/numeric.h"
#include "core/rng.h"
#include "io/weight_names.h"

namespace nvfp4lm {
namespace {

constexpr int64_t kChunkElements = int64_t{1} << 22;  // even, so Box-Muller pairs never straddle chunks
constexpr float kTwoPi = 6.28318530717958647692f;

uint64_t stream_key(uint64_t seed, const std::string& name) { return mix64(seed ^ mix64(name_hash(name))); }

// Standard normal for element `index` of a stream: elements 2k and 2k+1 are the cos / sin halves of one
// Box-Muller pair.
inline float normal_at(uint64_t key, int64_t index) {
  const uint64_t pair = static_cast<uint64_t>(index) / 2;
  const float u1 = counter_uniform(key, 2 * pair), u2 = counter_uniform(key, 2 * pair + 1);
  const float radius = std::sqrt(-2.0f * std::log(1.0f - u1));  // 1 - u1 in (0, 1]
  const float angle = kTwoPi * u2;
  return radius * ((index & 1) ? std::sin(angle) : std::cos(angle));
}

bool is_norm(WeightKind kind) {
  return kind == WeightKind::QkNorm || kind == WeightKind::LayerNorm || kind == WeightKind::FinalNorm;
}

// The standard deviation of a weight's values (norms: of the noise around 1).
float synth_scale(const SynthOptions& options, const std::string& name, bool norm) {
  if (norm) return options.norm_noise;
  const std::optional<WeightKind> kind = classify_weight_name(name);
  const bool embedding = kind == WeightKind::Embedding || kind == WeightKind::LmHead;
  return embedding && options.embedding_std > 0 ? options.embedding_std : options.init_std;
}

std::optional<fs::path> tokenizer_at(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "tokenizer.json", ec)) return fs::weakly_canonical(dir, ec);
  return std::nullopt;
}

// ---- the in-memory random model (random_model_files)
// --------------------------------------------------------------------------------

class RandomModelFiles final : public ModelFiles {
 public:
  RandomModelFiles(const Qwen3Config& config, const std::string& name, uint64_t seed) {
    config.validate(name);
    path_ = name;
    config_path_ = name;
    config_ = config;
    config_json_ = qwen3_config_to_json(config);
    synth_.seed = seed;
    synth_.dtype = DType::F32;
    std::vector<WeightInfo> found;
    for (const ExpectedWeight& expected : qwen3_expected_weights(config)) {
      WeightInfo info;
      info.name = expected.name;
      info.shape = expected.shape;
      info.dtype = DType::F32;
      info.storage = "F32 (random, generated in memory)";
      found.push_back(std::move(info));
    }
    finalize_weights(std::move(found));
  }

  std::vector<fs::path> data_files() const override { return {}; }

  ModelWeight load(const std::string& name) const override {
    const WeightInfo& info = at(name);
    const bool norm =
        info.kind == WeightKind::QkNorm || info.kind == WeightKind::LayerNorm || info.kind == WeightKind::FinalNorm;
    ModelWeight weight;
    weight.dense = Tensor::empty(info.shape, DType::F32, Device::cpu());
    float* values = weight.dense.data<float>();
    const int64_t count = weight.dense.numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) values[i] = synth_value(synth_, name, norm, i);
    return weight;
  }

  void release(const std::string&) const override {}

 private:
  SynthOptions synth_;
};

}  // namespace

float synth_value(const SynthOptions& options, const std::string& name, bool norm, int64_t index) {
  // The same expression synth_model evaluates, so the two agree bit for bit.
  const float scale = synth_scale(options, name, norm);
  const float offset = norm ? 1.0f : 0.0f;
  return offset + scale * normal_at(stream_key(options.seed, name), index);
}

std::optional<fs::path> find_bundled_tokenizer() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    for (const fs::path& candidate : {dir / "models", dir / ".." / "models", dir / ".." / ".." / "models"})
      if (auto found = tokenizer_at(candidate / "qwen3-tokenizer")) return found;
  }
  return tokenizer_at(fs::path(NVFP4LM_SOURCE_DIR) / "models" / "qwen3-tokenizer");
}

SynthReport synth_model(const Qwen3Config& config, const fs::path& out, const SynthOptions& options) {
  config.validate("synth config");
  NVFP4LM_CHECK(options.dtype == DType::BF16 || options.dtype == DType::F32, "synth writes bf16 or f32 weights, not {}",
                dtype_name(options.dtype));
  SynthReport report;
  if (options.tokenizer_dir) {
    report.tokenizer_from = tokenizer_at(*options.tokenizer_dir);
    NVFP4LM_CHECK(report.tokenizer_from.has_value(), "tokenizer directory {} has no tokenizer.json",
                  options.tokenizer_dir->string());
  } else if (options.bundled_tokenizer && config.vocab_size == kQwen3TokenizerVocab) {
    report.tokenizer_from = find_bundled_tokenizer();
    if (!report.tokenizer_from) log::warn("bundled Qwen3 tokenizer not found; {} gets no tokenizer", out.string());
  }

  Qwen3Config written = config;
  written.torch_dtype = options.dtype == DType::BF16 ? "bfloat16" : "float32";
  ModelWriterOptions writer_options;
  writer_options.overwrite = options.overwrite;
  writer_options.max_shard_bytes = options.max_shard_bytes;
  writer_options.config_json = qwen3_config_to_json(written);
  writer_options.generation_config = generation_config_to_json(written);
  if (report.tokenizer_from) {
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      std::error_code ec;
      if (fs::is_regular_file(*report.tokenizer_from / name, ec))
        writer_options.copy_files.push_back(*report.tokenizer_from / name);
    }
  }

  const auto expected = qwen3_expected_weights(config);
  std::vector<WeightPlan> plan;
  for (const auto& weight : expected) plan.push_back({weight.name, weight.shape, false, options.dtype});
  ModelWriter writer(ModelFormat::HfSafetensors, out, plan, writer_options);

  const size_t element_bytes = dtype_bytes(options.dtype);
  std::vector<uint8_t> buffer(static_cast<size_t>(kChunkElements) * element_bytes);
  for (const auto& weight : expected) {
    const uint64_t key = stream_key(options.seed, weight.name);
    const bool norm = is_norm(weight.kind);
    const float scale = synth_scale(options, weight.name, norm);
    const float offset = norm ? 1.0f : 0.0f;
    const int64_t numel = weight.shape.numel();
    for (int64_t start = 0; start < numel; start += kChunkElements) {
      const int64_t count = std::min(kChunkElements, numel - start);
      if (options.dtype == DType::BF16) {
        auto* values = reinterpret_cast<uint16_t*>(buffer.data());
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; ++i) values[i] = float_to_bf16(offset + scale * normal_at(key, start + i));
      } else {
        auto* values = reinterpret_cast<float*>(buffer.data());
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < count; ++i) values[i] = offset + scale * normal_at(key, start + i);
      }
      writer.write_dense_bytes(weight.name, buffer.data(), static_cast<uint64_t>(count) * element_bytes);
    }
    report.parameters += numel;
  }
  writer.finish();
  report.weight_bytes = writer.bytes_written();
  report.shards = writer.shard_count();
  return report;
}

std::unique_ptr<ModelFiles> random_model_files(const Qwen3Config& config, const std::string& name, uint64_t seed) {
  return std::make_unique<RandomModelFiles>(config, name, seed);
}

}  // namespace nvfp4lm
