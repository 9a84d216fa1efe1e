// DataLoader (data/data_loader.h): seeded shuffling, epochs, exact batch counts, and resuming from a saved
// position giving exactly the batches of the uninterrupted run.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/test_util.h"
#include "core/error.h"
#include "data/data_loader.h"

namespace nvfp4lm::test_loader {
namespace {

std::vector<Sample> synthetic_samples(int count, int max_length, uint64_t seed) {
  Rng rng(seed);
  std::vector<Sample> samples(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    Sample& s = samples[static_cast<size_t>(i)];
    const int length = 2 + static_cast<int>(rng.below(static_cast<uint64_t>(max_length - 1)));
    for (int t = 0; t < length; ++t) {
      s.ids.push_back(100 * (i + 1) + t);
      s.train_mask.push_back(t % 3 == 0 ? 0 : 1);
    }
    s.source_line = i + 1;
  }
  return samples;
}

DataLoaderOptions loader_options(bool packing, uint64_t seed = 11) {
  DataLoaderOptions options;
  options.batch_size = 3;
  options.seq_len = 32;
  options.packing = packing;
  options.seed = seed;
  options.pad_id = 0;
  return options;
}

std::vector<int32_t> values(const Tensor& t) {
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}

void expect_same_batch(const TokenBatch& a, const TokenBatch& b, const std::string& what) {
  EXPECT_EQ(a.ids.shape(), b.ids.shape()) << what;
  EXPECT_EQ(values(a.ids), values(b.ids)) << what;
  EXPECT_EQ(values(a.targets), values(b.targets)) << what;
  EXPECT_EQ(values(a.positions), values(b.positions)) << what;
  EXPECT_EQ(values(a.segment_ids), values(b.segment_ids)) << what;
  EXPECT_EQ(a.tokens_in_batch, b.tokens_in_batch) << what;
  EXPECT_EQ(a.sample_indices, b.sample_indices) << what;
  EXPECT_EQ(a.epoch, b.epoch) << what;
  EXPECT_EQ(a.ends_epoch, b.ends_epoch) << what;
}

TEST(DataLoader, EveryEpochVisitsEverySampleOnceInASeededOrder) {
  const std::vector<Sample> samples = synthetic_samples(40, 20, 1);
  DataLoader loader(samples, loader_options(true));
  DataLoader same(samples, loader_options(true));
  DataLoader other_seed(samples, loader_options(true, 12));
  std::vector<std::vector<int64_t>> visits(3);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const int64_t batches = loader.batches_in_epoch(epoch);
    for (int64_t b = 0; b < batches; ++b) {
      EXPECT_EQ(loader.epoch(), epoch);
      TokenBatch batch = loader.next_batch();
      expect_same_batch(batch, same.next_batch(), "same seed");
      EXPECT_EQ(batch.epoch, epoch);
      EXPECT_EQ(batch.ends_epoch, b + 1 == batches) << "epoch " << epoch << " batch " << b;
      EXPECT_EQ(batch.row_tokens(), 32);
      EXPECT_LE(batch.rows(), 3);
      if (!batch.ends_epoch) {
        EXPECT_EQ(batch.rows(), 3);
      }
      visits[static_cast<size_t>(epoch)].insert(visits[static_cast<size_t>(epoch)].end(), batch.sample_indices.begin(),
                                                batch.sample_indices.end());
    }
    EXPECT_EQ(visits[static_cast<size_t>(epoch)], loader.epoch_order(epoch));
    std::vector<int64_t> sorted = visits[static_cast<size_t>(epoch)];
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(samples.size());
    std::iota(all.begin(), all.end(), int64_t{0});
    EXPECT_EQ(sorted, all) << "epoch " << epoch << " is not a permutation";
  }
  EXPECT_EQ(loader.epoch(), 3);
  EXPECT_EQ(loader.next_sample(), 0);
  EXPECT_NE(visits[0], visits[1]);
  EXPECT_NE(loader.epoch_order(0), other_seed.epoch_order(0));
  EXPECT_EQ(loader.total_batches(3),
            loader.batches_in_epoch(0) + loader.batches_in_epoch(1) + loader.batches_in_epoch(2));
}

TEST(DataLoader, WithoutShufflingTheOrderIsTheFileOrder) {
  const std::vector<Sample> samples = synthetic_samples(10, 20, 2);
  DataLoaderOptions options = loader_options(false);
  options.shuffle = false;
  options.batch_size = 4;
  DataLoader loader(samples, options);
  std::vector<int64_t> expected(samples.size());
  std::iota(expected.begin(), expected.end(), int64_t{0});
  EXPECT_EQ(loader.epoch_order(0), expected);
  EXPECT_EQ(loader.epoch_order(5), expected);
  EXPECT_EQ(loader.batches_in_epoch(0), 3);
  TokenBatch first = loader.next_batch();
  EXPECT_EQ(first.sample_indices, (std::vector<int64_t>{0, 1, 2, 3}));
  int64_t longest = 0;
  for (int i = 0; i < 4; ++i) longest = std::max<int64_t>(longest, samples[static_cast<size_t>(i)].ids.size());
  EXPECT_EQ(first.row_tokens(), longest);  // padded to the longest of the batch
  loader.next_batch();
  TokenBatch last = loader.next_batch();
  EXPECT_EQ(last.rows(), 2);
  EXPECT_TRUE(last.ends_epoch);

  options.pad_to_seq_len = true;
  DataLoader padded(samples, options);
  EXPECT_EQ(padded.next_batch().row_tokens(), 32);
}

void check_resume(bool packing) {
  const std::vector<Sample> samples = synthetic_samples(packing ? 23 : 11, 24, 3);
  DataLoader uninterrupted(samples, loader_options(packing));
  ASSERT_LT(uninterrupted.batches_in_epoch(0), 7) << "the test should cross an epoch boundary";
  std::vector<TokenBatch> reference;
  for (int i = 0; i < 10; ++i) reference.push_back(uninterrupted.next_batch());

  for (int stop : {5, static_cast<int>(uninterrupted.batches_in_epoch(0))}) {
    DataLoader first_run(samples, loader_options(packing));
    for (int i = 0; i < stop; ++i) expect_same_batch(first_run.next_batch(), reference[static_cast<size_t>(i)], "run");
    // Through text, as a checkpoint stores it.
    const std::string saved = first_run.state().dump();
    DataLoader resumed(samples, loader_options(packing));
    resumed.restore(nlohmann::json::parse(saved));
    EXPECT_EQ(resumed.epoch(), first_run.epoch());
    EXPECT_EQ(resumed.next_sample(), first_run.next_sample());
    for (int i = stop; i < 10; ++i) {
      expect_same_batch(resumed.next_batch(), reference[static_cast<size_t>(i)],
                        fmt::format("packing {} stop {} batch {}", packing, stop, i));
    }
  }
}

TEST(DataLoader, ResumedRunSeesTheSameBatchesPacked) { check_resume(true); }
TEST(DataLoader, ResumedRunSeesTheSameBatchesUnpacked) { check_resume(false); }

TEST(DataLoader, RestoreRefusesADifferentRun) {
  const std::vector<Sample> samples = synthetic_samples(12, 20, 4);
  DataLoader loader(samples, loader_options(true));
  loader.next_batch();
  const nlohmann::json state = loader.state();
  EXPECT_EQ(state["format"], "nvfp4lm-data-position");

  std::vector<Sample> changed = samples;
  changed[3].ids[1] += 1;
  DataLoader other_data(changed, loader_options(true));
  EXPECT_THROW(other_data.restore(state), Error);
  DataLoader fewer(std::vector<Sample>(samples.begin(), samples.end() - 1), loader_options(true));
  EXPECT_THROW(fewer.restore(state), Error);
  DataLoader other_seed(samples, loader_options(true, 99));
  EXPECT_THROW(other_seed.restore(state), Error);

  nlohmann::json broken = state;
  broken["next_sample"] = 13;
  DataLoader target(samples, loader_options(true));
  EXPECT_THROW(target.restore(broken), Error);
  broken = state;
  broken.erase("epoch");
  EXPECT_THROW(target.restore(broken), Error);
  broken = state;
  broken["epoch"] = "one";
  EXPECT_THROW(target.restore(broken), Error);
  EXPECT_THROW(target.restore(nlohmann::json::array()), Error);

  // Another batch size continues from the same sample (with a warning).
  DataLoaderOptions bigger = loader_options(true);
  bigger.batch_size = 5;
  DataLoader reshaped(samples, bigger);
  reshaped.restore(state);
  EXPECT_EQ(reshaped.next_sample(), loader.next_sample());
}

TEST(DataLoader, RejectsBadOptionsAndSamples) {
  const std::vector<Sample> samples = synthetic_samples(4, 20, 5);
  DataLoaderOptions options = loader_options(true);
  options.seq_len = 8;
  try {
    DataLoader loader(samples, options);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len = 8"), std::string::npos) << e.what();
  }
  options = loader_options(true);
  options.pad_id = -1;
  EXPECT_THROW((DataLoader{samples, options}), Error);
  options = loader_options(true);
  options.batch_size = 0;
  EXPECT_THROW((DataLoader{samples, options}), Error);
  EXPECT_THROW((DataLoader{std::vector<Sample>{}, loader_options(true)}), Error);
}

}  // namespace
}  // namespace nvfp4lm::test_loader
