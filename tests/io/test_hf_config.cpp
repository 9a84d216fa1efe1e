// Qwen3 config.json parsing (the real Qwen3-4B-Instruct-2507 file, defaults, rejections), writing it back,
// generation_config.json, presets and parameter counts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/hf_config.h"
#include "io/io_test_util.h"
#include "io/weight_names.h"

namespace nvfp4lm::test::test_hf_config {
namespace {

using json = nlohmann::json;

// config.json of Qwen/Qwen3-4B-Instruct-2507 as published.
const char* kQwen3_4B_Instruct_2507 = R"({
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2560,
  "initializer_range": 0.02,
  "intermediate_size": 9728,
  "max_position_embeddings": 262144,
  "max_window_layers": 36,
  "model_type": "qwen3",
  "num_attention_heads": 32,
  "num_hidden_layers": 36,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 5000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

Qwen3Config parse(const json& config) { return parse_qwen3_config(config, "test/config.json"); }

TEST(HfConfig, ParsesQwen3_4BAndMatchesThePreset) {
  const Qwen3Config c = parse(json::parse(kQwen3_4B_Instruct_2507));
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.num_hidden_layers, 36);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_EQ(c.kv_groups(), 4);
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c, qwen3_preset("qwen3-4b"));
  // Qwen3-4B: 4.0B parameters, 3.6B of them outside the embedding (the model card's numbers).
  EXPECT_EQ(c.total_parameters(), 4022468096);
  EXPECT_EQ(c.total_parameters() - c.embedding_parameters(), 3633511936);
  int64_t sum = 0;
  for (const auto& weight : qwen3_expected_weights(c)) sum += weight.shape.numel();
  EXPECT_EQ(sum, c.total_parameters());
}

TEST(HfConfig, WritesHfFormAndReadsItBack) {
  for (const auto& name : qwen3_preset_names()) {
    Qwen3Config c = qwen3_preset(name);
    c.eos_token_ids = {151645, 151643};
    const json written = qwen3_config_to_json(c);
    EXPECT_EQ(written["model_type"], "qwen3");
    EXPECT_EQ(written["architectures"][0], "Qwen3ForCausalLM");
    EXPECT_EQ(written["eos_token_id"], json({151645, 151643}));
    EXPECT_TRUE(written["rope_theta"].is_number_integer()) << "integral theta written as an integer";
    EXPECT_EQ(parse(json::parse(written.dump())), c) << name;
  }
  const json four_b = qwen3_config_to_json(qwen3_preset("qwen3-4b"));
  const json published = json::parse(kQwen3_4B_Instruct_2507);
  for (const auto& [key, value] : published.items()) {
    if (key == "transformers_version") continue;
    EXPECT_EQ(four_b.at(key), value) << key;
  }
}

TEST(HfConfig, DefaultsForOptionalFields) {
  const Qwen3Config c = parse({{"model_type", "qwen3"},
                               {"vocab_size", 1000},
                               {"hidden_size", 256},
                               {"intermediate_size", 512},
                               {"num_hidden_layers", 2},
                               {"num_attention_heads", 8}});
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 32);  // hidden / heads
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.bos_token_id.has_value());
  // Architecture from the architectures list alone; rope_scaling "default" and full-attention layer types are fine.
  json alt = json::parse(kQwen3_4B_Instruct_2507);
  alt.erase("model_type");
  alt["rope_scaling"] = {{"rope_type", "default"}};
  alt["layer_types"] = json(36, "full_attention");
  alt["eos_token_id"] = {151645, 151643};
  alt.erase("torch_dtype");
  alt["dtype"] = "float16";
  const Qwen3Config c2 = parse(alt);
  EXPECT_EQ(c2.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(c2.torch_dtype, "float16");
}

TEST(HfConfig, RejectsWhatWeDoNotImplement) {
  const json base = json::parse(kQwen3_4B_Instruct_2507);
  auto with = [&](const std::string& key, const json& value) {
    json c = base;
    c[key] = value;
    return c;
  };
  json llama = base;
  llama["model_type"] = "llama";
  llama["architectures"] = {"LlamaForCausalLM"};
  expect_error([&] { parse(llama); }, {"test/config.json", "model_type 'llama'", "LlamaForCausalLM", "only Qwen3"});
  json moe = with("model_type", "qwen3_moe");
  moe["architectures"] = {"Qwen3MoeForCausalLM"};
  expect_error([&] { parse(moe); }, {"qwen3_moe", "only Qwen3"});
  expect_error([&] { parse(with("attention_bias", true)); }, {"test/config.json", "attention_bias"});
  expect_error([&] { parse(with("use_sliding_window", true)); }, {"sliding-window"});
  expect_error([&] { parse(with("layer_types", json(36, "sliding_attention"))); }, {"sliding_attention"});
  expect_error(
      [&] {
        parse(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}));
      },
      {"rope_scaling", "'yarn'"});
  expect_error([&] { parse(with("hidden_act", "gelu")); }, {"hidden_act", "gelu"});
}

