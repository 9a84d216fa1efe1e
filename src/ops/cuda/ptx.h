// Every inline-PTX instruction of nvfp4lm's kernels, in one place (included by .cu files only). In the emulated
// build (docs/cuda-emulation.md) each has a C++ twin in emu/device_api.h with the PTX ISA's semantics;
// tests/emu/ptx_probe.cu runs them all on random inputs in both builds for a bitwise comparison on a real GPU.
//  - cp.async.{cg,ca}.shared.global with a source size (0: fill with zeros) + commit_group / wait_group 0;
//  - ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16;
//  - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (fragment layout in attention_mma.h);
//  - ex2.approx.ftz.f32;
//  - ld.global.nc.L1::no_allocate.v4.u32 (streaming loads of data read once).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace nvfp4lm::cuda {

// The shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ uint32_t smem_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global -> shared, bypassing L1; `valid == false` writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::cp_async(dst, src, 16, valid ? 16 : 0);
#else
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
#endif
}

// 4 bytes global -> shared through L1; `valid == false` writes 4 zero bytes.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::cp_async(dst, src, 4, valid ? 4 : 0);
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits for every committed cp.async group of this thread (other threads' copies need a barrier after it).
__device__ __forceinline__ void cp_async_wait_all() {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::cp_async_wait_group(0);
#else
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::ldmatrix(r, 4, false, address);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::ldmatrix(r, 4, true, address);
#else
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
#endif
}

// d += a b (16x16 BF16 times 16x8 BF16, fp32 accumulators).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::mma_m16n8k16_bf16(d, a, b0, b1);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// 2^x with one MUFU instruction (relative error ~2^-22; 2^-inf = 0, which masking relies on).
__device__ __forceinline__ float fast_exp2(float x) {
#if NVFP4LM_CUDA_EMULATION
  return ::nvfp4lm::emu::ex2_approx_ftz(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// 16 bytes of data that is read once: not kept in L1 (read-only path).
__device__ __forceinline__ uint4 load_streaming(const void* pointer) {
#if NVFP4LM_CUDA_EMULATION
  return *static_cast<const uint4*>(pointer);
#else
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(pointer));
  return v;
#endif
}

}  // namespace nvfp4lm::cuda
