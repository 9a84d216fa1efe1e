// The device side of CUDA as emulated kernels see it: the built-in variables, barriers, warp shuffles / votes /
// matches / reductions, atomics, the integer and float intrinsics, and the PTX instructions of ops/cuda/ptx.h.
// Included through cuda_emu.h (the header forced into every emulated .cu); only what nvfp4lm's kernels use plus
// the obvious siblings of each family. Semantics follow the CUDA C++ Programming Guide and the PTX ISA; where a
// GPU result is undefined the emulator either faults (misuse a GPU might survive by luck) or returns poison.
#pragma once

#include <cuda_runtime.h>
#include <vector_types.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "emu/block_runner.h"
#include "emu/thread_context.h"
#include "emu/warp_collectives.h"

// ---- built-in variables ---------------------------------------------------------------------------------------

#define threadIdx (::nvfp4lm::emu::this_thread().thread_idx)
#define blockIdx (::nvfp4lm::emu::this_thread().block_idx)
#define blockDim (::nvfp4lm::emu::this_thread().block_dim)
#define gridDim (::nvfp4lm::emu::this_thread().grid_dim)
inline constexpr int warpSize = 32;

namespace nvfp4lm::emu {

// __syncthreads() is a macro naming its source line: all threads waiting at the barrier must have reached the
// same one (block_runner.h). A code address would not do: the compiler may duplicate one barrier into branches.
void syncthreads(const char* file, int line);
WarpResult warp_collective(const WarpPost& post);
void* static_shared(const SharedSite& site);
void* dynamic_shared();
uint32_t shared_address(const void* pointer);

// PTX instructions (ops/cuda/ptx.h calls these in the emulated build).
void cp_async(uint32_t shared_dst, const void* global_src, int copy_bytes, int source_bytes);
void cp_async_commit();
void cp_async_wait_group(int groups_left_pending);
void ldmatrix(uint32_t* regs, int matrices, bool trans, uint32_t shared_address);
void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
// mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 d, a, b, d,
// scale_a, {0, thread_id_a}, scale_b, {0, thread_id_b}: only on an emulated sm_120 / sm_121 (NVFP4LM_EMU_ARCH); on
// another it is a fault, as a GPU without an sm_120a / sm_121a image cannot run the kernel.
void mma_m16n8k64_fp4(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], uint32_t scale_a,
                      uint16_t thread_id_a, uint32_t scale_b, uint16_t thread_id_b);
// A memory fence; `device_scope` (__threadfence, __threadfence_system) publishes the block's plain stores to other
// blocks for the global race check.
void thread_fence(bool device_scope);
// ex2.approx.ftz.f32: 2^x with subnormal inputs and results flushed to zero.
float ex2_approx_ftz(float x);

template <typename T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8),
                "warp intrinsics take 2-, 4- or 8-byte trivially copyable values");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// A shuffle, vote, match or reduction with scalar operands (out of line: the emulated .cu files are instrumented
// for memory checks, and scalars keep the collective's bookkeeping out of their loads and stores). Returns the
// lane's result; `predicate` (optional) receives match.all's.
uint64_t warp_scalar_collective(WarpOp op, unsigned mask, uint64_t value, int value_bytes, bool is_signed, int lane_arg,
                                int width, bool* predicate = nullptr);

template <typename T>
T shuffle(WarpOp op, unsigned mask, T value, int lane_arg, int width) {
  return from_bits<T>(warp_scalar_collective(op, mask, to_bits(value), sizeof(T) == 8 ? 8 : 4, false, lane_arg, width));
}

inline uint64_t simple_collective(WarpOp op, unsigned mask, uint64_t value, int value_bytes = 4,
                                  bool is_signed = false) {
  return warp_scalar_collective(op, mask, value, value_bytes, is_signed, 0, 32);
}

