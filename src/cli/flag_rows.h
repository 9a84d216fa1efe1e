// The flag rows that several commands take (cli/flag_row.h), each defined once, and the groups of them that several
// commands take together (the model, the device, sampling). A command gives a row its own help where the flag means
// something more particular there ("--overwrite": replace OUT, or the --json file). Rows `train` has too come from the
// training flag table (cli/train_flags_cli.h), so the two say the same.
#pragma once

#include <string>

#include "cli/cli_common.h"
#include "cli/flag_row.h"
#include "infer/sampler.h"

namespace nvfp4lm::cli::rows {

// ---- the model ------------------------------------------------------------------------------------------------
FlagRow model();      // --model: HF directory, ModelOpt NVFP4 directory or .dat file
FlagRow tokenizer();  // --tokenizer DIR
FlagRow config();     // --config FILE, for a .dat model
// --cpu-matmul int8|bf16|fp32 (ops/cpu_matmul.h), its help naming `default_value` ("int8" for the commands that run a
// model for its output, "fp32" for those that measure it).
FlagRow cpu_matmul(const std::string& default_value);
// --w4a4 on|off: a W4A4 checkpoint's activations NVFP4 as exported, or 16-bit (ModelOptions::w4a4_activations).
FlagRow w4a4();
FlagRow lora_adapter(bool several);  // --lora NAME=DIR (model/lora_runtime.h): one (generate, chat) or several (serve)
// --preset NAME: a random model of a preset shape (io/hf_config.h).
FlagRow preset();
FlagRow nvfp4();  // --nvfp4: quantize a --preset model first (bench)

// ---- the device -------------------------------------------------------------------------------------------------
FlagRow device();
FlagRow max_memory();
FlagRow cuda_graph();     // --cuda-graph on|off (model/qwen3_decode_step.h)
FlagRow deterministic();  // --deterministic: batch-invariant kernels (ops/batch_invariance.h)

// ---- prompts and answers ----------------------------------------------------------------------------------------
FlagRow chat_template();  // auto, a bundled name or a Jinja file (tokenizer/chat_template.h)
FlagRow system();         // --system TEXT
FlagRow no_think();       // --no-think
FlagRow stop();           // --stop TEXT, repeated
FlagRow max_batch();      // --max-batch N: sequences decoded together
FlagRow context();        // --context N: tokens a sequence may hold

// ---- writing models -----------------------------------------------------------------------------------------------
FlagRow overwrite();
FlagRow max_shard_mb();
FlagRow block();             // --block 1d|2d
FlagRow quantize_lm_head();  // --quantize-lm-head
FlagRow gguf_type();         // --gguf-type nvfp4|q4_0|q8_0|f16|bf16
FlagRow calibrate();         // --calibrate FILE
FlagRow calibrate_tokens();

// ---- results ------------------------------------------------------------------------------------------------------
FlagRow json();                 // --json: print JSON instead of text
FlagRow json_file();            // --json FILE|-: a benchmark's results as JSON too
FlagRow json_file_overwrite();  // --overwrite of --json FILE
FlagRow seed();                 // --seed N
FlagRow tolerance();            // --tolerance CLASS=VALUE, repeated

}  // namespace nvfp4lm::cli::rows

namespace nvfp4lm::cli {

// --model, --tokenizer, --config; --model required.
FlagTable model_flags(ModelFlags& flags);
// --cpu-matmul, its field set to `default_value` (rows::cpu_matmul).
FlagTable cpu_matmul_flags(ModelFlags& flags, const std::string& default_value);
// --lora NAME=DIR into flags.lora: `several` (serve) per request, else one for every answer (generate, chat).
FlagTable lora_adapter_flags(ModelFlags& flags, bool several);
// --device, --max-memory.
FlagTable device_flags(DeviceFlags& flags);
// --gpu-limit-gb, --gpu-over-secs, --gpu-poll-secs: the predecessor's guard (core/memory_guard.h), for the commands
// its runner guarded (generate, chat, serve); train has them in its own table.
FlagTable guard_flags(GuardFlags& flags);
// --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --presence-penalty, --frequency-penalty, --seed,
// with the defaults of SamplingOptions (logit bias is the server's only: a request's logit_bias). Without seed_flag
// no --seed (serve draws a seed per request that names none).
FlagTable sampling_flags(SamplingOptions& options, bool seed_flag = true);

}  // namespace nvfp4lm::cli
