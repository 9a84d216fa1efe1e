// See warp_collectives.h. Fragment layouts are those of the PTX ISA (mma.m16n8k16 with .bf16, ldmatrix.m8n8);
// groupID = lane / 4 and threadID_in_group = lane % 4 as PTX names them.
#include "emu/warp_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "emu/fp4_values.h"

namespace nvfp4lm::emu {
namespace {

constexpr uint64_t kUndefined = ~uint64_t{0};  // what a lane reads from a lane that is not taking part

bool has(unsigned mask, int lane) { return (mask >> lane) & 1u; }

uint64_t value_mask(int bytes) { return bytes == 8 ? ~uint64_t{0} : 0xFFFFFFFFull; }

// PTX shfl.sync: the source lane of `lane`, or `lane` itself when the source is outside its segment.
int shuffle_source(WarpOp op, int lane, int b, int width) {
  const int segmask = (32 - width) & 0x1f;  // the lane bits that select the segment
  const int cval = op == WarpOp::ShflUp ? 0 : 0x1f;
  const int max_lane = (lane & segmask) | (cval & ~segmask);
  const int min_lane = lane & segmask;
  int j = lane;
  bool in_range = false;
  switch (op) {
    case WarpOp::ShflUp:
      j = lane - b;
      in_range = j >= max_lane;
      break;
    case WarpOp::ShflDown:
      j = lane + b;
      in_range = j <= max_lane;
      break;
    case WarpOp::ShflXor:
      j = lane ^ (b & 0x1f);
      in_range = j <= max_lane;
      break;
    default:  // idx
      j = min_lane | (b & 0x1f & ~segmask);
      in_range = j <= max_lane;
      break;
  }
  return in_range ? j : lane;
}

float bf16_value(uint32_t reg, int half) {
  const uint32_t bits = (half == 0 ? reg & 0xFFFFu : reg >> 16) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

void mma_m16n8k16(const WarpPost* const* posts, WarpResult* const* results) {
  double a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const WarpPost& p = *posts[lane];
    for (int half = 0; half < 2; ++half) {
      a[g][2 * t + half] = bf16_value(p.a[0], half);
      a[g + 8][2 * t + half] = bf16_value(p.a[1], half);
      a[g][2 * t + 8 + half] = bf16_value(p.a[2], half);
      a[g + 8][2 * t + 8 + half] = bf16_value(p.a[3], half);
      b[2 * t + half][g] = bf16_value(p.b[0], half);
      b[2 * t + 8 + half][g] = bf16_value(p.b[1], half);
      c[g][2 * t + half] = p.c[half];
      c[g + 8][2 * t + half] = p.c[2 + half];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
      double sum = c[row][col];
      for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][col];
      results[lane]->d[i] = static_cast<float>(sum);
    }
  }
}

// ---- mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 ----------
// The PTX ISA's statement (9.7.14.5.11 "Matrix Fragments for mma.m16n8k64", 9.7.14.3 "Block Scaling for mma.sync"),
// lane l, g = l / 4, t = l % 4, element 8 r + j of a fragment in nibble j of register r (the lower K in the lower
// nibble, as cuda_fp4.hpp packs __nv_fp4x2):
//   A (16x64): register r, nibble j -> row g + 8 (r % 2), k = 8 t + j + 32 (r / 2)
//   B (64x8):  register r, nibble j -> k = 8 t + j + 32 r, column g
//   C, D:      register i -> row g + 8 (i / 2), column 2 t + i % 2
//   SF_A: row m's 4 scales (byte q: k in [16 q, 16 q + 16)) in scale-a-data of lane 4 (m % 8) + 2 thread-id-a + m / 8
//   SF_B: column n's 4 scales in scale-b-data of lane 4 n + thread-id-b
// (the scale lanes and bytes are the ISA's figures 43-45, as CUTLASS cute's SM120 SFALayout / SFBLayout read them;
// tests/emu checks them against both).
// (ue4m3_value: the ISA says the byte's MSB must be zero; the caller faults on one that is not.)
double e2m1_value(uint32_t reg, int nibble) { return e2m1_code_value((reg >> (4 * nibble)) & 0xF); }

int mma_m16n8k64_fp4(const WarpPost* const* posts, WarpResult* const* results, std::string& error) {
  const WarpPost& first = *posts[0];
  for (int lane = 1; lane < 32; ++lane) {
    const WarpPost& p = *posts[lane];
    if (p.byte_id_a != first.byte_id_a || p.thread_id_a != first.thread_id_a || p.byte_id_b != first.byte_id_b ||
        p.thread_id_b != first.thread_id_b) {
      error = fmt::format("{}: lanes 0 and {} give different scale selectors", warp_op_name(WarpOp::MmaFp4), lane);
      return lane;
    }
  }
  if (first.byte_id_a != 0 || first.byte_id_b != 0 || first.thread_id_a > 1 || first.thread_id_b > 3) {
    error = fmt::format(
        "{}: scale selectors byte-id-a {}, thread-id-a {}, byte-id-b {}, thread-id-b {}; scale_vec::4X takes "
        "byte-ids 0, thread-id-a 0..1, thread-id-b 0..3 (undefined behaviour on a GPU)",
        warp_op_name(WarpOp::MmaFp4), first.byte_id_a, first.thread_id_a, first.byte_id_b, first.thread_id_b);
    return 0;
  }
  double a[16][64], b[64][8], c[16][8], scale_a[16][4], scale_b[4][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const WarpPost& p = *posts[lane];
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 8; ++j) a[g + 8 * (r % 2)][8 * t + j + 32 * (r / 2)] = e2m1_value(p.a[r], j);
    for (int r = 0; r < 2; ++r)
      for (int j = 0; j < 8; ++j) b[8 * t + j + 32 * r][g] = e2m1_value(p.b[r], j);
    for (int i = 0; i < 4; ++i) c[g + 8 * (i / 2)][2 * t + i % 2] = p.c[i];
  }
  auto scale_bytes = [&](int lane, uint32_t data, double* out, const char* which) {
    for (int q = 0; q < 4; ++q) {
      const auto byte = static_cast<uint8_t>(data >> (8 * q));
      if (byte & 0x80) {
        error = fmt::format(
            "{}: scale byte {:#04x} ({} of lane {}, byte {}) has its most significant bit set: a ue4m3 "
            "scale must not (PTX: undefined)",
            warp_op_name(WarpOp::MmaFp4), byte, which, lane, q);
        return false;
      }
      out[q] = ue4m3_value(byte);
    }
    return true;
  };
  for (int m = 0; m < 16; ++m) {
    const int lane = 4 * (m % 8) + 2 * first.thread_id_a + m / 8;
    if (!scale_bytes(lane, posts[lane]->scale_a, scale_a[m], "scale-a-data")) return lane;
  }
  for (int n = 0; n < 8; ++n) {
    const int lane = 4 * n + first.thread_id_b;
    double column[4];
    if (!scale_bytes(lane, posts[lane]->scale_b, column, "scale-b-data")) return lane;
    for (int q = 0; q < 4; ++q) scale_b[q][n] = column[q];
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double sum = c[row][col];
      for (int k = 0; k < 64; ++k) sum += (a[row][k] * scale_a[row][k / 16]) * (b[k][col] * scale_b[k / 16][col]);
      results[lane]->d[i] = static_cast<float>(sum);
    }
  }
  return -1;
}

