// See communicator.h.
#include "train/dist/communicator.h"

#include <cstring>

#include "core/error.h"

namespace nvfp4lm {

void SingleProcess::all_gather(std::span<const std::byte> send, std::span<std::byte> recv) {
  NVFP4LM_ASSERT(recv.size() == send.size(), "all_gather of one rank: {} bytes into {}", send.size(), recv.size());
  if (!send.empty()) std::memcpy(recv.data(), send.data(), send.size());
}

void SingleProcess::all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
  NVFP4LM_ASSERT(recv.size() == send.size(), "all_to_all of one rank: {} bytes into {}", send.size(), recv.size());
  if (!send.empty()) std::memcpy(recv.data(), send.data(), send.size());
}

void SingleProcess::broadcast(std::span<std::byte>, int root) {
  NVFP4LM_ASSERT(root == 0, "broadcast from rank {} in a group of one", root);
}

void SingleProcess::gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) {
  NVFP4LM_ASSERT(root == 0, "gather to rank {} in a group of one", root);
  all_gather(send, recv);
}

}  // namespace nvfp4lm
