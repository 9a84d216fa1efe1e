// The file commands end to end through the real executable: synth -> quantize (dat, modelopt) -> info, and bad
// input giving a one-line error and a non-zero exit code, never a crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "io/hf_config.h"

namespace nvfp4lm::test::test_info_quantize_synth {
namespace {

using json = nlohmann::json;

// A small model (vocab 512) written with synth --config.
fs::path synth_small(const TempDir& dir) {
  Qwen3Config config = qwen3_preset("tiny");
  config.vocab_size = 512;
  config.bos_token_id = 1;
  config.eos_token_ids = {2};
  write_file(dir / "small.json", qwen3_config_to_json(config).dump());
  const fs::path out = dir / "hf";
  const CliResult result = run_cli("synth --config " + quoted(dir / "small.json") + " " + quoted(out) + " --seed 3");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return out;
}

TEST(CliFiles, SynthQuantizeInfoRoundTrip) {
  TempDir dir;
  const fs::path hf = synth_small(dir);
  EXPECT_TRUE(fs::exists(hf / "model.safetensors"));
  EXPECT_TRUE(fs::exists(hf / "config.json"));
  EXPECT_TRUE(fs::exists(hf / "generation_config.json"));

  const CliResult info = run_cli("info " + quoted(hf) + " --json");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const json hf_info = json::parse(info.out);
  EXPECT_EQ(hf_info["format"], "hf-safetensors");
  EXPECT_EQ(hf_info["config"]["vocab_size"], 512);
  EXPECT_EQ(hf_info["tensors"].size(), 24u);
  EXPECT_EQ(hf_info["parameters"]["nvfp4"], 0);
  const int64_t total = hf_info["parameters"]["total"];
  EXPECT_EQ(total, hf_info["parameters"]["embedding"].get<int64_t>() +
                       hf_info["parameters"]["attention"].get<int64_t>() + hf_info["parameters"]["mlp"].get<int64_t>() +
                       hf_info["parameters"]["qk_norm"].get<int64_t>() +
                       hf_info["parameters"]["layer_norm"].get<int64_t>() +
                       hf_info["parameters"]["final_norm"].get<int64_t>());

  for (const std::string format : {"modelopt", "compressed-tensors", "dat"}) {
    const fs::path out = dir / ("q-" + format);
    const CliResult quantize = run_cli("quantize " + quoted(hf) + " " + quoted(out) + " --format " + format);
    ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
    EXPECT_NE(quantize.err.find("cpu/quantize"), std::string::npos) << "compute path is reported: " << quantize.err;
    EXPECT_NE(quantize.out.find("model.layers.1.mlp.down_proj.weight"), std::string::npos) << quantize.out;
    EXPECT_NE(quantize.out.find("total relative RMS error"), std::string::npos) << quantize.out;
    EXPECT_NE(quantize.out.find("peak RSS"), std::string::npos) << quantize.out;

    const CliResult quantized_info = run_cli("info " + quoted(out) + " --json");
    ASSERT_EQ(quantized_info.exit_code, 0) << quantized_info.err;
    const json q = json::parse(quantized_info.out);
    EXPECT_EQ(q["format"], format == "dat" ? "dat" : format + "-nvfp4");
    EXPECT_EQ(q["parameters"]["total"], total);
    EXPECT_EQ(q["parameters"]["nvfp4"],
              q["parameters"]["attention"].get<int64_t>() + q["parameters"]["mlp"].get<int64_t>());
    EXPECT_LT(q["bytes"]["nvfp4"].get<int64_t>(), q["parameters"]["nvfp4"].get<int64_t>());  // < 1 byte a parameter
    int nvfp4 = 0;
    for (const auto& tensor : q["tensors"]) nvfp4 += tensor["nvfp4"].get<bool>();
    EXPECT_EQ(nvfp4, 14);

    // Text output names the format and every tensor.
    const CliResult text = run_cli("info " + quoted(out));
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos);
    EXPECT_NE(text.out.find("NVFP4"), std::string::npos);

    // Never overwritten without --overwrite; with it, replaced.
    const CliResult again = run_cli("quantize " + quoted(hf) + " " + quoted(out) + " --format " + format);
    expect_one_line_error(again, {out.string(), "--overwrite"});
    const CliResult replaced =
        run_cli("quantize " + quoted(hf) + " " + quoted(out) + " --format " + format + " --overwrite --block 2d");
    EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  }
  // A .dat file named directly (config.json beside it).
  EXPECT_EQ(run_cli("info " + quoted(dir / "q-dat" / "model.dat")).exit_code, 0);
}

// The predecessor's step 1 (HF -> dense .dat) and step 2 (dense .dat -> NVFP4 .dat) through the executable: the same
// NVFP4 .dat as quantizing the HF directory; a model takes only the dense formats; an NVFP4 model's BF16 copy.
TEST(CliFiles, ExportWritesTheDenseDatThePredecessorQuantized) {
  TempDir dir;
  const fs::path hf = synth_small(dir);
  const CliResult dense = run_cli("export " + quoted(hf) + " " + quoted(dir / "dense") + " --format dense-dat");
  ASSERT_EQ(dense.exit_code, 0) << dense.err;
  EXPECT_NE(dense.err.find("dense BF16 copy (dat)"), std::string::npos) << dense.err;
  EXPECT_NE(dense.err.find("0 values rounded"), std::string::npos) << dense.err;
  for (const auto& [from, out] : {std::pair{hf, dir / "q-hf"}, std::pair{dir / "dense" / "model.dat", dir / "q-dat"}})
    ASSERT_EQ(run_cli("quantize " + quoted(from) + " " + quoted(out) + " --format dat").exit_code, 0) << from;
  EXPECT_EQ(read_file(dir / "q-hf" / "model.dat"), read_file(dir / "q-dat" / "model.dat"));

  const CliResult f16 =
      run_cli("export " + quoted(hf) + " " + quoted(dir / "f16.dat") + " --format dense-dat --dtype f16");
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_NE(f16.err.find("dense F16 copy"), std::string::npos) << f16.err;
  const json f16_info = json::parse(run_cli("info " + quoted(dir / "f16.dat") + " --json").out);
  EXPECT_NE(f16_info.dump().find("\"F16\""), std::string::npos) << f16_info.dump();

  const CliResult bf16 =
      run_cli("export " + quoted(dir / "q-dat" / "model.dat") + " " + quoted(dir / "bf16") + " --format bf16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_NE(bf16.err.find("14 NVFP4 dequantized"), std::string::npos) << bf16.err;

  expect_one_line_error(run_cli("export " + quoted(hf) + " " + quoted(dir / "m") + " --format modelopt"),
                        {"is a model", "dense copy", "nvfp4lm quantize"});
  expect_one_line_error(run_cli("export " + quoted(hf) + " " + quoted(dir / "m") + " --format bf16 --dtype f16"),
                        {"--format bf16", "dense-dat --dtype f16"});
  expect_one_line_error(run_cli("export " + quoted(hf) + " " + quoted(dir / "m") + " --format dense-dat --block 2d"),
                        {"is a model", "--block"});
}

TEST(CliFiles, ChecksumsAndPresets) {
  TempDir dir;
  const fs::path hf = synth_small(dir);
  const CliResult info = run_cli("info " + quoted(hf) + " --json --checksums");
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const json checksums = json::parse(info.out)["checksums"];
  ASSERT_EQ(checksums.size(), 1u);
  EXPECT_EQ(checksums[0]["file"], "model.safetensors");
  for (const auto& tensor : checksums[0]["tensors"]) {
    const std::string name = tensor["name"];
    const double sum = tensor["sum"], abs_sum = tensor["abs_sum"];
    EXPECT_LE(std::fabs(sum), abs_sum) << name;
    if (name.find("norm") != std::string::npos) {
      EXPECT_NEAR(sum / tensor["shape"][0].get<double>(), 1.0, 0.1) << name;
    }
  }
  // Same seed, same bytes; the tiny preset gets the bundled tokenizer (vocab 151936).
  const CliResult tiny = run_cli("synth --preset tiny " + quoted(dir / "tiny") + " --dtype f32 --seed 1");
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  const json tiny_info = json::parse(run_cli("info " + quoted(dir / "tiny") + " --json").out);
  EXPECT_EQ(tiny_info["config"]["vocab_size"], 151936);
  EXPECT_EQ(tiny_info["tensors"][0]["dtype"], "F32");
  if (fs::exists(source_path("models/qwen3-tokenizer/tokenizer.json"))) {
    EXPECT_TRUE(fs::exists(dir / "tiny" / "tokenizer.json"));
    EXPECT_TRUE(fs::exists(dir / "tiny" / "tokenizer_config.json"));
    EXPECT_FALSE(tiny_info["tokenizer_dir"].is_null());
  }
}

TEST(CliFiles, BadInputGivesOneLineErrors) {
  TempDir dir;
  expect_one_line_error(run_cli("info " + quoted(dir / "nothing")), {"nothing", "does not exist"});

  write_file(dir / "bad.dat", std::string("\x05\x03", 2));
  write_file(dir / "config.json", qwen3_config_to_json(qwen3_preset("tiny")).dump());
  expect_one_line_error(run_cli("info " + quoted(dir / "bad.dat")), {"bad.dat", "entry count"});

  const fs::path broken = dir / "broken";
  fs::create_directories(broken);
  write_file(broken / "config.json", qwen3_config_to_json(qwen3_preset("tiny")).dump());
  write_file(broken / "model.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10));
  expect_one_line_error(run_cli("info " + quoted(broken)), {"model.safetensors", "header length", "past the end"});
  write_file(broken / "model.safetensors", std::string("\x02\x00\x00\x00\x00\x00\x00\x00[]", 10));
  expect_one_line_error(run_cli("quantize " + quoted(broken) + " " + quoted(dir / "out") + " --format dat"),
                        {"model.safetensors", "JSON object"});
  EXPECT_FALSE(fs::exists(dir / "out"));

  write_file(broken / "config.json", R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})");
  expect_one_line_error(run_cli("info " + quoted(broken)), {"config.json", "LlamaForCausalLM", "only Qwen3"});

  const fs::path hf = synth_small(dir);
  expect_one_line_error(run_cli("quantize " + quoted(hf) + " " + quoted(dir / "o") + " --format onnx"),
                        {"--format", "onnx", "dat, modelopt, compressed-tensors or gguf"});
  // GGUF carries the tokenizer in its metadata: a model without one (synth_small writes none) needs --tokenizer.
  expect_one_line_error(run_cli("quantize " + quoted(hf) + " " + quoted(dir / "o.gguf") + " --format gguf"),
                        {"tokenizer.json", "--tokenizer DIR"});
  // A GGUF file is one whatever its name (issue 33): the smallest valid one (version 3, no tensors, no metadata).
  std::string gguf("GGUF", 4);
  gguf += std::string("\x03\x00\x00\x00", 4) + std::string(16, '\0');
  write_file(dir / "weights.bin", gguf);
  const CliResult gguf_info = run_cli("info " + quoted(dir / "weights.bin") + " --json");
  ASSERT_EQ(gguf_info.exit_code, 0) << gguf_info.err;
  EXPECT_EQ(json::parse(gguf_info.out)["format"], "gguf");
  // ... and a model to every command (io/model_files_gguf.cpp): this one has no architecture to run.
  expect_one_line_error(run_cli("generate --model " + quoted(dir / "weights.bin") + " --prompt hi"),
                        {"weights.bin", "general.architecture", "missing"});
  expect_one_line_error(run_cli("quantize " + quoted(hf) + " " + quoted(dir / "o") + " --format dat --block 3d"),
                        {"--block"});
  expect_one_line_error(run_cli("synth --preset enormous " + quoted(dir / "s")), {"enormous", "tiny, small, qwen3-4b"});
  expect_one_line_error(run_cli("synth " + quoted(dir / "s")), {"--config", "--preset"});
  expect_one_line_error(run_cli("synth --preset tiny " + quoted(hf)), {hf.string(), "--overwrite"});
  EXPECT_FALSE(fs::exists(dir / "o"));
  EXPECT_FALSE(fs::exists(dir / "s"));
}

}  // namespace
}  // namespace nvfp4lm::test::test_info_quantize_synth
