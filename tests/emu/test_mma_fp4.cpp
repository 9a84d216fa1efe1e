// The emulated mma.sync.m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X (Blackwell SM 12.x NVFP4 x NVFP4) against
// two statements of its layouts written down here independently of the emulator's code, so that the emulator and a
// kernel cannot share a misreading unseen:
//  1. the PTX ISA's text, transcribed as it is written (PTX ISA 9.1, 9.7.14.5.11 "Matrix Fragments for
//     mma.m16n8k64": the row / col formulas of elements a_i, b_i, c_i; 9.7.14.3 "Block Scaling for mma.sync": which
//     lanes give SF_A / SF_B for a thread-id selector);
//  2. CUTLASS cute's SM120 traits of SM120::BLOCKSCALED::SM120_16x8x64_TN_VS<float_e2m1_t, float_e2m1_t, float,
//     float_ue4m3_t, 16> (NVIDIA/cutlass include/cute/atom/mma_traits_sm120.hpp l.134-165 at 7107b055: ALayout,
//     BLayout, SFALayout, SFBLayout; CLayout = SM80_16x8_Row, include/cute/atom/mma_traits_sm80.hpp l.53-54), read as
//     data by a small evaluator of cute's (shape, stride) layouts. Which byte of a scale register holds which K chunk
//     comes from cute's recast of 4 consecutive ue4m3 values into one uint32 (mma_traits_sm120.hpp l.101-102): byte q
//     is chunk q.
// The two statements must agree element by element; then the emulator, fed registers packed by statement 2, must
// give D = C + Σ_k (A[m][k] SF_A[m][k/16]) (B[k][n] SF_B[k/16][n]) with every product exact and one rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "common/emulated_arch.h"
#include "core/rng.h"
#include "emu/emu_kernels.h"

