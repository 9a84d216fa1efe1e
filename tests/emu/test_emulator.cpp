// The emulated CUDA device against what CUDA and the PTX ISA specify, written here independently of the emulator
// (the CUDA C++ Programming Guide's wording of each intrinsic, a double-precision matrix product, ...). Run in the
// emulated build only (tests/emu/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/numeric.h"
#include "core/rng.h"
#include "emu/emu_kernels.h"
#include "emu/settings.h"

namespace nvfp4lm::emu_test::test_emulator {
namespace {

using emu::Schedule;
using emu::Settings;
using emu::settings_for_testing;
using emu::StreamMode;

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kUndefined = -1;  // all ones: what the emulator hands a lane that reads a lane not taking part

std::vector<unsigned> same_mask(unsigned mask) { return std::vector<unsigned>(32, mask); }

// The source lane of each shuffle as the Programming Guide states it, or -1 for "the caller's own value".
int guide_source(Shuffle mode, int lane, int arg, int width) {
  const int segment = lane / width * width;
  switch (mode) {
    case Shuffle::Idx:  // "srcLane ... modulo width", within the caller's segment
      return segment + ((arg % width) + width) % width;
    case Shuffle::Up:  // "if lane - delta falls below the segment, var is unchanged"
      return lane - arg >= segment ? lane - arg : -1;
    case Shuffle::Down:  // "if lane + delta passes the segment's end, var is unchanged"
      return lane + arg < segment + width ? lane + arg : -1;
    default:  // xor: "earlier groups are accessible, later groups return their own value"
      return (lane ^ arg) < segment + width ? (lane ^ arg) : -1;
  }
}

const char* name(Shuffle mode) {
  switch (mode) {
    case Shuffle::Idx:
      return "idx";
    case Shuffle::Up:
      return "up";
    case Shuffle::Down:
      return "down";
    default:
      return "xor";
  }
}

TEST(EmulatedWarp, EveryShuffleModeWidthAndArgumentFollowsTheProgrammingGuide) {
  const int args[] = {0, 1, 3, 5, 16, 31, 37};
  for (Shuffle mode : {Shuffle::Idx, Shuffle::Up, Shuffle::Down, Shuffle::Xor}) {
    for (int width : {1, 2, 4, 8, 16, 32}) {
      for (int arg : args) {
        if (mode != Shuffle::Idx && arg > 31) continue;
        const std::vector<int> got = shuffle(mode, arg, width, same_mask(kFull), kFull);
        for (int lane = 0; lane < 32; ++lane) {
          const int source = guide_source(mode, lane, arg, width);
          EXPECT_EQ(got[lane], 1000 + (source < 0 ? lane : source))
              << name(mode) << " width " << width << " arg " << arg << " lane " << lane;
        }
      }
    }
  }
}

TEST(EmulatedWarp, ShufflesWithSegmentMasksReadOnlyTheirSegment) {
  // Each lane names only its own segment of `width` lanes: a source outside it takes no part, so its value is
  // undefined; inside, the Programming Guide's answer.
  for (Shuffle mode : {Shuffle::Idx, Shuffle::Up, Shuffle::Down, Shuffle::Xor}) {
    for (int width : {1, 2, 4, 8, 16}) {
      std::vector<unsigned> masks(32);
      for (int lane = 0; lane < 32; ++lane) masks[lane] = ((1u << width) - 1u) << (lane / width * width);
      for (int arg : {0, 1, 3, 16}) {
        const std::vector<int> got = shuffle(mode, arg, width, masks, kFull);
        for (int lane = 0; lane < 32; ++lane) {
          const int source = guide_source(mode, lane, arg, width);
          const bool inside = source < 0 || source / width == lane / width;
          EXPECT_EQ(got[lane], !inside ? kUndefined : 1000 + (source < 0 ? lane : source))
              << name(mode) << " width " << width << " arg " << arg << " lane " << lane;
        }
      }
    }
  }
}

TEST(EmulatedWarp, SixtyFourBitShufflesMoveBothHalves) {
  for (Shuffle mode : {Shuffle::Idx, Shuffle::Up, Shuffle::Down, Shuffle::Xor}) {
    const std::vector<uint64_t> got = shuffle_u64(mode, 3, 8);
    for (int lane = 0; lane < 32; ++lane) {
      const int source = guide_source(mode, lane, 3, 8);
      EXPECT_EQ(got[lane], (uint64_t{1} << 40) | static_cast<uint64_t>(source < 0 ? lane : source)) << name(mode);
    }
  }
}

TEST(EmulatedWarp, GroupsWithTheirOwnMasksShuffleIndependently) {
  // Eight groups of four lanes, each with its own mask, as rmsnorm's row groups do.
  std::vector<unsigned> masks(32);
  for (int lane = 0; lane < 32; ++lane) masks[lane] = 0xFu << (lane / 4 * 4);
  const std::vector<int> got = shuffle(Shuffle::Xor, 2, 4, masks, kFull);
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(got[lane], 1000 + (lane ^ 2)) << lane;
  // Only groups 0 and 2 call at all: the others never arrive and nobody waits for them.
  const unsigned calling = 0x00000F0Fu;
  const std::vector<int> some = shuffle(Shuffle::Xor, 1, 4, masks, calling);
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(some[lane], (calling >> lane) & 1u ? 1000 + (lane ^ 1) : -1) << lane;
}

TEST(EmulatedWarp, ReadingALaneThatTakesNoPartIsUndefined) {
  // Lanes 0..15 shuffle with a full mask while lanes 16..31 exit: the waits are for non-exited lanes only (PTX),
  // and a value fetched from an exited lane is undefined (all ones here), never a plausible number.
  const std::vector<int> got = shuffle(Shuffle::Xor, 16, 32, same_mask(kFull), 0x0000FFFFu);
  for (int lane = 0; lane < 16; ++lane) EXPECT_EQ(got[lane], kUndefined) << lane;
  const std::vector<int> inside = shuffle(Shuffle::Xor, 1, 32, same_mask(kFull), 0x0000FFFFu);
  for (int lane = 0; lane < 16; ++lane) EXPECT_EQ(inside[lane], 1000 + (lane ^ 1)) << lane;
}

TEST(EmulatedWarp, VotesMatchesAndReductionsOverTheLanesOfTheMask) {
  std::vector<int> values(32);
  for (int lane = 0; lane < 32; ++lane) values[lane] = lane % 3 == 0 ? 0 : (lane % 5) - 2;  // negatives too
  for (unsigned mask : {kFull, 0x0F0F0F0Fu, 0x80000001u}) {
    const std::vector<VoteResult> got = votes(values, mask);
    unsigned ballot = 0, add = 0, min = ~0u, max = 0;
    int min_signed = INT32_MAX;
    for (int lane = 0; lane < 32; ++lane) {
      if (((mask >> lane) & 1u) == 0) continue;
      if (values[lane] != 0) ballot |= 1u << lane;
      const auto u = static_cast<unsigned>(values[lane]);
      add += u;
      min = std::min(min, u);
      max = std::max(max, u);
      min_signed = std::min(min_signed, values[lane]);
    }
    for (int lane = 0; lane < 32; ++lane) {
      if (((mask >> lane) & 1u) == 0) continue;
      const VoteResult& r = got[lane];
      unsigned same = 0;
      for (int other = 0; other < 32; ++other)
        if (((mask >> other) & 1u) && values[other] == values[lane]) same |= 1u << other;
      EXPECT_EQ(r.ballot, ballot) << lane;
      EXPECT_EQ(r.any, ballot != 0 ? 1 : 0);
      EXPECT_EQ(r.all, ballot == mask ? 1 : 0);
      EXPECT_EQ(r.match_any, same) << lane;
      EXPECT_EQ(r.match_all_predicate, same == mask ? 1 : 0);
      EXPECT_EQ(r.match_all, same == mask ? mask : 0u);
      EXPECT_EQ(r.reduce_add, add);
      EXPECT_EQ(r.reduce_min, min);
      EXPECT_EQ(r.reduce_max, max);
      EXPECT_EQ(r.reduce_min_signed, min_signed);
    }
  }
  // All equal: match.all holds.
  const std::vector<VoteResult> equal = votes(std::vector<int>(32, 7), kFull);
  EXPECT_EQ(equal[3].match_all_predicate, 1);
  EXPECT_EQ(equal[3].match_all, kFull);
}

// ---- blocks ---------------------------------------------------------------------------------------------------

TEST(EmulatedBlock, ExitedThreadsDoNotHoldTheBarrier) {
  for (auto [threads, exit_from] : {std::pair{64, 40}, std::pair{256, 1}, std::pair{100, 100}, std::pair{1024, 999}}) {
    const std::vector<int> got = barrier_with_exits(threads, exit_from);
    for (int t = 0; t < threads; ++t)
      EXPECT_EQ(got[t], t < exit_from ? (t + 1) % exit_from : -1) << threads << " threads, exit from " << exit_from;
  }
}

TEST(EmulatedBlock, SchedulesRunThreadsInTheirStatedOrder) {
  Settings& settings = settings_for_testing();
  const Schedule saved = settings.schedule;
  // Round-robin: every thread takes its first ticket before any takes its second.
  settings.schedule = Schedule::RoundRobin;
  std::vector<int> order = execution_order();
  for (int t = 0; t < 64; ++t) {
    EXPECT_EQ(order[t], t);
    EXPECT_EQ(order[64 + t], 64 + t);
  }
  // Warp-serial: warp 0 takes both its tickets before warp 1 starts.
  settings.schedule = Schedule::WarpSerial;
  order = execution_order();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(order[lane], lane);
    EXPECT_EQ(order[64 + lane], 32 + lane);
    EXPECT_EQ(order[32 + lane], 64 + lane);
    EXPECT_EQ(order[96 + lane], 96 + lane);
  }
  // Reverse: the last warp first, its last lane first.
  settings.schedule = Schedule::Reverse;
  order = execution_order();
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(order[63 - lane], lane);
    EXPECT_EQ(order[31 - lane], 64 + lane);
  }
  settings.schedule = saved;
}