int ldmatrix(const WarpPost* const* posts, WarpResult* const* results, const SharedView& shared, std::string& error) {
  const int matrices = posts[0]->lane_arg;
  const bool trans = posts[0]->width == 1;
  for (int lane = 1; lane < 32; ++lane) {
    if (posts[lane]->lane_arg != matrices || (posts[lane]->width == 1) != trans) {
      error = fmt::format("ldmatrix: lanes 0 and {} execute different variants (.x{}{} and .x{}{})", lane, matrices,
                          trans ? ".trans" : "", posts[lane]->lane_arg, posts[lane]->width == 1 ? ".trans" : "");
      return lane;
    }
  }
  // Row r of matrix m comes from the address of lane 8 m + r.
  uint16_t element[4][8][8];
  for (int m = 0; m < matrices; ++m) {
    for (int r = 0; r < 8; ++r) {
      const int lane = 8 * m + r;
      const uint64_t address = posts[lane]->value;
      if (address % 16 != 0) {
        error = fmt::format("ldmatrix: row address {:#x} of lane {} is not 16-byte aligned", address, lane);
        return lane;
      }
      if (address + 16 > shared.bytes) {
        error = fmt::format("ldmatrix: row address {:#x} of lane {} reads past the block's {} bytes of shared memory",
                            address, lane, shared.bytes);
        return lane;
      }
      std::memcpy(element[m][r], shared.base + address, 16);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int m = 0; m < matrices; ++m) {
      const uint16_t low = trans ? element[m][2 * t][g] : element[m][g][2 * t];
      const uint16_t high = trans ? element[m][2 * t + 1][g] : element[m][g][2 * t + 1];
      results[lane]->regs[m] = static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
    }
  }
  return -1;
}

uint64_t reduce(WarpOp op, unsigned lanes, const WarpPost* const* posts) {
  bool first = true;
  uint32_t acc = 0;
  for (int lane = 0; lane < 32; ++lane) {
    if (!has(lanes, lane)) continue;
    const auto v = static_cast<uint32_t>(posts[lane]->value);
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    const bool is_signed = posts[lane]->is_signed;
    switch (op) {
      case WarpOp::ReduceAdd:
        acc += v;
        break;
      case WarpOp::ReduceMin:
        acc = is_signed ? static_cast<uint32_t>(std::min(static_cast<int32_t>(acc), static_cast<int32_t>(v)))
                        : std::min(acc, v);
        break;
      case WarpOp::ReduceMax:
        acc = is_signed ? static_cast<uint32_t>(std::max(static_cast<int32_t>(acc), static_cast<int32_t>(v)))
                        : std::max(acc, v);
        break;
      case WarpOp::ReduceAnd:
        acc &= v;
        break;
      case WarpOp::ReduceOr:
        acc |= v;
        break;
      default:
        acc ^= v;
        break;
    }
  }
  return acc;
}

}  // namespace

