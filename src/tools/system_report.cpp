// See system_report.h. Everything here is read-only probing: /proc for the CPU, OpenMP and OpenBLAS for threads,
// the CUDA runtime (core/cuda/runtime.h, only in CUDA builds) for GPUs. Nothing throws for a missing piece of
// information; it is reported as unknown.
#include "tools/system_report.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/memory.h"
#include "ops/cpu_backend.h"
#include "ops/nvfp4_linear.h"
#include "ops/nvfp4_w4a4_linear.h"
#if NVFP4LM_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

namespace nvfp4lm {
namespace {

// The value of the first "key : value" line of /proc/cpuinfo (or "" when absent).
[[maybe_unused]] std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    return line.substr(colon + (colon + 1 < line.size() ? 2 : 1));
  }
  return {};
}

uint64_t meminfo_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

// Why no CUDA path can run on the first GPU ("" when one can).
std::string cuda_prerequisite_missing(const SystemReport& report) {
  if (!report.cuda_built) return "not built with CUDA";
  if (report.gpus.empty()) return "no GPU: " + report.gpu_unavailable;
  const GpuReport& gpu = report.gpus.front();
  if (gpu.sm < kMinCudaSm)
    return fmt::format("GPU cuda:0 ({}) has SM {}; nvfp4lm's CUDA kernels need SM {} or newer", gpu.name,
                       cuda_sm_text(gpu.sm), cuda_sm_text(kMinCudaSm));
  return {};
}

std::vector<ComputePathStatus> compute_paths(const SystemReport& report) {
  std::vector<ComputePathStatus> paths;
  const std::string cpu_detail = fmt::format("fp32, OpenBLAS sgemm, {} OpenMP threads", report.openmp_threads);
  const std::string limit = cpu_isa_limit_note();  // NVFP4LM_CPU_ISA, named where the kernels it caps are
  paths.push_back({"cpu/dense", true, cpu_detail});
  std::string nvfp4_cpu;
  try {
    nvfp4_cpu = nvfp4_linear_compute_path(Device::cpu());
  } catch (const Error& e) {
    paths.push_back({"cpu/dequant-gemm", false, e.what()});
  }
  if (!nvfp4_cpu.empty())
    paths.push_back({"cpu/dequant-gemm", nvfp4_cpu == "cpu/dequant-gemm",
                     nvfp4_cpu == "cpu/dequant-gemm"
                         ? fmt::format("NVFP4 weights kept packed, {}, {} decode kernel{}", cpu_detail,
                                       cpu_nvfp4_dot_kernel(CpuMatmul::Fp32), limit)
                         : "NVFP4 linears on the CPU use " + nvfp4_cpu});
  // The fast CPU paths (generate, chat, serve, bench infer by default: int8; --cpu-matmul bf16): they always run,
  // the variants of their kernels depend on the CPU.
  paths.push_back(
      {nvfp4_linear_compute_path(Device::cpu(), CpuMatmul::Int8Activations), true,
       fmt::format("int8 activations (a scale per 16) in the decode step's NVFP4 products and an int8 copy of a "
                   "BF16 lm_head, {} kernel; BF16 in the prefill's, {} kernels; {} OpenMP threads{}",
                   cpu_nvfp4_dot_kernel(CpuMatmul::Int8Activations), cpu_bf16_kernel(), report.openmp_threads, limit)});
  paths.push_back(
      {nvfp4_linear_compute_path(Device::cpu(), CpuMatmul::Bf16Activations), true,
       fmt::format("BF16 activations in the prefill's products, fp32 sums, NVFP4 weights dequantized to "
                   "BF16 in cache; {} BF16 kernels, {} decode kernel, {} OpenMP threads{}",
                   cpu_bf16_kernel(), cpu_nvfp4_dot_kernel(CpuMatmul::Bf16Activations), report.openmp_threads, limit)});

  const std::string missing = cuda_prerequisite_missing(report);
  if (!missing.empty()) {
    for (const char* name :
         {"cuda/dense-bf16", "cuda/dequant-gemm", "cuda/nvfp4-w4a16", kNvfp4W4a4CudaPath, kNvfp4W4a4CublasLtPath})
      paths.push_back({name, false, missing});
    return paths;
  }
  const std::string where = cuda_is_emulated() ? " on the emulated CUDA device (the CPU)" : "";
  paths.push_back({"cuda/dense-bf16", true, "bf16 activations, fp32 accumulation (cuBLASLt)" + where});
  // NVFP4 linears on CUDA take two paths by the number of rows (ops/nvfp4_linear.cpp): decode rows run the fused
  // W4A16 kernel, prefill and training dequantize into the BF16 scratch and call the cuBLASLt GEMM.
  try {
    const std::string decode_path = nvfp4_linear_compute_path(Device::cuda(0));
    paths.push_back({"cuda/dequant-gemm", true,
                     "NVFP4 weights dequantized to bf16 into a GEMM (cuBLASLt): prefill and training" + where});
    paths.push_back({decode_path, true, "fused NVFP4 x bf16 GEMV kernel: decode rows" + where});
  } catch (const Error& e) {
    for (const char* name : {"cuda/dequant-gemm", "cuda/nvfp4-w4a16"}) paths.push_back({name, false, e.what()});
  }
  // Blackwell's FP4 tensor cores (ops/nvfp4_w4a4_linear.h): NVFP4 x NVFP4, for W4A4 linears only — SM 12.x's
  // block-scaled mma.sync, SM 10.x's through cuBLASLt.
  std::string why_not;
  const bool mma = nvfp4_w4a4_path_available(Device::cuda(0), kNvfp4W4a4CudaPath, &why_not);
  paths.push_back({kNvfp4W4a4CudaPath, mma,
                   mma ? "NVFP4 weights x NVFP4 activations (1x16 blocks, E4M3 scales) on the block-scaled FP4 "
                         "mma.sync, fp32 accumulation: W4A4 linears" +
                             where
                       : why_not});
  const bool cublaslt = nvfp4_w4a4_path_available(Device::cuda(0), kNvfp4W4a4CublasLtPath, &why_not);
  paths.push_back({kNvfp4W4a4CublasLtPath, cublaslt,
                   cublaslt ? "NVFP4 weights x NVFP4 activations on cuBLASLt's block-scaled FP4 matmul (VEC16_UE4M3 "
                              "scales), fp32 accumulation: W4A4 linears" +
                                  where
                            : "not available: " + why_not});
  return paths;
}

}  // namespace