TEST(EmulatedBlock, SharedAndDeviceMemoryStartPoisoned) {
  Settings& settings = settings_for_testing();
  const bool saved = settings.checks.init;
  settings.checks.init = false;  // the read of unwritten shared memory is the point here
  const Poison p = poison();
  settings.checks.init = saved;
  EXPECT_EQ(p.static_shared, 0xFFFFFFFFu);
  EXPECT_EQ(p.dynamic_shared, 0xFFFFFFFFu);
  EXPECT_EQ(p.device_memory, 0xFFFFFFFFu);
}

TEST(EmulatedBlock, AtomicsAreAtomicAcrossWorkerThreads) {
  Settings& settings = settings_for_testing();
  const int saved = settings.workers;
  for (int workers : {1, 4}) {
    settings.workers = workers;
    const AtomicCounts counts = atomic_counts(64);
    EXPECT_EQ(counts.count, 64u * 256u) << workers << " workers";
    EXPECT_EQ(counts.sum, 64 * 256 * 0.5f) << workers << " workers";
  }
  settings.workers = saved;
}

// ---- tensor-core instructions ---------------------------------------------------------------------------------

uint16_t random_bf16(Rng& rng) { return float_to_bf16(rng.normal()); }

TEST(EmulatedTensorCores, MmaFromLdmatrixOrRegistersIsTheExactProduct) {
  Rng rng(7);
  std::vector<uint16_t> a(256), b(128);
  std::vector<float> c(128);
  for (auto& v : a) v = random_bf16(rng);
  for (auto& v : b) v = random_bf16(rng);
  for (auto& v : c) v = rng.normal();
  const MmaResult got = mma(a, b, c);
  EXPECT_EQ(got.a_fragments_ldmatrix, got.a_fragments_layout) << "ldmatrix .x4 gives the PTX A fragment layout";
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) {
      double sum = c[row * 8 + col];
      for (int k = 0; k < 16; ++k) sum += double{bf16_to_float(a[row * 16 + k])} * bf16_to_float(b[k * 8 + col]);
      EXPECT_EQ(got.d_from_registers[row * 8 + col], static_cast<float>(sum)) << row << ", " << col;
      EXPECT_EQ(got.d_from_ldmatrix[row * 8 + col], static_cast<float>(sum)) << row << ", " << col;
    }
  }
}

