// Export of trained weights (train/export.h): `train --export` at the end of a run and exports of a checkpoint in
// every format (ModelOpt NVFP4, .dat NVFP4, BF16) reload with open_model / Qwen3Model::load and generate; exported
// NVFP4 weights are the codec's quantization of the checkpoint's masters (codes, block scales and tensor scale
// byte for byte: fused q/k/v and gate/up groups share the tensor scale of their joint amax, .dat uses 1), the
// ModelOpt export computes what the trained QAT forward computed, and no export overwrites the model it was
// trained from, the checkpoint it reads or an existing directory without `overwrite`.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "common/test_util.h"
#include "core/error.h"
#include "core/numeric.h"
#include "infer/qwen3_cached_lm.h"
#include "io/compressed_tensors.h"
#include "io/model_files.h"
#include "io/safetensors_reader.h"
#include "io/weight_names.h"
#include "model/qwen3_model.h"
#include "quant/nvfp4_fixed_scale.h"
#include "quant/tensor_amax.h"
#include "tokenizer/tokenizer.h"
#include "train/checkpoint.h"
#include "train/dense_export.h"
#include "train/tensor_model_files.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test_trainer_export {
namespace {

using test::TempDir;

std::string bytes_of(const Tensor& tensor) {
  const Tensor host = tensor.contiguous();
  return std::string(static_cast<const char*>(host.raw()), host.nbytes());
}

// The checkpoint's master weights, by name (F32 CPU tensors that own their storage).
std::map<std::string, Tensor> checkpoint_masters(const fs::path& checkpoint) {
  std::map<std::string, Tensor> masters;
  const auto file = SafetensorsFile::open(checkpoint / kModelFileName);
  for (const SafetensorsEntry& entry : file->entries()) masters[entry.name] = file->tensor(entry).clone();
  return masters;
}

// Checks every weight of the export at `out` against the masters: NVFP4 ones equal the codec's quantization with
// the tensor scale `tensor_scale_of(name)`, dense ones equal the masters (or their BF16 rounding).
void expect_export_matches(const fs::path& out, ModelFormat format, const std::map<std::string, Tensor>& masters,
                           const std::function<float(const std::string&)>& tensor_scale_of, DType dense_dtype) {
  const std::unique_ptr<ModelFiles> files = open_model(out);
  EXPECT_EQ(files->format(), format);
  int nvfp4 = 0;
  for (const WeightInfo& info : files->weights()) {
    ASSERT_TRUE(masters.count(info.name)) << info.name;
    const Tensor& master = masters.at(info.name);
    const ModelWeight weight = files->load(info.name);
    if (weight.is_nvfp4()) {
      ++nvfp4;
      const Nvfp4Tensor expected =
          quantize_nvfp4_with_tensor_scale(master, tensor_scale_of(info.name), Nvfp4Block::Row1x16, info.name);
      // compressed-tensors stores 1 / tensor scale; it reads back as the float whose reciprocal was stored.
      const float stored = format == ModelFormat::CompressedTensorsNvfp4
                               ? 1.0f / compressed_tensors_global_scale(expected.tensor_scale)
                               : expected.tensor_scale;
      EXPECT_EQ(weight.nvfp4.tensor_scale, stored) << info.name;
      EXPECT_TRUE(bytes_of(weight.nvfp4.codes) == bytes_of(expected.codes)) << info.name << ": E2M1 codes differ";
      EXPECT_TRUE(bytes_of(weight.nvfp4.block_scales) == bytes_of(expected.block_scales))
          << info.name << ": E4M3 block scales differ";
    } else {
      ASSERT_EQ(weight.dense.dtype(), dense_dtype) << info.name;
      Tensor expected = master;
      if (dense_dtype == DType::BF16) {
        expected = Tensor::empty(master.shape(), DType::BF16, Device::cpu());
        const float* from = master.data<float>();
        uint16_t* to = expected.data<uint16_t>();
        for (int64_t i = 0; i < master.numel(); ++i) to[i] = float_to_bf16(from[i]);
      }
      EXPECT_TRUE(bytes_of(weight.dense) == bytes_of(expected)) << info.name << ": dense weight differs";
    }
  }
  // q/k/v/o and gate/up/down of 2 layers; lm_head stays dense (not --quantize-lm-head).
  EXPECT_EQ(nvfp4, format == ModelFormat::HfSafetensors ? 0 : 14);
}

// Tensor scales of the ModelOpt export: one per fused group, from the group's joint amax.
std::function<float(const std::string&)> group_tensor_scales(const std::map<std::string, Tensor>& masters) {
  auto amax = std::make_shared<std::map<std::string, float>>();
  for (const auto& [name, tensor] : masters) {
    if (name.find("_proj.weight") == std::string::npos) continue;
    float& group = (*amax)[fused_scale_group(name)];
    group = std::max(group, tensor_amax(tensor, name));
  }
  return [amax](const std::string& name) { return nvfp4_tensor_scale(amax->at(fused_scale_group(name))); };
}

// The greedy answer of a reloaded export (it must load, and generate tokens).
std::string reload_and_answer(const fs::path& out) {
  const Qwen3Model model = Qwen3Model::load(out);
  const Tokenizer tokenizer = Tokenizer::load(out);
  return answer_greedy(model, tokenizer, ChatTemplate::resolve(tokenizer, "qwen3-instruct-2507"), "What is 2 plus 3?",
                       8);
}

class TrainerExport : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = test::write_pairs_jsonl(dir_ / "pairs.jsonl", 8);
    options_ = test::tiny_train_options(data_, dir_ / "run");
    options_.max_steps = 4;
  }
  TempDir dir_;
  fs::path data_;
  TrainOptions options_;
};

