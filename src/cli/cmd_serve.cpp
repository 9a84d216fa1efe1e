// `nvfp4lm serve --model M [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-batch N] [--context N]
// [--max-memory GiB] [--prefill-chunk N] [--prefix-cache on|off|answers] [--max-connections N] [--idle-timeout S]
// [--header-timeout S] [--body-timeout S] [--write-timeout S] [--max-body-mb MB] [--cors-origin ORIGIN]...
// [--no-access-log] [--lora NAME=DIR]... [--deterministic]`: the model behind the OpenAI API (chat completions,
// completions, models, tokenize, health, metrics) with continuous batching, until SIGTERM / SIGINT (then it drains and
// exits 0; a second signal exits at once). Parsing only: serve/server.h.
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/flag_rows.h"
#include "core/error.h"
#include "serve/server.h"

namespace nvfp4lm::cli {
namespace {

struct ServeCliOptions {
  ModelFlags model;
  DeviceFlags device;
  GuardFlags guard;
  std::string cuda_graph = "on";
  std::string prefix_cache = "on";
  serve::ServeOptions serve;
  bool no_think = false;
  bool deterministic = false;
  int64_t max_body_mb = 8;
};

int run_serve(ServeCliOptions& cli) {
  NVFP4LM_CHECK(cli.serve.http.port >= 0 && cli.serve.http.port <= 65535, "--port must be from 0 to 65535, got {}",
                cli.serve.http.port);
  const Device device = setup_device(cli.device);
  const auto guard = start_memory_guard(cli.guard, device);
  set_deterministic(device, cli.deterministic);
  const Qwen3Model model = load_model("serve", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  cli.serve.decode = decode_mode_for(device, cli.cuda_graph);
  if (cli.no_think) cli.serve.enable_thinking = false;
  cli.serve.http.max_body_bytes = static_cast<uint64_t>(cli.max_body_mb) << 20;
  cli.serve.prefix_cache = cli.prefix_cache != "off";
  cli.serve.reuse_answers = cli.prefix_cache == "answers";
  serve::serve_until_signal(model, tokenizer, cli.serve);
  return 0;
}

CommandRegistration serve_registration(
    "serve", "Serve the model over an OpenAI-compatible HTTP API with continuous batching",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<ServeCliOptions>();
      serve::ServeOptions& serve = options->serve;
      add_flags(app, model_flags(options->model));
      add_flags(app, lora_adapter_flags(options->model, /*several=*/true));
      add_flags(
          app,
          {
              FlagUse(
                  {.name = "--host", .help = "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
                  serve.http.host),
              FlagUse({.name = "--port",
                       .help = "TCP port (default 8080; 0 = any free port)",
                       .value = FlagNumber<int>{{0, 65535}}},
                      serve.http.port),
              FlagUse({.name = "--api-key", .help = "require 'Authorization: Bearer KEY' on /v1/* (default: no key)"},
                      serve.http.api_key),
              FlagUse({.name = "--model-name",
                       .help = "the model id clients send and /v1/models lists (default: the model directory's name)"},
                      serve.http.model_name),
              FlagUse(rows::max_batch(), serve.max_batch),
              FlagUse(rows::context(), serve.context),
              FlagUse({.name = "--max-queue",
                       .help = "requests waiting for a slot before new ones get 429 (default 64)",
                       .value = FlagNumber<int64_t>{{0, int64_t{1} << 20}}},
                      serve.max_queue),
              FlagUse({.name = "--prefill-chunk",
                       .help = "prompt tokens prefilled between two decode steps, so running answers go on while a "
                               "long prompt joins (default 256; 0 = each prompt at once)",
                       .value = FlagNumber<int64_t>{{0, int64_t{1} << 24}}},
                      serve.prefill_chunk),
              FlagUse({.name = "--prefix-cache",
                       .help = "on: a prompt reuses the KV cache a free slot kept of an earlier request's prompt, "
                               "and its answer is bit for bit the one it gets alone on the CPU (default on); "
                               "answers: also of that request's answer, which spares a follow-up turn prefilling "
                               "it again, but its answer may then differ slightly from the one it gets alone",
                       .value = one_of({"on", "off", "answers"}, /*shown=*/true)},
                      options->prefix_cache),
              FlagUse(
                  {.name = "--shutdown-timeout",
                   .help = "seconds running requests may go on after SIGTERM before they are cancelled (default 30)",
                   .value = FlagNumber<double>{{0.0, 86400.0}}},
                  serve.shutdown_timeout_s),
              FlagUse({.name = "--max-connections",
                       .help = "client connections open at once; more are answered 503 and closed (default 4096)",
                       .value = FlagNumber<int64_t>{{1, int64_t{1} << 20}}},
                      serve.http.max_connections),
              FlagUse({.name = "--idle-timeout",
                       .help = "seconds a connection may stay open without a request (default 60)",
                       .value = FlagNumber<double>{{0.001, 86400.0}}},
                      serve.http.idle_timeout_s),
              FlagUse({.name = "--header-timeout",
                       .help = "seconds from a request's first byte to the end of its header (default 10)",
                       .value = FlagNumber<double>{{0.001, 86400.0}}},
                      serve.http.header_timeout_s),
              FlagUse({.name = "--body-timeout",
                       .help = "seconds from the end of a request's header to the end of its body (default 60)",
                       .value = FlagNumber<double>{{0.001, 86400.0}}},
                      serve.http.body_timeout_s),
              FlagUse({.name = "--write-timeout",
                       .help = "seconds one write of an answer may wait for a client that does not read (default 30)",
                       .value = FlagNumber<double>{{0.001, 86400.0}}},
                      serve.http.write_timeout_s),
              FlagUse({.name = "--cors-origin",
                       .help = "an origin browsers may call the API from (repeat for several; '*' for any); default "
                               "none: no web page may call it (llama-server and vLLM allow every origin by default)",
                       .value_name = "ORIGIN"},
                      serve.http.cors_origins),
              FlagUse({.name = "--no-access-log",
                       .help = "no log line per request (method, path, status, bytes, seconds)",
                       .value = FlagSwitch{.negated = true}},
                      serve.http.access_log),
              FlagUse({.name = "--max-body-mb",
                       .help = "largest request body in MiB, chunked bodies too (default 8)",
                       .value = FlagNumber<int64_t>{{1, 1024}}},
                      options->max_body_mb),
          });
      add_flags(app, sampling_flags(serve.sampling, /*seed_flag=*/false));  // defaults for what a request leaves out
      add_flags(app, {
                         FlagUse(rows::no_think(), options->no_think,
                                 "pass enable_thinking=false to the chat template unless a request's "
                                 "chat_template_kwargs say otherwise (the hybrid Qwen3 template then asks for answers "
                                 "without a think block)"),
                         FlagUse(rows::chat_template(), serve.chat_template),
                     });
      add_flags(app, cpu_matmul_flags(options->model, "int8"));
      add_flags(app, device_flags(options->device));
      add_flags(app, guard_flags(options->guard));
      add_flags(app, {FlagUse(rows::cuda_graph(), options->cuda_graph),
                      FlagUse(rows::deterministic(), options->deterministic)});
      return [options] { return run_serve(*options); };
    },
    45);

}  // namespace
}  // namespace nvfp4lm::cli
