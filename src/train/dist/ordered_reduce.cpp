// See ordered_reduce.h.
#include "train/dist/ordered_reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace nvfp4lm {
namespace {

std::span<const std::byte> bytes_of(std::span<const float> values) { return std::as_bytes(values); }
std::span<std::byte> bytes_of(std::span<float> values) { return std::as_writable_bytes(values); }

}  // namespace

ShardRange shard_range(int64_t n, int ranks, int rank) {
  NVFP4LM_ASSERT(ranks >= 1 && rank >= 0 && rank < ranks && n >= 0, "shard {} of {} over {} elements", rank, ranks, n);
  const int64_t base = n / ranks, longer = n % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, longer);
  return {begin, begin + base + (rank < longer ? 1 : 0)};
}

void reduce_scatter_ordered(Communicator& comm, std::span<const float> contribution, std::span<float> shard_sum,
                            int64_t piece_elements) {
  const int ranks = comm.size();
  const int64_t n = static_cast<int64_t>(contribution.size());
  const ShardRange mine = shard_range(n, ranks, comm.rank());
  NVFP4LM_ASSERT(static_cast<int64_t>(shard_sum.size()) == mine.size(), "rank {}: shard of {} values, given {}",
                 comm.rank(), mine.size(), shard_sum.size());
  const int64_t longest = shard_range(n, ranks, 0).size();
  const int64_t piece = std::max<int64_t>(1, std::min(longest, piece_elements));
  std::vector<float> send(static_cast<size_t>(piece * ranks)), recv(send.size());
  for (int64_t offset = 0; offset < longest; offset += piece) {
    const int64_t count = std::min(piece, longest - offset);
    // Chunk r: elements [offset, offset + count) of rank r's shard, zero-padded past its end.
    for (int r = 0; r < ranks; ++r) {
      const ShardRange shard = shard_range(n, ranks, r);
      const int64_t have = std::clamp<int64_t>(shard.size() - offset, 0, count);
      float* chunk = send.data() + r * count;
      if (have > 0) std::memcpy(chunk, contribution.data() + shard.begin + offset, sizeof(float) * have);
      std::fill(chunk + have, chunk + count, 0.0f);
    }
    comm.all_to_all(bytes_of(std::span<const float>(send.data(), static_cast<size_t>(count * ranks))),
                    bytes_of(std::span<float>(recv.data(), static_cast<size_t>(count * ranks))));
    const int64_t have = std::clamp<int64_t>(mine.size() - offset, 0, count);
    float* sum = shard_sum.data() + offset;
    for (int r = 0; r < ranks; ++r) {  // rank order: the order of one process
      const float* from = recv.data() + r * count;
      for (int64_t i = 0; i < have; ++i) sum[i] += from[i];
    }
  }
}

void all_gather_shards(Communicator& comm, std::span<const float> shard, std::span<float> whole,
                       int64_t piece_elements) {
  const int ranks = comm.size();
  const int64_t n = static_cast<int64_t>(whole.size());
  NVFP4LM_ASSERT(static_cast<int64_t>(shard.size()) == shard_range(n, ranks, comm.rank()).size(),
                 "rank {}: shard of {} values for {} in all", comm.rank(), shard.size(), n);
  const int64_t longest = shard_range(n, ranks, 0).size();
  const int64_t piece = std::max<int64_t>(1, std::min(longest, piece_elements));
  std::vector<float> send(static_cast<size_t>(piece)), recv(static_cast<size_t>(piece * ranks));
  for (int64_t offset = 0; offset < longest; offset += piece) {
    const int64_t count = std::min(piece, longest - offset);
    const int64_t have = std::clamp<int64_t>(static_cast<int64_t>(shard.size()) - offset, 0, count);
    if (have > 0) std::memcpy(send.data(), shard.data() + offset, sizeof(float) * have);
    std::fill(send.data() + have, send.data() + count, 0.0f);
    comm.all_gather(bytes_of(std::span<const float>(send.data(), static_cast<size_t>(count))),
                    bytes_of(std::span<float>(recv.data(), static_cast<size_t>(count * ranks))));
    for (int r = 0; r < ranks; ++r) {
      const ShardRange theirs = shard_range(n, ranks, r);
      const int64_t got = std::clamp<int64_t>(theirs.size() - offset, 0, count);
      if (got > 0) std::memcpy(whole.data() + theirs.begin + offset, recv.data() + r * count, sizeof(float) * got);
    }
  }
}

double all_reduce_ordered(Communicator& comm, double value) {
  std::vector<double> values(static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span(&value, 1)), std::as_writable_bytes(std::span(values)));
  double sum = 0;
  for (double v : values) sum += v;  // rank order
  return sum;
}

}  // namespace nvfp4lm