TEST(EmulatedTensorCores, LdmatrixTransposedGivesColumnPairs) {
  std::vector<uint16_t> tile(256);
  for (int i = 0; i < 256; ++i) tile[i] = static_cast<uint16_t>(i);
  const std::vector<uint32_t> got = ldmatrix_transposed(tile);
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int m = 0; m < 4; ++m) {
      // Matrix m covers rows 8 (m & 1) .. + 7 and columns 8 (m >> 1) .. + 7; .trans: the lane gets column g,
      // rows 2t and 2t + 1 of it.
      const int row0 = (m & 1) * 8, col0 = (m >> 1) * 8;
      const uint32_t low = tile[(row0 + 2 * t) * 16 + col0 + g], high = tile[(row0 + 2 * t + 1) * 16 + col0 + g];
      EXPECT_EQ(got[lane * 4 + m], low | (high << 16)) << "lane " << lane << " matrix " << m;
    }
  }
}

TEST(EmulatedTensorCores, CpAsyncCopiesOrZeroFillsAndLandsAtTheWait) {
  std::vector<uint32_t> words(64 * 4);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint32_t>(i * 2654435761u);
  const std::vector<uint32_t> copied = cp_async_roundtrip(words, false);
  for (size_t i = 0; i < words.size(); ++i) EXPECT_EQ(copied[i], words[(i + 4) % words.size()]) << i;
  const std::vector<uint32_t> zeros = cp_async_roundtrip(words, true);
  for (uint32_t w : zeros) EXPECT_EQ(w, 0u);
}