TEST_F(TrainerExport, TrainExportIsTheCodecQuantizationOfTheMastersAndComputesTheTrainedForward) {
  options_.export_path = (dir_ / "export").string();
  Trainer trainer(options_, {});
  const TrainSummary summary = trainer.run();
  ASSERT_TRUE(summary.export_report.has_value());
  EXPECT_EQ(summary.export_report->nvfp4_tensors, 14);

  const auto masters = checkpoint_masters(checkpoint_dir(options_.output, 4));
  // The checkpoint holds the live masters (and they moved away from the fixture's weights).
  std::map<std::string, std::string> checkpoint_bytes;
  for (const auto& [name, tensor] : masters) checkpoint_bytes[name] = bytes_of(tensor);
  test::expect_same_bytes(test::tensor_bytes(trainer.model().master_weights()), checkpoint_bytes,
                          "checkpoint vs live masters");
  const auto fixture = open_model(test::tiny_model_dir());
  EXPECT_NE(bytes_of(fixture->load("model.layers.0.self_attn.q_proj.weight").dense),
            bytes_of(masters.at("model.layers.0.self_attn.q_proj.weight")));

  expect_export_matches(dir_ / "export", ModelFormat::ModeloptNvfp4, masters, group_tensor_scales(masters), DType::F32);

  // The export computes the trained QAT forward: the same logits as the training model's deq(Q(W)) weights.
  const Qwen3Model exported = Qwen3Model::load(dir_ / "export");
  const Qwen3Model trained = trainer.model().inference_model();
  Tensor ids = Tensor::empty({1, 12}, DType::I32, Device::cpu());
  for (int t = 0; t < 12; ++t) ids.data<int32_t>()[t] = (37 * t + 11) % 500;
  test::expect_close(exported.forward(ids), trained.forward(ids), test::kF32Tol, "export vs trained logits");

  const std::string answer = reload_and_answer(dir_ / "export");
  EXPECT_FALSE(answer.empty());
  const Tokenizer tokenizer = Tokenizer::load(dir_ / "export");
  EXPECT_EQ(answer, answer_greedy(trained, tokenizer, ChatTemplate::resolve(tokenizer, "qwen3-instruct-2507"),
                                  "What is 2 plus 3?", 8));
}

TEST_F(TrainerExport, CheckpointExportsInEveryFormatReloadAndGenerate) {
  Trainer(options_, {}).run();
  const fs::path checkpoint = checkpoint_dir(options_.output, 4);
  const auto masters = checkpoint_masters(checkpoint);

  // From the run directory: its newest complete checkpoint.
  const CheckpointExportInput input = open_checkpoint_for_export(options_.output);
  EXPECT_EQ(input.checkpoint, checkpoint);
  EXPECT_EQ(input.step, 4);
  EXPECT_EQ(input.run_options.seq_len, 64);

  ExportOptions modelopt;
  export_checkpoint(input, dir_ / "modelopt", modelopt);
  expect_export_matches(dir_ / "modelopt", ModelFormat::ModeloptNvfp4, masters, group_tensor_scales(masters),
                        DType::F32);

  ExportOptions compressed;
  compressed.format = ModelFormat::CompressedTensorsNvfp4;
  export_checkpoint(input, dir_ / "compressed-tensors", compressed);
  expect_export_matches(dir_ / "compressed-tensors", ModelFormat::CompressedTensorsNvfp4, masters,
                        group_tensor_scales(masters), DType::F32);

  ExportOptions dat;
  dat.format = ModelFormat::Dat;
  dat.dense_dtype = DType::BF16;
  export_checkpoint(input, dir_ / "dat", dat);
  expect_export_matches(
      dir_ / "dat", ModelFormat::Dat, masters, [](const std::string&) { return 1.0f; }, DType::BF16);

  ExportOptions bf16;
  bf16.format = ModelFormat::HfSafetensors;
  export_checkpoint(input, dir_ / "bf16", bf16);
  expect_export_matches(dir_ / "bf16", ModelFormat::HfSafetensors, masters, nullptr, DType::BF16);

  // --format dense-dat: the masters as they are (F32), bit for bit.
  std::vector<NamedTensor> named;
  for (const auto& [name, tensor] : masters) named.push_back({name, tensor});
  const auto in_memory = tensor_model_files(input.source.config_json, named, "the checkpoint");
  export_dense_model(*in_memory, input.source, dir_ / "dense-dat", {.format = ModelFormat::Dat, .dtype = DType::F32});
  const auto dense = open_model(dir_ / "dense-dat" / "model.dat");
  for (const auto& [name, tensor] : masters) {
    const Tensor copy = dense->load(name).dense;
    ASSERT_EQ(copy.dtype(), DType::F32) << name;
    EXPECT_EQ(to_float_vector(copy), to_float_vector(tensor)) << name;
  }

  for (const char* name : {"modelopt", "compressed-tensors", "dat", "bf16", "dense-dat"}) {
    EXPECT_FALSE(reload_and_answer(dir_ / name).empty()) << name;
    EXPECT_TRUE(fs::exists(dir_ / name / "tokenizer.json")) << name;
  }
}

