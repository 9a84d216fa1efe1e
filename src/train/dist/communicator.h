// The processes of a data-parallel run (issue 32) as ranks 0..size()-1, and the few collectives training needs. The
// interface moves bytes only; every sum is done by the caller in a fixed order (train/dist/ordered_reduce.h), so a
// result never depends on the transport's reduction algorithm or on timing: N ranks reproduce one process bit for
// bit (on the CPU). Transports: SingleProcess (here), LocalGroup (threads of one process: tests, and the stand-in
// for a collective library's semantics where it cannot run), MPI (train/dist/mpi_communicator.h, when built with it).
//
// Every rank calls the same collectives in the same order with the same sizes (the callers' contract, as in MPI and
// NCCL); a size that differs is a programming error. A rank that fails makes the others' collectives throw Error
// naming it where the transport can tell (LocalGroup; MPI aborts the job), instead of waiting forever.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace nvfp4lm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "one process", "3 threads of one process", "MPI (Open MPI 4.1.4), 3 ranks": for the run's header line.
  virtual std::string describe() const = 0;

  // recv = every rank's send, rank after rank (recv.size() == size() * send.size()).
  virtual void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
  // send: size() equal chunks, chunk r for rank r; recv: size() chunks, chunk r the one rank r sent to this rank.
  virtual void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
  // root's data into every rank's (same size everywhere).
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // On root: recv = every rank's send, rank after rank (recv.size() == size() * send.size()); other ranks' recv is
  // not touched (may be empty).
  virtual void gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) = 0;
};

// One process: the collectives of a group of one.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "one process"; }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override;
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) override;
};

}  // namespace nvfp4lm
