// DataLoader: epochs of seeded-shuffled samples cut into batches (batch.h), with a position that can be saved
// in a checkpoint and restored so a resumed run sees exactly the batches the uninterrupted run would have.
//
// Order: epoch e visits the samples in a permutation drawn by Fisher-Yates from Rng(epoch_seed(seed, e))
// (core/rng.h), or in file order without shuffling. Each epoch's generator is derived from (seed, e) instead of
// continuing one stream, so any epoch's order — and so its exact number of batches — can be computed on its own,
// and the saved position needs no generator state beyond the seed.
//
// Batches: next_batch() takes up to batch_size rows from the current epoch (packing or one sample a row, see
// batch.h); the last batch of an epoch may have fewer rows. An epoch never borrows samples from the next one.
// After the last batch of epoch e the position is (e + 1, 0). The loader runs forever; the training loop stops
// it (by epochs via TokenBatch::ends_epoch, or by steps).
//
// Saved position (state()/restore()), a JSON object:
//   {"format": "nvfp4lm-data-position", "epoch": e, "next_sample": i, "seed": s, "shuffle": true,
//    "samples": N, "fingerprint": "<xxh64 of every sample's ids and mask, 16 hex digits>",
//    "batch_size": B, "seq_len": T, "packing": true}
// where i indexes epoch e's order. restore() refuses (Error) a position whose data (samples, fingerprint) or
// order (seed, shuffle) differs from this loader's, since it would not continue the same run; a different
// batch_size / seq_len / packing is allowed with a warning (the run continues from the same sample, but the
// batches are not those of the original run).
// The training loop stores state() as trainer_state.json's "data_position" (train/checkpoint.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/sample.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

struct DataLoaderOptions {
  int64_t batch_size = 1;       // rows per batch
  int64_t seq_len = 0;          // tokens per row (packing), the longest row otherwise; every sample must fit
  bool packing = true;          // false: one sample a row
  bool pad_to_seq_len = false;  // without packing: pad every row to seq_len instead of the batch's longest
  bool shuffle = true;
  uint64_t seed = 0;
  int32_t pad_id = -1;  // required; default_pad_id(tokenizer)
  // > 1: samples come in groups of this many consecutive ones that stay together (preference pairs: chosen,
  // rejected): the shuffle permutes whole groups, and batches hold whole groups (one sample a row, so packing off
  // and batch_size a multiple of group).
  int64_t group = 1;
};

// The token padding is filled with: pad_token, else <|endoftext|>, else eos. Error when the tokenizer has none.
int32_t default_pad_id(const Tokenizer& tokenizer);

// The seed of epoch `epoch`'s permutation generator.
uint64_t epoch_seed(uint64_t seed, int64_t epoch);

class DataLoader {
 public:
  // Error when the options are out of range or a sample is empty or longer than seq_len (naming its line).
  DataLoader(std::vector<Sample> samples, const DataLoaderOptions& options);

  TokenBatch next_batch();

  int64_t epoch() const { return epoch_; }              // epoch of the next batch = epochs completed
  int64_t next_sample() const { return next_sample_; }  // index into epoch()'s order of the next sample

  // Exact number of batches of any epoch (packing depends on the order, so epochs can differ slightly).
  int64_t batches_in_epoch(int64_t epoch) const;
  // Sum of batches_in_epoch over epochs 0..epochs-1 (e.g. total optimizer steps for an LR schedule).
  int64_t total_batches(int64_t epochs) const;
  // Sample indices in the order epoch `epoch` visits them.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  // Moves to the first batch of `epoch`, leaving the rest of the current one (train --steps-per-epoch); nothing
  // when `epoch` is the current epoch. Going back is an internal error.
  void start_epoch(int64_t epoch);

  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

  const std::vector<Sample>& samples() const { return samples_; }
  const DataLoaderOptions& options() const { return options_; }
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  size_t fill_rows(const std::vector<int64_t>& order, size_t begin, std::vector<std::vector<int64_t>>& rows) const;
  const std::vector<int64_t>& current_order();

  std::vector<Sample> samples_;
  DataLoaderOptions options_;
  std::string fingerprint_;
  int64_t epoch_ = 0;
  int64_t next_sample_ = 0;
  int64_t order_epoch_ = -1;  // epoch order_ belongs to (-1: none yet)
  std::vector<int64_t> order_;
};

}  // namespace nvfp4lm
