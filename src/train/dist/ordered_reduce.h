// Sums across ranks in a fixed order, so that N ranks compute bit for bit what one process computes adding the same
// terms one after the other (issue 32: N-rank CPU training equal to one process). A vector is sharded over the ranks
// by boundaries (rank r owns elements [bounds[r], bounds[r+1]), in rank order): balanced (shard_range), or along a
// model's parameters (train/dist/parameter_shards.h), the shape ZeRO-1 needs: each rank owns the optimizer state of
// its shard. Vectors may be stored in segments (Segments: a model's gradients, one tensor per parameter), read and
// written as if they were one.
//
// reduce_scatter_ordered is one round: every rank contributes a vector; the owner of each shard adds the
// contributions onto its running sum in rank order, acc = (((acc + c_0) + c_1) + ... + c_{N-1}). Deal a step's
// terms (micro-batch gradients) round-robin, term i to rank i mod N, and a round adds terms rN .. rN+N-1 in their
// order: the order of one process. Work and memory are bounded by pieces of kReducePieceElements per shard and round.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "train/dist/communicator.h"

namespace nvfp4lm {

struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The elements of `n` rank `rank` of `ranks` owns: the first n % ranks shards hold one element more.
ShardRange shard_range(int64_t n, int ranks, int rank);
// All of them as boundaries: ranks + 1 offsets, 0 first and n last.
std::vector<int64_t> balanced_bounds(int64_t n, int ranks);

// One vector of T as consecutive segments (spans of other storage, not copied): elements are numbered through the
// segments in order.
template <class T>
class Segments {
 public:
  Segments() = default;
  explicit Segments(std::vector<std::span<T>> segments) : segments_(std::move(segments)) {
    starts_.reserve(segments_.size() + 1);
    int64_t start = 0;
    for (const std::span<T>& segment : segments_) {
      starts_.push_back(start);
      start += static_cast<int64_t>(segment.size());
    }
    starts_.push_back(start);
  }
  int64_t size() const { return starts_.empty() ? 0 : starts_.back(); }
  // Calls f(span of segment elements, offset in [begin, begin + count)) for the pieces of that range, in order.
  template <class F>
  void for_range(int64_t begin, int64_t count, F&& f) const;

 private:
  std::vector<std::span<T>> segments_;
  std::vector<int64_t> starts_;  // segments_.size() + 1 offsets
};

// Elements of one shard moved per collective (the send and receive buffers hold ranks x this many values).
inline constexpr int64_t kReducePieceElements = int64_t{1} << 22;

// `contribution`: this rank's vector (every rank the same length, the last of `bounds`); `shard_sum`: this rank's
// running sum of its shard (bounds[rank + 1] - bounds[rank] values), to which the contributions of ranks
// 0 .. contributors - 1 are added in rank order (the other ranks' are not: a last round with fewer terms than ranks).
void reduce_scatter_ordered(Communicator& comm, const Segments<float>& contribution, const std::vector<int64_t>& bounds,
                            const Segments<float>& shard_sum, int contributors,
                            int64_t piece_elements = kReducePieceElements);
// The balanced form over one contiguous vector, every rank contributing.
void reduce_scatter_ordered(Communicator& comm, std::span<const float> contribution, std::span<float> shard_sum,
                            int64_t piece_elements = kReducePieceElements);

// In place: every rank's shard of `whole` (its [bounds[rank], bounds[rank + 1])) copied into the others' `whole`.
// Elements are bytes, so any dtype travels (a model's F32 or BF16 masters).
void all_gather_shards(Communicator& comm, const Segments<std::byte>& whole, const std::vector<int64_t>& bounds,
                       int64_t piece_bytes = 4 * kReducePieceElements);
// The balanced form: the whole vector from every rank's shard (shard: this rank's shard_range of whole.size()).
void all_gather_shards(Communicator& comm, std::span<const float> shard, std::span<float> whole,
                       int64_t piece_elements = kReducePieceElements);

// sum over ranks of `value`, in rank order, the same double on every rank (token counts, losses, squared norms).
double all_reduce_ordered(Communicator& comm, double value);

// Every rank's `values` (any length each), concatenated in rank order, on every rank.
std::vector<double> all_gather_concatenated(Communicator& comm, std::span<const double> values);
// Every rank's string, in rank order, on every rank.
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& text);

// `data` from `root` into every rank's, in pieces MPI's int counts can take.
void broadcast_pieces(Communicator& comm, std::span<std::byte> data, int root);

// ---- implementation ----

template <class T>
template <class F>
void Segments<T>::for_range(int64_t begin, int64_t count, F&& f) const {
  if (count <= 0) return;
  // The segment holding `begin`: the last start <= begin (segments may be empty).
  size_t s = 0, hi = segments_.size();
  while (hi - s > 1) {
    const size_t mid = (s + hi) / 2;
    if (starts_[mid] <= begin)
      s = mid;
    else
      hi = mid;
  }
  int64_t offset = 0;
  for (; offset < count && s < segments_.size(); ++s) {
    const int64_t from = begin + offset - starts_[s];
    const int64_t have = static_cast<int64_t>(segments_[s].size()) - from;
    if (have <= 0) continue;
    const int64_t take = std::min(have, count - offset);
    f(segments_[s].subspan(static_cast<size_t>(from), static_cast<size_t>(take)), offset);
    offset += take;
  }
}

}  // namespace nvfp4lm
