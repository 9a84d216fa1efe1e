// Randomized robustness: valid model files (safetensors, ModelOpt, .dat, config.json, index) with random bytes
// changed or cut off must either still load or fail with nvfp4lm::Error — never crash, never throw anything else,
// never allocate absurdly. Seeded, so a failure reproduces; a few hundred cases per format keep it fast.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/synth_model.h"

namespace nvfp4lm::test::test_fuzz {
namespace {

// Opens the model and touches every weight the way a loader would. Returns "ok" or "error".
std::string exercise(const fs::path& model) {
  try {
    const auto files = open_model(model);
    for (const WeightInfo& info : files->weights()) {
      const ModelWeight weight = files->load(info.name);
      if (weight.is_nvfp4()) {
        dequantize_nvfp4(weight.nvfp4, DType::F32);
      } else if (dtype_is_float(weight.dense.dtype())) {
        to_float_vector(weight.dense.reshape(Shape{weight.dense.numel()}));
      }
      files->release(info.name);
    }
    return "ok";
  } catch (const Error&) {
    return "error";
  }
  // Anything else propagates and fails the test with its message.
}

std::string mutate(const std::string& original, Rng& rng) {
  std::string bytes = original;
  switch (rng.below(4)) {
    case 0: {  // a few random bytes, biased to the start where headers live
      const uint64_t count = 1 + rng.below(8);
      for (uint64_t i = 0; i < count; ++i) {
        const uint64_t span = rng.below(2) ? std::min<uint64_t>(bytes.size(), 512) : bytes.size();
        bytes[rng.below(span)] = static_cast<char>(rng.below(256));
      }
      break;
    }
    case 1:  // truncation
      bytes.resize(rng.below(bytes.size()));
      break;
    case 2: {  // a byte set to an extreme value (lengths, LEB128 continuation bits)
      const uint64_t span = std::min<uint64_t>(bytes.size(), 256);
      bytes[rng.below(span)] = rng.below(2) ? '\xff' : '\x80';
      break;
    }
    default: {  // a digit in a text header replaced by a large number
      const size_t at = bytes.find_first_of("0123456789", rng.below(std::min<uint64_t>(bytes.size(), 2048)));
      if (at != std::string::npos && at < bytes.size()) bytes.replace(at, 1, rng.below(2) ? "99999999999" : "-1");
      break;
    }
  }
  return bytes;
}

class Fuzz : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    SynthOptions options;
    options.bundled_tokenizer = false;
    Qwen3Config config = small_test_config();
    config.vocab_size = 64;  // smaller files: more of each is header
    synth_model(config, *dir_ / "hf", options);
    options.max_shard_bytes = 20'000;
    synth_model(config, *dir_ / "sharded", options);
    const auto source = open_model(*dir_ / "hf");
    quantize_model(*source, *dir_ / "mo", QuantizeOptions{ModelFormat::ModeloptNvfp4});
    quantize_model(*source, *dir_ / "dat", QuantizeOptions{ModelFormat::Dat});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Mutates `file` of `model` `cases` times; every outcome must be ok or an Error.
  void fuzz(const std::string& model, const std::string& file, int cases, uint64_t seed) {
    const fs::path path = *dir_ / model / file;
    const std::string original = read_file(path);
    ASSERT_EQ(exercise(*dir_ / model), "ok");
    Rng rng(seed);
    int errors = 0;
    for (int i = 0; i < cases; ++i) {
      write_file(path, mutate(original, rng));
      const std::string outcome = exercise(*dir_ / model);
      errors += outcome == "error";
    }
    write_file(path, original);
    // The mutations are not all harmless: most must have been caught.
    EXPECT_GT(errors, cases / 4) << model << "/" << file;
  }

  static TempDir* dir_;
};
TempDir* Fuzz::dir_ = nullptr;

TEST_F(Fuzz, Safetensors) { fuzz("hf", "model.safetensors", 300, 1); }
TEST_F(Fuzz, ModeloptSafetensors) { fuzz("mo", "model.safetensors", 300, 2); }
TEST_F(Fuzz, Dat) { fuzz("dat", "model.dat", 400, 3); }
TEST_F(Fuzz, ConfigJson) { fuzz("hf", "config.json", 200, 4); }
TEST_F(Fuzz, HfQuantConfig) { fuzz("mo", "hf_quant_config.json", 100, 5); }
TEST_F(Fuzz, ShardIndex) { fuzz("sharded", "model.safetensors.index.json", 150, 6); }

}  // namespace
}  // namespace nvfp4lm::test::test_fuzz
