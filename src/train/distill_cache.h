// A teacher's top-K token distribution precomputed once for a data set (`nvfp4lm distill-cache`), so that a
// distilling run (`train --distill-from CACHE`) needs no teacher in memory and no teacher forward per step: when the
// BF16 teacher and the student do not fit on the device together, or the same teacher serves many runs.
//
// The approximation: at every trained token the cache keeps the teacher's K most likely tokens and the probability
// of all the others together (at the cache's temperature), and training compares the student with it over those
// K + 1 outcomes (ops/distillation.h lm_head_distillation_topk): exact when the K carry all the teacher's mass,
// otherwise a lower bound of KL(teacher ‖ student) that leaves the shape of the student's tail free.
//
// Keys: the teacher's distribution at a token depends only on the sample it belongs to (attention stays inside a
// sample and positions restart at 0 in each), so the cache is keyed by sample content, not by batch or order:
// sample_key = xxh64 of the sample's token ids, then its targets (I32, as a batch holds them). Packing, shuffling,
// --batch, epochs and --eval-split's held-out samples all find their entries, and a sample the cache lacks is an
// Error naming the fix. Identical samples share one entry.
//
// File: safetensors (io/safetensors_reader.h), readable by any safetensors library:
//   ids I32 [P, K], log_probs F32 [P, K], log_rest F32 [P]   (TeacherTopK, P = the positions of all samples)
//   targets I32 [P]                                           (each position's target token, checked when read)
//   sample_keys I64 [S], sample_offsets I64 [S + 1]           (sample s holds positions offsets[s] .. offsets[s+1])
//   __metadata__: format "nvfp4lm-teacher-top-k", version "1", teacher, vocab, top_k, temperature, samples,
//                 positions, data
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "core/tensor.h"
#include "model/qwen3_trainable.h"

namespace nvfp4lm {

namespace fs = std::filesystem;

class SafetensorsFile;

inline constexpr const char* kDistillCacheFormat = "nvfp4lm-teacher-top-k";
inline constexpr int64_t kDefaultDistillTopK = 32;

// The samples of a batch (host tensors) that have trained targets, in row-major order: where each one lies and its
// key.
struct BatchSample {
  int64_t row = 0, begin = 0, end = 0;  // tokens [begin, end) of row `row`
  int64_t trained = 0;                  // targets other than -100
  uint64_t key = 0;
};
std::vector<BatchSample> trained_samples(const TrainBatch& batch);

// True when `path` is a file whose safetensors metadata names kDistillCacheFormat (a model is never one).
bool is_distill_cache(const fs::path& path);

struct DistillCacheInfo {
  fs::path path;
  std::string teacher;  // the model it was made from, as given
  std::string data;     // the data file(s) it was made from, for messages
  int64_t vocab = 0;
  int64_t top_k = 0;
  double temperature = 1.0;
  int64_t samples = 0;
  int64_t positions = 0;
};

class DistillCache {
 public:
  // Maps the file and checks its metadata and index (Error naming the file and what is wrong).
  static DistillCache open(const fs::path& path);

  const DistillCacheInfo& info() const { return info_; }

  // Fills batch.teacher_top_k (CPU) from the cache for every trained target of the batch in row order. Error when a
  // sample is not in the cache or its targets differ: the cache was made from other data or other data flags.
  void attach(TrainBatch& batch) const;
  // The same Errors without copying anything: every trained sample of the batch is in the cache.
  void check_covers(const TrainBatch& batch) const;

 private:
  // The first position of the sample in the cache; Error when it is missing or has another number of positions.
  int64_t first_position(const BatchSample& sample) const;

  DistillCacheInfo info_;
  std::shared_ptr<SafetensorsFile> file_;
  Tensor ids_, log_probs_, log_rest_, targets_, offsets_;
  std::unordered_map<uint64_t, int64_t> sample_of_key_;
};

struct DistillCacheWriteOptions {
  fs::path output;
  int64_t top_k = kDefaultDistillTopK;
  float temperature = 1.0f;
  bool overwrite = false;
  std::string teacher;  // metadata only
  std::string data;     // metadata only
};

struct DistillCacheProgress {
  int64_t batches_done = 0, batches_total = 0;
  int64_t positions_done = 0, positions_total = 0;
};

struct DistillCacheStats {
  int64_t samples = 0;     // distinct samples written
  int64_t positions = 0;   // their trained targets
  int64_t duplicates = 0;  // samples seen again (one entry serves all)
  double mean_rest = 0;    // the teacher's mean probability outside the K: what the cache leaves out
  uint64_t bytes = 0;      // file size
};

// Runs the frozen `teacher` over `batches` (host tensors) and writes the cache: for each new sample the teacher's
// final hidden state, its lm_head logits in F32 (on the teacher's device, in chunks of rows), the top K on the host
// (ops/distillation.h select_teacher_top_k). The file appears complete or not at all (written beside, renamed).
DistillCacheStats write_distill_cache(Qwen3Trainable& teacher, std::span<const TrainBatch> batches,
                                      const DistillCacheWriteOptions& options,
                                      const std::function<void(const DistillCacheProgress&)>& progress = {});

}  // namespace nvfp4lm
