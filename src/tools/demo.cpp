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
#include "io/synth_model.h"
#include "tokenizer/chat.h"

namespace nvfp4lm {
namespace {

constexpr int64_t kDemoEpochs = 24;
constexpr double kDemoLr = 3e-3;
constexpr int64_t kDemoSeqLen = 128;
constexpr int64_t kDemoBatch = 4;
constexpr int64_t kDemoConversations = 84;

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
  if (answers.empty()) return false;
  for (const DemoAnswer& answer : answers)
    if (!answer.correct) return false;
  return true;
}

DemoResult run_demo(const DemoOptions& options) {
  const Clock::time_point start = Clock::now();
  std::FILE* out = options.out;
  DemoResult result;
  result.work_dir = options.work_dir.empty() ? fresh_work_dir() : options.work_dir;
  std::error_code ec;
  NVFP4LM_CHECK(!fs::exists(result.work_dir / "run", ec),
                "demo work directory {} already holds a run; choose a new --work-dir", result.work_dir.string());
  fs::create_directories(result.work_dir, ec);
  NVFP4LM_CHECK(!ec, "cannot create the demo work directory {}: {}", result.work_dir.string(), ec.message());
  say(out, "nvfp4lm demo: work directory {}", result.work_dir.string());

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

  // 2. A tiny random model with the bundled Qwen3 tokenizer.
  const fs::path base = result.work_dir / "base-model";
  SynthOptions synth;
  synth.seed = options.seed;
  synth.dtype = DType::F32;
  const SynthReport synthesised = synth_model(options.model, base, synth);
  NVFP4LM_CHECK(synthesised.tokenizer_from.has_value(),
                "the bundled Qwen3 tokenizer (models/qwen3-tokenizer) was not found beside the executable or in the "
                "source tree; the demo needs it");
  say(out, "[2/4] synthesised a random Qwen3 ({} layers, hidden {}, vocab {}: {:.1f}M parameters) in {}",
      options.model.num_hidden_layers, options.model.hidden_size, options.model.vocab_size,
      synthesised.parameters / 1e6, base.string());

  // 3. Train with NVFP4 QAT on the CPU, and export NVFP4 (ModelOpt).
  TrainOptions train;
  train.model = base.string();
  train.data = data.string();
  train.output = (result.work_dir / "run").string();
  train.qat = QatMode::W4A16;
  train.seq_len = kDemoSeqLen;
  train.batch = kDemoBatch;
  train.epochs = options.epochs > 0 ? options.epochs : kDemoEpochs;
  train.lr = options.lr > 0 ? options.lr : kDemoLr;
  train.lr_schedule = LrDecay::Cosine;
  train.warmup = 10;
  train.min_lr_ratio = 0.1;
  train.weight_decay = 0.0;
  train.seed = options.seed;
  train.device = "cpu";
  result.export_dir = result.work_dir / "export-nvfp4";
  train.export_path = result.export_dir.string();
  train.export_format = ModelFormat::ModeloptNvfp4;
  std::optional<Trainer> trainer;
  {
    // The loaders' info lines repeat what the set-up lines below say.
    const log::Level saved = log::level();
    if (saved == log::Level::Info) log::set_level(log::Level::Warn);
    try {
      trainer.emplace(train, std::set<std::string>{});
    } catch (...) {
      log::set_level(saved);
      throw;
    }
    log::set_level(saved);
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

  // 4. Reload the NVFP4 export and ask.
  const Qwen3Model model = Qwen3Model::load(result.export_dir);
  const Tokenizer tokenizer = Tokenizer::load(result.export_dir);
  say(out, "[4/4] reloaded {} ({}), greedy answers with the chat template it was trained with ({}):",
      result.export_dir.string(), model.compute_path(), chat_template.origin());
  for (const WhoamiQa& qa : demo_questions()) {
    DemoAnswer answer;
    answer.question = qa.question;
    answer.expected = qa.answer;
    answer.answer = answer_greedy(model, tokenizer, chat_template, qa.question);
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
