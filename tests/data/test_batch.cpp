// Row layout and batch tensors (data/batch.h) on synthetic samples whose token ids are all distinct, so
// every token can be traced back to its sample: packing invariants (rows exactly seq_len, positions restart,
// segments distinct, targets never cross a sample, nothing lost or duplicated) and the no-packing layout.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "common/test_util.h"
#include "core/error.h"
#include "data/batch.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm::test_batch {
namespace {

constexpr int32_t kPad = 999999;

// `count` samples of 2..max_length tokens; ids are 1000 * (index + 1) + t (unique); random masks with at least
// one trained token.
std::vector<Sample> synthetic_samples(int count, int max_length, uint64_t seed) {
  Rng rng(seed);
  std::vector<Sample> samples(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    Sample& s = samples[static_cast<size_t>(i)];
    const int length = 2 + static_cast<int>(rng.below(static_cast<uint64_t>(max_length - 1)));
    for (int t = 0; t < length; ++t) {
      s.ids.push_back(1000 * (i + 1) + t);
      s.train_mask.push_back(rng.uniform() < 0.6f ? 1 : 0);
    }
    s.train_mask[static_cast<size_t>(length - 1)] = 1;
    s.source_line = i + 1;
  }
  return samples;
}

std::vector<int32_t> row_values(const Tensor& t, int64_t row) {
  const int32_t* data = t.data<int32_t>() + row * t.dim(1);
  return std::vector<int32_t>(data, data + t.dim(1));
}

// Checks every invariant of batch.h for `batch` built from `samples`; returns the sample indices seen.
void check_batch(const std::vector<Sample>& samples, const TokenBatch& batch, int64_t expected_row_tokens) {
  ASSERT_EQ(batch.ids.dtype(), DType::I32);
  ASSERT_EQ(batch.targets.shape(), batch.ids.shape());
  ASSERT_EQ(batch.positions.shape(), batch.ids.shape());
  ASSERT_EQ(batch.segment_ids.shape(), batch.ids.shape());
  EXPECT_EQ(batch.row_tokens(), expected_row_tokens);
  int64_t trained = 0, padding = 0;
  std::map<int32_t, int64_t> segment_rows;  // segment id -> row it appears in
  size_t next_sample = 0;
  for (int64_t r = 0; r < batch.rows(); ++r) {
    const auto ids = row_values(batch.ids, r), targets = row_values(batch.targets, r);
    const auto positions = row_values(batch.positions, r), segments = row_values(batch.segment_ids, r);
    int64_t t = 0;
    while (t < expected_row_tokens) {
      const int32_t segment = segments[static_cast<size_t>(t)];
      auto [it, inserted] = segment_rows.emplace(segment, r);
      EXPECT_TRUE(inserted) << "segment " << segment << " appears twice (row " << r << ")";
      int64_t end = t;
      while (end < expected_row_tokens && segments[static_cast<size_t>(end)] == segment) ++end;
      const bool is_padding = ids[static_cast<size_t>(t)] == kPad;
      if (is_padding) {
        EXPECT_EQ(end, expected_row_tokens) << "padding must be the row's tail";
        for (int64_t k = t; k < end; ++k) {
          EXPECT_EQ(ids[static_cast<size_t>(k)], kPad);
          EXPECT_EQ(targets[static_cast<size_t>(k)], kIgnoreIndex);
          EXPECT_EQ(positions[static_cast<size_t>(k)], k - t);
        }
        padding += end - t;
      } else {
        ASSERT_LT(next_sample, batch.sample_indices.size());
        const Sample& sample = samples[static_cast<size_t>(batch.sample_indices[next_sample++])];
        ASSERT_EQ(static_cast<size_t>(end - t), sample.ids.size()) << "a sample must be one whole segment";
        const std::vector<int32_t> expected_targets = next_token_targets(sample);
        for (int64_t k = t; k < end; ++k) {
          const size_t i = static_cast<size_t>(k - t);
          EXPECT_EQ(ids[static_cast<size_t>(k)], sample.ids[i]);
          EXPECT_EQ(positions[static_cast<size_t>(k)], static_cast<int32_t>(i)) << "positions restart per sample";
          EXPECT_EQ(targets[static_cast<size_t>(k)], expected_targets[i]);
          const int32_t target = targets[static_cast<size_t>(k)];
          if (target != kIgnoreIndex) {
            ++trained;
            // Never crosses a boundary: the target is the next token of the same segment.
            ASSERT_LT(k + 1, end);
            EXPECT_EQ(target, ids[static_cast<size_t>(k + 1)]);
          }
        }
      }
      t = end;
    }
  }
  EXPECT_EQ(next_sample, batch.sample_indices.size());
  EXPECT_EQ(batch.tokens_in_batch, trained);
  EXPECT_EQ(batch.padding_tokens, padding);
}

TEST(DataBatch, PackedRowsKeepEverySampleWholeAndSeparate) {
  const int64_t seq_len = 64;
  const std::vector<Sample> samples = synthetic_samples(200, 40, 7);
  std::vector<int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), int64_t{0});

  std::multiset<int32_t> seen;
  int64_t batches = 0;
  for (size_t next = 0; next < order.size(); ++batches) {
    std::vector<std::vector<int64_t>> rows;
    const size_t after = pack_rows(samples, order, next, seq_len, 4, rows);
    ASSERT_GT(after, next);
    EXPECT_TRUE(rows.size() == 4 || after == order.size());
    // Greedy in order: the row's samples are consecutive in the order, and the next sample did not fit.
    size_t expected_index = next;
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t used = 0;
      for (int64_t index : rows[r]) {
        EXPECT_EQ(index, order[expected_index++]);
        used += static_cast<int64_t>(samples[static_cast<size_t>(index)].ids.size());
      }
      EXPECT_LE(used, seq_len);
      if (expected_index < order.size()) {
        EXPECT_GT(used + static_cast<int64_t>(samples[static_cast<size_t>(order[expected_index])].ids.size()), seq_len);
      }
    }
    EXPECT_EQ(expected_index, after);
    TokenBatch batch = assemble_batch(samples, rows, seq_len, kPad);
    check_batch(samples, batch, seq_len);
    for (int64_t i = 0; i < batch.ids.numel(); ++i) {
      if (batch.ids.data<int32_t>()[i] != kPad) seen.insert(batch.ids.data<int32_t>()[i]);
    }
    next = after;
  }
  // No token lost or duplicated.
  std::multiset<int32_t> all;
  for (const Sample& s : samples) all.insert(s.ids.begin(), s.ids.end());
  EXPECT_EQ(seen, all);
  EXPECT_GT(batches, 10);
}