// ---- misuse is a fault that names what happened ---------------------------------------------------------------

void expect_fault(Misuse kind, int error, const std::string& part, bool sticky) {
  const Outcome o = misuse(kind);
  EXPECT_EQ(o.error, error) << o.message;
  EXPECT_NE(o.message.find(part), std::string::npos) << o.message;
  EXPECT_EQ(o.sticky, sticky) << o.message;
}

constexpr int kLaunchFailure = 719;  // cudaErrorLaunchFailure
constexpr int kInvalidValue = 1;     // cudaErrorInvalidValue

TEST(EmulatedFaults, MisuseIsAStickyDeviceFaultNamingKernelBlockAndThread) {
  expect_fault(Misuse::LaneOutsideItsMask, kLaunchFailure, "does not include the calling lane", true);
  expect_fault(Misuse::ShuffleWidthNotPowerOfTwo, kLaunchFailure, "width 12 is not a power of two", true);
  expect_fault(Misuse::DivergentBarrier, kLaunchFailure, "a barrier in divergent code", true);
  expect_fault(Misuse::Deadlock, kLaunchFailure, "deadlock", true);
  expect_fault(Misuse::LaneMismatch, kLaunchFailure,
               "wait in __ballot_sync (mask 0xffffffff) with lanes that wait in "
               "another collective",
               true);
  expect_fault(Misuse::MmaAfterLanesExited, kLaunchFailure, "mma.sync", true);
  expect_fault(Misuse::LdmatrixMisaligned, kLaunchFailure, "not 16-byte aligned", true);
  expect_fault(Misuse::CpAsyncPastSharedMemory, kLaunchFailure, "past the block's", true);
  expect_fault(Misuse::SharedRace, kLaunchFailure, "shared memory race", true);
  expect_fault(Misuse::SharedOutOfBounds, kLaunchFailure, "past static 'small'", true);
  expect_fault(Misuse::SharedUninitialised, kLaunchFailure, "which no thread of the block has written", true);
  expect_fault(Misuse::CpAsyncReadBeforeBarrier, kLaunchFailure, "shared memory race", true);
  const Outcome o = misuse(Misuse::LaneOutsideItsMask);
  EXPECT_NE(o.message.find("kernel misuse_kernel block (0, 0, 0) thread ("), std::string::npos) << o.message;
}

TEST(EmulatedFaults, BadLaunchesAndCopiesAreErrorsThatDoNotStick) {
  expect_fault(Misuse::TooMuchDynamicShared, kInvalidValue, "cudaFuncSetAttribute", false);
  expect_fault(Misuse::HostPointerCopy, kInvalidValue, "not inside one device allocation", false);
}

TEST(EmulatedFaultsDeathTest, AnAccessPastADeviceAllocationEndsTheProcessWithAReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(write_past_device_allocation(),
               "device fault.*kernel write_past_kernel block \\(0, 0, 0\\) thread \\(0, 0, 0\\).*past the end of a "
               "device allocation of 256 bytes");
}

// ---- blocks of one launch: races in global memory, grid-stride loops -----------------------------------------

TEST(EmulatedGlobalMemory, BlocksTouchingTheSameBytesWithAPlainStoreAreARace) {
  // What the second block to touch the bytes is told (which block came first depends on the schedule).
  for (const auto& [pattern, what] :
       {std::pair{GlobalPattern::PlainMaxOfBlocks, "reads 4 byte(s)"},
        {GlobalPattern::PlainMaxOfBlocks, "of this launch wrote"},
        {GlobalPattern::AddIntoOneRow, "of this launch wrote"},
        {GlobalPattern::ReadNeighbourBlocksWrite, "writes 4 byte(s)"},
        {GlobalPattern::ReadNeighbourBlocksWrite, "of this launch read"},
        {GlobalPattern::PlainReadOfAtomicCounter, "which other blocks of this launch updated atomically"}}) {
    const Outcome o = global_pattern(pattern);
    EXPECT_EQ(o.error, kLaunchFailure) << static_cast<int>(pattern) << ": " << o.message;
    EXPECT_NE(o.message.find("global memory race"), std::string::npos) << o.message;
    EXPECT_NE(o.message.find(what), std::string::npos) << o.message;
    EXPECT_NE(o.message.find("of a device allocation of"), std::string::npos) << o.message;
  }
}

