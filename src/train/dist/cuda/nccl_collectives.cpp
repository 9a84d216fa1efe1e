// See nccl_collectives.h. Built in CUDA builds (the emulated one too, which never calls it: NCCL needs GPUs) when
// CMake found nccl.h (NVFP4LM_HAS_NCCL); the library is resolved with dlopen on the first data-parallel GPU run.
#include "train/dist/nccl_collectives.h"

#if NVFP4LM_HAS_NCCL

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <mutex>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/error.h"

namespace nvfp4lm {
namespace {

constexpr const char* kLibraryNames[] = {"libnccl.so.2", NVFP4LM_NCCL_DIR "/libnccl.so.2"};

// The entry points used, resolved once from the loaded library.
struct NcclLibrary {
  decltype(&::ncclGetVersion) get_version = nullptr;
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclCommAbort) comm_abort = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclReduce) reduce = nullptr;
  decltype(&::ncclBroadcast) broadcast = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;
};

const NcclLibrary& nccl() {
  static std::once_flag once;
  static NcclLibrary library;
  static void* handle = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    for (const char* name : kLibraryNames) {
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      failure = ::dlerror();
    }
    if (handle == nullptr) return;
    auto resolve = [](auto& slot, const char* symbol) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(::dlsym(handle, symbol));
      if (slot == nullptr && failure.empty()) failure = fmt::format("{} has no {}", kLibraryNames[0], symbol);
    };
    resolve(library.get_version, "ncclGetVersion");
    resolve(library.get_unique_id, "ncclGetUniqueId");
    resolve(library.comm_init_rank, "ncclCommInitRank");
    resolve(library.comm_destroy, "ncclCommDestroy");
    resolve(library.comm_abort, "ncclCommAbort");
    resolve(library.error_string, "ncclGetErrorString");
    resolve(library.reduce, "ncclReduce");
    resolve(library.broadcast, "ncclBroadcast");
    resolve(library.group_start, "ncclGroupStart");
    resolve(library.group_end, "ncclGroupEnd");
  });
  NVFP4LM_CHECK(handle != nullptr && failure.empty(),
                "cannot load NCCL ({}: {}); install NCCL 2 (the CUDA toolkit's, or Debian's libnccl2) or add its "
                "directory to LD_LIBRARY_PATH",
                kLibraryNames[0], failure);
  return library;
}

void check_nccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess) return;
  NVFP4LM_FAIL("{} failed: {} (NCCL_DEBUG=WARN in the environment prints NCCL's own account)", call,
               nccl().error_string(result));
}

class Nccl final : public DeviceCollectives {
 public:
  Nccl(Communicator& comm, Device device) : ranks_(comm.size()) {
    const NcclLibrary& lib = nccl();
    int version = 0;
    check_nccl(lib.get_version(&version), "ncclGetVersion");
    version_ = fmt::format("{}.{}.{}", version / 10000, version / 100 % 100, version % 100);
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (comm.rank() == 0) check_nccl(lib.get_unique_id(&id), "ncclGetUniqueId");
    comm.broadcast({reinterpret_cast<std::byte*>(&id), sizeof(id)}, 0);
    NVFP4LM_CUDA_CHECK(cudaSetDevice(device.index));
    check_nccl(lib.comm_init_rank(&comm_, comm.size(), id, comm.rank()), "ncclCommInitRank");
  }
  ~Nccl() override {
    // A run that fails leaves collectives in flight: abort them rather than wait for ranks that are gone.
    if (comm_ != nullptr) (std::uncaught_exceptions() > 0 ? nccl().comm_abort : nccl().comm_destroy)(comm_);
  }

  std::string describe() const override {
    return fmt::format("with NCCL {} over {} GPUs (NCCL's summation order: N GPUs agree with one to fp32 rounding)",
                       version_, ranks_);
  }

  void reduce_sum(Tensor& tensor, int root) override {
    NVFP4LM_ASSERT(tensor.dtype() == DType::F32 && tensor.is_contiguous() && tensor.device().is_cuda(),
                   "reduce_sum of {}", tensor.str());
    check_nccl(nccl().reduce(tensor.raw(), tensor.raw(), static_cast<size_t>(tensor.numel()), ncclFloat32, ncclSum,
                             root, comm_, stream()),
               "ncclReduce");
  }

  void broadcast(Tensor& tensor, int root) override {
    NVFP4LM_ASSERT(tensor.is_contiguous() && tensor.device().is_cuda(), "broadcast of {}", tensor.str());
    check_nccl(nccl().broadcast(tensor.raw(), tensor.raw(), tensor.nbytes(), ncclUint8, root, comm_, stream()),
               "ncclBroadcast");
  }

  void group_start() override { check_nccl(nccl().group_start(), "ncclGroupStart"); }
  void group_end() override { check_nccl(nccl().group_end(), "ncclGroupEnd"); }

 private:
  static cudaStream_t stream() { return static_cast<cudaStream_t>(cuda::current_stream_handle()); }

  int ranks_;
  std::string version_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::string nccl_build_reason() { return ""; }

std::unique_ptr<DeviceCollectives> make_nccl_collectives(Communicator& comm, Device device) {
  return std::make_unique<Nccl>(comm, device);
}

}  // namespace nvfp4lm

#endif  // NVFP4LM_HAS_NCCL