TEST(HfConfig, MissingIllTypedAndOutOfRangeFields) {
  json c = json::parse(kQwen3_4B_Instruct_2507);
  c.erase("hidden_size");
  expect_error([&] { parse(c); }, {"test/config.json", "'hidden_size'", "missing"});
  auto with = [&](const std::string& key, const json& value) {
    json changed = json::parse(kQwen3_4B_Instruct_2507);
    changed[key] = value;
    return changed;
  };
  expect_error([&] { parse(with("num_hidden_layers", "36")); }, {"'num_hidden_layers'", "integer"});
  expect_error([&] { parse(with("hidden_size", 2560.5)); }, {"'hidden_size'", "integer"});
  expect_error([&] { parse(with("rms_norm_eps", "small")); }, {"'rms_norm_eps'", "number"});
  expect_error([&] { parse(with("tie_word_embeddings", 1)); }, {"'tie_word_embeddings'"});
  expect_error([&] { parse(with("eos_token_id", "x")); }, {"'eos_token_id'"});
  expect_error([&] { parse(with("num_key_value_heads", 7)); }, {"not a multiple of num_key_value_heads 7"});
  expect_error([&] { parse(with("vocab_size", 0)); }, {"vocab_size = 0"});
  expect_error([&] { parse(with("hidden_size", int64_t{1} << 40)); }, {"hidden_size"});
  expect_error([&] { parse(with("head_dim", 127)); }, {"head_dim 127", "even"});
  expect_error([&] { parse(with("eos_token_id", 999999)); }, {"eos token id 999999"});
  expect_error([&] { parse(json::array()); }, {"JSON object"});
}

TEST(HfConfig, LoadsFilesAndNamesThem) {
  TempDir dir;
  write_file(dir / "config.json", kQwen3_4B_Instruct_2507);
  EXPECT_EQ(load_qwen3_config(dir / "config.json").hidden_size, 2560);
  write_file(dir / "broken.json", "{\"model_type\": ");
  expect_error([&] { load_qwen3_config(dir / "broken.json"); }, {"broken.json", "not valid JSON"});
  expect_error([&] { load_qwen3_config(dir / "absent.json"); }, {"absent.json"});
}

TEST(HfConfig, GenerationConfig) {
  TempDir dir;
  write_file(dir / "generation_config.json",
             R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
                 "temperature": 0.7, "top_k": 20, "top_p": 0.8})");
  const GenerationConfig g = load_generation_config(dir / "generation_config.json");
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(g.bos_token_id, 151643);
  EXPECT_EQ(g.pad_token_id, 151643);
  write_file(dir / "generation_config.json", R"({"eos_token_id": 7})");
  EXPECT_EQ(load_generation_config(dir / "generation_config.json").eos_token_ids, (std::vector<int64_t>{7}));
  write_file(dir / "generation_config.json", R"({"eos_token_id": [1, "two"]})");
  expect_error([&] { load_generation_config(dir / "generation_config.json"); },
               {"generation_config.json", "eos_token_id"});
  // What synth writes: Qwen3 instruct stops on <|im_end|> and <|endoftext|>.
  const json written = generation_config_to_json(qwen3_preset("qwen3-4b"));
  EXPECT_EQ(written["eos_token_id"], json({151645, 151643}));
  EXPECT_EQ(written["bos_token_id"], 151643);
}

TEST(HfConfig, Presets) {
  const Qwen3Config tiny = qwen3_preset("tiny");
  EXPECT_EQ(tiny.num_hidden_layers, 2);
  EXPECT_EQ(tiny.hidden_size, 64);
  EXPECT_EQ(tiny.head_dim, 16);
  EXPECT_EQ(tiny.vocab_size, 151936);
  const Qwen3Config small = qwen3_preset("small");
  EXPECT_GT(small.total_parameters(), 90'000'000);
  EXPECT_LT(small.total_parameters(), 120'000'000);
  expect_error([] { qwen3_preset("huge"); }, {"'huge'", "tiny, small, qwen3-4b"});
}

TEST(WeightNames, ClassifiesAndGroups) {
  EXPECT_EQ(classify_weight_name("model.layers.12.self_attn.k_proj.weight"), WeightKind::AttentionProjection);
  EXPECT_EQ(classify_weight_name("model.layers.0.mlp.down_proj.weight"), WeightKind::MlpProjection);
  EXPECT_EQ(classify_weight_name("model.layers.3.self_attn.q_norm.weight"), WeightKind::QkNorm);
  EXPECT_EQ(classify_weight_name("model.layers.3.post_attention_layernorm.weight"), WeightKind::LayerNorm);
  EXPECT_EQ(classify_weight_name("lm_head.weight"), WeightKind::LmHead);
  EXPECT_FALSE(classify_weight_name("model.layers.x.mlp.down_proj.weight").has_value());
  EXPECT_FALSE(classify_weight_name("model.layers.0.self_attn.rotary_emb.inv_freq").has_value());
  EXPECT_EQ(fused_scale_group("model.layers.5.self_attn.v_proj.weight"), "model.layers.5.self_attn.qkv");
  EXPECT_EQ(fused_scale_group("model.layers.5.mlp.up_proj.weight"), "model.layers.5.mlp.gate_up");
  EXPECT_EQ(fused_scale_group("model.layers.5.self_attn.o_proj.weight"), "model.layers.5.self_attn.o_proj.weight");
  EXPECT_EQ(fused_scale_group("lm_head.weight"), "lm_head.weight");
  const auto untied = qwen3_expected_weights(small_test_config(false));
  EXPECT_EQ(untied.size(), 1u + 2 * 11 + 1 + 1);
  EXPECT_EQ(untied.back().name, "lm_head.weight");
  EXPECT_EQ(qwen3_expected_weights(small_test_config(true)).size(), untied.size() - 1);
}

}  // namespace
}  // namespace nvfp4lm::test::test_hf_config
