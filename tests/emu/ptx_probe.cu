// The PTX probe: every instruction the emulated device stands in for (ops/cuda/ptx.h, the warp intrinsics, the
// number-format intrinsics nvfp4lm's kernels use) run on fixed pseudo-random inputs, each lane's result written
// out. The same file builds with nvcc and for the emulated device, so one GPU run compares the two bit for bit
// (scripts/compare_ptx_probe.py; ulp bounds for ex2.approx and the mma accumulation, whose rounding PTX leaves
// open). tests/fixtures/emu/ptx_probe.txt is the emulator's dump; test_emu checks it stays current.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda/check.h"
#include "core/cuda/launch.h"
#include "emu/ptx_probe.h"
#include "ops/cuda/ptx.h"

namespace nvfp4lm::ptx_probe {
namespace {

using namespace cuda;  // ptx.h

// splitmix64: the probe's inputs depend on nothing but this.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint32_t u32() { return static_cast<uint32_t>(next() >> 32); }
  float uniform(float low, float high) { return low + (high - low) * static_cast<float>(next() >> 40) * 0x1p-24f; }
  // A BF16 value: mostly normal numbers of both signs, some tiny or subnormal ones, some exact zeros.
  uint16_t bf16() {
    const uint32_t pick = u32() % 16;
    if (pick == 0) return 0;
    if (pick == 1) return static_cast<uint16_t>((u32() & 0x807Fu) | 0x0001u);  // subnormal
    const float value = uniform(-4.f, 4.f) * std::ldexp(1.f, static_cast<int>(u32() % 9) - 4);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
  }
};

uint32_t float_to_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

template <typename T>
class Buffer {
 public:
  explicit Buffer(const std::vector<T>& host) : count_(host.size()) {
    NVFP4LM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(count_, 1) * sizeof(T)));
    // On the kernels' stream: the legacy stream's cudaMemcpy is not ordered with a non-blocking stream.
    if (count_ > 0)
      NVFP4LM_CUDA_CHECK(
          cudaMemcpyAsync(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice, cuda::stream()));
  }
  explicit Buffer(size_t count) : Buffer(std::vector<T>(count)) {}
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return data_; }
  std::vector<T> read() const {
    std::vector<T> host(count_);
    NVFP4LM_CUDA_CHECK(cudaDeviceSynchronize());
    if (count_ > 0) NVFP4LM_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  size_t count_;
};

void launched() { NVFP4LM_CUDA_CHECK_LAUNCH(); }

// ---- kernels ----------------------------------------------------------------------------------------------------

// One mma per case: fragments straight from the PTX layout; lane l writes d[0..3].
__global__ void mma_kernel(const uint32_t* a_regs, const uint32_t* b_regs, const float* c, float* d) {
  const int lane = static_cast<int>(threadIdx.x), base = static_cast<int>(blockIdx.x) * 32 + lane;
  uint32_t a[4];
  float acc[4];
  for (int i = 0; i < 4; ++i) {
    a[i] = a_regs[base * 4 + i];
    acc[i] = c[base * 4 + i];
  }
  mma_bf16(acc, a, b_regs[base * 2], b_regs[base * 2 + 1]);
  for (int i = 0; i < 4; ++i) d[base * 4 + i] = acc[i];
}

// ldmatrix .x4 and .x4.trans of a 16 x 16 u16 tile with the two row-address patterns the attention kernels use.
__global__ void ldmatrix_kernel(const uint16_t* tile, uint32_t* out) {
  NVFP4LM_SHARED(uint16_t[16 * 16], shared_tile);
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 256; i += 32) shared_tile[i] = tile[static_cast<int>(blockIdx.x) * 256 + i];
  __syncwarp();
  const uint32_t rows_then_chunk = smem_address(shared_tile + (lane & 15) * 16 + (lane >> 4) * 8);
  const uint32_t blocks = smem_address(shared_tile + (((lane >> 3) & 1) * 8 + (lane & 7)) * 16 + (lane >> 4) * 8);
  uint32_t r[4];
  uint32_t* o = out + (static_cast<int>(blockIdx.x) * 32 + lane) * 16;
  ldmatrix_x4(r, rows_then_chunk);
  for (int i = 0; i < 4; ++i) o[i] = r[i];
  ldmatrix_x4_trans(r, rows_then_chunk);
  for (int i = 0; i < 4; ++i) o[4 + i] = r[i];
  ldmatrix_x4(r, blocks);
  for (int i = 0; i < 4; ++i) o[8 + i] = r[i];
  ldmatrix_x4_trans(r, blocks);
  for (int i = 0; i < 4; ++i) o[12 + i] = r[i];
}