template <typename T>
T atomic_update(T* address, T value, T (*combine)(T, T)) {
  using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(T) == sizeof(Bits));
  auto* word = reinterpret_cast<Bits*>(address);
  Bits expected = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    const T updated = combine(from_bits<T>(expected), value);
    Bits desired;
    std::memcpy(&desired, &updated, sizeof(T));
    if (__atomic_compare_exchange_n(word, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return from_bits<T>(expected);
  }
}

}  // namespace nvfp4lm::emu

// ---- barriers and fences --------------------------------------------------------------------------------------

#define __syncthreads() ::nvfp4lm::emu::syncthreads(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu) {
  ::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::SyncWarp, mask, 0);
}
// Out of line: the emulated .cu files are built with -fsanitize=thread, which rejects a fence in their code.
// __threadfence also tells the global race check that the block's stores so far are published.
inline void __threadfence() { ::nvfp4lm::emu::thread_fence(true); }
inline void __threadfence_block() { ::nvfp4lm::emu::thread_fence(false); }
inline void __threadfence_system() { ::nvfp4lm::emu::thread_fence(true); }

// ---- warp shuffles, votes, matches, reductions ---------------------------------------------------------------

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  return ::nvfp4lm::emu::shuffle(::nvfp4lm::emu::WarpOp::ShflIdx, mask, var, src_lane, width);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::nvfp4lm::emu::shuffle(::nvfp4lm::emu::WarpOp::ShflUp, mask, var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::nvfp4lm::emu::shuffle(::nvfp4lm::emu::WarpOp::ShflDown, mask, var, static_cast<int>(delta), width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return ::nvfp4lm::emu::shuffle(::nvfp4lm::emu::WarpOp::ShflXor, mask, var, lane_mask, width);
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::Ballot, mask, predicate != 0));
}
inline int __any_sync(unsigned mask, int predicate) {
  return static_cast<int>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::Any, mask, predicate != 0));
}
inline int __all_sync(unsigned mask, int predicate) {
  return static_cast<int>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::All, mask, predicate != 0));
}

template <typename T>
unsigned __match_any_sync(unsigned mask, T value) {
  return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(
      ::nvfp4lm::emu::WarpOp::MatchAny, mask, ::nvfp4lm::emu::to_bits(value), sizeof(T) == 8 ? 8 : 4));
}
template <typename T>
unsigned __match_all_sync(unsigned mask, T value, int* predicate) {
  bool all_equal = false;
  const uint64_t result =
      ::nvfp4lm::emu::warp_scalar_collective(::nvfp4lm::emu::WarpOp::MatchAll, mask, ::nvfp4lm::emu::to_bits(value),
                                             sizeof(T) == 8 ? 8 : 4, false, 0, 32, &all_equal);
  *predicate = all_equal ? 1 : 0;
  return static_cast<unsigned>(result);
}

#define NVFP4LM_EMU_REDUCE(name, op)                                                                                  \
  inline unsigned name(unsigned mask, unsigned value) {                                                               \
    return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::op, mask, value));         \
  }                                                                                                                   \
  inline int name(unsigned mask, int value) {                                                                         \
    return static_cast<int>(static_cast<uint32_t>(                                                                    \
        ::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::op, mask, static_cast<uint32_t>(value), 4, true))); \
  }
NVFP4LM_EMU_REDUCE(__reduce_add_sync, ReduceAdd)
NVFP4LM_EMU_REDUCE(__reduce_min_sync, ReduceMin)
NVFP4LM_EMU_REDUCE(__reduce_max_sync, ReduceMax)
#undef NVFP4LM_EMU_REDUCE
inline unsigned __reduce_and_sync(unsigned mask, unsigned value) {
  return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::ReduceAnd, mask, value));
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value) {
  return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::ReduceOr, mask, value));
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value) {
  return static_cast<unsigned>(::nvfp4lm::emu::simple_collective(::nvfp4lm::emu::WarpOp::ReduceXor, mask, value));
}