TEST(EmulatedGlobalMemory, AtomicsOwnBytesFencesAndReadOnlyInputsAreNoRace) {
  for (const GlobalPattern pattern :
       {GlobalPattern::DisjointWritesSharedInput, GlobalPattern::AtomicsFromEveryBlock, GlobalPattern::OwnBytesReadBack,
        GlobalPattern::FencedLastBlockReduces, GlobalPattern::VolatileFirstErrorSlot}) {
    const Outcome o = global_pattern(pattern);
    EXPECT_EQ(o.error, 0) << static_cast<int>(pattern) << ": " << o.message;
  }
}

TEST(EmulatedGlobalMemory, TheCheckIsOffWhenAskedOrWhenBlocksRunConcurrently) {
  Settings& settings = settings_for_testing();
  const Settings saved = settings;
  settings.checks.global = false;
  EXPECT_EQ(global_pattern(GlobalPattern::PlainMaxOfBlocks).error, 0);
  settings = saved;
  settings.workers = 2;  // blocks of one launch on two OS threads: the shadow itself would race
  EXPECT_EQ(global_pattern(GlobalPattern::AddIntoOneRow).error, 0);
  settings = saved;
  EXPECT_EQ(global_pattern(GlobalPattern::AddIntoOneRow).error, kLaunchFailure);
}

TEST(EmulatedGridCap, GridStrideLaunchesTakeAtMostTheCapAndLoopOverTheRest) {
  Settings& settings = settings_for_testing();
  const int64_t saved = settings.grid_cap;
  settings.grid_cap = 0;
  GridStrideRun run = grid_stride_reuse(true);
  EXPECT_EQ(run.blocks, 64u);
  EXPECT_TRUE(run.all_items_right) << run.outcome.message;
  run = grid_stride_reuse(false);  // one iteration per block: the missing barrier cannot show
  EXPECT_TRUE(run.all_items_right) << run.outcome.message;

  settings.grid_cap = 2;
  run = grid_stride_reuse(true);
  EXPECT_EQ(run.blocks, 2u);
  EXPECT_TRUE(run.all_items_right) << run.outcome.message;
  run = grid_stride_reuse(false);  // 32 iterations per block: the next staging overwrites what others still read
  EXPECT_EQ(run.outcome.error, kLaunchFailure);
  EXPECT_NE(run.outcome.message.find("shared memory race"), std::string::npos) << run.outcome.message;
  settings.grid_cap = saved;
}

// ---- streams and graphs ---------------------------------------------------------------------------------------

TEST(EmulatedStreams, DeferredWorkRunsAtTheSynchronisation) {
  Settings& settings = settings_for_testing();
  const StreamMode saved = settings.stream_mode;
  settings.stream_mode = StreamMode::Deferred;
  const DeferredCopy deferred = deferred_copy();
  EXPECT_EQ(deferred.before_sync, 0) << "the host must not see a result it has not synchronised with";
  EXPECT_EQ(deferred.after_sync, 42);
  settings.stream_mode = StreamMode::Sync;
  EXPECT_EQ(deferred_copy().before_sync, 42);
  settings.stream_mode = saved;
}

TEST(EmulatedStreams, CaptureRefusesSynchronisationAndReplaysWhatItRecorded) {
  const CaptureResult r = capture();
  EXPECT_EQ(r.sync_in_capture, 900);  // cudaErrorStreamCaptureUnsupported
  EXPECT_EQ(r.end_invalidated, 901);  // cudaErrorStreamCaptureInvalidated
  EXPECT_TRUE(r.graph_null);
  EXPECT_EQ(r.pageable_copy_in_capture, 900);
  EXPECT_EQ(r.nodes, 2u);
  EXPECT_EQ(r.counter_after_replays, 3);
  EXPECT_EQ(r.memset_value, 0x01010101);
}

TEST(EmulatedStreams, OnlyCudaOrderingRulesOrderStreams) {
  // The emulator runs the newest free operation first, so the unordered kernel runs before the memset.
  const StreamOrder order = stream_order();
  EXPECT_EQ(order.non_blocking, 0) << "a cudaStreamNonBlocking stream must not wait for the legacy stream";
  EXPECT_EQ(order.blocking, 0x02020202) << "a blocking stream waits for the legacy stream's earlier work";
}

}  // namespace
}  // namespace nvfp4lm::emu_test::test_emulator
