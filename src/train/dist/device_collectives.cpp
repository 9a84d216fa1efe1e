// See device_collectives.h.
#include "train/dist/device_collectives.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "train/dist/nccl_collectives.h"
#include "train/dist/ordered_reduce.h"

namespace nvfp4lm {
namespace {

class HostStaged final : public DeviceCollectives {
 public:
  HostStaged(Communicator& comm, std::string why) : comm_(&comm), why_(std::move(why)) {}

  std::string describe() const override {
    return "through host memory, in rank order (the host-staged transport" + (why_.empty() ? "" : ": " + why_) + ")";
  }

  void reduce_sum(Tensor& tensor, int root) override {
    NVFP4LM_ASSERT(tensor.dtype() == DType::F32 && tensor.is_contiguous(), "reduce_sum of {}", tensor.str());
    const Tensor host = tensor.to(Device::cpu());  // waits for the work that wrote it
    const int64_t n = host.numel();
    // The whole vector is root's shard: ranks before it own nothing, those after it nothing either.
    std::vector<int64_t> bounds(static_cast<size_t>(comm_->size()) + 1, 0);
    for (size_t r = static_cast<size_t>(root) + 1; r < bounds.size(); ++r) bounds[r] = n;
    const bool is_root = comm_->rank() == root;
    Tensor sum = is_root ? Tensor::zeros(tensor.shape(), DType::F32, Device::cpu()) : Tensor();
    reduce_scatter_ordered(
        *comm_, Segments<float>({{host.data<float>(), static_cast<size_t>(n)}}), bounds,
        Segments<float>({is_root ? std::span<float>(sum.data<float>(), static_cast<size_t>(n)) : std::span<float>()}),
        comm_->size());
    if (is_root) tensor.copy_from(sum);
  }

  void broadcast(Tensor& tensor, int root) override {
    NVFP4LM_ASSERT(tensor.is_contiguous(), "broadcast of {}", tensor.str());
    Tensor host =
        comm_->rank() == root ? tensor.to(Device::cpu()) : Tensor::empty(tensor.shape(), tensor.dtype(), Device::cpu());
    broadcast_pieces(*comm_, {static_cast<std::byte*>(host.raw()), host.nbytes()}, root);
    if (comm_->rank() != root) tensor.copy_from(host);
  }

 private:
  Communicator* comm_;
  std::string why_;
};

}  // namespace

#if !NVFP4LM_HAS_NCCL
std::string nccl_build_reason() {
  return NVFP4LM_HAS_CUDA ? "this build found no nccl.h (install NCCL's headers and build again)"
                          : "this build has no CUDA";
}

std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator&, Device) {
  NVFP4LM_FAIL("NCCL is not built into this nvfp4lm: {}", nccl_build_reason());
}
#endif

std::unique_ptr<DeviceCollectives> make_host_staged_collectives(Communicator& comm, const std::string& why) {
  return std::make_unique<HostStaged>(comm, why);
}

std::string nccl_unavailable_reason() {
  if (cuda_is_emulated()) return "the emulated CUDA device runs on the CPU (NCCL needs GPUs)";
  return nccl_build_reason();
}

std::unique_ptr<DeviceCollectives> make_device_collectives(Communicator& comm, Device device) {
  NVFP4LM_ASSERT(device.is_cuda(), "make_device_collectives on {}", device.str());
  const char* asked = std::getenv("NVFP4LM_GPU_TRANSPORT");
  const std::string transport = asked != nullptr ? asked : "";
  NVFP4LM_CHECK(transport.empty() || transport == "nccl" || transport == "host",
                "NVFP4LM_GPU_TRANSPORT={}: use nccl, host (through host memory over MPI), or leave it unset (NCCL "
                "where it can run)",
                transport);
  const std::string reason = nccl_unavailable_reason();
  NVFP4LM_CHECK(transport != "nccl" || reason.empty(), "NVFP4LM_GPU_TRANSPORT=nccl, but {}", reason);
  if (transport == "host") return make_host_staged_collectives(comm, "NVFP4LM_GPU_TRANSPORT=host");
  if (!reason.empty()) return make_host_staged_collectives(comm, "no NCCL: " + reason);
  return make_nccl_collectives(comm, device);
}

}  // namespace nvfp4lm
