// `nvfp4lm serve --model M [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--max-batch N] [--context N]
// [--max-memory GiB] [--prefill-chunk N] [--prefix-cache on|off] [--max-connections N] [--idle-timeout S]
// [--header-timeout S] [--body-timeout S] [--write-timeout S] [--max-body-mb MB] [--cors-origin ORIGIN]...
// [--no-access-log]`: the model behind the OpenAI API (chat completions, completions, models, tokenize, health,
// metrics) with continuous batching, until SIGTERM / SIGINT (then it drains and exits 0; a second signal exits at
// once). Parsing only: serve/server.h.
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/command.h"
#include "cli/number_flags.h"
#include "core/error.h"
#include "serve/server.h"

namespace nvfp4lm::cli {
namespace {

struct ServeCliOptions {
  ModelFlags model;
  DeviceFlags device;
  std::string cuda_graph = "on";
  std::string prefix_cache = "on";
  serve::ServeOptions serve;
  bool no_think = false;
  int64_t max_body_mb = 8;
};

int run_serve(ServeCliOptions& cli) {
  NVFP4LM_CHECK(cli.serve.http.port >= 0 && cli.serve.http.port <= 65535, "--port must be from 0 to 65535, got {}",
                cli.serve.http.port);
  const Device device = setup_device(cli.device);
  const Qwen3Model model = load_model("serve", cli.model, device);
  const Tokenizer tokenizer = load_tokenizer(model);
  cli.serve.decode = decode_mode_for(device, cli.cuda_graph);
  if (cli.no_think) cli.serve.enable_thinking = false;
  cli.serve.http.max_body_bytes = static_cast<uint64_t>(cli.max_body_mb) << 20;
  cli.serve.prefix_cache = cli.prefix_cache == "on";
  serve::serve_until_signal(model, tokenizer, cli.serve);
  return 0;
}

CommandRegistration registration(
    "serve", "Serve the model over an OpenAI-compatible HTTP API with continuous batching",
    [](CLI::App& app) -> CommandRun {
      auto options = std::make_shared<ServeCliOptions>();
      serve::ServeOptions& serve = options->serve;
      add_model_flags(app, options->model);
      app.add_option("--host", serve.http.host,
                     "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
      add_number_option(app, "--port", serve.http.port, "TCP port (default 8080; 0 = any free port)", {0, 65535});
      app.add_option("--api-key", serve.http.api_key, "require 'Authorization: Bearer KEY' on /v1/* (default: no key)");
      app.add_option("--model-name", serve.http.model_name,
                     "the model id clients send and /v1/models lists (default: the model directory's name)");
      add_number_option(app, "--max-batch", serve.max_batch,
                        "most sequences decoded together = KV-cache slots (default 8)", {int64_t{1}, int64_t{1024}});
      add_number_option(app, "--context", serve.context,
                        "tokens per sequence, prompt + answer (default: the model's, at most 4096)",
                        {int64_t{2}, int64_t{1} << 24});
      add_number_option(app, "--max-queue", serve.max_queue,
                        "requests waiting for a slot before new ones get 429 (default 64)",
                        {int64_t{0}, int64_t{1} << 20});
      add_number_option(app, "--prefill-chunk", serve.prefill_chunk,
                        "prompt tokens prefilled between two decode steps, so running answers go on while a long "
                        "prompt joins (default 256; 0 = each prompt at once)",
                        {int64_t{0}, int64_t{1} << 24});
      app.add_option("--prefix-cache", options->prefix_cache,
                     "on: a prompt reuses the KV cache a free slot kept of its prefix from an earlier request "
                     "(default on)")
          ->check(CLI::IsMember({"on", "off"}));
      add_number_option(app, "--shutdown-timeout", serve.shutdown_timeout_s,
                        "seconds running requests may go on after SIGTERM before they are cancelled (default 30)",
                        {0.0, 86400.0});
      add_number_option(app, "--max-connections", serve.http.max_connections,
                        "client connections open at once; more are answered 503 and closed (default 4096)",
                        {int64_t{1}, int64_t{1} << 20});
      add_number_option(app, "--idle-timeout", serve.http.idle_timeout_s,
                        "seconds a connection may stay open without a request (default 60)", {0.001, 86400.0});
      add_number_option(app, "--header-timeout", serve.http.header_timeout_s,
                        "seconds from a request's first byte to the end of its header (default 10)", {0.001, 86400.0});
      add_number_option(app, "--body-timeout", serve.http.body_timeout_s,
                        "seconds from the end of a request's header to the end of its body (default 60)",
                        {0.001, 86400.0});
      add_number_option(app, "--write-timeout", serve.http.write_timeout_s,
                        "seconds one write of an answer may wait for a client that does not read (default 30)",
                        {0.001, 86400.0});
      app.add_option("--cors-origin", serve.http.cors_origins,
                     "an origin browsers may call the API from (repeat for several; '*' for any); default none")
          ->type_name("ORIGIN");
      app.add_flag_function(
          "--no-access-log", [&serve](int64_t) { serve.http.access_log = false; },
          "no log line per request (method, path, status, bytes, seconds)");
      add_number_option(app, "--max-body-mb", options->max_body_mb,
                        "largest request body in MiB, chunked bodies too (default 8)", {int64_t{1}, int64_t{1024}});
      add_sampling_flags(app, serve.sampling, /*seed_flag=*/false);  // defaults for what a request leaves out
      app.add_flag("--no-think", options->no_think,
                   "pass enable_thinking=false to the chat template unless a request's chat_template_kwargs say "
                   "otherwise (the hybrid Qwen3 template then asks for answers without a think block)");
      add_chat_template_flag(app, serve.chat_template);
      add_cpu_matmul_flag(app, options->model, "int8");
      add_device_flags(app, options->device);
      add_cuda_graph_flag(app, options->cuda_graph);
      return [options] { return run_serve(*options); };
    },
    45);

}  // namespace
}  // namespace nvfp4lm::cli
