// See ordered_reduce.h.
#include "train/dist/ordered_reduce.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace nvfp4lm {
namespace {

void check_bounds(const std::vector<int64_t>& bounds, int ranks, int64_t n) {
  NVFP4LM_ASSERT(static_cast<int>(bounds.size()) == ranks + 1 && bounds.front() == 0 && bounds.back() == n,
                 "{} shard bounds for {} ranks over {} values", bounds.size(), ranks, n);
  for (int r = 0; r < ranks; ++r)
    NVFP4LM_ASSERT(bounds[r] <= bounds[r + 1], "shard bounds must not decrease (rank {})", r);
}

int64_t longest_shard(const std::vector<int64_t>& bounds) {
  int64_t longest = 0;
  for (size_t r = 0; r + 1 < bounds.size(); ++r) longest = std::max(longest, bounds[r + 1] - bounds[r]);
  return longest;
}

}  // namespace

ShardRange shard_range(int64_t n, int ranks, int rank) {
  NVFP4LM_ASSERT(ranks >= 1 && rank >= 0 && rank < ranks && n >= 0, "shard {} of {} over {} elements", rank, ranks, n);
  const int64_t base = n / ranks, longer = n % ranks;
  const int64_t begin = rank * base + std::min<int64_t>(rank, longer);
  return {begin, begin + base + (rank < longer ? 1 : 0)};
}

std::vector<int64_t> balanced_bounds(int64_t n, int ranks) {
  std::vector<int64_t> bounds;
  for (int r = 0; r < ranks; ++r) bounds.push_back(shard_range(n, ranks, r).begin);
  bounds.push_back(n);
  return bounds;
}

void reduce_scatter_ordered(Communicator& comm, const Segments<float>& contribution, const std::vector<int64_t>& bounds,
                            const Segments<float>& shard_sum, int contributors, int64_t piece_elements) {
  const int ranks = comm.size(), rank = comm.rank();
  check_bounds(bounds, ranks, contribution.size());
  NVFP4LM_ASSERT(contributors >= 1 && contributors <= ranks, "{} contributors of {} ranks", contributors, ranks);
  const int64_t mine = bounds[rank + 1] - bounds[rank];
  NVFP4LM_ASSERT(shard_sum.size() == mine, "rank {}: shard of {} values, given {}", rank, mine, shard_sum.size());
  const int64_t longest = longest_shard(bounds);
  if (longest == 0) return;
  const int64_t piece = std::max<int64_t>(1, std::min(longest, piece_elements));
  std::vector<float> send(static_cast<size_t>(piece * ranks)), recv(send.size());
  for (int64_t offset = 0; offset < longest; offset += piece) {
    const int64_t count = std::min(piece, longest - offset);
    // Chunk r: elements [offset, offset + count) of rank r's shard, zero-padded past its end.
    for (int r = 0; r < ranks; ++r) {
      const int64_t have = std::clamp<int64_t>(bounds[r + 1] - bounds[r] - offset, 0, count);
      float* chunk = send.data() + r * count;
      contribution.for_range(bounds[r] + offset, have, [&](std::span<float> part, int64_t at) {
        std::memcpy(chunk + at, part.data(), sizeof(float) * part.size());
      });
      std::fill(chunk + have, chunk + count, 0.0f);
    }
    comm.all_to_all(std::as_bytes(std::span<const float>(send.data(), static_cast<size_t>(count * ranks))),
                    std::as_writable_bytes(std::span<float>(recv.data(), static_cast<size_t>(count * ranks))));
    const int64_t have = std::clamp<int64_t>(mine - offset, 0, count);
    shard_sum.for_range(offset, have, [&](std::span<float> sum, int64_t at) {
      for (int r = 0; r < contributors; ++r) {  // rank order: the order of one process
        const float* from = recv.data() + r * count + at;
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += from[i];
      }
    });
  }
}

void reduce_scatter_ordered(Communicator& comm, std::span<const float> contribution, std::span<float> shard_sum,
                            int64_t piece_elements) {
  // Segments are of mutable spans; the contribution is only read.
  const Segments<float> whole({std::span<float>(const_cast<float*>(contribution.data()), contribution.size())});
  const Segments<float> sum({shard_sum});
  reduce_scatter_ordered(comm, whole, balanced_bounds(static_cast<int64_t>(contribution.size()), comm.size()), sum,
                         comm.size(), piece_elements);
}

