// `nvfp4lm parity`: the same token sequences through every inference path this build has, compared position by
// position (it replaces the predecessor's parity script and its runner's --check-logits).
//
// Sequences: per prompt (the user's, or default_parity_prompts(), each rendered with the model's chat template as
// generation renders it), the prompt's ids plus the reference path's greedy continuation of up to new_tokens ids
// (stopping after an end-of-sequence token). Every path is then teacher-forced over exactly those ids, so its
// logits line up with the reference's at every position.
//
// Paths (a path that cannot run here is listed as skipped, with the reason; nothing is left out silently):
//   reference      the model as given, on the CPU, full forward (cpu/dequant-gemm for NVFP4: dequant + sgemm)
//   cpu-cache      the same model through a KV cache: the prompt prefilled, then one token per step (the fused
//                  <= 8-row NVFP4 kernel), as generation runs it                     vs reference         fp32
//   cpu-dense      its NVFP4 weights dequantized once to F32 (cpu/dense)            vs reference         fp32
//   cpu-bf16       KV cache with BF16 activations in the prefill's products (cpu/nvfp4-bf16; ops/cpu_matmul.h)
//                                                                                  vs reference bf16-activations
//   cpu-int8       KV cache with int8 activations in the decode steps' NVFP4 products, BF16 in the prefill's
//                  (cpu/nvfp4-int8, what generate runs by default)                 vs reference int8-activations
//   copy-modelopt  the model written as ModelOpt NVFP4 to a temporary directory    vs reference         identical
//   copy-dat       ... as `.dat` (needs tensor scales of 1, which .dat models have) vs copy-modelopt    identical
//   copy-bf16      ... as dense BF16 safetensors                                   vs reference         bf16-weights
//   cuda           on the CUDA device, full forward                                vs reference bf16-activations
//   cuda-eager     CUDA, KV cache, decode steps op by op                          vs cuda              bf16-activations
//   cuda-graph     CUDA, KV cache, decode steps replayed as one CUDA graph        vs cuda-eager        identical
//   cuda-dense     CUDA with the weights dequantized once to BF16 (cuda/dense-bf16) vs cpu-dense       bf16-activations
//   other          --other M2 on the CPU, full forward                            vs reference         other
// The tolerance classes and the measure are tools/logit_diff.h's. A path's logits with a NaN or inf fail its pair.
//
// Memory: one model is loaded at a time, the prompts run in groups of bounded logit size (max_logit_bytes), each path
// compares its logits ([T, V] F32 per prompt) as they are produced, and the logits a later path is judged against
// are kept in memory up to max_logit_bytes a path, beyond that (one prompt longer than the budget) in the scratch
// directory (tools/kept_logits.h); they are dropped once no pair needs them. The copies take the model's size (BF16: ~2
// bytes a parameter) in the temporary directory.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/files.h"
#include "io/model_files.h"
#include "tools/logit_diff.h"

namespace nvfp4lm {

struct ParityOptions {
  fs::path model;
  OpenModelOptions open;  // --config, --tokenizer (for the model; --other brings its own)
  std::optional<fs::path> other;
  std::vector<std::string> prompts;  // user messages; empty: default_parity_prompts()
  int64_t new_tokens = 8;            // >= 1
  LogitTolerances tolerances;
  std::optional<Device> cuda;  // the CUDA device whose paths run; nullopt: none
  std::string no_cuda_reason;  // why not, for the report ("--device cpu", "not built with CUDA", ...)
  fs::path temp_dir;           // parent of the copies' scratch directory; empty: the system's
  // The logits one path holds at a time: the prompts run in groups of about this size (at least one prompt each),
  // each group loading the models again. Peak memory is a few times this, whatever the number of prompts.
  int64_t max_logit_bytes = int64_t{256} << 20;
};

// Consecutive prompts [begin, end) whose logits ([tokens, vocab] F32 each) together fit max_logit_bytes, or one
// prompt alone when it does not fit by itself; the groups cover every prompt, in order.
struct ParityPromptGroup {
  size_t begin = 0, end = 0;
};
std::vector<ParityPromptGroup> parity_prompt_groups(const std::vector<int64_t>& prompt_tokens, int64_t vocab,
                                                    int64_t max_logit_bytes);

// English and Chinese questions.
std::vector<std::string> default_parity_prompts();

struct ParityPath {
  std::string name;         // "cpu-cache"
  std::string description;  // "KV cache: prompt prefill, then one token per step"
  std::string device;       // "cpu", "cuda:0 (emulated on the CPU)"
  std::string compute_path;
  std::string precision;
  std::string skipped;  // why it did not run ("" when it ran)
  double seconds = 0;   // loading and running every prompt
};

struct ParityPair {
  std::string path, against;
  ToleranceClass tolerance_class = ToleranceClass::Fp32;
  double tolerance = 0;
  LogitDiff diff;
  std::string token_text, reference_token_text;  // the argmaxes at diff.first_divergence, decoded
  bool pass() const { return diff.within(tolerance); }
};

struct ParityPrompt {
  std::string text;
  std::vector<int32_t> ids;  // prompt + continuation
  int64_t prompt_tokens = 0;
  std::vector<ParityPair> pairs;
};

struct ParityReport {
  std::string model;
  std::string other;
  std::vector<ParityPath> paths;
  std::vector<ParityPrompt> prompts;
  LogitTolerances tolerances;
  // "other vs reference (other, prompt 1): max |Δlogit| 3.1 > bound 1.2e-05", one per failed pair.
  std::vector<std::string> failures;
  bool pass() const { return failures.empty(); }
};

ParityReport run_parity(const ParityOptions& options);

// The report for people: the paths, then per prompt a table of pairs, then the verdict.
std::string parity_table(const ParityReport& report);
nlohmann::json parity_json(const ParityReport& report);

}  // namespace nvfp4lm