// cp.async 16 (cg) and 4 (ca) bytes, every third copy zero-filled; then the shared words as the block sees them.
__global__ void cp_async_kernel(const uint32_t* source, uint32_t* out) {
  NVFP4LM_DYNAMIC_SHARED(uint32_t, staged);  // 64 threads: 256 words of 16-byte copies, then 64 of 4-byte copies
  const int t = static_cast<int>(threadIdx.x);
  cp_async_16(smem_address(staged + 4 * t), source + 4 * t, t % 3 != 0);
  cp_async_4(smem_address(staged + 256 + t), source + 256 + t, t % 3 != 1);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  for (int i = t; i < 320; i += 64) out[i] = staged[i];
}

__global__ void ex2_kernel(const float* x, float* y, int count) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) y[i] = fast_exp2(x[i]);
}

struct ShuffleCase {
  int mode, arg, width;
  unsigned mask_kind;  // 0: full mask; 1: a group mask of `width` lanes
};

__global__ void shuffle_kernel(const ShuffleCase* cases, const uint32_t* values, uint32_t* out) {
  const ShuffleCase c = cases[blockIdx.x];
  const int lane = static_cast<int>(threadIdx.x);
  const uint32_t v = values[blockIdx.x * 32 + lane];
  unsigned mask = 0xFFFFFFFFu;
  if (c.mask_kind == 1 && c.width < 32) mask = ((1u << c.width) - 1u) << (lane / c.width * c.width);
  uint32_t r = 0;
  switch (c.mode) {
    case 0:
      r = __shfl_sync(mask, v, c.arg, c.width);
      break;
    case 1:
      r = __shfl_up_sync(mask, v, static_cast<unsigned>(c.arg), c.width);
      break;
    case 2:
      r = __shfl_down_sync(mask, v, static_cast<unsigned>(c.arg), c.width);
      break;
    default:
      r = __shfl_xor_sync(mask, v, c.arg, c.width);
      break;
  }
  out[blockIdx.x * 32 + lane] = r;
}

__global__ void vote_kernel(const uint32_t* values, uint32_t* out) {
  const int lane = static_cast<int>(threadIdx.x), base = static_cast<int>(blockIdx.x) * 32 + lane;
  const uint32_t v = values[base];
  const unsigned mask = blockIdx.x % 2 == 0 ? 0xFFFFFFFFu : 0x5A5A5A5Au;
  uint32_t* o = out + base * 6;
  if (((mask >> lane) & 1u) == 0) {
    for (int i = 0; i < 6; ++i) o[i] = 0;
    return;
  }
  o[0] = __ballot_sync(mask, v & 1u);
  o[1] = __match_any_sync(mask, v % 5u);
  o[2] = __reduce_add_sync(mask, v);
  o[3] = __reduce_min_sync(mask, v);
  o[4] = __reduce_max_sync(mask, v);
  o[5] = static_cast<uint32_t>(__reduce_min_sync(mask, static_cast<int>(v)));
}

// Number formats: byte_perm, fp8 pairs to half, float -> unsigned long long, BF16x2 multiply and round.
__global__ void formats_kernel(const uint32_t* words, int count, uint32_t* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  const uint32_t x = words[3 * i], y = words[3 * i + 1], s = words[3 * i + 2];
  uint32_t* o = out + 6 * i;
  o[0] = __byte_perm(x, y, s);
  const __half2_raw halves = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(x & 0xFFFFu), __NV_E4M3);
  o[1] = static_cast<uint32_t>(halves.x) | (static_cast<uint32_t>(halves.y) << 16);
  const unsigned long long converted = __float2ull_rn(__uint_as_float(y));
  o[2] = static_cast<uint32_t>(converted);
  o[3] = static_cast<uint32_t>(converted >> 32);
  const __nv_bfloat162 product =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&x), *reinterpret_cast<const __nv_bfloat162*>(&y));
  o[4] = *reinterpret_cast<const uint32_t*>(&product);
  const __nv_bfloat162 rounded = __floats2bfloat162_rn(__uint_as_float(x), __uint_as_float(s));
  o[5] = *reinterpret_cast<const uint32_t*>(&rounded);
}