std::string arm_cpu_model(std::istream& in) {
  struct Part {
    unsigned implementer, part;
    const char* name;
  };
  static constexpr Part kParts[] = {
      {0x41, 0xd03, "Cortex-A53"},    {0x41, 0xd05, "Cortex-A55"},  {0x41, 0xd07, "Cortex-A57"},
      {0x41, 0xd08, "Cortex-A72"},    {0x41, 0xd0b, "Cortex-A76"},  {0x41, 0xd0c, "Neoverse N1"},
      {0x41, 0xd40, "Neoverse V1"},   {0x41, 0xd41, "Cortex-A78"},  {0x41, 0xd44, "Cortex-X1"},
      {0x41, 0xd47, "Cortex-A710"},   {0x41, 0xd48, "Cortex-X2"},   {0x41, 0xd49, "Neoverse N2"},
      {0x41, 0xd4f, "Neoverse V2"},   {0x41, 0xd80, "Cortex-A520"}, {0x41, 0xd81, "Cortex-A720"},
      {0x41, 0xd82, "Cortex-X4"},     {0x41, 0xd84, "Neoverse V3"}, {0x41, 0xd85, "Cortex-X925"},
      {0x41, 0xd87, "Cortex-A725"},   {0x41, 0xd8e, "Neoverse N3"}, {0xc0, 0xac3, "AmpereOne"},
      {0x4e, 0x004, "NVIDIA Carmel"}, {0x61, 0x022, "Apple M1"},    {0x61, 0x023, "Apple M1"},
  };
  std::string line;
  unsigned implementer = 0;
  std::vector<std::pair<std::string, int>> cores;  // design, count, in order of first appearance
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const unsigned value = static_cast<unsigned>(std::strtoul(line.c_str() + colon + 1, nullptr, 0));
    if (line.rfind("CPU implementer", 0) == 0) implementer = value;
    if (line.rfind("CPU part", 0) != 0) continue;
    std::string name = fmt::format("implementer {:#x} part {:#x}", implementer, value);
    for (const Part& part : kParts)
      if (part.implementer == implementer && part.part == value) name = part.name;
    auto it = std::find_if(cores.begin(), cores.end(), [&](const auto& core) { return core.first == name; });
    if (it == cores.end())
      cores.emplace_back(name, 1);
    else
      ++it->second;
  }
  std::string text;
  for (const auto& [name, count] : cores) text += fmt::format("{}{} x{}", text.empty() ? "" : " + ", name, count);
  return text;
}