const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::ShflIdx:
      return "__shfl_sync";
    case WarpOp::ShflUp:
      return "__shfl_up_sync";
    case WarpOp::ShflDown:
      return "__shfl_down_sync";
    case WarpOp::ShflXor:
      return "__shfl_xor_sync";
    case WarpOp::Ballot:
      return "__ballot_sync";
    case WarpOp::Any:
      return "__any_sync";
    case WarpOp::All:
      return "__all_sync";
    case WarpOp::MatchAny:
      return "__match_any_sync";
    case WarpOp::MatchAll:
      return "__match_all_sync";
    case WarpOp::ReduceAdd:
      return "__reduce_add_sync";
    case WarpOp::ReduceMin:
      return "__reduce_min_sync";
    case WarpOp::ReduceMax:
      return "__reduce_max_sync";
    case WarpOp::ReduceAnd:
      return "__reduce_and_sync";
    case WarpOp::ReduceOr:
      return "__reduce_or_sync";
    case WarpOp::ReduceXor:
      return "__reduce_xor_sync";
    case WarpOp::SyncWarp:
      return "__syncwarp";
    case WarpOp::Mma:
      return "mma.sync.m16n8k16";
    case WarpOp::MmaFp4:
      return "mma.sync.m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X";
    case WarpOp::Ldmatrix:
      return "ldmatrix.sync";
  }
  return "?";
}

int compute_collective(WarpOp op, unsigned taking_part, const WarpPost* const* posts, WarpResult* const* results,
                       const SharedView& shared, std::string& error) {
  switch (op) {
    case WarpOp::ShflIdx:
    case WarpOp::ShflUp:
    case WarpOp::ShflDown:
    case WarpOp::ShflXor:
      for (int lane = 0; lane < 32; ++lane) {
        if (!has(taking_part, lane)) continue;
        const WarpPost& p = *posts[lane];
        if (p.width < 1 || p.width > 32 || (p.width & (p.width - 1)) != 0) {
          error = fmt::format("{}: width {} is not a power of two in [1, 32]", warp_op_name(op), p.width);
          return lane;
        }
        const int source = shuffle_source(op, lane, p.lane_arg, p.width);
        const uint64_t bits = has(taking_part, source) ? posts[source]->value : kUndefined;
        results[lane]->value = bits & value_mask(p.value_bytes);
      }
      return -1;
    case WarpOp::Ballot:
    case WarpOp::Any:
    case WarpOp::All: {
      unsigned ballot = 0;
      for (int lane = 0; lane < 32; ++lane)
        if (has(taking_part, lane) && posts[lane]->value != 0) ballot |= 1u << lane;
      for (int lane = 0; lane < 32; ++lane) {
        if (!has(taking_part, lane)) continue;
        if (op == WarpOp::Ballot) results[lane]->value = ballot;
        if (op == WarpOp::Any) results[lane]->value = ballot != 0;
        if (op == WarpOp::All) results[lane]->value = ballot == taking_part;
      }
      return -1;
    }
    case WarpOp::MatchAny:
    case WarpOp::MatchAll: {
      bool all_equal = true;
      int first = -1;
      for (int lane = 0; lane < 32; ++lane) {
        if (!has(taking_part, lane)) continue;
        const uint64_t bits = posts[lane]->value & value_mask(posts[lane]->value_bytes);
        unsigned same = 0;
        for (int other = 0; other < 32; ++other)
          if (has(taking_part, other) && (posts[other]->value & value_mask(posts[other]->value_bytes)) == bits)
            same |= 1u << other;
        if (first < 0) first = lane;
        all_equal = all_equal && same == taking_part;
        if (op == WarpOp::MatchAny) results[lane]->value = same;
      }
      if (op == WarpOp::MatchAll) {
        for (int lane = 0; lane < 32; ++lane) {
          if (!has(taking_part, lane)) continue;
          results[lane]->value = all_equal ? taking_part : 0u;
          results[lane]->predicate = all_equal;
        }
      }
      return -1;
    }
    case WarpOp::ReduceAdd:
    case WarpOp::ReduceMin:
    case WarpOp::ReduceMax:
    case WarpOp::ReduceAnd:
    case WarpOp::ReduceOr:
    case WarpOp::ReduceXor: {
      const uint64_t result = reduce(op, taking_part, posts);
      for (int lane = 0; lane < 32; ++lane)
        if (has(taking_part, lane)) results[lane]->value = result;
      return -1;
    }
    case WarpOp::SyncWarp:
      return -1;
    case WarpOp::Mma:
      mma_m16n8k16(posts, results);
      return -1;
    case WarpOp::MmaFp4:
      return mma_m16n8k64_fp4(posts, results, error);
    case WarpOp::Ldmatrix:
      return ldmatrix(posts, results, shared, error);
  }
  return -1;
}

}  // namespace nvfp4lm::emu
