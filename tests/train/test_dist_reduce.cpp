// The data-parallel collectives (train/dist/): a group of N thread ranks (LocalGroup) summing in the fixed order of
// ordered_reduce.h gives, bit for bit, what one process gets adding the same terms one after the other — for 1 to 4
// ranks, vectors shorter than the group, lengths that do not divide, and several pieces a round; terms are drawn
// over a wide range of magnitudes so that another order gives other bits (checked). A rank that fails ends the
// group: the others' collectives throw instead of waiting, and the first failure is what the caller sees.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <vector>

#include "core/error.h"
#include "train/dist/communicator.h"
#include "train/dist/local_group.h"
#include "train/dist/ordered_reduce.h"
#include "train/dist_test_terms.h"

namespace nvfp4lm {
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

}  // namespace
}  // namespace nvfp4lm
