// The data-parallel collectives (train/dist/): a group of N thread ranks (LocalGroup) summing in the fixed order of
// ordered_reduce.h gives, bit for bit, what one process gets adding the same terms one after the other — for 1 to 4
// ranks, vectors shorter than the group, lengths that do not divide, and several pieces a round; terms are drawn
// over a wide range of magnitudes so that another order gives other bits (checked). A rank that fails ends the
// group: the others' collectives throw instead of waiting, and the first failure is what the caller sees.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/dist/local_group.h"
#include "train/dist/ordered_reduce.h"
#include "train/dist/watchdog.h"
#include "train/dist_test_terms.h"

namespace nvfp4lm::test_dist_reduce {
namespace {

TEST(DistShards, ContiguousBalancedInRankOrder) {
  for (int ranks = 1; ranks <= 5; ++ranks)
    for (int64_t n : {0, 1, 3, 7, 100, 101}) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        const ShardRange shard = shard_range(n, ranks, r);
        EXPECT_EQ(shard.begin, next) << n << " over " << ranks;
        EXPECT_TRUE(shard.size() == n / ranks || shard.size() == n / ranks + 1) << n << " over " << ranks;
        next = shard.end;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(DistReduce, RanksSumInTheOrderOfOneProcessBitForBit) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (const int64_t n : {int64_t{2}, int64_t{37}, int64_t{1000}}) {
      for (const int64_t piece : {int64_t{3}, kReducePieceElements}) {
        SCOPED_TRACE(testing::Message() << ranks << " ranks, " << n << " values, pieces of " << piece);
        const int rounds = 3;
        const int terms = ranks * rounds;
        // One process: every term added in order.
        const std::vector<float> expected = test::dist_sequential_sum(n, terms);
        std::vector<float> reversed(static_cast<size_t>(n), 0.0f);
        for (int t = terms - 1; t >= 0; --t) {
          const std::vector<float> values = test::dist_term(n, static_cast<uint64_t>(t));
          for (int64_t i = 0; i < n; ++i) reversed[static_cast<size_t>(i)] += values[static_cast<size_t>(i)];
        }
        if (terms > 2 && n > 10) {
          EXPECT_NE(expected, reversed) << "the terms must make the order visible";
        }

        std::vector<std::vector<float>> results(static_cast<size_t>(ranks));
        run_local_group(ranks, [&](Communicator& comm) {
          const ShardRange mine = shard_range(n, comm.size(), comm.rank());
          std::vector<float> sum(static_cast<size_t>(mine.size()), 0.0f);
          for (int round = 0; round < rounds; ++round) {  // term round * ranks + rank is this rank's
            const std::vector<float> values = test::dist_term(n, static_cast<uint64_t>(round * ranks + comm.rank()));
            reduce_scatter_ordered(comm, values, sum, piece);
          }
          std::vector<float> whole(static_cast<size_t>(n));
          all_gather_shards(comm, sum, whole, piece);
          results[static_cast<size_t>(comm.rank())] = whole;
        });
        for (int r = 0; r < ranks; ++r) {
          ASSERT_EQ(results[static_cast<size_t>(r)].size(), static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(results[static_cast<size_t>(r)][static_cast<size_t>(i)]),
                      std::bit_cast<uint32_t>(expected[static_cast<size_t>(i)]))
                << "rank " << r << " element " << i;
        }
      }
    }
  }
}

TEST(DistReduce, ScalarsAndBroadcast) {
  run_local_group(3, [](Communicator& comm) {
    EXPECT_EQ(comm.describe(), "3 threads of one process");
    const double total = all_reduce_ordered(comm, 0.1 * (comm.rank() + 1));
    EXPECT_EQ(total, ((0.0 + 0.1 * 1) + 0.1 * 2) + 0.1 * 3);
    std::vector<int> data = {comm.rank(), comm.rank() * 10};
    comm.broadcast(std::as_writable_bytes(std::span(data)), 2);
    EXPECT_EQ(data, (std::vector<int>{2, 20}));
  });
  SingleProcess one;
  EXPECT_EQ(all_reduce_ordered(one, 2.5), 2.5);
}

TEST(DistReduce, AFailedRankEndsTheGroupInsteadOfAHang) {
  std::atomic<int> stopped{0};
  try {
    run_local_group(3, [&](Communicator& comm) {
      if (comm.rank() == 1) NVFP4LM_FAIL("rank one's data is unreadable");
      try {
        for (int i = 0; i < 5; ++i) all_reduce_ordered(comm, 1.0);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1 failed: rank one's data is unreadable"), std::string::npos)
            << e.what();
        ++stopped;
        throw;
      }
    });
    FAIL() << "the group's failure must reach the caller";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank one's data is unreadable"), std::string::npos) << e.what();
  }
  EXPECT_EQ(stopped.load(), 2);
}

TEST(DistReduce, SegmentedVectorsAlongParameterShardsWithAShortLastRound) {
  // Segments of 5, 0, 9, 1 and 16 values (an empty one included), owned by 3 ranks along segment boundaries as
  // ParameterShards would deal them: [5 0] [9 1] [16]. Two rounds: 3 terms, then 2 (the third rank has none).
  const std::vector<int64_t> lengths = {5, 0, 9, 1, 16};
  const int64_t n = 31;
  const std::vector<int64_t> bounds = {0, 5, 15, 31};
  const int terms = 5;
  const std::vector<float> expected = test::dist_sequential_sum(n, terms);
  std::vector<std::vector<float>> results(3);
  run_local_group(3, [&](Communicator& comm) {
    const int rank = comm.rank();
    // This rank's contribution, stored in segments (like a model's gradients).
    std::vector<std::vector<float>> storage;
    for (int64_t length : lengths) storage.emplace_back(static_cast<size_t>(length));
    std::vector<std::span<float>> spans;
    for (std::vector<float>& segment : storage) spans.emplace_back(segment);
    const Segments<float> contribution(spans);
    std::vector<float> mine(static_cast<size_t>(bounds[rank + 1] - bounds[rank]), 0.0f);
    // The running sum in two pieces, to cross a segment boundary inside the shard too.
    const size_t half = mine.size() / 2;
    const Segments<float> sum(
        {std::span<float>(mine.data(), half), std::span<float>(mine.data() + half, mine.size() - half)});
    for (int round = 0; round * 3 < terms; ++round) {
      const int term = round * 3 + rank, contributors = std::min(3, terms - round * 3);
      const std::vector<float> values = term < terms ? test::dist_term(n, static_cast<uint64_t>(term))
                                                     : std::vector<float>(static_cast<size_t>(n), 1e30f);  // unused
      int64_t at = 0;
      for (std::vector<float>& segment : storage)
        for (float& v : segment) v = values[static_cast<size_t>(at++)];
      reduce_scatter_ordered(comm, contribution, bounds, sum, contributors, /*piece_elements=*/4);
    }
    // Gather the sums as bytes, in place.
    std::vector<float> whole(static_cast<size_t>(n), 0.0f);
    std::copy(mine.begin(), mine.end(), whole.begin() + bounds[rank]);
    std::vector<int64_t> byte_bounds;
    for (int64_t b : bounds) byte_bounds.push_back(b * 4);
    all_gather_shards(comm, Segments<std::byte>({std::as_writable_bytes(std::span(whole))}), byte_bounds,
                      /*piece_bytes=*/12);
    results[static_cast<size_t>(rank)] = whole;
  });
  for (int r = 0; r < 3; ++r)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(results[static_cast<size_t>(r)][static_cast<size_t>(i)]),
                std::bit_cast<uint32_t>(expected[static_cast<size_t>(i)]))
          << "rank " << r << " element " << i;
}

