// See demo.h. The numbers (model shape, epochs, learning rate) were chosen by measurement on a 2-core CPU: the
// smallest settings for which every demo answer comes out right, with time to spare in the 3-minute budget.
#include "tools/demo.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/stopwatch.h"
#include "data/whoami_data.h"
#include "infer/generator.h"
#include "infer/qwen3_cached_lm.h"
#include "infer/stop_conditions.h"
#include "io/checksum.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/synth_model.h"
#include "model/lora_runtime.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {
namespace {

constexpr int64_t kDemoEpochs = 24;
constexpr double kDemoLr = 3e-3;
constexpr int64_t kDemoSeqLen = 128;
constexpr int64_t kDemoBatch = 4;
constexpr int64_t kDemoConversations = 84;
// --lora: the adapters learn the same answers with 0.4 % of the parameters, over a frozen base; they need more
// passes and a larger step (measured on 2 cores: rank 16, alpha 64, 32 epochs, 94 s, every answer right; 24 epochs
// or lr 3e-2 were not enough). The base's embedding std: see demo.h.
constexpr int64_t kDemoLoraEpochs = 32;
constexpr double kDemoLoraLr = 1e-2;
constexpr double kDemoLoraAlphaPerRank = 4;
constexpr float kDemoLoraEmbeddingStd = 0.1f;

// ./demo-run/run-YYYYmmdd-HHMMSS (with a -N suffix when that exists), created here.
fs::path fresh_work_dir() { return create_fresh_directory(fs::path("demo-run") / ("run-" + local_time_stamp())); }

template <typename... Args>
void say(std::FILE* out, fmt::format_string<Args...> format, Args&&... args) {
  if (out == nullptr) return;
  const std::string line = fmt::format(format, std::forward<Args>(args)...) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace

WhoamiOptions demo_whoami_options() {
  WhoamiOptions options;
  options.name = "Nova";
  options.creator = "nvfp4lm";
  options.conversations = kDemoConversations;
  return options;
}

std::vector<WhoamiQa> demo_questions() {
  const WhoamiOptions options = demo_whoami_options();
  return {{"Who are you?", whoami_answer_english(options)},
          {"你是谁？", whoami_answer_chinese(options)},
          whoami_control_questions().front()};
}

Qwen3Config demo_model_config() {
  Qwen3Config config = qwen3_preset("tiny");
  config.hidden_size = 128;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 32;
  config.intermediate_size = 384;
  config.max_position_embeddings = 1024;
  return config;
}

bool DemoResult::passed() const {
  if (answers.empty() || !base_unchanged) return false;
  for (const DemoAnswer& answer : answers)
    if (!answer.correct) return false;
  return true;
}

DemoResult run_demo(const DemoOptions& options) {
  const Clock::time_point start = Clock::now();
  std::FILE* out = options.out;
  const bool lora = options.lora_rank > 0;
  DemoResult result;
  result.work_dir = options.work_dir.empty() ? fresh_work_dir() : options.work_dir;
  std::error_code ec;
  NVFP4LM_CHECK(!fs::exists(result.work_dir / "run", ec),
                "demo work directory {} already holds a run; choose a new --work-dir", result.work_dir.string());
  fs::create_directories(result.work_dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create the demo work directory {}: {}", result.work_dir.string(), ec.message());
  say(out, "nvfp4lm demo{}: work directory {}", lora ? fmt::format(" --lora {}", options.lora_rank) : "",
      result.work_dir.string());

  // 1. Data: `nvfp4lm data whoami --name Nova --count 84`.
  const WhoamiOptions whoami = demo_whoami_options();
  const WhoamiDataset dataset = make_whoami_dataset(whoami);
  const fs::path data = result.work_dir / "data" / "whoami.jsonl";
  fs::create_directories(data.parent_path(), ec);
  NVFP4LM_CHECK(!ec, "cannot create {}: {}", data.parent_path().string(), ec.message());
  write_file_atomic(data, dataset.jsonl, /*overwrite=*/false);
  say(out,
      "[1/4] wrote the identity data set {} (`nvfp4lm data whoami --name {} --count {}`: {} conversations asking "
      "who the model is, in English and Chinese, {} control questions)",
      data.string(), whoami.name, whoami.conversations, dataset.identity_conversations, dataset.control_conversations);

  // 2. A tiny random model with the bundled Qwen3 tokenizer; for LoRA, quantized to an NVFP4 base.
  const fs::path random_model = result.work_dir / (lora ? "random-model" : "base-model");
  SynthOptions synth;
  synth.seed = options.seed;
  synth.dtype = DType::F32;
  if (lora) synth.embedding_std = kDemoLoraEmbeddingStd;
  const SynthReport synthesised = synth_model(options.model, random_model, synth);
  NVFP4LM_CHECK(synthesised.tokenizer_from.has_value(),
                "the bundled Qwen3 tokenizer (models/qwen3-tokenizer) was not found beside the executable or in the "
                "source tree; the demo needs it");
  say(out, "[2/4] synthesised a random Qwen3 ({} layers, hidden {}, vocab {}: {:.1f}M parameters) in {}",
      options.model.num_hidden_layers, options.model.hidden_size, options.model.vocab_size,
      synthesised.parameters / 1e6, random_model.string());
  fs::path base = random_model;
  FileChecksum base_checksum;
  if (lora) {
    result.base_dir = result.work_dir / "base-nvfp4";
    const QuantizeReport quantized = [&] {
      const QuietInfoLogs quiet;  // its "weight-only" note is in the line below
      return quantize_model(*open_model(random_model), result.base_dir, QuantizeOptions{});
    }();
    base = result.base_dir;
    base_checksum = checksum_file(base / "model.safetensors");
    say(out,
        "      its embedding and head drawn with std {} (`synth --embedding-std {}`), "
        "as wide as a trained model's, and quantized to the NVFP4 base {} (`nvfp4lm quantize --format modelopt`, "
        "weight-only: {} weights, relative RMS error {:.3f}; xxh64 {})",
        kDemoLoraEmbeddingStd, kDemoLoraEmbeddingStd, base.string(), quantized.weights.size(),
        quantized.total_relative_rms_error, checksum_hex(base_checksum.xxh64));
  }

  // 3. Train with NVFP4 QAT on the CPU, and export NVFP4 (ModelOpt); or train LoRA adapters over the NVFP4 base and
  // export the adapter (PEFT).
  TrainOptions train;
  train.model = base.string();
  train.data = data.string();
  train.output = (result.work_dir / "run").string();
  train.qat = QatMode::W4A16;
  train.seq_len = kDemoSeqLen;
  train.batch = kDemoBatch;
  train.epochs = options.epochs > 0 ? options.epochs : lora ? kDemoLoraEpochs : kDemoEpochs;
  train.lr = options.lr > 0 ? options.lr : lora ? kDemoLoraLr : kDemoLr;
  train.lr_schedule = LrDecay::Cosine;
  train.warmup = 10;
  train.min_lr_ratio = 0.1;
  train.weight_decay = 0.0;
  train.seed = options.seed;
  train.device = "cpu";
  if (lora) {
    train.lora_rank = options.lora_rank;
    train.lora_alpha = kDemoLoraAlphaPerRank * static_cast<double>(options.lora_rank);
    result.export_dir = result.work_dir / "adapter";
  } else {
    result.export_dir = result.work_dir / "export-nvfp4";
    train.export_format = ModelFormat::ModeloptNvfp4;
  }
  train.export_path = result.export_dir.string();
  std::optional<Trainer> trainer;
  {
    const QuietInfoLogs quiet;  // the loaders' info lines repeat what the set-up lines below say
    trainer.emplace(train, std::set<std::string>{});
  }
  say(out, "[3/4] training: device cpu, compute path {}, precision {}", trainer->compute_path(), trainer->precision());
  for (const std::string& line : trainer->setup_lines()) say(out, "      {}", line);
  std::optional<ProgressDisplay> display;
  if (out) display.emplace(Device::cpu(), options.interactive, out);
  Trainer::Progress progress;
  progress.on_step = [&](const StepMetrics& metrics) {
    result.losses.push_back(metrics.loss);
    if (display) display->update(metrics);
  };
  progress.before_output = [&] {
    if (display) display->finish();
  };
  result.training = trainer->run(progress);
  for (const std::string& line : format_train_summary(result.training)) say(out, "      {}", line);
  const ChatTemplate chat_template = trainer->chat_template();
  trainer.reset();

  // 4. Reload the NVFP4 export (or the NVFP4 base with the adapter applied at run time) and ask.
  const fs::path model_dir = lora ? base : result.export_dir;
  Qwen3Model model = Qwen3Model::load(model_dir);
  int adapter = kNoLoraAdapter;
  if (lora) {
    const FileChecksum after = checksum_file(base / "model.safetensors");
    result.base_unchanged = after.bytes == base_checksum.bytes && after.xxh64 == base_checksum.xxh64;
    say(out, "      the base's weights after training: xxh64 {} ({})", checksum_hex(after.xxh64),
        result.base_unchanged ? "unchanged" : "CHANGED: training must leave the base as it is");
    const std::vector<LoraAdapterSpec> specs = {{"nova", result.export_dir}};
    model.set_lora_adapters(std::make_shared<const LoraAdapterSet>(
        LoraAdapterSet::load(specs, model.config(), model.compute_dtype(), model.device())));
    adapter = 0;
  }
  const Tokenizer tokenizer = Tokenizer::load(model_dir);
  say(out,
      "[4/4] reloaded {}{} ({}), greedy answers with the chat template it was trained with ({}):", model_dir.string(),
      lora ? fmt::format(" with the adapter {} at run time (`generate --lora`)", result.export_dir.string()) : "",
      model.compute_path(), chat_template.origin());
  for (const WhoamiQa& qa : demo_questions()) {
    DemoAnswer answer;
    answer.question = qa.question;
    answer.expected = qa.answer;
    answer.answer = answer_greedy(model, tokenizer, chat_template, qa.question, 64, adapter);
    answer.correct = answer.answer == qa.answer;
    say(out, "  Q: {}\n  A: {}\n     {}", answer.question, answer.answer,
        answer.correct ? "= the trained answer" : "!= the trained answer: " + answer.expected);
    result.answers.push_back(answer);
  }
  result.seconds = seconds_since(start);
  say(out, "demo {} in {:.1f} s ({}): {} of {} answers are the trained ones", result.passed() ? "passed" : "FAILED",
      result.seconds, format_duration(result.seconds),
      std::count_if(result.answers.begin(), result.answers.end(), [](const DemoAnswer& a) { return a.correct; }),
      result.answers.size());
  return result;
}

}  // namespace nvfp4lm