namespace nvfp4lm::test::test_mma_fp4 {
namespace {

using emu_test::Fp4MmaLanes;
using emu_test::Fp4MmaOutcome;

// ---- statement 1: the PTX ISA's text ----------------------------------------------------------------------------
// For lane l: groupID = l >> 2, threadID_in_group = l % 4. A: four .b32 registers of eight .e2m1 elements each,
// a0..a31 low to high (a_i in register i / 8, nibble i % 8).
struct RowCol {
  int row, col;
};
RowCol ptx_a(int lane, int i) {
  const int group = lane >> 2, thread_in_group = lane % 4;
  const int row = ((0 <= i && i < 8) || (16 <= i && i < 24)) ? group : group + 8;
  const int col = i < 16 ? thread_in_group * 8 + (i & 0x7) : thread_in_group * 8 + (i & 0x7) + 32;
  return {row, col};
}
// B: two .b32 registers, b0..b15: (row = k, col = n).
RowCol ptx_b(int lane, int i) {
  const int group = lane >> 2, thread_in_group = lane % 4;
  const int row = i < 8 ? thread_in_group * 8 + (i & 0x7) : thread_in_group * 8 + (i & 0x7) + 32;
  return {row, group};
}
// C / D: c0..c3.
RowCol ptx_c(int lane, int i) {
  const int group = lane >> 2, thread_in_group = lane % 4;
  return {i < 2 ? group : group + 8, thread_in_group * 2 + (i & 0x1)};
}
// "when thread-id-a set to 0, thread-pair satisfying: %laneid % 4 == 0 or 1 provides the SF_A ... when set to 1,
// %laneid % 4 == 2 or 3"; "each thread satisfying: %laneid % 4 == thread-id-b provides the SF_B".
bool ptx_gives_scale_a(int lane, int thread_id_a) { return lane % 4 / 2 == thread_id_a; }
bool ptx_gives_scale_b(int lane, int thread_id_b) { return lane % 4 == thread_id_b; }

// ---- statement 2: CUTLASS cute's traits as data -----------------------------------------------------------------
// A layout maps (thread, value) to an index of a column-major (rows x cols) tile; each mode is a list of
// (size, stride) pairs, the coordinate decomposed colexicographically (the first pair varies fastest).
using Mode = std::vector<std::pair<int, int>>;
struct CuteLayout {
  Mode thread, value;
  int rows;  // the codomain's first extent: index = row + rows * col
};
int evaluate(const Mode& mode, int coordinate) {
  int index = 0;
  for (const auto& [size, stride] : mode) {
    index += (coordinate % size) * stride;
    coordinate /= size;
  }
  return index;
}
RowCol cute(const CuteLayout& layout, int thread, int value) {
  const int index = evaluate(layout.thread, thread) + evaluate(layout.value, value);
  return {index % layout.rows, index / layout.rows};
}
// ALayout = Layout<Shape<Shape<_4,_8>,Shape<_8,_2,_2>>, Stride<Stride<_128,_1>,Stride<_16,_8,_512>>>, (M16, K64).
const CuteLayout kCuteA{{{4, 128}, {8, 1}}, {{8, 16}, {2, 8}, {2, 512}}, 16};
// BLayout = Layout<Shape<Shape<_4,_8>,Shape<_8,_2>>, Stride<Stride<_64,_1>,Stride<_8,_256>>>, (N8, K64).
const CuteLayout kCuteB{{{4, 64}, {8, 1}}, {{8, 8}, {2, 256}}, 8};
// SM80_16x8_Row = Layout<Shape<Shape<_4,_8>,Shape<_2,_2>>, Stride<Stride<_32,_1>,Stride<_16,_8>>>, (M16, N8).
const CuteLayout kCuteC{{{4, 32}, {8, 1}}, {{2, 16}, {2, 8}}, 16};
// SFALayout = Layout<Shape<Shape<_2,_2,_8>,_64>, Stride<Stride<_8,_0,_1>,_16>>, (M16, K64).
const CuteLayout kCuteScaleA{{{2, 8}, {2, 0}, {8, 1}}, {{64, 16}}, 16};
// SFBLayout = Layout<Shape<Shape<_4,_8>,_64>, Stride<Stride<_0,_1>,_8>>, (N8, K64).
const CuteLayout kCuteScaleB{{{4, 0}, {8, 1}}, {{64, 8}}, 8};

// ---- the two statements agree -----------------------------------------------------------------------------------

TEST(MmaFp4Layouts, ThePtxTextAndCutlassCuteStateTheSameFragments) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 32; ++i) {
      const RowCol ptx = ptx_a(lane, i), layout = cute(kCuteA, lane, i);
      EXPECT_EQ(ptx.row, layout.row) << "A lane " << lane << " a" << i;
      EXPECT_EQ(ptx.col, layout.col) << "A lane " << lane << " a" << i;
    }
    for (int i = 0; i < 16; ++i) {
      const RowCol ptx = ptx_b(lane, i), layout = cute(kCuteB, lane, i);  // cute's B: (n, k)
      EXPECT_EQ(ptx.row, layout.col) << "B lane " << lane << " b" << i;
      EXPECT_EQ(ptx.col, layout.row) << "B lane " << lane << " b" << i;
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol ptx = ptx_c(lane, i), layout = cute(kCuteC, lane, i);
      EXPECT_EQ(ptx.row, layout.row) << "C lane " << lane << " c" << i;
      EXPECT_EQ(ptx.col, layout.col) << "C lane " << lane << " c" << i;
    }
  }
}

TEST(MmaFp4Layouts, TheScaleLanesOfThePtxTextAreCutlassCutes) {
  // cute (thread-id 0): lane -> the row / column whose 64 K values' scales it holds; the ISA's text: which lanes give.
  for (int lane = 0; lane < 32; ++lane) {
    const RowCol a = cute(kCuteScaleA, lane, 0), b = cute(kCuteScaleB, lane, 0);
    EXPECT_EQ(a.row, lane / 4 + 8 * (lane % 2)) << "SF_A of lane " << lane;
    EXPECT_EQ(b.row, lane / 4) << "SF_B of lane " << lane;
    for (int k = 0; k < 64; ++k) {
      EXPECT_EQ(cute(kCuteScaleA, lane, k).col, k);
      EXPECT_EQ(cute(kCuteScaleB, lane, k).col, k);
    }
  }
  // cute's stride-0 modes say which lanes duplicate others; the lanes the ISA names for selector 0 are one copy each.
  for (int m = 0; m < 16; ++m) {
    int givers = 0;
    for (int lane = 0; lane < 32; ++lane) givers += ptx_gives_scale_a(lane, 0) && cute(kCuteScaleA, lane, 0).row == m;
    EXPECT_EQ(givers, 1) << "row " << m;
  }
  for (int n = 0; n < 8; ++n) {
    int givers = 0;
    for (int lane = 0; lane < 32; ++lane) givers += ptx_gives_scale_b(lane, 0) && cute(kCuteScaleB, lane, 0).row == n;
    EXPECT_EQ(givers, 1) << "column " << n;
  }
}

