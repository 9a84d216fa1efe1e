// See gather_state.h.
#include "train/dist/gather_state.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/dist/ordered_reduce.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

constexpr int64_t kPieceBytes = int64_t{64} << 20;

std::span<std::byte> bytes_of(const Tensor& tensor) { return {static_cast<std::byte*>(tensor.raw()), tensor.nbytes()}; }

}  // namespace

std::vector<NamedTensor> gather_state_on_rank0(Communicator& comm, const std::vector<NamedTensor>& mine) {
  json specs = json::array();
  int64_t my_bytes = 0;
  std::vector<Tensor> on_host;  // this rank's state in host memory (a copy of a GPU rank's)
  for (const NamedTensor& entry : mine) {
    NVFP4LM_ASSERT(entry.tensor.is_contiguous(), "gather_state_on_rank0: {} is not contiguous", entry.name);
    on_host.push_back(entry.tensor.to(Device::cpu()));
    specs.push_back({entry.name, static_cast<int>(entry.tensor.dtype()), entry.tensor.shape().to_vector()});
    my_bytes += static_cast<int64_t>(entry.tensor.nbytes());
  }
  const std::vector<std::string> all_specs = all_gather_strings(comm, specs.dump());
  const int ranks = comm.size(), rank = comm.rank();

  // Rank 0's list: its own tensors, then every other rank's, allocated here.
  std::vector<NamedTensor> all;
  std::vector<int64_t> bounds = {0};  // bytes of the concatenated state, per rank
  for (int r = 0; r < ranks; ++r) {
    int64_t bytes = 0;
    for (const json& spec : json::parse(all_specs[static_cast<size_t>(r)])) {
      const Shape shape(spec[2].get<std::vector<int64_t>>());
      const DType dtype = static_cast<DType>(spec[1].get<int>());
      bytes += shape.numel() * static_cast<int64_t>(dtype_bytes(dtype));
      if (rank != 0) continue;
      all.push_back({spec[0].get<std::string>(), r == 0 ? Tensor() : Tensor::empty(shape, dtype, Device::cpu())});
    }
    bounds.push_back(bounds.back() + bytes);
  }
  NVFP4LM_ASSERT(bounds[static_cast<size_t>(rank) + 1] - bounds[static_cast<size_t>(rank)] == my_bytes,
                 "rank {}: its state is {} bytes, its spec says otherwise", rank, my_bytes);
  if (rank == 0)
    for (size_t i = 0; i < mine.size(); ++i) all[i].tensor = mine[i].tensor;

  std::vector<std::span<std::byte>> my_parts;
  for (const Tensor& tensor : on_host) my_parts.push_back(bytes_of(tensor));
  const Segments<std::byte> my_bytes_segments(std::move(my_parts));
  std::vector<std::span<std::byte>> all_parts;
  for (const NamedTensor& entry : all) all_parts.push_back(bytes_of(entry.tensor));
  const Segments<std::byte> whole(std::move(all_parts));

  int64_t longest = 0;
  for (int r = 0; r < ranks; ++r)
    longest = std::max(longest, bounds[static_cast<size_t>(r) + 1] - bounds[static_cast<size_t>(r)]);
  const int64_t piece = std::max<int64_t>(1, std::min(longest, kPieceBytes));
  std::vector<std::byte> send(static_cast<size_t>(piece)), recv(rank == 0 ? static_cast<size_t>(piece * ranks) : 0);
  for (int64_t offset = 0; offset < longest; offset += piece) {
    const int64_t count = std::min(piece, longest - offset);
    const int64_t have = std::clamp<int64_t>(my_bytes - offset, 0, count);
    my_bytes_segments.for_range(offset, have, [&](std::span<std::byte> part, int64_t at) {
      std::memcpy(send.data() + at, part.data(), part.size());
    });
    std::fill(send.data() + have, send.data() + count, std::byte{0});
    comm.gather(std::span<const std::byte>(send.data(), static_cast<size_t>(count)),
                std::span<std::byte>(recv.data(), rank == 0 ? static_cast<size_t>(count * ranks) : 0), 0);
    if (rank != 0) continue;
    for (int r = 1; r < ranks; ++r) {
      const int64_t begin = bounds[static_cast<size_t>(r)], size = bounds[static_cast<size_t>(r) + 1] - begin;
      const int64_t got = std::clamp<int64_t>(size - offset, 0, count);
      whole.for_range(begin + offset, got, [&](std::span<std::byte> part, int64_t at) {
        std::memcpy(part.data(), recv.data() + r * count + at, part.size());
      });
    }
  }
  return all;
}

}  // namespace nvfp4lm