TEST(DistReduce, GathersOfRaggedValuesAndStrings) {
  run_local_group(3, [](Communicator& comm) {
    std::vector<double> mine(static_cast<size_t>(comm.rank()), comm.rank() + 0.5);  // 0, 1 and 2 values
    EXPECT_EQ(all_gather_concatenated(comm, mine), (std::vector<double>{1.5, 2.5, 2.5}));
    EXPECT_EQ(all_gather_strings(comm, std::string(static_cast<size_t>(comm.rank()), 'x')),
              (std::vector<std::string>{"", "x", "xx"}));
    std::vector<std::byte> big(3 << 20, std::byte{static_cast<unsigned char>(comm.rank())});
    broadcast_pieces(comm, big, 1);
    EXPECT_EQ(big.front(), std::byte{1});
    EXPECT_EQ(big.back(), std::byte{1});
  });
}

TEST(DistShards, ParametersDealtInContiguousRunsBalancedByElements) {
  std::vector<Parameter> parameters;
  for (int64_t size : {100, 10, 10, 10, 50, 30, 5, 5}) {
    parameters.push_back({"p" + std::to_string(parameters.size()), Tensor::zeros({size}, DType::F32, Device::cpu()),
                          Tensor::zeros({size}, DType::F32, Device::cpu()), false});
  }
  EXPECT_EQ(ParameterShards::balance(parameters, 1).first, (std::vector<size_t>{0, 8}));
  // A rank's run ends at the parameter whose middle passes r/N of the elements.
  EXPECT_EQ(ParameterShards::balance(parameters, 2).first, (std::vector<size_t>{0, 2, 8}));     // 110 | 110
  EXPECT_EQ(ParameterShards::balance(parameters, 3).first, (std::vector<size_t>{0, 1, 4, 8}));  // 100 | 30 | 90
  const ParameterShards many = ParameterShards::balance(parameters, 12);  // more ranks than parameters: some own none
  EXPECT_EQ(many.first.front(), 0u);
  EXPECT_EQ(many.first.back(), 8u);
  for (int r = 0; r < 12; ++r) EXPECT_LE(many.begin(r), many.end(r));
}

