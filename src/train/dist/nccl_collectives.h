// The NCCL transport of device_collectives.h (its body: train/dist/cuda/nccl_collectives.cpp, in CUDA builds that
// found nccl.h; libnccl.so.2 is loaded with dlopen on first use, as cuBLASLt is). Use make_device_collectives.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "train/dist/device_collectives.h"

namespace nvfp4lm {

// "" when this build has the NCCL transport; otherwise why not ("built without CUDA", "built without nccl.h").
std::string nccl_build_reason();

// Collective over `comm`: rank 0 makes NCCL's id and broadcasts it, every rank joins on `device` (one GPU a rank).
// Error naming NCCL's reason when the library cannot be loaded or a rank cannot join.
std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator& comm, Device device);

}  // namespace nvfp4lm
