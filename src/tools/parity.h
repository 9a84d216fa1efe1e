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
//   copy-compressed-tensors  ... as compressed-tensors NVFP4 (tensor scales stored as 1/x)  vs copy-modelopt
//                  identical, or fp32 when a tensor scale is no float's reciprocal (it moves by one ulp)
//   copy-dat       ... as `.dat` (needs tensor scales of 1, which .dat models have) vs copy-modelopt    identical
//   copy-bf16      ... as dense BF16 safetensors                                   vs reference         bf16-weights
//   cuda           on the CUDA device, full forward                                vs reference bf16-activations
//   cuda-eager     CUDA, KV cache, decode steps op by op                          vs cuda              bf16-activations
//   cuda-graph     CUDA, KV cache, decode steps replayed as one CUDA graph        vs cuda-eager        identical
//   cuda-dense     CUDA with the weights dequantized once to BF16 (cuda/dense-bf16) vs cpu-dense       bf16-activations
//   train-export   the model as `train` starts from it (Qwen3Trainable's masters: an NVFP4 model's weights
//                  dequantized), exported as `train --export` writes it (ModelOpt NVFP4, QAT's group tensor scales)
//                  to a temporary directory, full forward  vs reference (NVFP4 models only: a dense model's QAT
//                  forward is NVFP4, which it is not)                                                  requantized
//   train-forward  the QAT forward training computes (w4a16; Qwen3Trainable::logits), on the CPU
//                                                                                  vs train-export      fp32
//   train-cuda     ... on the CUDA device                                           vs train-forward bf16-activations
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
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/files.h"
#include "io/model_files.h"
#include "tools/logit_diff.h"

namespace nvfp4lm {

struct ParityBaseline;

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
  // The training paths (train-export, train-forward, train-cuda): they hold the model as training does (F32 masters
  // and the forward's weights: ~8 bytes a parameter on the CPU).
  bool train_forward = true;
  // The logits one path holds at a time: the prompts run in groups of about this size (at least one prompt each),
  // each group loading the models again. Peak memory is a few times this, whatever the number of prompts.
  int64_t max_logit_bytes = int64_t{256} << 20;
  // A baseline to check against (tools/parity_baseline.h): its prompts over its ids replace `prompts`.
  const ParityBaseline* baseline = nullptr;
  // Record each path's top logits per position (ParityPrompt::top_logits), for --write-baseline.
  bool record_top_logits = false;
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

// One position's largest logits, largest first (tools/parity_baseline.h).
struct ParityTopK {
  std::vector<int32_t> ids;
  std::vector<float> logits;
};

struct ParityPrompt {
  std::string text;
  std::vector<int32_t> ids;  // prompt + continuation
  int64_t prompt_tokens = 0;
  std::vector<ParityPair> pairs;
  // With record_top_logits, per path that ran: each position's top logits (what a baseline records); with a
  // baseline, per path the baseline has that ran: the logits at the baseline's top ids of each position.
  std::map<std::string, std::vector<ParityTopK>> top_logits;
  std::map<std::string, std::vector<std::vector<float>>> at_baseline_ids;
  // With a baseline: the reference's greedy continuation now (the baseline's ids are what every path ran over).
  std::vector<int32_t> greedy_now;
  int64_t greedy_moved_at = -1;  // the first generated token where it differs from the baseline's (-1: none)
};

// A baseline read back (tools/parity_baseline.h).
struct ParityBaseline {
  fs::path file;
  nlohmann::json build;
  std::string written, model;
  int64_t new_tokens = 0;
  nlohmann::json paths;  // as written: each path's name, device and compute path, or why it was skipped
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
    int64_t prompt_tokens = 0;
    std::map<std::string, std::vector<ParityTopK>> logits;
  };
  std::vector<Prompt> prompts;
};

// How far one path moved on one prompt since the baseline.
struct BaselineMove {
  std::string path;
  size_t prompt = 0;
  int64_t positions = 0;
  double max_abs_diff = 0;      // at the baseline's top ids
  double max_abs_baseline = 0;  // the baseline's largest |logit| there
  double bound = 0;
  int64_t top1_agree = 0;
  int64_t first_divergence = -1;  // first position whose argmax (among the baseline's top ids) moved
  bool pass = true;
};

struct ParityReport {
  std::string model;
  std::string other;
  std::vector<ParityPath> paths;
  std::vector<ParityPrompt> prompts;
  LogitTolerances tolerances;
  // With a baseline (ParityOptions::baseline): what moved, and what could not be compared.
  std::string baseline_file;
  std::vector<BaselineMove> baseline_moves;
  std::vector<std::string> baseline_notes;
  // "other vs reference (other, prompt 1): max |Δlogit| 3.1 > bound 1.2e-05", one per failed pair.
  std::vector<std::string> failures;
  bool pass() const { return failures.empty(); }
};

ParityReport run_parity(const ParityOptions& options);

// The report for people: the paths, then per prompt a table of pairs, then the verdict.
std::string parity_table(const ParityReport& report);
nlohmann::json parity_json(const ParityReport& report);

}  // namespace nvfp4lm
