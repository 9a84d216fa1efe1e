// LoRA adapters at run time (model/lora_runtime.h) on the CPU:
//  - a model with adapters gives, for each adapter, the logits of the base with that adapter merged in double
//    (W + s·B·A): dense and NVFP4 bases (the NVFP4 one against its dequantized weights), every linear or a few on
//    some layers, rsLoRA's scale; the base's rows are the base's, bit for bit;
//  - a row's logits do not depend on which other adapters the set holds (the stacks' 16-column blocks);
//  - adapter files that a plain LoRA over Qwen3's linears cannot express are one-line Errors naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "common/lora_test_util.h"
#include "common/test_util.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "model/lora_runtime.h"
#include "model/qwen3_decode_step.h"
#include "model/qwen3_model.h"

namespace nvfp4lm::test::test_lora_runtime {
namespace {

Tensor prompt_ids() { return Tensor::from_ints({9707, 11, 1879, 0, 315, 3017, 13, 576, 220, 17}, Shape{1, 10}); }

// Loads the adapters written by `specs` (named a0, a1, ...) onto `model`.
void attach(Qwen3Model& model, const TempDir& dir, const std::vector<RandomAdapter>& specs) {
  std::vector<LoraAdapterSpec> adapters;
  for (size_t k = 0; k < specs.size(); ++k) {
    const fs::path path = dir / ("a" + std::to_string(k));
    if (!fs::exists(path)) write_random_adapter(path, model.config(), specs[k]);
    adapters.push_back({"a" + std::to_string(k), path});
  }
  model.set_lora_adapters(std::make_shared<const LoraAdapterSet>(
      LoraAdapterSet::load(adapters, model.config(), model.compute_dtype(), model.device())));
}

std::vector<RandomAdapter> two_adapters() {
  RandomAdapter every;  // rank 4, alpha 8: every linear of every layer
  RandomAdapter some;
  some.rank = 3;
  some.alpha = 3;
  some.use_rslora = true;
  some.targets = {LoraTarget::Q, LoraTarget::V, LoraTarget::Down};
  some.layers = std::vector<int>{1};
  some.seed = 2;
  some.b_bound = 1.0f;
  return {every, some};
}

// Logits within 1e-4 of the largest, and different from the base's (the adapter does something).
void expect_merged(const Tensor& logits, const Tensor& merged, const Tensor& base, const std::string& what) {
  const std::vector<float> got = to_float_vector(logits), want = to_float_vector(merged), plain = to_float_vector(base);
  double largest = 0, error = 0, change = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(want[i])));
    error = std::max(error, std::abs(static_cast<double>(got[i]) - want[i]));
    change = std::max(change, std::abs(static_cast<double>(plain[i]) - want[i]));
  }
  EXPECT_LE(error, 1e-4 * largest) << what;
  EXPECT_GT(change, 100 * error + 1e-3 * largest) << what << ": the adapter hardly changes the logits";
}

TEST(LoraRuntime, EachAdapterGivesTheMergedModelsLogits) {
  const TempDir dir;
  Qwen3Model model = Qwen3Model::load(synth_tiny_model(7));
  const Tensor base = model.forward(prompt_ids());
  const std::vector<RandomAdapter> specs = two_adapters();
  attach(model, dir, specs);
  for (size_t k = 0; k < specs.size(); ++k)
    expect_merged(model.forward(prompt_ids(), nullptr, nullptr, static_cast<int>(k)),
                  merged_model(model, specs[k]).forward(prompt_ids()), base, "dense, adapter " + std::to_string(k));
  // The base's rows: the base, bit for bit.
  EXPECT_EQ(to_float_vector(model.forward(prompt_ids())), to_float_vector(base));
  EXPECT_EQ(model.lora_adapters()->width(), 2 * 16);  // two adapters, ranks 4 and 3 in 16-column blocks
  EXPECT_NE(model.lora_adapters()->describe().find("a1 (rank 3, alpha 3, scale 1.7320508 rsLoRA, q,v,down in 1 of"),
            std::string::npos)
      << model.lora_adapters()->describe();
}