TEST_F(TrainerExport, NeverOverwritesAnExistingDirectoryTheModelOrTheCheckpoint) {
  // A copy of the fixture model, so a wrong export could only damage the copy.
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  for (const char* name : {"config.json", "model.safetensors"})
    fs::copy_file(test::tiny_model_dir() / name, model / name);
  options_.model = model.string();
  const fs::path data_dir = dir_ / "data";
  fs::create_directories(data_dir);
  options_.data = test::write_pairs_jsonl(data_dir / "pairs.jsonl", 8).string();
  const std::string model_bytes = test::read_file(model / "model.safetensors");

  auto expect_refused = [](const std::function<void()>& action, const std::string& words) {
    try {
      action();
      ADD_FAILURE() << "not refused (expected '" << words << "')";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };

  // Checked before training: nothing is trained (no run directory) when the export target is wrong.
  TrainOptions into_model = options_;
  into_model.export_path = model.string();
  into_model.overwrite = true;
  expect_refused([&] { Trainer trainer(into_model, {}); }, "refusing to write the export");
  const fs::path existing = dir_ / "existing";
  fs::create_directories(existing);
  test::write_file(existing / "config.json", "{}");  // an earlier export there
  test::write_file(existing / "keep.txt", "mine");
  TrainOptions into_existing = options_;
  into_existing.export_path = existing.string();
  expect_refused([&] { Trainer trainer(into_existing, {}); }, "pass --overwrite");
  // Nor a directory holding the training data (an --overwrite export replaces OUT as a whole).
  TrainOptions over_data = options_;
  over_data.export_path = data_dir.string();
  over_data.overwrite = true;
  expect_refused([&] { Trainer trainer(over_data, {}); }, options_.data);  // "it contains the training data <path>"
  EXPECT_FALSE(fs::exists(options_.output));

  Trainer(options_, {}).run();
  const CheckpointExportInput input = open_checkpoint_for_export(options_.output);
  ExportOptions export_options;
  expect_refused([&] { export_checkpoint(input, existing, export_options); }, "pass --overwrite");
  EXPECT_EQ(test::read_file(existing / "keep.txt"), "mine");
  export_options.overwrite = true;
  expect_refused([&] { export_checkpoint(input, input.checkpoint, export_options); }, "refusing to write the export");
  expect_refused([&] { export_checkpoint(input, options_.output, export_options); }, "refusing to write the export");
  expect_refused([&] { export_checkpoint(input, model, export_options); }, "refusing to write the export");
  expect_refused([&] { export_checkpoint(input, input.checkpoint / "inner", export_options); },
                 "refusing to write the export");
  expect_refused([&] { export_checkpoint(input, data_dir, export_options); },
                 options_.data);  // "it contains the training data <path>"
  EXPECT_TRUE(fs::exists(options_.data));
  EXPECT_EQ(test::read_file(model / "model.safetensors"), model_bytes);
  EXPECT_NE(latest_checkpoint(options_.output), std::nullopt);

  // With overwrite an existing model directory is replaced by a loadable model; a directory of something else is not.
  const fs::path notes = dir_ / "notes";
  fs::create_directories(notes);
  test::write_file(notes / "todo.txt", "mine");
  expect_refused([&] { export_checkpoint(input, notes, export_options); }, "model directory only");
  EXPECT_EQ(test::read_file(notes / "todo.txt"), "mine");
  export_checkpoint(input, existing, export_options);
  EXPECT_FALSE(fs::exists(existing / "keep.txt"));
  EXPECT_EQ(open_model(existing)->format(), ModelFormat::ModeloptNvfp4);
}

}  // namespace
}  // namespace nvfp4lm::test_trainer_export
