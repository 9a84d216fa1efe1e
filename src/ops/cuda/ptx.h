// Every inline-PTX instruction of nvfp4lm's kernels, in one place (included by .cu files only). In the emulated
// build (docs/cuda-emulation.md) each has a C++ twin in emu/device_api.h with the PTX ISA's semantics;
// tests/emu/ptx_probe.cu runs them all on random inputs in both builds for a bitwise comparison on a real GPU.
//  - cp.async.{cg,ca}.shared.global with a source size (0: fill with zeros) + commit_group / wait_group 0;
//  - ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16;
//  - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (fragment layout in attention_mma.h);
//  - mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 (Blackwell
//    SM 12.x only: compiled where the target is sm_120a / sm_121a, a trap elsewhere);
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

// Whether this compilation emits the SM 12.x block-scaled FP4 mma (an sm_120a / sm_121a image, or the emulator).
#if NVFP4LM_CUDA_EMULATION || defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define NVFP4LM_HAS_FP4_MMA 1
#else
#define NVFP4LM_HAS_FP4_MMA 0
#endif

// d += (a · scale_a)(b · scale_b): a 16x64 NVFP4 tile times a 64x8 one, an E4M3 scale per 16 K values of each row of
// a and each column of b, fp32 accumulators (fragment and scale layouts: the PTX ISA's "Matrix Fragments for
// mma.m16n8k64" and "Block Scaling for mma.sync"; how nvfp4lm fills them: ops/cuda/nvfp4_w4a4_gemm.cu). thread_id_a / _b
// select the lanes whose scale registers count (scale_vec::4X: every byte of them, byte-ids 0).
__device__ __forceinline__ void mma_fp4(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                        uint32_t scale_a, uint16_t thread_id_a, uint32_t scale_b,
                                        uint16_t thread_id_b) {
#if NVFP4LM_CUDA_EMULATION
  ::nvfp4lm::emu::mma_m16n8k64_fp4(d, a, b, scale_a, thread_id_a, scale_b, thread_id_b);
#elif NVFP4LM_HAS_FP4_MMA
  const uint16_t byte_id = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3}, %10, {%11, %12}, %13, {%14, %15};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(scale_a), "h"(byte_id), "h"(thread_id_a),
        "r"(scale_b), "h"(byte_id), "h"(thread_id_b));
#else
  __trap();  // no FP4 tensor cores in this image: callers check nvfp4_w4a4_gemm_available() on the host first
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