__global__ void streaming_kernel(const uint4* in, uint4* out) { out[threadIdx.x] = load_streaming(in + threadIdx.x); }

// ---- host -------------------------------------------------------------------------------------------------------

void add(std::vector<Record>& lines, const std::string& name, int index, const uint32_t* words, int count) {
  lines.push_back(Record{name, index, std::vector<uint32_t>(words, words + count)});
}

void probe_mma(Random& random, std::vector<Record>& lines) {
  constexpr int kCases = 6;
  std::vector<uint32_t> a_regs(kCases * 32 * 4), b_regs(kCases * 32 * 2);
  std::vector<float> c(kCases * 32 * 4);
  for (int k = 0; k < kCases; ++k) {
    for (int lane = 0; lane < 32; ++lane) {
      const int base = k * 32 + lane;
      for (int i = 0; i < 4; ++i) a_regs[base * 4 + i] = random.bf16() | (uint32_t{random.bf16()} << 16);
      for (int i = 0; i < 2; ++i) b_regs[base * 2 + i] = random.bf16() | (uint32_t{random.bf16()} << 16);
      for (int i = 0; i < 4; ++i) c[base * 4 + i] = k == 0 ? 0.f : random.uniform(-8.f, 8.f);
    }
  }
  const Buffer<uint32_t> a(a_regs), b(b_regs);
  const Buffer<float> dc(c);
  Buffer<float> d(c.size());
  NVFP4LM_LAUNCH(mma_kernel, kCases, 32, 0)(a.get(), b.get(), dc.get(), d.get());
  launched();
  const std::vector<float> result = d.read();
  for (int base = 0; base < kCases * 32; ++base) {
    uint32_t words[4];
    std::memcpy(words, &result[base * 4], 16);
    add(lines, "mma.m16n8k16.bf16", base, words, 4);
  }
}

void probe_ldmatrix(Random& random, std::vector<Record>& lines) {
  constexpr int kCases = 2;
  std::vector<uint16_t> tile(kCases * 256);
  for (auto& v : tile) v = static_cast<uint16_t>(random.u32());
  const Buffer<uint16_t> in(tile);
  Buffer<uint32_t> out(kCases * 32 * 16);
  NVFP4LM_LAUNCH(ldmatrix_kernel, kCases, 32, 0)(in.get(), out.get());
  launched();
  const std::vector<uint32_t> regs = out.read();
  for (int base = 0; base < kCases * 32; ++base) add(lines, "ldmatrix.x4(.trans)", base, &regs[base * 16], 16);
}

void probe_cp_async(Random& random, std::vector<Record>& lines) {
  std::vector<uint32_t> source(320);
  for (auto& w : source) w = random.u32();
  const Buffer<uint32_t> in(source);
  Buffer<uint32_t> out(320);
  NVFP4LM_LAUNCH(cp_async_kernel, 1, 64, 320 * 4)(in.get(), out.get());
  launched();
  const std::vector<uint32_t> words = out.read();
  for (int i = 0; i < 320; i += 16) add(lines, "cp.async", i / 16, &words[i], 16);
}

void probe_ex2(Random& random, std::vector<Record>& lines) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {-inf,    inf,     std::numeric_limits<float>::quiet_NaN(),
                          0.f,     -0.f,    1e-40f,
                          -1e-40f, -126.f,  -126.5f,
                          -127.f,  -149.f,  -150.f,
                          127.f,   127.99f, 128.f,
                          1.f,     -1.f,    0.5f,
                          0x1p-20f};
  while (x.size() < 1024) x.push_back(random.uniform(-140.f, 130.f));
  const Buffer<float> in(x);
  Buffer<float> out(x.size());
  NVFP4LM_LAUNCH(ex2_kernel, 8, 128, 0)(in.get(), out.get(), static_cast<int>(x.size()));
  launched();
  const std::vector<float> y = out.read();
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t words[2] = {float_to_bits(x[i]), float_to_bits(y[i])};
    add(lines, "ex2.approx.ftz", static_cast<int>(i), words, 2);
  }
}

