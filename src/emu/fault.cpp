// See fault.h.
#include "emu/fault.h"

#include <signal.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "emu/block_runner.h"
#include "emu/device_memory.h"
#include "emu/thread_context.h"

namespace nvfp4lm::emu {
namespace {

struct Sticky {
  std::mutex mutex;
  cudaError_t error = cudaSuccess;
  std::string detail;
};

Sticky& sticky() {
  static auto* instance = new Sticky();
  return *instance;
}

struct sigaction previous_segv, previous_bus;

void on_fault(int signal, siginfo_t* info, void* context) {
  ThreadContext* thread = current_thread;
  if (thread != nullptr) {
    std::string what = device_memory_describe(info->si_addr);
    if (what.empty()) what = thread->block->describe_address(info->si_addr);
    if (what.empty()) what = "not device, shared or local memory (a host pointer passed to a kernel?)";
    std::fprintf(stderr,
                 "nvfp4lm emulated CUDA: device fault (the kernel made an invalid memory access; on a GPU: "
                 "cudaErrorIllegalAddress): %s: address %p: %s\n",
                 thread->block->where(*thread).c_str(), info->si_addr, what.c_str());
    std::fflush(stderr);
  }
  // Let the signal take its normal course: the previous handler (a sanitizer's, a test framework's) or the default.
  const struct sigaction& previous = signal == SIGSEGV ? previous_segv : previous_bus;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
    previous.sa_handler(signal);
    return;
  }
  sigaction(signal, &previous, nullptr);  // the faulting access runs again and ends the process
}

}  // namespace

void set_sticky_error(cudaError_t error, const std::string& detail) {
  Sticky& s = sticky();
  std::lock_guard lock(s.mutex);
  if (s.error != cudaSuccess) return;
  s.error = error;
  s.detail = detail;
  std::fprintf(stderr, "nvfp4lm emulated CUDA: device fault: %s\n", detail.c_str());
  std::fflush(stderr);
}

cudaError_t sticky_error() {
  Sticky& s = sticky();
  std::lock_guard lock(s.mutex);
  return s.error;
}

std::string sticky_detail() {
  Sticky& s = sticky();
  std::lock_guard lock(s.mutex);
  return s.detail;
}

void clear_sticky_error() {
  Sticky& s = sticky();
  std::lock_guard lock(s.mutex);
  s.error = cudaSuccess;
  s.detail.clear();
}

void install_fault_handler_for_this_thread() {
  thread_local bool has_alternate_stack = false;
  if (!has_alternate_stack) {
    stack_t current{};
    if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) != 0) {
      const size_t bytes = 64 << 10;
      void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (memory != MAP_FAILED) {
        stack_t alternate{};
        alternate.ss_sp = memory;
        alternate.ss_size = bytes;
        sigaltstack(&alternate, nullptr);  // never freed: the thread may fault until it ends
      }
    }
    has_alternate_stack = true;
  }
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = &on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv);
    sigaction(SIGBUS, &action, &previous_bus);
  });
}

}  // namespace nvfp4lm::emu
