// The GPU side of a data-parallel step (issue 32): the two collectives a ZeRO-1 step moves device tensors with, in
// NCCL's semantics, one GPU a rank:
//   reduce_sum(t, root)  every rank's t summed into root's t, in place (ncclReduce with sendbuff == recvbuff); the
//                        other ranks' t are left as they were;
//   broadcast(t, root)   root's t into every rank's t (ncclBroadcast in place), any dtype (as bytes).
// Both are enqueued on the device's one stream (core/cuda/runtime.h), after the work that wrote the tensor and
// before the work that reads it, and return without waiting for the device. Every rank calls the same collectives in
// the same order with the same shapes. Between group_start() and group_end() the calls are issued as one batch
// (ncclGroupStart/End: a step's hundreds of per-parameter reductions cost one launch); a transport may also run them
// one by one.
//
// Transports:
//  - NCCL (train/dist/cuda/nccl_collectives.cpp): a real CUDA build, with libnccl.so.2 loaded on first use (the
//    toolkit's or the system's; not linked, as cuBLASLt is not: every command would map it). The sum's order is
//    NCCL's (ring or tree): a run with N GPUs is not bit-identical to one GPU, as with every NCCL trainer.
//  - host-staged (here): each tensor copied to host memory, summed in rank order over a Communicator (MPI, or the
//    thread group in tests) and copied back. The stand-in with NCCL's semantics where NCCL cannot run — the emulated
//    device, where CI tests the GPU step's logic, and a build without NCCL — and slow on a GPU (every byte crosses
//    PCIe twice and the host network once); `train` says which transport it uses.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "train/dist/communicator.h"

namespace nvfp4lm {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // "with NCCL 2.28.9 (...)", "through host memory, in rank order (...)": how the tensors travel, for the run's
  // set-up line.
  virtual std::string describe() const = 0;
  // `tensor`: F32, contiguous, on the device.
  virtual void reduce_sum(Tensor& tensor, int root) = 0;
  // `tensor`: contiguous, on the device, any dtype.
  virtual void broadcast(Tensor& tensor, int root) = 0;
  virtual void group_start() {}
  virtual void group_end() {}
};

// Over `comm` (its ranks, its order), any device: the host-staged transport; `why` it is used, for describe().
std::unique_ptr<DeviceCollectives> make_host_staged_collectives(Communicator& comm, const std::string& why = "");

// The transport a data-parallel run on `device` (CUDA) uses: NCCL where this build can load it and the device is a
// real GPU, the host-staged one otherwise (the emulated device; a build without NCCL's header), or as
// NVFP4LM_GPU_TRANSPORT (nccl, host) asks. Collective: every rank calls it (NCCL's communicator is created from an
// id rank 0 broadcasts over `comm`).
std::unique_ptr<DeviceCollectives> make_device_collectives(Communicator& comm, Device device);

// Why make_device_collectives takes the host-staged transport on this build, in words; "" when it takes NCCL.
std::string nccl_unavailable_reason();

}  // namespace nvfp4lm
