// What `nvfp4lm diagnose` reports, and the device check behind every --device flag: the build (version, CUDA
// compiled in or not), the CPU (model, cores, OpenMP threads, OpenBLAS), the GPUs (name, SM, memory, driver and
// runtime versions, or why there are none) and, for each compute path (DESIGN.md §3), whether it can run here
// and why not. Requirements: CUDA paths need a CUDA build and a GPU with SM >= 8.0 (bf16 tensor cores, the
// kernels' cp.async and ldmatrix use); the NVFP4 CUDA paths also need the kernel this build has for them.
#pragma once

#include <cstdint>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace nvfp4lm {

struct ComputePathStatus {
  std::string name;  // "cpu/dequant-gemm", ...
  bool available = false;
  std::string detail;  // how it runs when available, why not otherwise
};

struct GpuReport {
  int index = 0;
  std::string name;
  int sm = 0;  // major * 10 + minor
  int multiprocessors = 0;
  uint64_t total_bytes = 0, free_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  bool unified_memory = false;  // integrated (GB10): its memory is the host's; --max-memory counts both
};

struct SystemReport {
  std::string version;
  bool cuda_built = false;
  std::string cuda_emulation;  // the emulated build: how its CUDA device runs (core/cuda/runtime.h); else ""
  std::string compiler;
  std::string cpu_model;
  std::string cpu_features;  // the CPU features the kernels use that this CPU has (ops/cpu/cpu_features.h)
  std::vector<std::pair<std::string, std::string>> cpu_kernels;  // each CPU kernel family and the variant it runs
  std::string cpu_isa_limit;                                     // ", capped by NVFP4LM_CPU_ISA=..." or ""
  int logical_cores = 0;
  int openmp_threads = 0;
  std::string blas;  // OpenBLAS configuration and core
  int blas_threads = 0;
  std::string blas_warning;  // cpu_blas_threading_warning(): "" when OpenBLAS and OpenMP get along
  uint64_t memory_total_bytes = 0;
  std::vector<GpuReport> gpus;
  std::string gpu_unavailable;  // why there are no GPUs ("not built with CUDA", the driver's reason)
  std::vector<ComputePathStatus> compute_paths;
};

// AArch64 Linux names no model in /proc/cpuinfo: each core's "CPU implementer" and "CPU part" (its MIDR) say which
// design it is. The cores of `cpuinfo` (/proc/cpuinfo's text) by design and count, in order of appearance
// ("Cortex-X925 x10 + Cortex-A725 x10" on a DGX Spark's GB10), or "" when it has no such lines (qemu-user shows the
// host's /proc/cpuinfo).
std::string arm_cpu_model(std::istream& cpuinfo);

SystemReport collect_system_report();
nlohmann::json system_report_json(const SystemReport& report);
std::string system_report_text(const SystemReport& report);

}  // namespace nvfp4lm
