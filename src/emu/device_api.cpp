// The out-of-line half of device_api.h: entry points from kernel code into the running thread's block runner,
// the PTX instruction twins, and kernel launches.
#include "emu/device_api.h"

#include <fmt/format.h>

#include <cmath>

#include "emu/global_race_check.h"
#include "emu/grid.h"
#include "emu/last_error.h"
#include "emu/settings.h"
#include "emu/stream.h"

namespace nvfp4lm::emu {

void syncthreads(const char* file, int line) {
  ThreadContext& t = this_thread();
  t.block->syncthreads(t, file, line);
}

WarpResult warp_collective(const WarpPost& post) {
  ThreadContext& t = this_thread();
  return t.block->collective(t, post);
}

uint64_t warp_scalar_collective(WarpOp op, unsigned mask, uint64_t value, int value_bytes, bool is_signed, int lane_arg,
                                int width, bool* predicate) {
  WarpPost post;
  post.op = op;
  post.mask = mask;
  post.value = value;
  post.value_bytes = value_bytes;
  post.is_signed = is_signed;
  post.lane_arg = lane_arg;
  post.width = width;
  ThreadContext& t = this_thread();
  const WarpResult& result = t.block->collective(t, post);
  if (predicate != nullptr) *predicate = result.predicate;
  return result.value;
}

void* static_shared(const SharedSite& site) {
  ThreadContext& t = this_thread();
  return t.block->static_shared(t, site);
}

void* dynamic_shared() { return this_thread().block->dynamic_shared(); }

void thread_fence(bool device_scope) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (device_scope) global_race_check_fence(this_thread().block_linear);
}

uint32_t shared_address(const void* pointer) {
  ThreadContext& t = this_thread();
  return t.block->shared_address(t, pointer);
}

void cp_async(uint32_t shared_dst, const void* global_src, int copy_bytes, int source_bytes) {
  ThreadContext& t = this_thread();
  t.block->cp_async(t, shared_dst, global_src, copy_bytes, source_bytes);
}

void cp_async_commit() {
  ThreadContext& t = this_thread();
  t.block->cp_async_commit(t);
}

void cp_async_wait_group(int groups_left_pending) {
  ThreadContext& t = this_thread();
  t.block->cp_async_wait(t, groups_left_pending);
}

void ldmatrix(uint32_t* regs, int matrices, bool trans, uint32_t shared_address) {
  WarpPost post;
  post.op = WarpOp::Ldmatrix;
  post.mask = 0xFFFFFFFFu;
  post.lane_arg = matrices;
  post.width = trans ? 1 : 0;
  post.value = shared_address;
  const WarpResult result = warp_collective(post);
  for (int m = 0; m < matrices; ++m) regs[m] = result.regs[m];
}

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  WarpPost post;
  post.op = WarpOp::Mma;
  post.mask = 0xFFFFFFFFu;
  for (int i = 0; i < 4; ++i) post.a[i] = a[i];
  post.b[0] = b0;
  post.b[1] = b1;
  for (int i = 0; i < 4; ++i) post.c[i] = d[i];
  const WarpResult result = warp_collective(post);
  for (int i = 0; i < 4; ++i) d[i] = result.d[i];
}

void mma_m16n8k64_fp4(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], uint32_t scale_a,
                      uint16_t thread_id_a, uint32_t scale_b, uint16_t thread_id_b) {
  ThreadContext& thread = this_thread();
  if (settings().arch != 120 && settings().arch != 121)
    thread.block->fault(thread, fmt::format("{} runs on sm_120a / sm_121a only; the emulated device is {} "
                                            "(NVFP4LM_EMU_ARCH=sm_121 presents a GB10)",
                                            warp_op_name(WarpOp::MmaFp4), arch_name(settings().arch)));
  WarpPost post;
  post.op = WarpOp::MmaFp4;
  post.mask = 0xFFFFFFFFu;
  for (int i = 0; i < 4; ++i) post.a[i] = a[i];
  post.b[0] = b[0];
  post.b[1] = b[1];
  for (int i = 0; i < 4; ++i) post.c[i] = d[i];
  post.scale_a = scale_a;
  post.scale_b = scale_b;
  post.thread_id_a = thread_id_a;
  post.thread_id_b = thread_id_b;
  const WarpResult result = warp_collective(post);
  for (int i = 0; i < 4; ++i) d[i] = result.d[i];
}

float ex2_approx_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::copysign(0.0f, x);
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

void submit_launch(LaunchRequest request) {
  std::string why;
  if (const cudaError_t sticky = sticky_error_or_success(); sticky != cudaSuccess) {
    record_error(sticky, {});
    return;
  }
  if (const cudaError_t status = check_launch(request, why); status != cudaSuccess) {
    record_error(status, why);
    return;
  }
  const cudaStream_t stream = request.stream;
  Work work;
  work.what = std::string("kernel ") + request.name;
  work.run = [request = std::move(request)](std::string& fault) { return run_grid(request, fault); };
  if (const cudaError_t status = submit(stream, std::move(work)); status != cudaSuccess) record_error(status, {});
}

std::string kernel_name_from_signature(const char* pretty_function) {
  // GCC: "const char* nvfp4lm::emu::kernel_name() [with auto Kernel = nvfp4lm::cuda::{anonymous}::k<float>]"
  std::string text = pretty_function;
  const size_t start = text.find("Kernel = ");
  if (start == std::string::npos) return text;
  std::string name = text.substr(start + 9);
  if (const size_t end = name.rfind(']'); end != std::string::npos) name.erase(end);
  if (!name.empty() && name.front() == '&') name.erase(0, 1);
  // Drop the namespaces in front of the kernel's own name (not those inside its template arguments).
  const size_t template_start = name.find('<');
  const size_t last_scope = name.rfind("::", template_start);
  if (last_scope != std::string::npos) name.erase(0, last_scope + 2);
  return name;
}

}  // namespace nvfp4lm::emu