// ---- atomics (real atomic operations: blocks may run on several OS threads) ----------------------------------

#define NVFP4LM_EMU_INTEGER_ATOMICS(T)                                                                       \
  inline T atomicAdd(T* address, T value) { return __atomic_fetch_add(address, value, __ATOMIC_RELAXED); }   \
  inline T atomicSub(T* address, T value) { return __atomic_fetch_sub(address, value, __ATOMIC_RELAXED); }   \
  inline T atomicExch(T* address, T value) { return __atomic_exchange_n(address, value, __ATOMIC_RELAXED); } \
  inline T atomicAnd(T* address, T value) { return __atomic_fetch_and(address, value, __ATOMIC_RELAXED); }   \
  inline T atomicOr(T* address, T value) { return __atomic_fetch_or(address, value, __ATOMIC_RELAXED); }     \
  inline T atomicXor(T* address, T value) { return __atomic_fetch_xor(address, value, __ATOMIC_RELAXED); }   \
  inline T atomicMin(T* address, T value) {                                                                  \
    return ::nvfp4lm::emu::atomic_update<T>(address, value, [](T a, T b) { return b < a ? b : a; });         \
  }                                                                                                          \
  inline T atomicMax(T* address, T value) {                                                                  \
    return ::nvfp4lm::emu::atomic_update<T>(address, value, [](T a, T b) { return b > a ? b : a; });         \
  }                                                                                                          \
  inline T atomicCAS(T* address, T compare, T value) {                                                       \
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);        \
    return compare;                                                                                          \
  }
NVFP4LM_EMU_INTEGER_ATOMICS(int)
NVFP4LM_EMU_INTEGER_ATOMICS(unsigned int)
NVFP4LM_EMU_INTEGER_ATOMICS(long long)
NVFP4LM_EMU_INTEGER_ATOMICS(unsigned long long)
#undef NVFP4LM_EMU_INTEGER_ATOMICS

inline float atomicAdd(float* address, float value) {
  return ::nvfp4lm::emu::atomic_update<float>(address, value, [](float a, float b) { return a + b; });
}
inline double atomicAdd(double* address, double value) {
  return ::nvfp4lm::emu::atomic_update<double>(address, value, [](double a, double b) { return a + b; });
}
// sm_90: a vector atomic, each element atomic on its own.
inline float2 atomicAdd(float2* address, float2 value) {
  float2 old;
  old.x = atomicAdd(&address->x, value.x);
  old.y = atomicAdd(&address->y, value.y);
  return old;
}
inline float atomicExch(float* address, float value) {
  return ::nvfp4lm::emu::atomic_update<float>(address, value, [](float, float b) { return b; });
}

// ---- integer and bit intrinsics ----------------------------------------------------------------------------

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
  return (x >> 16) | (x << 16);
}
// prmt.b32 default mode: byte i of the result is byte (s >> 4 i) & 7 of the 8-byte value {y, x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = (static_cast<uint64_t>(y) << 32) | x;
  unsigned result = 0;
  for (int i = 0; i < 4; ++i)
    result |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return result;
}

inline unsigned __float_as_uint(float x) { return ::nvfp4lm::emu::from_bits<unsigned>(::nvfp4lm::emu::to_bits(x)); }
inline float __uint_as_float(unsigned x) { return ::nvfp4lm::emu::from_bits<float>(x); }
inline int __float_as_int(float x) { return ::nvfp4lm::emu::from_bits<int>(::nvfp4lm::emu::to_bits(x)); }
inline float __int_as_float(int x) { return ::nvfp4lm::emu::from_bits<float>(static_cast<uint32_t>(x)); }
inline long long __double_as_longlong(double x) {
  return ::nvfp4lm::emu::from_bits<long long>(::nvfp4lm::emu::to_bits(x));
}
inline double __longlong_as_double(long long x) { return ::nvfp4lm::emu::from_bits<double>(static_cast<uint64_t>(x)); }

