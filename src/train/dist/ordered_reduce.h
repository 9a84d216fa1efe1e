// Sums across ranks in a fixed order, so that N ranks compute bit for bit what one process computes adding the same
// terms one after the other (issue 32: N-rank CPU training equal to one process). Vectors are sharded over the ranks
// (shard_range: contiguous, balanced, in rank order), the shape ZeRO-1 needs: each rank owns the optimizer state of
// its shard.
//
// reduce_scatter_ordered is one round: every rank contributes a vector; the owner of each shard adds the
// contributions onto its running sum in rank order, acc = (((acc + c_0) + c_1) + ... + c_{N-1}). Deal a step's
// terms (micro-batch gradients) round-robin, term i to rank i mod N, and a round adds terms rN .. rN+N-1 in their
// order: the order of one process. Work and memory are bounded by pieces of kReducePieceElements per shard and round.
#pragma once

#include <cstdint>
#include <span>

#include "train/dist/communicator.h"

namespace nvfp4lm {

struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The elements of `n` rank `rank` of `ranks` owns: the first n % ranks shards hold one element more.
ShardRange shard_range(int64_t n, int ranks, int rank);

// Elements of one shard moved per collective (the send and receive buffers hold ranks x this many floats).
inline constexpr int64_t kReducePieceElements = int64_t{1} << 22;

// `contribution`: this rank's n values (every rank the same n); `shard_sum`: this rank's running sum of its shard
// (shard_range(n, size, rank).size() values), to which every rank's contribution is added in rank order.
void reduce_scatter_ordered(Communicator& comm, std::span<const float> contribution, std::span<float> shard_sum,
                            int64_t piece_elements = kReducePieceElements);

// The whole vector from every rank's shard (shard: this rank's shard_range of whole.size()), on every rank.
void all_gather_shards(Communicator& comm, std::span<const float> shard, std::span<float> whole,
                       int64_t piece_elements = kReducePieceElements);

// sum over ranks of `value`, in rank order, the same double on every rank (token counts, losses, squared norms).
double all_reduce_ordered(Communicator& comm, double value);

}  // namespace nvfp4lm