TEST(LoraRuntime, AnNvfp4BaseStaysPackedAndAddsTheAdapter) {
  const TempDir dir;
  QuantizeOptions options;
  options.format = ModelFormat::ModeloptNvfp4;
  quantize_model(*open_model(synth_tiny_model(7)), dir / "nvfp4", options);
  Qwen3Model model = Qwen3Model::load(dir / "nvfp4");
  ModelOptions dense_options;
  dense_options.dequantize_nvfp4 = true;
  const Qwen3Model dequantized = Qwen3Model::load(dir / "nvfp4", dense_options);
  const Tensor base = model.forward(prompt_ids());
  const std::vector<RandomAdapter> specs = two_adapters();
  attach(model, dir, specs);
  ASSERT_TRUE(model.weights().layers[0].q_proj.is_nvfp4());
  for (size_t k = 0; k < specs.size(); ++k)
    expect_merged(model.forward(prompt_ids(), nullptr, nullptr, static_cast<int>(k)),
                  merged_model(dequantized, specs[k]).forward(prompt_ids()), base,
                  "NVFP4, adapter " + std::to_string(k));
}

// The cached prefill and the decode step with an adapter: a row's logits are the same bits whether the set holds its
// adapter alone or beside another one.
TEST(LoraRuntime, ARowsLogitsDoNotDependOnTheOtherAdaptersOfTheSet) {
  const TempDir dir;
  const std::vector<RandomAdapter> specs = two_adapters();
  Qwen3Model both = Qwen3Model::load(synth_tiny_model(7));
  attach(both, dir, specs);
  Qwen3Model alone = Qwen3Model::load(synth_tiny_model(7));
  alone.set_lora_adapters(std::make_shared<const LoraAdapterSet>(LoraAdapterSet::load(
      std::vector<LoraAdapterSpec>{{"a1", dir / "a1"}}, alone.config(), alone.compute_dtype(), alone.device())));
  for (const bool decode_step : {false, true}) {
    KVCache cache_both = both.make_cache(1, 16), cache_alone = alone.make_cache(1, 16);
    const Tensor prefill_both = both.forward_cached(prompt_ids(), cache_both, false, 1);
    const Tensor prefill_alone = alone.forward_cached(prompt_ids(), cache_alone, false, 0);
    EXPECT_EQ(to_float_vector(prefill_both), to_float_vector(prefill_alone));
    const std::vector<int32_t> next = {42};
    if (decode_step) {
      Qwen3DecodeStep step_both(both, cache_both, DecodeMode::Eager), step_alone(alone, cache_alone, DecodeMode::Eager);
      EXPECT_EQ(to_float_vector(step_both.run(next, 1)), to_float_vector(step_alone.run(next, 0)));
    } else {
      const Tensor ids = Tensor::from_ints(next, Shape{1, 1});
      EXPECT_EQ(to_float_vector(both.forward_cached(ids, cache_both, false, 1)),
                to_float_vector(alone.forward_cached(ids, cache_alone, false, 0)));
    }
  }
}

// Rewrites one key of DIR/adapter_config.json.
void set_config_key(const fs::path& dir, const std::string& key, const nlohmann::json& value) {
  const fs::path file = dir / kPeftConfigFileName;
  nlohmann::json json = nlohmann::json::parse(std::ifstream(file));
  json[key] = value;
  std::ofstream(file) << json.dump(2);
}

void expect_load_error(const Qwen3Model& model, const fs::path& dir, const std::string& needle) {
  try {
    LoraAdapterSet::load(std::vector<LoraAdapterSpec>{{"x", dir}}, model.config(), DType::F32, Device::cpu());
    ADD_FAILURE() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.string()), std::string::npos) << e.what();
  }
}

