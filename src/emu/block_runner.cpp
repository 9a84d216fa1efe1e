// See block_runner.h.
#include "emu/block_runner.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "emu/fault.h"

namespace nvfp4lm::emu {

thread_local ThreadContext* current_thread = nullptr;

void outside_kernel(const char* what) {
  std::fprintf(stderr, "nvfp4lm emulated CUDA: %s used outside a kernel (device code called from the host)\n", what);
  std::abort();
}

namespace {

unsigned lane_bit(int lane) { return 1u << lane; }

// "0x1a2b in /path/libx.so (addr2line -Cfie /path/libx.so 0x1a2b)": where a kernel instruction is, for messages.
std::string describe_code(const void* code) {
  Dl_info info{};
  if (dladdr(code, &info) == 0 || info.dli_fname == nullptr) return fmt::format("{}", code);
  const auto offset = static_cast<size_t>(static_cast<const char*>(code) - static_cast<const char*>(info.dli_fbase));
  return fmt::format("{:#x} in {}; addr2line -Cfie {} {:#x}", offset, info.dli_fname, info.dli_fname, offset);
}

}  // namespace

BlockRunner::BlockRunner() : fibers_(settings().stack_bytes, &BlockRunner::fiber_main) {
  install_fault_handler_for_this_thread();
}

BlockRunner::~BlockRunner() = default;

BlockRunner& BlockRunner::of_this_thread() {
  thread_local std::unique_ptr<BlockRunner> runner;
  if (!runner) runner = std::make_unique<BlockRunner>();
  return *runner;
}

// ---- running a block ----------------------------------------------------------------------------------------

bool BlockRunner::run(const BlockPlan& plan, uint3 block_idx, std::string& fault) {
  plan_ = &plan;
  const dim3 dim = plan.block_dim;
  const int count = static_cast<int>(dim.x * dim.y * dim.z);
  const int warp_count = (count + 31) / 32;
  if (threads_.size() != static_cast<size_t>(count)) threads_ = std::vector<Thread>(static_cast<size_t>(count));
  warps_.assign(static_cast<size_t>(warp_count), Warp{});
  const auto block_linear = static_cast<uint32_t>(
      block_idx.x + uint64_t{plan.grid_dim.x} * (block_idx.y + uint64_t{plan.grid_dim.y} * block_idx.z));
  for (int linear = 0; linear < count; ++linear) {
    Thread& t = threads_[static_cast<size_t>(linear)];
    t.thread_idx = uint3{static_cast<unsigned>(linear) % dim.x, static_cast<unsigned>(linear) / dim.x % dim.y,
                         static_cast<unsigned>(linear) / (dim.x * dim.y)};
    t.block_idx = block_idx;
    t.block_dim = dim;
    t.grid_dim = plan.grid_dim;
    t.linear = linear;
    t.lane = linear % 32;
    t.warp = linear / 32;
    t.block_linear = block_linear;
    t.block = this;
    t.status = Status::NotStarted;
    t.wait = Wait::None;
    t.fiber = nullptr;
    t.copies.clear();
    t.committed_groups = 0;
    t.warp_sync = 0;
    warps_[static_cast<size_t>(t.warp)].present |= lane_bit(t.lane);
  }
  live_ = count;
  barrier_waiting_ = 0;
  barrier_file_ = nullptr;
  faulted_ = false;
  fault_message_.clear();
  shared_.begin_block(plan.dynamic_shared_bytes);

  if (plan.schedule == Schedule::RoundRobin) {
    run_round_robin();
  } else {
    run_warp_serial(plan.schedule == Schedule::Reverse);
  }
  if (!faulted_ && live_ > 0) {
    faulted_ = true;
    fault_message_ = fmt::format("kernel {} block ({}, {}, {}): deadlock: {}", plan.kernel_name, block_idx.x,
                                 block_idx.y, block_idx.z, deadlock_report());
  }
  // Threads left behind by a fault or a deadlock: drop their frames, keep their stacks.
  for (Thread& t : threads_) {
    if (t.fiber != nullptr) {
      t.fiber->restart();
      fibers_.release(t.fiber);
      t.fiber = nullptr;
    }
  }
  plan_ = nullptr;
  if (faulted_) fault = fault_message_;
  return !faulted_;
}

void BlockRunner::run_round_robin() {
  for (bool progress = true; progress && !faulted_;) {
    progress = false;
    for (Thread& t : threads_) {
      if (t.status != Status::NotStarted && t.status != Status::Runnable) continue;
      step(t);
      progress = true;
      if (faulted_) return;
    }
  }
}

void BlockRunner::run_warp_serial(bool reverse) {
  const int warp_count = static_cast<int>(warps_.size());
  const int count = static_cast<int>(threads_.size());
  // Warps in schedule order; a warp runs its lanes in order until none can run. Only a barrier release can wake a
  // warp that was passed over, so it starts the pass over from the first warp.
  for (bool ran_any = true; ran_any;) {
    ran_any = false;
    const uint64_t releases = barrier_releases_;
    for (int wi = 0; wi < warp_count && releases == barrier_releases_; ++wi) {
      const int warp = reverse ? warp_count - 1 - wi : wi;
      for (bool ran = true; ran && releases == barrier_releases_;) {
        ran = false;
        for (int li = 0; li < 32 && releases == barrier_releases_; ++li) {
          const int index = warp * 32 + (reverse ? 31 - li : li);
          if (index >= count) continue;
          Thread& t = threads_[static_cast<size_t>(index)];
          if (t.status != Status::NotStarted && t.status != Status::Runnable) continue;
          step(t);
          ran = ran_any = true;
          if (faulted_) return;
        }
      }
    }
  }
}

void BlockRunner::step(Thread& t) {
  if (t.status == Status::NotStarted) {
    t.fiber = fibers_.acquire();
    t.fiber->user = &t;
  }
  t.status = Status::Running;
  current_thread = &t;
  t.fiber->resume();
  current_thread = nullptr;
  if (t.status == Status::Exited) {
    fibers_.release(t.fiber);
    t.fiber = nullptr;
  }
}

void BlockRunner::fiber_main(Fiber& fiber) {
  for (;;) {
    auto* t = static_cast<Thread*>(fiber.user);
    static_cast<BlockRunner*>(t->block)->execute(*t);
    fiber.suspend();
  }
}

void BlockRunner::execute(Thread& t) {
  try {
    plan_->invoke(plan_->closure);
  } catch (const std::exception& error) {
    fault(t, fmt::format("a C++ exception escaped the kernel: {}", error.what()));
  } catch (...) {
    fault(t, "a C++ exception escaped the kernel");
  }
  exited(t);
}

void BlockRunner::wait(Thread& t) {
  t.status = Status::Waiting;
  t.fiber->suspend();
}

void BlockRunner::fault(ThreadContext& named, const std::string& message) {
  if (!faulted_) {
    faulted_ = true;
    fault_message_ = fmt::format("kernel {} {}: {}", plan_->kernel_name, thread_name(named), message);
  }
  // The thread named may be another one (a lane whose operands are wrong); the one to stop is the running one.
  auto& running = static_cast<Thread&>(*current_thread);
  running.status = Status::Faulted;
  running.fiber->suspend();
  std::abort();  // a faulted fiber is restarted, never resumed
}

std::string BlockRunner::where(const ThreadContext& thread) const {
  return fmt::format("kernel {} {}", plan_ != nullptr ? plan_->kernel_name : "?", thread_name(thread));
}

std::string BlockRunner::thread_name(const ThreadContext& t) const {
  return fmt::format("block ({}, {}, {}) thread ({}, {}, {})", t.block_idx.x, t.block_idx.y, t.block_idx.z,
                     t.thread_idx.x, t.thread_idx.y, t.thread_idx.z);
}

// ---- exit and barrier ---------------------------------------------------------------------------------------

void BlockRunner::exited(Thread& t) {
  complete_copies(t, INT64_MAX);  // in flight at exit: they still land
  t.status = Status::Exited;
  --live_;
  Warp& warp = warps_[static_cast<size_t>(t.warp)];
  warp.exited |= lane_bit(t.lane);
  // Lanes waiting for this one no longer need it (PTX waits for the non-exited lanes of the mask), unless they wait
  // in an .aligned instruction, which needs the whole warp.
  for (int lane = 0; lane < 32; ++lane) {
    if ((warp.pending & lane_bit(lane)) == 0) continue;
    Thread& waiting = lane_thread(t.warp, lane);
    if ((waiting.post.mask & lane_bit(t.lane)) == 0) continue;
    if (warp_op_aligned(waiting.post.op))
      fault(t,
            fmt::format("exits while lane {} of its warp waits for it in {} (every lane of the warp must execute it)",
                        lane, warp_op_name(waiting.post.op)));
    try_complete(t.warp, waiting.post);
  }
  if (barrier_waiting_ > 0 && barrier_waiting_ == live_) release_barrier();
}

void BlockRunner::syncthreads(ThreadContext& context, const char* file, int line) {
  auto& t = static_cast<Thread&>(context);
  if (barrier_waiting_ == 0) {
    barrier_file_ = file;
    barrier_line_ = line;
  } else if (line != barrier_line_ || (file != barrier_file_ && std::strcmp(file, barrier_file_) != 0)) {
    fault(t, fmt::format("reaches the __syncthreads at {}:{} while {} thread(s) wait at the one at {}:{}: a barrier "
                         "in divergent code is undefined on a GPU",
                         file, line, barrier_waiting_, barrier_file_, barrier_line_));
  }
  ++barrier_waiting_;
  t.wait = Wait::Barrier;
  if (barrier_waiting_ == live_) {
    release_barrier();
    t.status = Status::Runnable;  // the schedule, not arrival order, decides who goes first
    t.fiber->suspend();
    return;
  }
  wait(t);
}

void BlockRunner::release_barrier() {
  for (Thread& t : threads_) {
    if (t.wait != Wait::Barrier) continue;
    t.wait = Wait::None;
    if (t.status == Status::Waiting) t.status = Status::Runnable;
  }
  barrier_waiting_ = 0;
  barrier_file_ = nullptr;
  ++barrier_releases_;
}

// ---- warp collectives ---------------------------------------------------------------------------------------

const WarpResult& BlockRunner::collective(ThreadContext& context, const WarpPost& post) {
  auto& t = static_cast<Thread&>(context);
  Warp& warp = warps_[static_cast<size_t>(t.warp)];
  const char* name = warp_op_name(post.op);
  if ((post.mask & lane_bit(t.lane)) == 0)
    fault(t, fmt::format("{} with mask {:#010x}, which does not include the calling lane {}", name, post.mask, t.lane));
  if (warp_op_aligned(post.op) && (post.mask != 0xFFFFFFFFu || warp.present != 0xFFFFFFFFu || warp.exited != 0))
    fault(t, fmt::format("{} needs all 32 lanes of the warp (lanes present {:#010x}, exited {:#010x})", name,
                         warp.present, warp.exited));
  if ((post.mask & ~warp.present) != 0)
    fault(t, fmt::format("{} with mask {:#010x} names lanes {:#010x}, which do not exist in a block of {} threads",
                         name, post.mask, post.mask & ~warp.present, threads_.size()));
  t.post = post;
  t.wait = Wait::Warp;
  warp.pending |= lane_bit(t.lane);
  if (!try_complete(t.warp, post)) {
    wait(t);
  } else {
    t.status = Status::Runnable;  // the completing lane does not run ahead of the lanes it woke
    t.fiber->suspend();
  }
  return t.result;
}

bool BlockRunner::try_complete(int warp_index, const WarpPost& post) {
  Warp& warp = warps_[static_cast<size_t>(warp_index)];
  const unsigned taking_part = post.mask & ~warp.exited;
  if ((warp.pending & taking_part) != taking_part) return false;
  const WarpPost* posts[32] = {};
  WarpResult* results[32] = {};
  for (int lane = 0; lane < 32; ++lane) {
    if ((taking_part & lane_bit(lane)) == 0) continue;
    Thread& l = lane_thread(warp_index, lane);
    if (l.post.op != post.op || l.post.mask != post.mask) return false;
    posts[lane] = &l.post;
    results[lane] = &l.result;
  }
  if (post.op == WarpOp::Ldmatrix) {  // each lane that gives a row address reads that row
    for (int lane = 0; lane < 8 * std::clamp(post.lane_arg, 1, 4); ++lane) {
      const uint64_t address = posts[lane]->value;
      if (address % 16 == 0 && address + 16 <= shared_.used())
        check_shared(lane_thread(warp_index, lane), address, 16, false, nullptr);
    }
  }
  std::string error;
  const SharedView shared{shared_.base(), shared_.used()};
  const int bad_lane = compute_collective(post.op, taking_part, posts, results, shared, error);
  if (bad_lane >= 0) fault(lane_thread(warp_index, bad_lane), error);
  warp.pending &= ~taking_part;
  uint32_t sync = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((taking_part & lane_bit(lane)) != 0) sync = std::max(sync, lane_thread(warp_index, lane).warp_sync);
  for (int lane = 0; lane < 32; ++lane) {
    if ((taking_part & lane_bit(lane)) == 0) continue;
    Thread& l = lane_thread(warp_index, lane);
    l.warp_sync = sync + 1;
    l.wait = Wait::None;
    if (l.status == Status::Waiting) l.status = Status::Runnable;
  }
  return true;
}

// ---- global memory ------------------------------------------------------------------------------------------

namespace {

const char* access_name(GlobalAccess kind, bool present) {
  switch (kind) {
    case GlobalAccess::Read:
      return present ? "reads" : "read";
    case GlobalAccess::Write:
      return present ? "writes" : "wrote";
    case GlobalAccess::Atomic:
      return present ? "updates atomically" : "updated atomically";
  }
  return "?";
}

std::string block_name(uint32_t linear, dim3 grid) {
  return fmt::format("({}, {}, {})", linear % grid.x, linear / grid.x % grid.y, linear / (grid.x * grid.y));
}

}  // namespace

void BlockRunner::check_global(ThreadContext& context, const void* address, size_t bytes, GlobalAccess kind,
                               const void* code) {
  const GlobalAccessProblem problem = global_race_check_access(context.block_linear, address, bytes, kind);
  if (!problem.race) [[likely]]
    return;
  auto& t = static_cast<Thread&>(context);
  const std::string at = code != nullptr ? " (kernel code " + describe_code(code) + ")" : std::string();
  const std::string other = problem.several_blocks
                                ? "other blocks of this launch"
                                : "block " + block_name(problem.other_block, t.grid_dim) + " of this launch";
  const char* fix = kind == GlobalAccess::Read && problem.other == GlobalAccess::Write
                        ? "; blocks of one launch run in no defined order: read it in a later launch, or publish it "
                          "with __threadfence() and an atomic flag"
                        : "; blocks of one launch run in no defined order (and at once on a GPU): make every access "
                          "atomic, give each block its own bytes, or split the kernel";
  fault(t, fmt::format("global memory race: {} {} byte(s) at {} ({}), which {} {}{}{}", access_name(kind, true), bytes,
                       reinterpret_cast<const void*>(problem.address),
                       device_memory_describe(reinterpret_cast<const void*>(problem.address)), other,
                       access_name(problem.other, false), fix, at));
}

// ---- shared memory and cp.async -----------------------------------------------------------------------------

void* BlockRunner::static_shared(ThreadContext& thread, const SharedSite& site) {
  std::string error;
  const size_t offset = shared_.place_static(site, error);
  if (offset == SIZE_MAX) fault(thread, error);
  return shared_.base() + offset;
}

uint32_t BlockRunner::shared_address(ThreadContext& thread, const void* pointer) {
  const size_t offset = static_cast<size_t>(static_cast<const unsigned char*>(pointer) - shared_.base());
  if (offset > shared_.span())
    fault(thread, fmt::format("__cvta_generic_to_shared({}) of an address that is not shared memory", pointer));
  return static_cast<uint32_t>(offset);
}

void BlockRunner::check_shared(ThreadContext& context, size_t offset, size_t bytes, bool write, const void* code) {
  auto& t = static_cast<Thread&>(context);
  const SharedAccessProblem problem =
      shared_.access({t.linear, t.warp, t.warp_sync}, offset, bytes, write, static_cast<uint32_t>(barrier_releases_));
  if (problem.kind == SharedAccessProblem::Kind::None) [[likely]]
    return;
  const Checks& checks = settings().checks;
  const char* verb = write ? "writes" : "reads";
  const std::string at = code != nullptr ? " (kernel code " + describe_code(code) + ")" : std::string();
  switch (problem.kind) {
    case SharedAccessProblem::Kind::None:
      return;
    case SharedAccessProblem::Kind::OutOfBounds:
      if (checks.bounds)
        fault(t, fmt::format("{} {} byte(s) at shared offset {:#x}, {}: out of bounds of the block's shared memory{}",
                             verb, bytes, problem.offset, shared_.describe(problem.offset), at));
      return;
    case SharedAccessProblem::Kind::Uninitialised:
      if (checks.init)
        fault(t, fmt::format("reads {}, which no thread of the block has written (uninitialised shared memory){}",
                             shared_.describe(problem.offset), at));
      return;
    case SharedAccessProblem::Kind::Race: {
      if (!checks.races) return;
      const Thread& other = threads_[static_cast<size_t>(problem.other_thread)];
      fault(t, fmt::format("shared memory race: {} {} that thread ({}, {}, {}) {} since the last __syncthreads, and no "
                           "barrier{} orders the two accesses{}",
                           verb, shared_.describe(problem.offset), other.thread_idx.x, other.thread_idx.y,
                           other.thread_idx.z, problem.other_wrote ? "wrote" : "read",
                           other.warp == t.warp ? " or warp synchronisation" : "", at));
    }
  }
}

void BlockRunner::cp_async(ThreadContext& context, uint32_t dst, const void* src, int copy_bytes, int source_bytes) {
  auto& t = static_cast<Thread&>(context);
  if (copy_bytes != 4 && copy_bytes != 8 && copy_bytes != 16)
    fault(t, fmt::format("cp.async of {} bytes (4, 8 or 16)", copy_bytes));
  if (source_bytes < 0 || source_bytes > copy_bytes)
    fault(t, fmt::format("cp.async src-size {} outside [0, {}]", source_bytes, copy_bytes));
  if (dst % static_cast<uint32_t>(copy_bytes) != 0 || reinterpret_cast<uintptr_t>(src) % copy_bytes != 0)
    fault(t, fmt::format("cp.async of {} bytes with a misaligned address (shared {:#x}, global {})", copy_bytes, dst,
                         src));
  if (dst + static_cast<size_t>(copy_bytes) > shared_.used())
    fault(t, fmt::format("cp.async writes shared bytes [{:#x}, {:#x}) past the block's {} bytes of shared memory", dst,
                         dst + static_cast<size_t>(copy_bytes), shared_.used()));
  if (global_race_check_active && source_bytes > 0 && in_device_span(src))
    check_global(t, src, static_cast<size_t>(source_bytes), GlobalAccess::Read, nullptr);
  t.copies.push_back(CpAsync{dst, copy_bytes, source_bytes, src, -1});
}

void BlockRunner::cp_async_commit(ThreadContext& context) {
  auto& t = static_cast<Thread&>(context);
  ++t.committed_groups;
  for (CpAsync& copy : t.copies)
    if (copy.group < 0) copy.group = t.committed_groups;
}

void BlockRunner::cp_async_wait(ThreadContext& context, int groups_left_pending) {
  auto& t = static_cast<Thread&>(context);
  complete_copies(t, t.committed_groups - groups_left_pending);
}

void BlockRunner::complete_copies(Thread& t, int64_t up_to_group) {
  size_t kept = 0;
  for (const CpAsync& copy : t.copies) {
    const bool due = up_to_group == INT64_MAX || (copy.group >= 0 && copy.group <= up_to_group);
    if (!due) {
      t.copies[kept++] = copy;
      continue;
    }
    check_shared(t, copy.dst, static_cast<size_t>(copy.copy_bytes), true, nullptr);  // the copy lands now
    std::memcpy(shared_.base() + copy.dst, copy.src, static_cast<size_t>(copy.source_bytes));
    std::memset(shared_.base() + copy.dst + copy.source_bytes, 0,
                static_cast<size_t>(copy.copy_bytes - copy.source_bytes));
  }
  t.copies.resize(kept);
}

// ---- reports ------------------------------------------------------------------------------------------------

std::string BlockRunner::deadlock_report() const {
  int at_barrier = 0;
  for (const Thread& t : threads_)
    if (t.wait == Wait::Barrier) ++at_barrier;
  std::string report = fmt::format("{} of {} live threads wait at __syncthreads", at_barrier, live_);
  // Per warp, the lanes waiting in each (operation, mask), and whom they wait for.
  for (size_t w = 0; w < warps_.size() && report.size() < 2000; ++w) {
    const Warp& warp = warps_[w];
    unsigned reported = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if ((warp.pending & lane_bit(lane) & ~reported) == 0) continue;
      const WarpPost& post = threads_[w * 32 + static_cast<size_t>(lane)].post;
      unsigned lanes = 0;
      for (int other = lane; other < 32; ++other) {
        const Thread& t = threads_[w * 32 + static_cast<size_t>(other)];
        if ((warp.pending & lane_bit(other)) != 0 && t.post.op == post.op && t.post.mask == post.mask)
          lanes |= lane_bit(other);
      }
      reported |= lanes;
      const unsigned missing = post.mask & ~warp.exited & ~warp.pending;
      report += fmt::format("; warp {} lanes {:#010x} wait in {} (mask {:#010x}) {}", w, lanes, warp_op_name(post.op),
                            post.mask,
                            missing != 0 ? fmt::format("for lanes {:#010x}", missing)
                                         : std::string("with lanes that wait in another collective"));
    }
  }
  return report;
}

std::string BlockRunner::describe_address(const void* address) const {
  const auto* p = static_cast<const unsigned char*>(address);
  if (p >= shared_.base() + shared_.span() && p < shared_.base() + shared_.span() + 4096)
    return "past the end of the block's shared memory";
  for (const auto& fiber : fibers_.all())
    if (fiber->guard_contains(address))
      return "the stack of an emulated CUDA thread overflowed (NVFP4LM_EMU_STACK_KIB)";
  return {};
}

}  // namespace nvfp4lm::emu