inline int min(int a, int b) { return b < a ? b : a; }
inline unsigned min(unsigned a, unsigned b) { return b < a ? b : a; }
inline long min(long a, long b) { return b < a ? b : a; }
inline unsigned long min(unsigned long a, unsigned long b) { return b < a ? b : a; }
inline long long min(long long a, long long b) { return b < a ? b : a; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return b < a ? b : a; }
inline float min(float a, float b) { return fminf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline int max(int a, int b) { return b > a ? b : a; }
inline unsigned max(unsigned a, unsigned b) { return b > a ? b : a; }
inline long max(long a, long b) { return b > a ? b : a; }
inline unsigned long max(unsigned long a, unsigned long b) { return b > a ? b : a; }
inline long long max(long long a, long long b) { return b > a ? b : a; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return b > a ? b : a; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// ---- float intrinsics -------------------------------------------------------------------------------------------
// The _rn operations are IEEE operations rounded to nearest (what plain C++ arithmetic is here: nvfp4lm compiles
// without FMA contraction). The fast approximations are built as the GPU builds them (ex2 / lg2 based), so their
// error is of the GPU's kind rather than libm's.

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
inline float __saturatef(float a) { return std::isnan(a) ? 0.0f : fminf(fmaxf(a, 0.0f), 1.0f); }
inline float __expf(float x) { return ::nvfp4lm::emu::ex2_approx_ftz(x * 1.4426950408889634f); }
inline float __exp10f(float x) { return ::nvfp4lm::emu::ex2_approx_ftz(x * 3.3219280948873623f); }
inline float __logf(float x) { return log2f(x) * 0.6931471805599453f; }
inline float __log2f(float x) { return log2f(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float a, float b) { return ::nvfp4lm::emu::ex2_approx_ftz(b * log2f(a)); }

namespace nvfp4lm::emu {
// cvt.rni with saturation to the destination range. NaN converts to 0 for 32-bit destinations and to
// 0x8000000000000000 for 64-bit ones, signed or not (what the hardware gives: the H200 PTX probe, and CUDA's
// math API notes for __float2ull_rn / __float2ll_rn).
template <typename Int>
Int float_to_int_rn(double value) {
  if (std::isnan(value)) return sizeof(Int) == 8 ? static_cast<Int>(uint64_t{1} << 63) : Int{0};
  const double rounded = std::nearbyint(value);
  if (rounded <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (rounded >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(rounded);
}
}  // namespace nvfp4lm::emu
inline int __float2int_rn(float x) { return ::nvfp4lm::emu::float_to_int_rn<int>(x); }
inline unsigned __float2uint_rn(float x) { return ::nvfp4lm::emu::float_to_int_rn<unsigned>(x); }
inline long long __float2ll_rn(float x) { return ::nvfp4lm::emu::float_to_int_rn<long long>(x); }
inline unsigned long long __float2ull_rn(float x) { return ::nvfp4lm::emu::float_to_int_rn<unsigned long long>(x); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }

// CUDA declares the classification functions in the global namespace for device code.
using std::isfinite;
using std::isinf;
using std::isnan;

// ---- loads, shared memory address space, timing ------------------------------------------------------------------

template <typename T>
T __ldg(const T* address) {
  return *address;
}
template <typename T>
T __ldcs(const T* address) {
  return *address;
}
// ld.global.cg: cached in L2 only (no stale L1 line of another block's store): a plain load here.
template <typename T>
T __ldcg(const T* address) {
  return *address;
}
template <typename T>
void __stcs(T* address, T value) {
  *address = value;
}
inline size_t __cvta_generic_to_shared(const void* pointer) { return ::nvfp4lm::emu::shared_address(pointer); }
// The runtime's template overload for kernel pointers (cuda_runtime.h declares it for nvcc only).
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}

inline long long clock64() { return static_cast<long long>(__builtin_ia32_rdtsc()); }
inline void __nanosleep(unsigned) {}