TEST(LoraRuntime, AdaptersItCannotApplyAreErrorsNamingTheFile) {
  const TempDir dir;
  const Qwen3Model model = Qwen3Model::load(synth_tiny_model(7));
  RandomAdapter spec;
  spec.targets = {LoraTarget::Q};
  int count = 0;
  auto fresh = [&] {
    const fs::path path = dir / ("case" + std::to_string(count++));
    write_random_adapter(path, model.config(), spec);
    return path;
  };
  {
    const fs::path path = fresh();
    set_config_key(path, "use_dora", true);
    expect_load_error(model, path, "\"use_dora\" is true");
  }
  {
    const fs::path path = fresh();
    set_config_key(path, "target_modules", ".*q_proj");
    expect_load_error(model, path, "regular expression");
  }
  {
    const fs::path path = fresh();
    set_config_key(path, "target_modules", nlohmann::json::array({"q_proj", "lm_head"}));
    expect_load_error(model, path, "'lm_head' is not one of Qwen3's decoder linears");
  }
  {
    const fs::path path = fresh();  // the file has q_proj only; the config also claims k_proj
    set_config_key(path, "target_modules", nlohmann::json::array({"q_proj", "k_proj"}));
    expect_load_error(model, path, "has no tensor base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  }
  {
    const fs::path path = fresh();  // a larger rank in the config than in the file
    set_config_key(path, "r", 8);
    expect_load_error(model, path, "expected [8,");
  }
  {
    const fs::path path = fresh();  // the tensors of layer 1 are not explained by layers_to_transform [0]
    set_config_key(path, "layers_to_transform", nlohmann::json::array({0}));
    expect_load_error(model, path, "does not explain, such as base_model.model.model.layers.1.");
  }
  {
    const fs::path path = fresh();
    set_config_key(path, "layers_to_transform", nlohmann::json::array({99}));
    expect_load_error(model, path, "names layer 99");
  }
  {
    const fs::path path = fresh();
    set_config_key(path, "peft_type", "PREFIX_TUNING");
    expect_load_error(model, path, "\"peft_type\" is \"PREFIX_TUNING\"");
  }
  {
    const fs::path path = fresh();
    fs::remove(path / kPeftWeightsFileName);
    std::ofstream(path / "adapter_model.bin") << "pickle";
    expect_load_error(model, path, "pickled adapter_model.bin");
  }
  {
    const fs::path path = dir / "nan";
    std::vector<PeftTensor> tensors;
    for (auto& [name, tensor] : random_adapter_tensors(model.config(), spec)) tensors.push_back({name, tensor});
    tensors.back().tensor.data<float>()[3] = std::nanf("");
    PeftLoraConfig config;
    config.rank = spec.rank;
    config.alpha = spec.alpha;
    config.target_modules = {"q_proj"};
    write_peft_adapter(path, config, tensors, false);
    expect_load_error(model, path, "holds a non-finite value");
  }
  {
    const fs::path path = fresh();  // "all-linear" is every linear: the file's q_proj alone is not enough
    set_config_key(path, "target_modules", "all-linear");
    expect_load_error(model, path, "has no tensor base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight");
  }
  // PEFT's "self_attn.q_proj" spelling of a target is understood, and so is the null base_model_name_or_path of a
  // LoraConfig made without a base's name.
  {
    const fs::path path = fresh();
    set_config_key(path, "target_modules", nlohmann::json::array({"self_attn.q_proj"}));
    set_config_key(path, "base_model_name_or_path", nullptr);
    EXPECT_NO_THROW(
        LoraAdapterSet::load(std::vector<LoraAdapterSpec>{{"x", path}}, model.config(), DType::F32, Device::cpu()));
  }
  EXPECT_THROW(parse_lora_adapter_spec("=dir"), Error);
  EXPECT_EQ(parse_lora_adapter_spec("support=/tmp/a").name, "support");
  EXPECT_EQ(parse_lora_adapter_spec("/tmp/adapters/persona/").name, "persona");
  const fs::path one = fresh();
  EXPECT_THROW(LoraAdapterSet::load(std::vector<LoraAdapterSpec>{{"x", one}, {"x", one}}, model.config(), DType::F32,
                                    Device::cpu()),
               Error);
}

}  // namespace
}  // namespace nvfp4lm::test::test_lora_runtime
