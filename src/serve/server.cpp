// See server.h.
#include "serve/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/logging.h"
#include "core/memory.h"
#include "infer/stop_conditions.h"

namespace nvfp4lm::serve {
namespace {

constexpr int64_t kDefaultContext = 4096;
// After the scheduler is idle, answers may still be finishing their last writes; a client that reads slower than
// that is cut off.
constexpr auto kWriteGrace = std::chrono::seconds(5);

// SIGTERM / SIGINT while the server runs: the handler (which may run on any thread: OpenMP and OpenBLAS start
// threads before serve, and they do not block signals) only writes the signal number to a pipe, the one thing a
// handler may safely do; wait() reads it on an ordinary thread. The previous handlers come back at destruction.
class ShutdownSignals {
 public:
  ShutdownSignals() {
    NVFP4LM_CHECK(::pipe2(pipe_, O_CLOEXEC) == 0, "serve: cannot create the signal pipe: {}", std::strerror(errno));
    write_end_ = pipe_[1];
    struct sigaction action {};
    action.sa_handler = [](int number) {
      const auto byte = static_cast<char>(number);
      [[maybe_unused]] const ssize_t written = ::write(write_end_, &byte, 1);
    };
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGTERM, &action, &previous_term_);
    ::sigaction(SIGINT, &action, &previous_int_);
  }
  ~ShutdownSignals() {
    ::sigaction(SIGTERM, &previous_term_, nullptr);
    ::sigaction(SIGINT, &previous_int_, nullptr);
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Blocks until one of the signals arrives or wake() is called; returns the signal's number (0 for wake()).
  int wait() {
    char byte = 0;
    while (::read(pipe_[0], &byte, 1) < 0 && errno == EINTR) {
    }
    return byte;
  }
  // Ends a wait() from an ordinary thread.
  void wake() {
    const char byte = 0;
    [[maybe_unused]] const ssize_t written = ::write(pipe_[1], &byte, 1);
  }

 private:
  static inline int write_end_ = -1;  // the handler's only state (a handler cannot capture)
  int pipe_[2] = {-1, -1};
  struct sigaction previous_term_ {
  }, previous_int_{};
};

}  // namespace

Server::Server(const Qwen3Model& model, Tokenizer tokenizer, ServeOptions options) : options_(std::move(options)) {
  const Qwen3Config& config = model.config();
  if (options_.context == 0) options_.context = std::min(config.max_position_embeddings, kDefaultContext);
  NVFP4LM_CHECK(options_.context >= 2 && options_.context <= config.max_position_embeddings,
                "--context {} must be from 2 to the model's max_position_embeddings ({})", options_.context,
                config.max_position_embeddings);
  NVFP4LM_CHECK(options_.max_batch >= 1, "--max-batch must be at least 1, got {}", options_.max_batch);
  options_.sampling.validate();

  const int64_t slots = BatchEngine::slots_within_memory(model, options_.context, options_.max_batch);
  if (slots < options_.max_batch)
    log::warn("serve: --max-memory leaves room for {} KV-cache slots of {} tokens, fewer than --max-batch {}", slots,
              options_.context, options_.max_batch);

  BatchEngineOptions engine_options;
  engine_options.slots = slots;
  engine_options.context = options_.context;
  engine_options.decode = options_.decode;
  engine_options.prefix_cache = options_.prefix_cache;
  engine_options.reuse_answers = options_.reuse_answers;
  engine_ = std::make_unique<BatchEngine>(model, tokenizer, engine_options);

  ServedModel served{tokenizer, PromptRules{}, RequestDefaults{}, slots, model.device().str()};
  served.tokenizer = tokenizer;
  served.rules.chat_template =
      std::make_shared<const ChatTemplate>(ChatTemplate::resolve(tokenizer, options_.chat_template));
  log::info("chat template: {}", served.rules.chat_template->origin());
  served.rules.enable_thinking = options_.enable_thinking;
  served.rules.eos_ids =
      end_of_sequence_ids(config, find_generation_config(model.source()), tokenizer, config.vocab_size);
  served.rules.context = options_.context;
  served.rules.vocab_size = std::min<int64_t>(config.vocab_size, static_cast<int64_t>(tokenizer.vocab_size()));
  served.defaults.sampling = options_.sampling;
  if (options_.http.model_name.empty()) {
    const fs::path source = model.source();
    options_.http.model_name = (source.has_filename() ? source : source.parent_path()).filename().string();
  }
  if (const LoraAdapterSet* lora = model.lora_adapters()) {
    for (int k = 0; k < lora->count(); ++k) {
      NVFP4LM_CHECK(lora->name(k) != options_.http.model_name,
                    "--lora {}: the adapter has the served model's name, which requests use for the base (name it "
                    "otherwise, or set --model-name)",
                    lora->name(k));
      served.lora_adapters.push_back(lora->name(k));
    }
  }

  SchedulerOptions scheduler_options;
  scheduler_options.max_queue = options_.max_queue;
  scheduler_options.prefill_chunk = options_.prefill_chunk;
  scheduler_ = std::make_unique<Scheduler>(*engine_, metrics_, scheduler_options);
  http_ = std::make_unique<HttpServer>(*scheduler_, metrics_, std::move(served), options_.http);
}

Server::~Server() {
  http_.reset();
  scheduler_.reset();
}

void Server::shutdown() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    shutdown_ = true;
  }
  shutdown_requested_.notify_all();
}

void Server::run() {
  http_->start();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    shutdown_requested_.wait(lock, [&] { return shutdown_; });
  }
  log::info(
      "serve: shutting down: new requests get 503; the {} running and {} waiting request(s) may finish within {:g} s "
      "(--shutdown-timeout), what is left then gets 503",
      scheduler_->running(), scheduler_->waiting(), options_.shutdown_timeout_s);
  http_->set_draining();
  const auto start = std::chrono::steady_clock::now();
  scheduler_->drain(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(options_.shutdown_timeout_s)));
  http_->stop(std::chrono::steady_clock::now() + kWriteGrace);
  log::info("serve: stopped after {:.2f} s of shutdown",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void serve_until_signal(const Qwen3Model& model, const Tokenizer& tokenizer, const ServeOptions& options) {
  Server server(model, tokenizer, options);
  const BatchEngine& engine = server.engine();
  ShutdownSignals signals;  // from here on SIGTERM / SIGINT only wake the watcher below
  const ServeOptions& served = server.options();
  log::info(
      "serve: listening on http://{}:{} (model '{}', {} slots x {} tokens, decode {}, max queue {}, prefill chunk {}, "
      "prefix cache {})",
      served.http.host, server.port(), served.http.model_name, engine.slots(), engine.context(), engine.decode_path(),
      served.max_queue, served.prefill_chunk > 0 ? std::to_string(served.prefill_chunk) : "off (whole prompts)",
      !served.prefix_cache   ? "off"
      : served.reuse_answers ? "answers (prompts and answers)"
                             : "on (prompts)");
  // run() returns only after shutdown(), which only this watcher calls. A second signal while the server drains
  // ends the process at once (the user asked twice); once run() returned, wake() ends the watcher.
  std::thread watcher([&] {
    const int number = signals.wait();
    log::info("serve: {} received", number == SIGTERM ? "SIGTERM" : "SIGINT");
    server.shutdown();
    const int second = signals.wait();
    if (second == 0) return;
    log::warn("serve: a second {} received: exiting now without finishing the running requests",
              second == SIGTERM ? "SIGTERM" : "SIGINT");
    std::_Exit(128 + second);
  });
  server.run();
  signals.wake();
  watcher.join();
}

}  // namespace nvfp4lm::serve
