// Where a tensor lives. CPU is the fp32 reference; CUDA:n is a GPU (bf16 activations).
#pragma once

#include <string>

namespace nvfp4lm {

struct Device {
  enum class Kind : unsigned char { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static constexpr Device cpu() { return Device{Kind::CPU, 0}; }
  static constexpr Device cuda(int index = 0) { return Device{Kind::CUDA, index}; }
  constexpr bool is_cpu() const { return kind == Kind::CPU; }
  constexpr bool is_cuda() const { return kind == Kind::CUDA; }
  constexpr bool operator==(const Device&) const = default;

  std::string str() const;  // "cpu", "cuda:0"
  // What logs, headers and benchmarks show: str(), plus " (emulated on the CPU)" for a CUDA device of the
  // emulated build, whose timings are the emulator's and never a GPU's.
  std::string label() const;
  // Parses "cpu", "cuda", "cuda:N"; throws Error naming the accepted forms otherwise.
  static Device parse(const std::string& text);
};

inline constexpr int kMinCudaSm = 80;  // the oldest GPU nvfp4lm's CUDA kernels run on (major * 10 + minor)
std::string cuda_sm_text(int sm);      // 90 -> "9.0"

// Why computations cannot run on `device`, in words ("" when they can): not built with CUDA, no GPU (with the
// driver's reason), no such index, or an SM below kMinCudaSm.
std::string device_unavailable_reason(Device device);

// Whether `device`'s memory is the host's (an integrated GPU: the DGX Spark's GB10, Jetson; the emulated device
// presenting a GB10). False for the CPU and for discrete GPUs.
bool device_memory_is_host_memory(Device device);

// The one set-up of --device and --max-memory for every command: parses `text` ("cpu", "cuda", "cuda:N"), Error
// when computations cannot run there (the reason, and what to do), and limits the memory tracker's bytes on it to
// `max_memory_gib` GiB (0: no limit; a negative or non-finite value is an Error). On a GPU whose memory is the
// host's the tracker pools the two (MemoryTracker::share_with_host): the limit is the process's tensors on both, as
// the predecessor's memory guard on the DGX Spark capped the whole process.
Device open_device(const std::string& text, double max_memory_gib);

// Waits for the work queued on `device` (its one stream on CUDA; nothing on the CPU), so a host clock stopped after
// it counts that work.
void synchronize(Device device);

// True in the NVFP4LM_CUDA=EMULATE build: the CUDA device is the emulated one (docs/cuda-emulation.md).
constexpr bool cuda_is_emulated() {
#if defined(NVFP4LM_CUDA_EMULATION) && NVFP4LM_CUDA_EMULATION
  return true;
#else
  return false;
#endif
}

}  // namespace nvfp4lm