TEST(RankWatchdog, ACollectiveThatWaitsTooLongIsReported) {
  // Rank 0's collectives are watched with a 0.2 s timeout; rank 1 arrives 1 s late. The report names the rank and
  // the collective; here it is recorded instead of ending the process.
  struct Borrowed final : Communicator {
    explicit Borrowed(Communicator& c) : inner(c) {}
    int rank() const override { return inner.rank(); }
    int size() const override { return inner.size(); }
    std::string describe() const override { return inner.describe(); }
    void all_gather(std::span<const std::byte> s, std::span<std::byte> r) override { inner.all_gather(s, r); }
    void all_to_all(std::span<const std::byte> s, std::span<std::byte> r) override { inner.all_to_all(s, r); }
    void broadcast(std::span<std::byte> d, int root) override { inner.broadcast(d, root); }
    void gather(std::span<const std::byte> s, std::span<std::byte> r, int root) override { inner.gather(s, r, root); }
    Communicator& inner;
  };
  std::atomic<int> reports{0};
  std::string report;
  run_local_group(2, [&](Communicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      all_reduce_ordered(comm, 1.0);
      all_reduce_ordered(comm, 1.0);
      return;
    }
    WatchedCommunicator watched(std::make_unique<Borrowed>(comm), 0.2, [&](const std::string& message) {
      if (reports++ == 0) report = message;
    });
    EXPECT_NE(watched.describe().find("waits at most 0.2 s"), std::string::npos);
    all_reduce_ordered(watched, 1.0);  // waits ~1 s: reported once
    all_reduce_ordered(watched, 1.0);  // rank 1 is there: no report
  });
  EXPECT_EQ(reports.load(), 1);
  EXPECT_NE(report.find("rank 0 of 2 waited"), std::string::npos) << report;
  EXPECT_NE(report.find("in an all-gather"), std::string::npos) << report;
}

TEST(RankWatchdog, TheTimeoutComesFromTheEnvironment) {
  ::unsetenv("NVFP4LM_RANK_TIMEOUT");
  EXPECT_EQ(rank_timeout_seconds(), kDefaultRankTimeoutSeconds);
  ::setenv("NVFP4LM_RANK_TIMEOUT", "45", 1);
  EXPECT_EQ(rank_timeout_seconds(), 45);
  ::setenv("NVFP4LM_RANK_TIMEOUT", "soon", 1);
  EXPECT_NE(test::error_message([] { rank_timeout_seconds(); }).find("NVFP4LM_RANK_TIMEOUT=\"soon\""),
            std::string::npos);
  ::unsetenv("NVFP4LM_RANK_TIMEOUT");
}

}  // namespace
}  // namespace nvfp4lm::test_dist_reduce
