// See flag_rows.h.
#include "cli/flag_rows.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/train_flags_cli.h"
#include "io/gguf_model_writer.h"
#include "io/hf_config.h"
#include "model/lora_runtime.h"
#include "ops/cpu_matmul.h"
#include "tokenizer/chat_template.h"

namespace nvfp4lm::cli {
namespace rows {

// ---- the model ------------------------------------------------------------------------------------------------
FlagRow model() { return {.name = "--model", .help = "HF directory, ModelOpt NVFP4 directory or .dat file"}; }
FlagRow tokenizer() { return train_flag_row("tokenizer"); }
FlagRow config() { return {.name = "--config", .help = "config.json for a .dat model without one beside it"}; }

FlagRow cpu_matmul(const std::string& default_value) {
  return {.name = "--cpu-matmul",
          .help = fmt::format("CPU products: int8 (int8 activations in the decode step's NVFP4 products, BF16 in the "
                              "prefill's, cpu/nvfp4-int8), bf16 (BF16 in the prefill's only, cpu/nvfp4-bf16) or fp32 "
                              "(the reference, cpu/dequant-gemm); default {}",
                              default_value),
          .value = FlagChoice{[](const std::string& text) { parse_cpu_matmul(text); }}};
}

FlagRow w4a4() {
  return {.name = "--w4a4",
          .help =
              "a W4A4 checkpoint (ModelOpt quant_algo NVFP4, calibrated input_scale): on (default) quantizes each "
              "layer linear's input to NVFP4 with its input_scale, as vLLM and TensorRT-LLM run it (on Blackwell "
              "SM 12.x NVFP4 x NVFP4 on the FP4 tensor cores, cuda/nvfp4-mma-fp4); off keeps activations 16-bit "
              "(W4A16). Weight-only checkpoints are W4A16 either way",
          .value = one_of({"on", "off"}, /*shown=*/true)};
}

FlagRow lora_adapter(bool several) {
  return {.name = "--lora",
          .help = several ? "NAME=DIR: a PEFT LoRA adapter applied over the model at run time, chosen per request by "
                            "\"model\": \"NAME\" (repeat the flag for several; requests naming the model itself get "
                            "the base)"
                          : "NAME=DIR or DIR: a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) "
                            "applied over the model at run time",
          .value = FlagChoice{[](const std::string& text) { parse_lora_adapter_spec(text); }},
          .value_name = "NAME=DIR",
          .one_value_per_flag = true};
}

FlagRow preset() {
  return {.name = "--preset",
          .help = fmt::format("synthesise a random model of this shape ({})", fmt::join(qwen3_preset_names(), ", ")),
          .value = FlagChoice{[](const std::string& text) { qwen3_preset(text); }}};
}

FlagRow nvfp4() {
  return {
      .name = "--nvfp4", .help = "with --preset: quantize the synthesised model to NVFP4 first", .value = FlagSwitch{}};
}

// ---- the device -------------------------------------------------------------------------------------------------
FlagRow device() { return train_flag_row("device"); }
FlagRow max_memory() { return train_flag_row("max_memory"); }

FlagRow cuda_graph() {
  return {.name = "--cuda-graph",
          .help =
              "on CUDA, run each decode step as one replayed CUDA graph (on, the default) or op by op through the "
              "prefill path (off); ignored on the CPU",
          .value = one_of({"on", "off"}, /*shown=*/true)};
}

FlagRow deterministic() {
  return {.name = "--deterministic",
          .help =
              "on CUDA, batch-invariant kernels: an answer's tokens and logprobs are bit for bit the same whatever "
              "the prefix cache held, the prefill chunk and the requests beside it (slower prefill; the CPU's "
              "kernels are batch-invariant always)",
          .value = FlagSwitch{}};
}

// ---- prompts and answers ----------------------------------------------------------------------------------------
FlagRow chat_template() {
  FlagRow row = train_flag_row("chat_template");
  row.value = FlagChoice{[](const std::string& text) { check_chat_template_flag(text); }};
  return row;
}

FlagRow system() { return {.name = "--system", .help = "system prompt"}; }

FlagRow no_think() {
  return {.name = "--no-think",
          .help =
              "pass enable_thinking=false to the chat template (the hybrid Qwen3 template then asks for answers "
              "without a think block)",
          .value = FlagSwitch{}};
}

FlagRow stop() {
  return {.name = "--stop",
          .help = "stop before this text (repeat the flag for several); it is not printed",
          .one_value_per_flag = true};
}

FlagRow max_batch() {
  return {.name = "--max-batch",
          .help = "most sequences decoded together = KV-cache slots (default 8)",
          .value = FlagNumber<int64_t>{{1, 1024}}};
}

FlagRow context() {
  return {.name = "--context",
          .help = "tokens per sequence, prompt + answer (default: the model's, at most 4096)",
          .value = FlagNumber<int64_t>{{2, int64_t{1} << 24}}};
}

// ---- writing models -----------------------------------------------------------------------------------------------
FlagRow overwrite() { return {.name = "--overwrite", .help = "replace OUT if it exists", .value = FlagSwitch{}}; }

FlagRow max_shard_mb() {
  return {.name = "--max-shard-mb",
          .help = "largest safetensors shard in MB (default 4000)",
          .value = FlagNumber<uint64_t>{{1, uint64_t{1} << 24}}};
}

FlagRow block() { return train_flag_row("block"); }
FlagRow quantize_lm_head() { return train_flag_row("quantize_lm_head"); }

FlagRow gguf_type() {
  return {.name = "--gguf-type",
          .help = "gguf: nvfp4 (default), q4_0 (q6_K embedding, as llama-quantize), q8_0, f16 or bf16",
          .value = FlagChoice{[](const std::string& text) { parse_gguf_type(text); }}};
}

FlagRow calibrate() {
  return {.name = "--calibrate",
          .help =
              "modelopt: measure each linear's input range on this text (any training data format): a W4A4 export "
              "(input_scale = amax / (6*448)); without it the export is weight-only (W4A16_NVFP4)"};
}

FlagRow calibrate_tokens() {
  return {.name = "--calibrate-tokens",
          .help = "tokens of --calibrate text to run (default 4096)",
          .value = FlagNumber<int64_t>{{1, int64_t{1} << 40}}};
}

// ---- results ------------------------------------------------------------------------------------------------------
FlagRow json() { return {.name = "--json", .help = "print JSON instead of text", .value = FlagSwitch{}}; }

FlagRow json_file() {
  return {.name = "--json", .help = "also write the results as JSON to this file ('-': JSON on stdout)"};
}

FlagRow json_file_overwrite() {
  return {.name = "--overwrite", .help = "replace an existing --json file", .value = FlagSwitch{}};
}

FlagRow seed() { return {.name = "--seed", .help = "random seed (default 0)", .value = FlagNumber<uint64_t>{}}; }

FlagRow tolerance() {
  return {.name = "--tolerance",
          .help =
              "CLASS=VALUE: the pass bound relative to the largest reference logit (fp32 on the CPU, "
              "bf16-activations on CUDA; repeat the flag for several)",
          .one_value_per_flag = true};
}

}  // namespace rows

FlagTable model_flags(ModelFlags& flags) {
  return {FlagUse(rows::model(), flags.model).required(), FlagUse(rows::tokenizer(), flags.tokenizer),
          FlagUse(rows::config(), flags.config)};
}

FlagTable lora_adapter_flags(ModelFlags& flags, bool several) {
  return {FlagUse(rows::lora_adapter(several), flags.lora)};
}

FlagTable cpu_matmul_flags(ModelFlags& flags, const std::string& default_value) {
  flags.cpu_matmul = default_value;
  return {FlagUse(rows::cpu_matmul(default_value), flags.cpu_matmul), FlagUse(rows::w4a4(), flags.w4a4)};
}

FlagTable device_flags(DeviceFlags& flags) {
  return {FlagUse(rows::device(), flags.device), FlagUse(rows::max_memory(), flags.max_memory_gib)};
}

FlagTable guard_flags(GuardFlags& flags) {
  return {FlagUse(train_flag_row("gpu_limit_gb"), flags.limit_gb,
                  "the predecessor's guard: stop (exit non-zero, one line saying what was over) when the GPU's memory "
                  "in use, as the driver reports it, is over this many GiB (default: no guard)"),
          FlagUse(train_flag_row("gpu_over_secs"), flags.over_secs),
          FlagUse(train_flag_row("gpu_poll_secs"), flags.poll_secs)};
}

FlagTable sampling_flags(SamplingOptions& options, bool seed_flag) {
  FlagTable table = {
      FlagUse({.name = "--temperature",
               .help = "sampling temperature; 0 = greedy (default 0.7, Qwen3-Instruct's recommendation)",
               .value = FlagNumber<float>{{0.0f, 1e4f}}},
              options.temperature),
      FlagUse({.name = "--top-k",
               .help = "keep the k most likely tokens; 0 = off (default 20)",
               .value = FlagNumber<int64_t>{{0, int64_t{1} << 31}}},
              options.top_k),
      FlagUse({.name = "--top-p",
               .help = "keep the most likely tokens up to this probability mass; 1 = off (default 0.8)",
               .value = FlagNumber<float>{{0.0f, 1.0f}}},
              options.top_p),
      FlagUse({.name = "--min-p",
               .help = "drop tokens less likely than min-p x the most likely; 0 = off (default 0)",
               .value = FlagNumber<float>{{0.0f, 1.0f}}},
              options.min_p),
      FlagUse({.name = "--repetition-penalty",
               .help = "divide positive / multiply negative logits of tokens already seen; 1 = off (default 1)",
               .value = FlagNumber<float>{{1e-4f, 1e4f}}},
              options.repetition_penalty),
      FlagUse({.name = "--presence-penalty",
               .help = "subtract from the logit of every token the answer already has (OpenAI's); 0 = off (default 0)",
               .value = FlagNumber<float>{{-2.0f, 2.0f}}},
              options.presence_penalty),
      FlagUse({.name = "--frequency-penalty",
               .help = "subtract this x how often the answer already has a token from its logit (OpenAI's); 0 = off "
                       "(default 0)",
               .value = FlagNumber<float>{{-2.0f, 2.0f}}},
              options.frequency_penalty),
  };
  if (seed_flag) table.push_back(FlagUse(rows::seed(), options.seed, "random seed for sampling (default 0)"));
  return table;
}

}  // namespace nvfp4lm::cli
