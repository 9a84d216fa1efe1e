// parity's known-good baseline (the F# predecessor's artifacts/BASELINE_BRIDGE_SUCCESS.md, as a file a later run
// checks itself against): `parity --write-baseline FILE` records the prompts, their token ids (prompt + the reference's
// greedy continuation), and for every path that ran the top kBaselineTopK logits of each position, with the build
// (version, compiler, CPU and its kernels, GPUs), the device and compute path of each path and the model.
// `parity --baseline FILE` then runs the baseline's prompts over exactly its ids (teacher forcing, so positions line
// up), and says which prompts and paths moved and by how much: per path and prompt, max |Δlogit| at the baseline's
// top-k ids of each position against tolerance `baseline` x the baseline's largest logit, top-1 agreement and the
// first position whose argmax moved; and whether the reference's greedy continuation is still the baseline's. A path
// the baseline has that did not run now (or the reverse) is said, not judged.
//
// The file (JSON): {"nvfp4lm_parity_baseline": 1, "written": UTC time, "build": {...}, "model": ..., "new_tokens": N,
// "top_k": K, "paths": [{"name", "device", "compute_path", "precision"} | {"name", "skipped"}], "prompts": [{"text",
// "ids", "prompt_tokens", "logits": {PATH: [{"ids": [K], "logits": [K]} per position]}}]}. read_parity_baseline checks
// every field and names the file, the field and what was wrong.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/files.h"
#include "tools/parity.h"

namespace nvfp4lm {

inline constexpr int kBaselineTopK = 8;
inline constexpr int kBaselineVersion = 1;

// The K largest logits of one row (of ids [0, candidates)), largest first, ties to the lower id.
ParityTopK top_logits(const float* row, int64_t candidates, int k = kBaselineTopK);

// The baseline of a parity run (every path that ran, every prompt), with this build's description.
nlohmann::json parity_baseline_json(const ParityReport& report, int64_t new_tokens);
// Error naming `path`, the field and the problem for anything that is not such a file.
ParityBaseline read_parity_baseline(const fs::path& path);

// Judges report (a run with options.baseline set) against its baseline: fills report.baseline_moves and
// report.baseline_notes, and adds a failure line for each move over its bound and each greedy continuation that
// changed.
void judge_against_baseline(const ParityBaseline& baseline, double tolerance, ParityReport& report);

}  // namespace nvfp4lm