// ---- the emulator against them ----------------------------------------------------------------------------------

double e2m1(int code) {
  static constexpr double kMagnitudes[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8 ? -1.0 : 1.0) * kMagnitudes[code & 7];
}
double ue4m3(int byte) {
  const int exponent = byte >> 3, mantissa = byte & 7;
  return exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
}

// A problem: codes of A [16][64] and B [64][8] (column n of B: the K values of output column n), scale bytes
// [16][4] / [4][8], C.
struct Problem {
  int a[16][64], b[64][8];
  int scale_a[16][4], scale_b[4][8];
  float c[16][8];
};

// Random codes; scale bytes from the whole UE4M3 range, with all-zero blocks, the largest scale (0x7E = 448) and
// subnormal ones (0x01 = 2^-9) among them.
Problem random_problem(uint64_t seed) {
  Rng rng(seed);
  Problem p{};
  for (auto& row : p.a)
    for (int& code : row) code = static_cast<int>(rng.below(16));
  for (auto& row : p.b)
    for (int& code : row) code = static_cast<int>(rng.below(16));
  const int special[] = {0x00, 0x7E, 0x01, 0x07, 0x08};
  for (int m = 0; m < 16; ++m)
    for (int q = 0; q < 4; ++q)
      p.scale_a[m][q] = rng.below(4) == 0 ? special[rng.below(5)] : static_cast<int>(rng.below(0x7F));
  for (int q = 0; q < 4; ++q)
    for (int n = 0; n < 8; ++n)
      p.scale_b[q][n] = rng.below(4) == 0 ? special[rng.below(5)] : static_cast<int>(rng.below(0x7F));
  for (int k = 16; k < 32; ++k) p.a[9][k] = 0;  // an all-zero block of A
  for (auto& row : p.c)
    for (float& value : row) value = rng.normal();
  return p;
}

// The registers of `p` as cute's layouts place them (a value v of a thread: register v / 8, nibble v % 8), scales in
// the lanes the selectors name; every other lane's scale register holds `other_scales` (which must not count).
Fp4MmaLanes pack_by_cute(const Problem& p, uint16_t thread_id_a, uint16_t thread_id_b, uint32_t other_scales) {
  Fp4MmaLanes lanes;
  lanes.thread_id_a = thread_id_a;
  lanes.thread_id_b = thread_id_b;
  for (int lane = 0; lane < 32; ++lane) {
    for (int v = 0; v < 32; ++v) {
      const RowCol at = cute(kCuteA, lane, v);
      lanes.a[lane][v / 8] |= static_cast<uint32_t>(p.a[at.row][at.col]) << (4 * (v % 8));
    }
    for (int v = 0; v < 16; ++v) {
      const RowCol at = cute(kCuteB, lane, v);  // (n, k)
      lanes.b[lane][v / 8] |= static_cast<uint32_t>(p.b[at.col][at.row]) << (4 * (v % 8));
    }
    for (int v = 0; v < 4; ++v) {
      const RowCol at = cute(kCuteC, lane, v);
      lanes.c[lane][v] = p.c[at.row][at.col];
    }
    // cute states selector 0: lane L gives what lane L - 2 thread-id-a (A) or L - thread-id-b (B) gives there.
    const int lane_a = lane - 2 * thread_id_a, lane_b = lane - thread_id_b;
    lanes.scale_a[lane] = other_scales;
    lanes.scale_b[lane] = other_scales;
    if (ptx_gives_scale_a(lane, thread_id_a)) {
      const int row = cute(kCuteScaleA, lane_a, 0).row;
      lanes.scale_a[lane] = 0;
      for (int q = 0; q < 4; ++q) lanes.scale_a[lane] |= static_cast<uint32_t>(p.scale_a[row][q]) << (8 * q);
    }
    if (ptx_gives_scale_b(lane, thread_id_b)) {
      const int column = cute(kCuteScaleB, lane_b, 0).row;
      lanes.scale_b[lane] = 0;
      for (int q = 0; q < 4; ++q) lanes.scale_b[lane] |= static_cast<uint32_t>(p.scale_b[q][column]) << (8 * q);
    }
  }
  return lanes;
}

