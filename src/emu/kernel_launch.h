// NVFP4LM_LAUNCH in the emulated build (core/cuda/launch.h): the kernel's arguments are copied into a closure
// (as CUDA copies them into the parameter buffer) that every emulated thread calls the kernel with, and the launch
// is handed to the emulated stream (grid.h validates it, stream.h runs or records it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace nvfp4lm::emu {

struct LaunchRequest {
  const void* function = nullptr;  // the kernel's address: the key of cudaFuncSetAttribute
  const char* name = "?";
  dim3 grid, block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;
  std::shared_ptr<const void> closure;
  void (*invoke)(const void* closure) = nullptr;
};

// Validates the configuration (errors go to cudaGetLastError, as a failed <<<>>> does) and enqueues the launch.
void submit_launch(LaunchRequest request);

// "rmsnorm_forward_kernel<float>" from a __PRETTY_FUNCTION__ that names the kernel as a template argument.
std::string kernel_name_from_signature(const char* pretty_function);

template <auto Kernel>
const char* kernel_name() {
  static const std::string name = kernel_name_from_signature(__PRETTY_FUNCTION__);
  return name.c_str();
}

template <typename... Params>
struct KernelArguments {
  void (*kernel)(Params...);
  std::tuple<std::decay_t<Params>...> values;
  static void invoke(const void* self) {
    const auto& arguments = *static_cast<const KernelArguments*>(self);
    std::apply(arguments.kernel, arguments.values);
  }
};

template <auto Kernel>
class KernelLaunch {
 public:
  KernelLaunch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream)
      : grid_(grid), block_(block), shared_bytes_(shared_bytes), stream_(stream) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    launch(Kernel, std::forward<Args>(args)...);
  }

 private:
  template <typename... Params, typename... Args>
  void launch(void (*kernel)(Params...), Args&&... args) const {
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel launched with the wrong number of arguments");
    using Arguments = KernelArguments<Params...>;
    auto closure = std::make_shared<const Arguments>(
        Arguments{kernel, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)});
    LaunchRequest request;
    request.function = reinterpret_cast<const void*>(kernel);
    request.name = kernel_name<Kernel>();
    request.grid = grid_;
    request.block = block_;
    request.shared_bytes = shared_bytes_;
    request.stream = stream_;
    request.closure = closure;
    request.invoke = &Arguments::invoke;
    submit_launch(std::move(request));
  }

  dim3 grid_, block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
};

}  // namespace nvfp4lm::emu