void probe_shuffles(Random& random, std::vector<Record>& lines) {
  std::vector<ShuffleCase> cases;
  for (int mode = 0; mode < 4; ++mode)
    for (int width : {1, 2, 4, 8, 16, 32})
      for (int arg : {0, 1, 3, 7, 16, 31})
        for (unsigned mask_kind : {0u, 1u}) cases.push_back({mode, arg, width, mask_kind});
  std::vector<uint32_t> values(cases.size() * 32);
  for (auto& v : values) v = random.u32();
  const Buffer<ShuffleCase> dcases(cases);
  const Buffer<uint32_t> in(values);
  Buffer<uint32_t> out(values.size());
  NVFP4LM_LAUNCH(shuffle_kernel, static_cast<unsigned>(cases.size()), 32, 0)(dcases.get(), in.get(), out.get());
  launched();
  const std::vector<uint32_t> got = out.read();
  for (size_t k = 0; k < cases.size(); ++k) {
    const ShuffleCase& c = cases[k];
    const std::string name = "shfl.mode" + std::to_string(c.mode) + ".arg" + std::to_string(c.arg) + ".width" +
                             std::to_string(c.width) + ".mask" + std::to_string(c.mask_kind);
    add(lines, name, static_cast<int>(k), &got[k * 32], 32);
  }
}

void probe_votes(Random& random, std::vector<Record>& lines) {
  constexpr int kCases = 8;
  std::vector<uint32_t> values(kCases * 32);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i % 64 < 32 ? random.u32() % 9 : random.u32();  // small values: matches and ties
  const Buffer<uint32_t> in(values);
  Buffer<uint32_t> out(values.size() * 6);
  NVFP4LM_LAUNCH(vote_kernel, kCases, 32, 0)(in.get(), out.get());
  launched();
  const std::vector<uint32_t> got = out.read();
  for (int base = 0; base < kCases * 32; ++base) add(lines, "vote.match.redux", base, &got[base * 6], 6);
}

void probe_formats(Random& random, std::vector<Record>& lines) {
  std::vector<uint32_t> words;
  // fp8: every byte in either half; float -> u64: special values; the rest random.
  const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x3F000000u,
                               0x3FC00000u, 0x40200000u, 0x5F800000u, 0x5F7FFFFFu, 0x60000000u, 0xBF800000u,
                               0x00000001u, 0x4B000001u, 0x3F7FFFFFu, 0x3F400000u};
  for (uint32_t i = 0; i < 512; ++i) {
    const uint32_t pair = i < 256 ? (0x3800u | i) : ((i - 256) << 8 | 0x38u);
    const uint32_t y = i < 16 ? specials[i] : random.u32();
    words.insert(words.end(), {(random.u32() & 0xFFFF0000u) | pair, y, random.u32()});
  }
  const int count = static_cast<int>(words.size() / 3);
  const Buffer<uint32_t> in(words);
  Buffer<uint32_t> out(static_cast<size_t>(count) * 6);
  NVFP4LM_LAUNCH(formats_kernel, (count + 127) / 128, 128, 0)(in.get(), count, out.get());
  launched();
  const std::vector<uint32_t> got = out.read();
  for (int i = 0; i < count; ++i) add(lines, "prmt.cvt.fp8.f2ull.hmul2.bf16x2", i, &got[i * 6], 6);
}

void probe_streaming(Random& random, std::vector<Record>& lines) {
  std::vector<uint32_t> words(128);
  for (auto& w : words) w = random.u32();
  const Buffer<uint32_t> in(words);
  Buffer<uint32_t> out(words.size());
  NVFP4LM_LAUNCH(streaming_kernel, 1, 32, 0)
  (reinterpret_cast<const uint4*>(in.get()), reinterpret_cast<uint4*>(out.get()));
  launched();
  const std::vector<uint32_t> got = out.read();
  for (int i = 0; i < 32; ++i) add(lines, "ld.global.nc.v4", i, &got[i * 4], 4);
}

}  // namespace

std::vector<Record> run() {
  Random random{20261124};
  std::vector<Record> lines;
  probe_mma(random, lines);
  probe_ldmatrix(random, lines);
  probe_cp_async(random, lines);
  probe_ex2(random, lines);
  probe_shuffles(random, lines);
  probe_votes(random, lines);
  probe_formats(random, lines);
  probe_streaming(random, lines);
  return lines;
}

}  // namespace nvfp4lm::ptx_probe
