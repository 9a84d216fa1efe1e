// See local_group.h. Each collective is two phases separated by barriers: every rank publishes a pointer to its
// send buffer, then (after the first barrier) copies what it needs from the others' buffers, and (after the second)
// may reuse its buffer. The barrier is a generation counter under one mutex; a failure wakes every waiter.
#include "train/dist/local_group.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace nvfp4lm {
namespace {

struct Shared {
  explicit Shared(int n) : ranks(n), sends(static_cast<size_t>(n)), sizes(static_cast<size_t>(n)) {}
  const int ranks;
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  uint64_t generation = 0;
  std::optional<std::string> failure;  // "rank R failed: ..."
  std::vector<const std::byte*> sends;
  std::vector<size_t> sizes;

  void fail(int rank, const std::string& what) {
    const std::lock_guard lock(mutex);
    if (!failure) failure = "rank " + std::to_string(rank) + " failed: " + what;
    changed.notify_all();
  }

  void barrier() {
    std::unique_lock lock(mutex);
    if (failure) throw Error(*failure);
    const uint64_t mine = generation;
    if (++arrived == ranks) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return;
    }
    changed.wait(lock, [&] { return generation != mine || failure.has_value(); });
    if (generation == mine) throw Error(*failure);
  }
};

class LocalRank final : public Communicator {
 public:
  LocalRank(Shared& shared, int rank) : shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return shared_.ranks; }
  std::string describe() const override { return std::to_string(shared_.ranks) + " threads of one process"; }

  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override {
    NVFP4LM_ASSERT(recv.size() == send.size() * static_cast<size_t>(size()), "all_gather: {} bytes into {}",
                   send.size(), recv.size());
    publish(send);
    for (int r = 0; r < size(); ++r) copy_from(r, 0, send.size(), recv.data() + static_cast<size_t>(r) * send.size());
    shared_.barrier();
  }

  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) override {
    NVFP4LM_ASSERT(send.size() % static_cast<size_t>(size()) == 0 && recv.size() == send.size(),
                   "all_to_all: {} bytes into {} over {} ranks", send.size(), recv.size(), size());
    const size_t chunk = send.size() / static_cast<size_t>(size());
    publish(send);
    for (int r = 0; r < size(); ++r)
      copy_from(r, static_cast<size_t>(rank_) * chunk, chunk, recv.data() + static_cast<size_t>(r) * chunk);
    shared_.barrier();
  }

  void broadcast(std::span<std::byte> data, int root) override {
    NVFP4LM_ASSERT(root >= 0 && root < size(), "broadcast from rank {} of {}", root, size());
    publish(data);
    if (rank_ != root) copy_from(root, 0, data.size(), data.data());
    shared_.barrier();
  }

  void gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) override {
    NVFP4LM_ASSERT(root >= 0 && root < size(), "gather to rank {} of {}", root, size());
    NVFP4LM_ASSERT(rank_ != root || recv.size() == send.size() * static_cast<size_t>(size()),
                   "gather: {} bytes into {}", send.size(), recv.size());
    publish(send);
    if (rank_ == root)
      for (int r = 0; r < size(); ++r) copy_from(r, 0, send.size(), recv.data() + static_cast<size_t>(r) * send.size());
    shared_.barrier();
  }

 private:
  void publish(std::span<const std::byte> send) {
    {
      const std::lock_guard lock(shared_.mutex);
      shared_.sends[static_cast<size_t>(rank_)] = send.data();
      shared_.sizes[static_cast<size_t>(rank_)] = send.size();
    }
    shared_.barrier();
  }

  void copy_from(int from, size_t offset, size_t bytes, std::byte* to) const {
    const size_t available = shared_.sizes[static_cast<size_t>(from)];
    NVFP4LM_ASSERT(offset + bytes <= available, "rank {} reads {} bytes at {} of rank {}'s {}", rank_, bytes, offset,
                   from, available);
    if (bytes > 0) std::memcpy(to, shared_.sends[static_cast<size_t>(from)] + offset, bytes);
  }

  Shared& shared_;
  const int rank_;
};

}  // namespace

void run_local_group(int ranks, const std::function<void(Communicator&)>& body) {
  NVFP4LM_CHECK(ranks >= 1, "a group needs at least one rank, got {}", ranks);
  Shared shared(ranks);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      LocalRank rank(shared, r);
      try {
        body(rank);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        shared.fail(r, e.what());
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
        shared.fail(r, "unknown exception");
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  // The failure that started it (the others' errors only say that it happened).
  if (shared.failure) {
    for (int r = 0; r < ranks; ++r)
      if (errors[static_cast<size_t>(r)] && shared.failure->starts_with("rank " + std::to_string(r) + " failed"))
        std::rethrow_exception(errors[static_cast<size_t>(r)]);
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace nvfp4lm
