// Warp collectives of the emulated device: what each lane brings (WarpPost) and gets back (WarpResult), and the
// computation of one completed collective from the posts of its lanes. The block runner (block_runner.h) does
// the waiting; this file holds the PTX semantics:
//  - shfl.sync idx/up/down/bfly with the width rule of the CUDA intrinsics (c = (32 - width) << 8 | 0x1f, 0 for
//    up): the source lane j is computed as PTX does and, when it falls outside the lane's segment, the lane keeps
//    its own value. A source lane that is not taking part (outside the mask, or exited) gives undefined data on a
//    GPU; here all ones (NaN as a float), so a result built on it shows;
//  - vote.sync ballot/any/all, match.sync any/all, redux.sync add/min/max/and/or/xor over the lanes taking part;
//  - mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with exact products, a double sum and one rounding to fp32
//    (the GPU's internal accumulation order is unspecified; this is the most accurate legal answer);
//  - mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 (Blackwell
//    SM 12.x: NVFP4 x NVFP4 with a UE4M3 scale per 16 values of K), the same way: D = C + Σ (A·SF_A)(B·SF_B), each
//    product exact, the sum in double, one rounding (the fragment and scale layouts: above mma_m16n8k64_fp4 in warp_collectives.cpp);
//  - ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16 from the block's shared memory.
// Lanes taking part: the non-exited lanes of the mask (PTX: "all non-exited threads in membermask"). The .aligned
// instructions (mma, ldmatrix) need the whole warp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nvfp4lm::emu {

enum class WarpOp : uint8_t {
  ShflIdx,
  ShflUp,
  ShflDown,
  ShflXor,
  Ballot,
  Any,
  All,
  MatchAny,
  MatchAll,
  ReduceAdd,
  ReduceMin,
  ReduceMax,
  ReduceAnd,
  ReduceOr,
  ReduceXor,
  SyncWarp,
  Mma,
  MmaFp4,
  Ldmatrix,
};

// The CUDA / PTX name of an operation, for messages.
const char* warp_op_name(WarpOp op);
// Whether the operation is .aligned (every lane of the warp must execute it).
inline bool warp_op_aligned(WarpOp op) { return op == WarpOp::Mma || op == WarpOp::MmaFp4 || op == WarpOp::Ldmatrix; }

struct WarpPost {
  WarpOp op = WarpOp::SyncWarp;
  unsigned mask = 0;
  int lane_arg = 0;               // shfl: source lane, delta or lane mask; ldmatrix: matrices (1, 2, 4)
  int width = 32;                 // shfl: segment width; ldmatrix: 1 for .trans
  int value_bytes = 4;            // shfl / match / redux: 4 or 8 (8: two 32-bit halves, as CUDA does it)
  bool is_signed = false;         // redux min / max
  uint64_t value = 0;             // shfl / match / redux value, vote predicate, ldmatrix shared address
  uint32_t a[4] = {}, b[2] = {};  // mma fragments
  float c[4] = {};
  uint32_t scale_a = 0, scale_b = 0;  // mma kind::mxf4nvf4: the lane's scale-a-data / scale-b-data registers
  uint16_t byte_id_a = 0, thread_id_a = 0, byte_id_b = 0, thread_id_b = 0;  // and the selectors
};

struct WarpResult {
  uint64_t value = 0;      // shfl / match / vote / redux result
  bool predicate = false;  // match.all
  uint32_t regs[4] = {};   // ldmatrix
  float d[4] = {};         // mma
};

// The block's shared memory as the collectives see it (ldmatrix reads it).
struct SharedView {
  const unsigned char* base = nullptr;
  size_t bytes = 0;  // allocated: addresses at or past this are out of bounds
};

// Computes the results of one collective. posts[l] / results[l] are valid for the lanes in `taking_part`
// (non-exited lanes of the mask). Returns -1, or the lane whose post is invalid with `error` saying why (the block
// runner turns it into a device fault of that thread).
int compute_collective(WarpOp op, unsigned taking_part, const WarpPost* const* posts, WarpResult* const* results,
                       const SharedView& shared, std::string& error);

}  // namespace nvfp4lm::emu
