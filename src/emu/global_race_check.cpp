// See global_race_check.h.
#include "emu/global_race_check.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "emu/device_memory.h"
#include "emu/settings.h"

namespace nvfp4lm::emu {

bool global_race_check_active = false;

namespace {

constexpr size_t kPage = 4096;  // shadow pages are cleared per launch at this granularity
constexpr uint32_t kBlockMask = (1u << 29) - 1;
// Page epochs: 0 = not mapped (a guard page or free range: the access itself faults, the shadow is not touched),
// 1 = mapped, words stale; from kFirstEpoch on, the launch the words belong to.
constexpr uint32_t kUnmappedPage = 0;
constexpr uint32_t kStalePage = 1;
constexpr uint32_t kFirstEpoch = 2;

// Shadow word of one byte: the state in the top 3 bits, a block index (mod 2^29) below. Blocks whose indices agree
// mod 2^29 count as one: a race between them is missed, never invented.
enum State : uint32_t {
  kUntouched = 0,
  kReadBy = 1,       // plain loads by one block
  kReadByMany = 2,   // plain loads by several blocks
  kWrittenBy = 3,    // a plain store by one block (and any of its own accesses since)
  kAtomicBy = 4,     // atomics by one block (and its own plain accesses since)
  kAtomicByMany = 5  // atomics by several blocks
};
constexpr uint32_t word(State state, uint32_t block) { return state << 29 | (block & kBlockMask); }
constexpr State state_of(uint32_t w) { return static_cast<State>(w >> 29); }
constexpr uint32_t block_of(uint32_t w) { return w & kBlockMask; }

struct Shadow {
  std::once_flag reserved;
  bool available = false;
  uintptr_t device_base = 0;
  uint32_t* words = nullptr;   // one per device byte
  uint32_t* epochs = nullptr;  // one per device page: the launch whose accesses its words hold (see below)
  uint32_t epoch = kFirstEpoch - 1;
  std::unordered_set<uint32_t> fenced;  // blocks of this launch that executed __threadfence()
};

Shadow& shadow() {
  static auto* instance = new Shadow();  // never destroyed: kernels may run while the process exits
  return *instance;
}

void reserve(Shadow& s) {
  const DeviceSpan span = device_span_of_process;
  if (sysconf(_SC_PAGESIZE) != static_cast<long>(kPage)) {
    std::fprintf(stderr, "nvfp4lm emulated CUDA: the global-memory race check needs 4 KiB pages; it is off\n");
    return;
  }
  void* words =
      mmap(nullptr, span.bytes * sizeof(uint32_t), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* epochs = mmap(nullptr, span.bytes / kPage * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (words == MAP_FAILED || epochs == MAP_FAILED) {
    std::fprintf(stderr,
                 "nvfp4lm emulated CUDA: cannot reserve the global-memory race check's shadow (%zu GiB of address "
                 "space); the check is off for this process\n",
                 span.bytes * sizeof(uint32_t) >> 30);
    return;
  }
  s.device_base = span.base;
  s.words = static_cast<uint32_t*>(words);
  s.epochs = static_cast<uint32_t*>(epochs);
  s.available = true;
}

// The state after `kind` by `block` on a byte in state `before`; sets `conflict` when that access races.
uint32_t transition(uint32_t before, uint32_t block, GlobalAccess kind, const Shadow& s, bool& conflict) {
  const State state = state_of(before);
  const bool mine = block_of(before) == (block & kBlockMask);
  conflict = false;
  switch (kind) {
    case GlobalAccess::Read:
      switch (state) {
        case kUntouched:
          return word(kReadBy, block);
        case kReadBy:
          return mine ? before : word(kReadByMany, 0);
        case kReadByMany:
          return before;
        case kWrittenBy:
          conflict = !mine && !s.fenced.contains(block_of(before));
          return before;
        case kAtomicBy:
          conflict = !mine;
          return before;
        case kAtomicByMany:
          conflict = true;
          return before;
      }
      break;
    case GlobalAccess::Write:
      conflict = !(state == kUntouched || ((state == kReadBy || state == kWrittenBy || state == kAtomicBy) && mine));
      return word(kWrittenBy, block);
    case GlobalAccess::Atomic:
      switch (state) {
        case kUntouched:
          return word(kAtomicBy, block);
        case kAtomicBy:
          return mine ? before : word(kAtomicByMany, 0);
        case kAtomicByMany:
          return before;
        default:  // plain loads or stores of one or more blocks
          conflict = !(mine && state != kReadByMany);
          return word(kAtomicBy, block);
      }
  }
  return before;
}

GlobalAccess access_of(State state) {
  switch (state) {
    case kWrittenBy:
      return GlobalAccess::Write;
    case kAtomicBy:
    case kAtomicByMany:
      return GlobalAccess::Atomic;
    default:
      return GlobalAccess::Read;
  }
}

}  // namespace

void global_race_check_pages(uintptr_t start, size_t bytes, bool mapped) {
  Shadow& s = shadow();
  std::call_once(s.reserved, [&] { reserve(s); });
  if (!s.available) return;
  const size_t offset = start - s.device_base;
  uint32_t* first = s.words + offset;
  const size_t shadow_bytes = bytes * sizeof(uint32_t);
  if (mapped) {
    if (mprotect(first, shadow_bytes, PROT_READ | PROT_WRITE) != 0) {
      std::fprintf(stderr, "nvfp4lm emulated CUDA: cannot commit the global race check's shadow; the check is off\n");
      s.available = false;
      return;
    }
  } else {
    mmap(first, shadow_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  }
  std::fill(s.epochs + offset / kPage, s.epochs + (offset + bytes) / kPage, mapped ? kStalePage : kUnmappedPage);
}

void global_race_check_begin_launch() {
  Shadow& s = shadow();
  const Settings& settings_now = settings();
  global_race_check_active = settings_now.checks.global && settings_now.workers == 1 && s.available;
  if (!global_race_check_active) return;
  if (++s.epoch == 0) {  // 2^32 launches: start the page epochs over
    const size_t pages = device_span_of_process.bytes / kPage;
    for (size_t page = 0; page < pages; ++page)
      if (s.epochs[page] != kUnmappedPage) s.epochs[page] = kStalePage;
    s.epoch = kFirstEpoch;
  }
  s.fenced.clear();
}

GlobalAccessProblem global_race_check_access(uint32_t block, const void* address, size_t bytes, GlobalAccess kind) {
  Shadow& s = shadow();
  GlobalAccessProblem problem;
  const uintptr_t first = reinterpret_cast<uintptr_t>(address) - s.device_base;
  // The common case first: a load or store of up to 16 bytes in one page this launch has touched, all with one
  // history (a vector load of a row, a scalar of a counter) and no conflict: one transition for all of them.
  if (const size_t page = first / kPage;
      bytes <= 16 && (first + bytes - 1) / kPage == page && s.epochs[page] == s.epoch) {
    uint32_t* words = s.words + first;
    const uint32_t before = words[0];
    bool uniform = true;
    for (size_t i = 1; i < bytes; ++i) uniform &= words[i] == before;
    bool conflict = false;
    const uint32_t after = uniform ? transition(before, block, kind, s, conflict) : before;
    if (uniform && !conflict) {
      if (after != before) std::fill(words, words + bytes, after);
      return problem;
    }
  }
  uint32_t before_previous = 0, after_previous = 0;
  bool have_previous = false;
  for (uintptr_t offset = first; offset < first + bytes; ++offset) {
    const size_t page = offset / kPage;
    if (s.epochs[page] == kUnmappedPage) {  // the access itself faults; the SIGSEGV handler names it
      have_previous = false;
      continue;
    }
    if (s.epochs[page] != s.epoch) {
      std::memset(s.words + page * kPage, 0, kPage * sizeof(uint32_t));
      s.epochs[page] = s.epoch;
      have_previous = false;
    }
    uint32_t& w = s.words[offset];
    // Most accesses cover bytes with one history: then this byte fares as the previous one did.
    if (have_previous && w == before_previous) {
      w = after_previous;
      continue;
    }
    before_previous = w;
    bool conflict = false;
    w = transition(w, block, kind, s, conflict);
    after_previous = w;
    have_previous = !conflict;
    if (conflict && !problem.race) {
      const State state = state_of(before_previous);
      problem.race = true;
      problem.address = s.device_base + offset;
      problem.other_block = block_of(before_previous);
      problem.several_blocks = state == kReadByMany || state == kAtomicByMany;
      problem.other = access_of(state);
    }
  }
  return problem;
}

void global_race_check_fence(uint32_t block) {
  if (global_race_check_active) shadow().fenced.insert(block & kBlockMask);
}

std::string global_race_check_state() {
  const Settings& s = settings();
  if (!s.checks.global) return "off (NVFP4LM_EMU_CHECK)";
  if (s.workers != 1) return fmt::format("off ({} workers run blocks concurrently)", s.workers);
  return "on";
}

}  // namespace nvfp4lm::emu