float reference(const Problem& p, int m, int n) {
  double sum = p.c[m][n];
  for (int k = 0; k < 64; ++k)
    sum += (e2m1(p.a[m][k]) * ue4m3(p.scale_a[m][k / 16])) * (e2m1(p.b[k][n]) * ue4m3(p.scale_b[k / 16][n]));
  return static_cast<float>(sum);
}

void expect_reference(const Problem& p, const Fp4MmaOutcome& got, const std::string& what) {
  ASSERT_EQ(got.error, 0) << got.message;
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const RowCol at = cute(kCuteC, lane, i);
      EXPECT_EQ(got.d[lane][i], reference(p, at.row, at.col))
          << what << ": lane " << lane << " d" << i << " = D[" << at.row << "][" << at.col << "]";
    }
}

TEST(MmaFp4Emulated, ComputesTheScaledProductOfTheFragmentsCuteDescribes) {
  const EmulatedArch gb10(121);
  for (uint64_t seed : {1, 2, 3}) {
    const Problem p = random_problem(seed);
    expect_reference(p, emu_test::run_mma_fp4(pack_by_cute(p, 0, 0, 0x7E7E7E7Eu)), "selectors 0");
  }
}

TEST(MmaFp4Emulated, TheSelectorsPickTheScaleLanesThePtxTextNames) {
  const EmulatedArch rtx(120);
  const Problem p = random_problem(9);
  for (const auto& [thread_id_a, thread_id_b] : {std::pair<uint16_t, uint16_t>{1, 0}, {0, 2}, {1, 3}})
    expect_reference(p, emu_test::run_mma_fp4(pack_by_cute(p, thread_id_a, thread_id_b, 0x11223344u)),
                     "thread-id-a " + std::to_string(thread_id_a) + ", thread-id-b " + std::to_string(thread_id_b));
}

TEST(MmaFp4Emulated, OnlyAnSm12xDeviceRunsItAndBadScalesAreFaults) {
  const Problem p = random_problem(4);
  {
    const EmulatedArch hopper(90);
    const Fp4MmaOutcome got = emu_test::run_mma_fp4(pack_by_cute(p, 0, 0, 0));
    EXPECT_NE(got.error, 0);
    EXPECT_NE(got.message.find("runs on sm_120a / sm_121a only; the emulated device is sm_90"), std::string::npos)
        << got.message;
  }
  const EmulatedArch gb10(121);
  Fp4MmaLanes signed_scale = pack_by_cute(p, 0, 0, 0);
  signed_scale.scale_a[4] |= 0x80u << 8;  // lane 4 gives row 1's scales: byte 1 with its MSB set
  Fp4MmaOutcome got = emu_test::run_mma_fp4(signed_scale);
  EXPECT_NE(got.message.find("has its most significant bit set"), std::string::npos) << got.message;
  Fp4MmaLanes bad_selector = pack_by_cute(p, 0, 0, 0);
  bad_selector.thread_id_a = 2;
  got = emu_test::run_mma_fp4(bad_selector);
  EXPECT_NE(got.message.find("thread-id-a 0..1"), std::string::npos) << got.message;
  // The device works again after the faults (the helper resets it).
  expect_reference(p, emu_test::run_mma_fp4(pack_by_cute(p, 0, 0, 0)), "after the faults");
}

}  // namespace
}  // namespace nvfp4lm::test::test_mma_fp4
