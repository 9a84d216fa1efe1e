// See data_loader.h for the order, batch and saved-position conventions.
#include "data/data_loader.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/logging.h"
#include "core/rng.h"
#include "io/checksum.h"

namespace nvfp4lm {
namespace {

constexpr const char* kPositionFormat = "nvfp4lm-data-position";

std::string samples_fingerprint(const std::vector<Sample>& samples) {
  Xxh64 hash;
  for (const Sample& sample : samples) {
    const auto length = static_cast<uint64_t>(sample.ids.size());
    hash.update(&length, sizeof(length));
    hash.update(sample.ids.data(), sample.ids.size() * sizeof(int32_t));
    hash.update(sample.train_mask.data(), sample.train_mask.size());
  }
  return checksum_hex(hash.digest());
}

// state[key] as T; Error naming the key when it is missing or of another type.
template <typename T>
T field(const nlohmann::json& state, const char* key) {
  auto it = state.find(key);
  NVFP4LM_CHECK(it != state.end(), "data position: missing \"{}\"", key);
  if constexpr (std::is_same_v<T, bool>) {
    NVFP4LM_CHECK(it->is_boolean(), "data position: \"{}\" is {}, expected true/false", key, it->type_name());
  } else if constexpr (std::is_same_v<T, std::string>) {
    NVFP4LM_CHECK(it->is_string(), "data position: \"{}\" is {}, expected a string", key, it->type_name());
  } else if constexpr (std::is_unsigned_v<T>) {
    NVFP4LM_CHECK(it->is_number_unsigned(), "data position: \"{}\" is {}, expected an unsigned integer", key,
                  it->dump());
  } else {
    NVFP4LM_CHECK(it->is_number_integer(), "data position: \"{}\" is {}, expected an integer", key, it->dump());
  }
  return it->get<T>();
}

}  // namespace

int32_t default_pad_id(const Tokenizer& tokenizer) {
  const SpecialTokenIds& special = tokenizer.special_ids();
  for (int32_t id : {special.pad, special.endoftext, special.eos}) {
    if (id >= 0) return id;
  }
  NVFP4LM_FAIL("tokenizer {} has no pad, <|endoftext|> or eos token to pad batches with", tokenizer.origin());
}

uint64_t epoch_seed(uint64_t seed, int64_t epoch) { return mix64(seed ^ mix64(static_cast<uint64_t>(epoch))); }

DataLoader::DataLoader(std::vector<Sample> samples, const DataLoaderOptions& options)
    : samples_(std::move(samples)), options_(options) {
  NVFP4LM_CHECK(!samples_.empty(), "data loader: no samples");
  NVFP4LM_CHECK(options_.batch_size >= 1, "data loader: batch size {} must be at least 1", options_.batch_size);
  NVFP4LM_CHECK(options_.seq_len >= 2, "data loader: seq_len {} must be at least 2", options_.seq_len);
  NVFP4LM_CHECK(options_.pad_id >= 0, "data loader: pad id {} is not a token id", options_.pad_id);
  for (const Sample& sample : samples_) {
    NVFP4LM_CHECK(sample.train_mask.size() == sample.ids.size(), "sample from line {}: {} mask entries for {} ids",
                  sample.source_line, sample.train_mask.size(), sample.ids.size());
    NVFP4LM_CHECK(!sample.ids.empty() && static_cast<int64_t>(sample.ids.size()) <= options_.seq_len,
                  "sample from line {} has {} tokens; rows hold 1..seq_len = {} (read the dataset with max_tokens = "
                  "seq_len)",
                  sample.source_line, sample.ids.size(), options_.seq_len);
  }
  NVFP4LM_CHECK(options_.group >= 1 && samples_.size() % static_cast<size_t>(options_.group) == 0 &&
                    (options_.group == 1 || (!options_.packing && options_.batch_size % options_.group == 0)),
                "data loader: groups of {} need a sample count ({}) and batch size ({}) that are multiples of it, and "
                "one sample a row",
                options_.group, samples_.size(), options_.batch_size);
  fingerprint_ = samples_fingerprint(samples_);
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const auto group = static_cast<size_t>(options_.group);
  std::vector<int64_t> groups(samples_.size() / group);
  std::iota(groups.begin(), groups.end(), int64_t{0});
  if (options_.shuffle) {
    Rng rng(epoch_seed(options_.seed, epoch));
    for (size_t i = groups.size(); i > 1; --i) std::swap(groups[i - 1], groups[rng.below(i)]);
  }
  if (group == 1) return groups;
  std::vector<int64_t> order;
  order.reserve(samples_.size());
  for (int64_t g : groups)
    for (size_t k = 0; k < group; ++k) order.push_back(g * static_cast<int64_t>(group) + static_cast<int64_t>(k));
  return order;
}

const std::vector<int64_t>& DataLoader::current_order() {
  if (order_epoch_ != epoch_) {
    order_ = epoch_order(epoch_);
    order_epoch_ = epoch_;
  }
  return order_;
}

size_t DataLoader::fill_rows(const std::vector<int64_t>& order, size_t begin,
                             std::vector<std::vector<int64_t>>& rows) const {
  return options_.packing ? pack_rows(samples_, order, begin, options_.seq_len, options_.batch_size, rows)
                          : single_rows(samples_, order, begin, options_.seq_len, options_.batch_size, rows);
}

TokenBatch DataLoader::next_batch() {
  const auto count = static_cast<int64_t>(samples_.size());
  if (next_sample_ >= count) {
    ++epoch_;
    next_sample_ = 0;
  }
  const std::vector<int64_t>& order = current_order();
  std::vector<std::vector<int64_t>> rows;
  const size_t next = fill_rows(order, static_cast<size_t>(next_sample_), rows);
  int64_t row_tokens = options_.seq_len;
  if (!options_.packing && !options_.pad_to_seq_len) {
    row_tokens = 0;
    for (const auto& row : rows) row_tokens = std::max<int64_t>(row_tokens, samples_[row[0]].ids.size());
  }
  TokenBatch batch = assemble_batch(samples_, rows, row_tokens, options_.pad_id);
  batch.epoch = epoch_;
  next_sample_ = static_cast<int64_t>(next);
  if (next_sample_ == count) {
    batch.ends_epoch = true;
    ++epoch_;
    next_sample_ = 0;
  }
  return batch;
}

int64_t DataLoader::batches_in_epoch(int64_t epoch) const {
  const std::vector<int64_t> order = epoch_order(epoch);
  int64_t batches = 0;
  std::vector<std::vector<int64_t>> rows;
  for (size_t next = 0; next < order.size(); ++batches) {
    rows.clear();
    next = fill_rows(order, next, rows);
  }
  return batches;
}

int64_t DataLoader::total_batches(int64_t epochs) const {
  int64_t total = 0;
  for (int64_t e = 0; e < epochs; ++e) total += batches_in_epoch(e);
  return total;
}

void DataLoader::start_epoch(int64_t epoch) {
  NVFP4LM_ASSERT(epoch >= epoch_, "DataLoader::start_epoch({}) goes back from epoch {}", epoch, epoch_);
  if (epoch == epoch_) return;
  epoch_ = epoch;
  next_sample_ = 0;
}

nlohmann::json DataLoader::state() const {
  return {{"format", kPositionFormat},   {"epoch", epoch_},
          {"next_sample", next_sample_}, {"seed", options_.seed},
          {"shuffle", options_.shuffle}, {"samples", static_cast<int64_t>(samples_.size())},
          {"fingerprint", fingerprint_}, {"batch_size", options_.batch_size},
          {"seq_len", options_.seq_len}, {"packing", options_.packing}};
}

void DataLoader::restore(const nlohmann::json& state) {
  NVFP4LM_CHECK(state.is_object(), "data position: expected a JSON object, got {}", state.type_name());
  NVFP4LM_CHECK(field<std::string>(state, "format") == kPositionFormat, "data position: \"format\" is not \"{}\"",
                kPositionFormat);
  const auto samples = field<int64_t>(state, "samples");
  const auto fingerprint = field<std::string>(state, "fingerprint");
  NVFP4LM_CHECK(samples == static_cast<int64_t>(samples_.size()) && fingerprint == fingerprint_,
                "data position: saved for a dataset of {} samples (fingerprint {}), but this one has {} (fingerprint "
                "{}); resume with the same data file and data options (seq_len, template, ...)",
                samples, fingerprint, samples_.size(), fingerprint_);
  const auto seed = field<uint64_t>(state, "seed");
  const auto shuffle = field<bool>(state, "shuffle");
  NVFP4LM_CHECK(seed == options_.seed && shuffle == options_.shuffle,
                "data position: saved with seed {} and shuffle {}, but this run has seed {} and shuffle {}; the "
                "sample order would differ",
                seed, shuffle, options_.seed, options_.shuffle);
  const auto epoch = field<int64_t>(state, "epoch");
  const auto next_sample = field<int64_t>(state, "next_sample");
  NVFP4LM_CHECK(epoch >= 0 && next_sample >= 0 && next_sample <= samples,
                "data position: epoch {} / next_sample {} out of range for {} samples", epoch, next_sample, samples);
  const auto batch_size = field<int64_t>(state, "batch_size");
  const auto seq_len = field<int64_t>(state, "seq_len");
  const auto packing = field<bool>(state, "packing");
  if (batch_size != options_.batch_size || seq_len != options_.seq_len || packing != options_.packing) {
    log::warn(
        "data position: saved with batch size {}, seq_len {}, packing {}; continuing from the same sample with "
        "batch size {}, seq_len {}, packing {} (batches differ from the original run)",
        batch_size, seq_len, packing, options_.batch_size, options_.seq_len, options_.packing);
  }
  epoch_ = epoch;
  next_sample_ = next_sample;
}

}  // namespace nvfp4lm