TEST(DataBatch, AHandBuiltPackedRow) {
  Sample a{{10, 11, 12}, {0, 1, 1}, 1};
  Sample b{{20, 21}, {0, 1}, 2};
  Sample c{{30, 31, 32, 33}, {1, 0, 1, 1}, 3};
  const std::vector<Sample> samples = {a, b, c};
  const std::vector<int64_t> order = {0, 1, 2};
  std::vector<std::vector<int64_t>> rows;
  EXPECT_EQ(pack_rows(samples, order, 0, 8, 8, rows), 3u);
  ASSERT_EQ(rows, (std::vector<std::vector<int64_t>>{{0, 1}, {2}}));
  TokenBatch batch = assemble_batch(samples, rows, 8, kPad);
  const int32_t ig = kIgnoreIndex;
  EXPECT_EQ(row_values(batch.ids, 0), (std::vector<int32_t>{10, 11, 12, 20, 21, kPad, kPad, kPad}));
  EXPECT_EQ(row_values(batch.targets, 0), (std::vector<int32_t>{11, 12, ig, 21, ig, ig, ig, ig}));
  EXPECT_EQ(row_values(batch.positions, 0), (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 2}));
  EXPECT_EQ(row_values(batch.segment_ids, 0), (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 2}));
  EXPECT_EQ(row_values(batch.ids, 1), (std::vector<int32_t>{30, 31, 32, 33, kPad, kPad, kPad, kPad}));
  EXPECT_EQ(row_values(batch.targets, 1), (std::vector<int32_t>{ig, 32, 33, ig, ig, ig, ig, ig}));
  EXPECT_EQ(row_values(batch.segment_ids, 1), (std::vector<int32_t>{3, 3, 3, 3, 4, 4, 4, 4}));
  EXPECT_EQ(batch.tokens_in_batch, 5);
  EXPECT_EQ(batch.padding_tokens, 7);
  EXPECT_EQ(batch.sample_indices, (std::vector<int64_t>{0, 1, 2}));
}

TEST(DataBatch, ExactlyFullRowHasNoPaddingSegment) {
  const std::vector<Sample> samples = {Sample{{1, 2, 3}, {1, 1, 1}, 1}, Sample{{4, 5}, {1, 1}, 2}};
  const std::vector<int64_t> order = {0, 1};
  std::vector<std::vector<int64_t>> rows;
  pack_rows(samples, order, 0, 5, 1, rows);
  TokenBatch batch = assemble_batch(samples, rows, 5, kPad);
  EXPECT_EQ(row_values(batch.segment_ids, 0), (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(batch.padding_tokens, 0);
  EXPECT_EQ(batch.tokens_in_batch, 3);
}

TEST(DataBatch, SingleRowsPadToTheLongestSample) {
  const std::vector<Sample> samples = synthetic_samples(9, 30, 3);
  std::vector<int64_t> order = {8, 2, 5, 0, 1, 3, 4, 6, 7};
  std::vector<std::vector<int64_t>> rows;
  EXPECT_EQ(single_rows(samples, order, 0, 32, 4, rows), 4u);
  ASSERT_EQ(rows.size(), 4u);
  int64_t longest = 0;
  for (size_t r = 0; r < 4; ++r) {
    ASSERT_EQ(rows[r].size(), 1u);
    EXPECT_EQ(rows[r][0], order[r]);
    longest = std::max<int64_t>(longest, samples[static_cast<size_t>(order[r])].ids.size());
  }
  TokenBatch batch = assemble_batch(samples, rows, longest, kPad);
  check_batch(samples, batch, longest);
}

TEST(DataBatch, SampleLongerThanSeqLenIsAnError) {
  const std::vector<Sample> samples = {Sample{{1, 2, 3, 4, 5}, {1, 1, 1, 1, 1}, 42}};
  const std::vector<int64_t> order = {0};
  std::vector<std::vector<int64_t>> rows;
  try {
    pack_rows(samples, order, 0, 4, 1, rows);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 42"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nvfp4lm::test_batch