void all_gather_shards(Communicator& comm, const Segments<std::byte>& whole, const std::vector<int64_t>& bounds,
                       int64_t piece_bytes) {
  const int ranks = comm.size(), rank = comm.rank();
  check_bounds(bounds, ranks, whole.size());
  const int64_t longest = longest_shard(bounds);
  if (longest == 0 || ranks == 1) return;
  const int64_t piece = std::max<int64_t>(1, std::min(longest, piece_bytes));
  std::vector<std::byte> send(static_cast<size_t>(piece)), recv(static_cast<size_t>(piece * ranks));
  for (int64_t offset = 0; offset < longest; offset += piece) {
    const int64_t count = std::min(piece, longest - offset);
    const int64_t have = std::clamp<int64_t>(bounds[rank + 1] - bounds[rank] - offset, 0, count);
    whole.for_range(bounds[rank] + offset, have, [&](std::span<std::byte> part, int64_t at) {
      std::memcpy(send.data() + at, part.data(), part.size());
    });
    std::fill(send.data() + have, send.data() + count, std::byte{0});
    comm.all_gather(std::span<const std::byte>(send.data(), static_cast<size_t>(count)),
                    std::span<std::byte>(recv.data(), static_cast<size_t>(count * ranks)));
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) continue;
      const int64_t got = std::clamp<int64_t>(bounds[r + 1] - bounds[r] - offset, 0, count);
      whole.for_range(bounds[r] + offset, got, [&](std::span<std::byte> part, int64_t at) {
        std::memcpy(part.data(), recv.data() + r * count + at, part.size());
      });
    }
  }
}

void all_gather_shards(Communicator& comm, std::span<const float> shard, std::span<float> whole,
                       int64_t piece_elements) {
  const int64_t n = static_cast<int64_t>(whole.size());
  const ShardRange mine = shard_range(n, comm.size(), comm.rank());
  NVFP4LM_ASSERT(static_cast<int64_t>(shard.size()) == mine.size(), "rank {}: shard of {} values for {} in all",
                 comm.rank(), shard.size(), n);
  if (!shard.empty()) std::memcpy(whole.data() + mine.begin, shard.data(), sizeof(float) * shard.size());
  std::vector<int64_t> bounds = balanced_bounds(n, comm.size());
  for (int64_t& bound : bounds) bound *= static_cast<int64_t>(sizeof(float));
  all_gather_shards(comm, Segments<std::byte>({std::as_writable_bytes(whole)}), bounds,
                    piece_elements * static_cast<int64_t>(sizeof(float)));
}

double all_reduce_ordered(Communicator& comm, double value) {
  std::vector<double> values(static_cast<size_t>(comm.size()));
  comm.all_gather(std::as_bytes(std::span(&value, 1)), std::as_writable_bytes(std::span(values)));
  double sum = 0;
  for (double v : values) sum += v;  // rank order
  return sum;
}

std::vector<double> all_gather_concatenated(Communicator& comm, std::span<const double> values) {
  const int ranks = comm.size();
  const int64_t count = static_cast<int64_t>(values.size());
  std::vector<int64_t> counts(static_cast<size_t>(ranks));
  comm.all_gather(std::as_bytes(std::span(&count, 1)), std::as_writable_bytes(std::span(counts)));
  const int64_t longest = *std::max_element(counts.begin(), counts.end());
  std::vector<double> send(static_cast<size_t>(longest), 0.0), recv(static_cast<size_t>(longest * ranks));
  std::copy(values.begin(), values.end(), send.begin());
  comm.all_gather(std::as_bytes(std::span(send)), std::as_writable_bytes(std::span(recv)));
  std::vector<double> all;
  for (int r = 0; r < ranks; ++r)
    all.insert(all.end(), recv.begin() + r * longest, recv.begin() + r * longest + counts[static_cast<size_t>(r)]);
  return all;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& text) {
  const int ranks = comm.size();
  const int64_t length = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(static_cast<size_t>(ranks));
  comm.all_gather(std::as_bytes(std::span(&length, 1)), std::as_writable_bytes(std::span(lengths)));
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::byte> send(static_cast<size_t>(longest)), recv(static_cast<size_t>(longest * ranks));
  std::memcpy(send.data(), text.data(), text.size());
  comm.all_gather(send, recv);
  std::vector<std::string> all;
  for (int r = 0; r < ranks; ++r)
    all.emplace_back(reinterpret_cast<const char*>(recv.data() + r * longest),
                     static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  return all;
}

void broadcast_pieces(Communicator& comm, std::span<std::byte> data, int root) {
  constexpr size_t kPiece = size_t{1} << 30;  // below INT_MAX bytes
  for (size_t offset = 0; offset < data.size(); offset += kPiece)
    comm.broadcast(data.subspan(offset, std::min(kPiece, data.size() - offset)), root);
}

}  // namespace nvfp4lm