SystemReport collect_system_report() {
  SystemReport report;
  report.version = NVFP4LM_VERSION;
  report.cuda_built = NVFP4LM_HAS_CUDA != 0;
#if defined(__clang__)
  report.compiler = fmt::format("clang {}", __clang_version__);
#elif defined(__GNUC__)
  report.compiler = fmt::format("gcc {}", __VERSION__);
#else
  report.compiler = "unknown";
#endif
#if defined(__aarch64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  report.cpu_model = arm_cpu_model(cpuinfo);
  if (report.cpu_model.empty()) report.cpu_model = "unknown AArch64 CPU";
#else
  report.cpu_model = cpuinfo_field("model name");
  if (report.cpu_model.empty()) report.cpu_model = "unknown";
#endif
  report.cpu_features = cpu_kernel_features();  // the one probe the kernels use (ops/cpu_backend.h)
  if (report.cpu_features.empty()) report.cpu_features = "none the kernels use";
  report.cpu_kernels = cpu_kernel_variants();
  report.cpu_isa_limit = cpu_isa_limit_note();
  report.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  report.openmp_threads = omp_get_max_threads();
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  report.blas = fmt::format("OpenBLAS ({}; core {}; {} threading)", config ? config : "?", core ? core : "?",
                            cpu_blas_threading());
  report.blas_warning = cpu_blas_threading_warning();
  report.blas_threads = openblas_get_num_threads();
  report.memory_total_bytes = meminfo_total_bytes();
#if NVFP4LM_HAS_CUDA
  report.cuda_emulation = cuda::emulation_summary();
  const int count = cuda::device_count();
  if (count == 0) report.gpu_unavailable = cuda::unavailable_reason();
  for (int index = 0; index < count; ++index) {
    const cuda::DeviceInfo info = cuda::device_info(index);
    report.gpus.push_back({index, info.name, info.sm_major * 10 + info.sm_minor, info.multiprocessors, info.total_bytes,
                           info.free_bytes, info.driver_version, info.runtime_version, info.integrated});
  }
#else
  report.gpu_unavailable = "not built with CUDA";
#endif
  report.compute_paths = compute_paths(report);
  return report;
}

nlohmann::json system_report_json(const SystemReport& report) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuReport& gpu : report.gpus) {
    gpus.push_back({{"index", gpu.index},
                    {"name", gpu.name},
                    {"sm", cuda_sm_text(gpu.sm)},
                    {"multiprocessors", gpu.multiprocessors},
                    {"total_bytes", gpu.total_bytes},
                    {"free_bytes", gpu.free_bytes},
                    {"driver_version", gpu.driver_version},
                    {"runtime_version", gpu.runtime_version},
                    {"unified_memory", gpu.unified_memory}});
  }
  nlohmann::json paths = nlohmann::json::array();
  for (const ComputePathStatus& path : report.compute_paths)
    paths.push_back({{"name", path.name}, {"available", path.available}, {"detail", path.detail}});
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto& [family, variant] : report.cpu_kernels) kernels[family] = variant;
  nlohmann::json json = {{"build",
                          {{"version", report.version},
                           {"cuda", report.cuda_built},
                           {"cuda_emulated", !report.cuda_emulation.empty()},
                           {"compiler", report.compiler}}},
                         {"cpu",
                          {{"model", report.cpu_model},
                           {"features", report.cpu_features},
                           {"logical_cores", report.logical_cores},
                           {"openmp_threads", report.openmp_threads},
                           {"blas", report.blas},
                           {"blas_threads", report.blas_threads},
                           {"blas_warning", report.blas_warning},
                           {"memory_total_bytes", report.memory_total_bytes}}},
                         {"cpu_kernels", kernels},
                         {"gpus", gpus},
                         {"compute_paths", paths}};
  if (!report.gpu_unavailable.empty()) json["gpu_unavailable"] = report.gpu_unavailable;
  return json;
}

std::string system_report_text(const SystemReport& report) {
  std::string text;
  const std::string cuda = !report.cuda_emulation.empty()
                               ? "emulated on the CPU (NVFP4LM_CUDA=EMULATE build: " + report.cuda_emulation +
                                     "; results are checked, timings are not GPU timings)"
                               : (report.cuda_built ? "compiled in" : "not compiled in");
  text += fmt::format("build    nvfp4lm {}, CUDA {}, {}\n", report.version, cuda, report.compiler);
  text +=
      fmt::format("cpu      {} ({}), {} logical cores, {} OpenMP threads, {:.1f} GiB memory\n", report.cpu_model,
                  report.cpu_features, report.logical_cores, report.openmp_threads, to_gib(report.memory_total_bytes));
  std::string kernels;
  for (const auto& [family, variant] : report.cpu_kernels)
    kernels += fmt::format("{}{} {}", kernels.empty() ? "" : ", ", family, variant);
  text += fmt::format("kernels  {}{}\n", kernels, report.cpu_isa_limit);
  text += fmt::format("blas     {}, {} threads\n", report.blas, report.blas_threads);
  if (!report.blas_warning.empty()) text += fmt::format("         warning: {}\n", report.blas_warning);
  if (report.gpus.empty()) text += fmt::format("gpu      none: {}\n", report.gpu_unavailable);
  for (const GpuReport& gpu : report.gpus) {
    text +=
        fmt::format("gpu      cuda:{} {}, SM {}, {} SMs, {:.1f} GiB{} ({:.1f} GiB free), driver {}, runtime {}\n",
                    gpu.index, gpu.name, cuda_sm_text(gpu.sm), gpu.multiprocessors, to_gib(gpu.total_bytes),
                    gpu.unified_memory ? " unified memory (the host's: --max-memory counts CPU and GPU tensors)" : "",
                    to_gib(gpu.free_bytes), gpu.driver_version, gpu.runtime_version);
  }
  text += "compute paths\n";
  for (const ComputePathStatus& path : report.compute_paths)
    text += fmt::format("  {:<18} {:<13} {}\n", path.name, path.available ? "available" : "unavailable", path.detail);
  return text;
}

}  // namespace nvfp4lm
