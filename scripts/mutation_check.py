#!/usr/bin/env python3
"""Mutation check of the emulated CUDA device: does the emulated test suite catch the bugs GPUs punish?

usage: scripts/mutation_check.py [--work DIR] [--only ID[,ID...]] [--schedules warp-serial,reverse,round-robin]

Copies the working tree to DIR (default /tmp/nvfp4lm-mutations), builds the CUDA test executables there in the
emulated mode (NVFP4LM_CUDA=EMULATE), checks that the selected tests pass unmutated, then plants one bug at a time
(a one-place source edit), rebuilds and runs the tests that cover the code under every schedule. A mutation is
caught under a schedule when its tests fail or a fault or deadlock ends them. Some mutations run their tests with
emulator settings of their own (the grid cap of the "grid-cap" test configuration, NVFP4LM_EMU_GRID_CAP=2), the
configuration that catches them in the default suite. Prints a table (markdown), one row per
mutation, and exits 1 when fewer than all but one are caught by some schedule. Takes about half an hour on 2 cores;
run on demand, not in CI. Results and their date go to bench/NOTES.md; each run's test output is in DIR/logs.
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

# id, kind, file, text that must occur exactly once, replacement, [(test executable, gtest filter)], optional
# {environment variable: value} for the test runs
GRID_CAP = {"NVFP4LM_EMU_GRID_CAP": "2"}
ATTENTION_FORWARD = [("test_ops_cuda", "AttentionCuda.ForwardMatchesCpu:AttentionCuda.DecodeAndQueryOffsetMatchCpu")]
MUTATIONS = [
    ("barrier-stage-reuse", "missing barrier: a cp.async stage buffer refilled while other warps still read it",
     "src/ops/cuda/attention_forward.cu",
     "    cp_async_wait_all();\n    __syncthreads();  // the next tile has landed and nobody reads this stage any more",
     "    cp_async_wait_all();", ATTENTION_FORWARD),
    ("cp-async-no-wait", "missing cp.async.wait_group: a tile read before its copies landed",
     "src/ops/cuda/attention_forward.cu",
     "    cp_async_wait_all();\n    __syncthreads();  // the next tile has landed and nobody reads this stage any more",
     "    __syncthreads();  // the next tile has landed and nobody reads this stage any more", ATTENTION_FORWARD),
    ("mma-fragment-order", "wrong mma A-fragment register order (rows g + 8 and columns + 8 swapped)",
     "src/ops/cuda/attention_mma.h",
     "  a[1] = pack_bf16x2(acc[2 * kk][2], acc[2 * kk][3]);\n  a[2] = pack_bf16x2(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);",
     "  a[2] = pack_bf16x2(acc[2 * kk][2], acc[2 * kk][3]);\n  a[1] = pack_bf16x2(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);",
     ATTENTION_FORWARD),
    ("ldmatrix-address", "wrong ldmatrix row address (lane >> 3 instead of lane >> 4 picks the 8-row block)",
     "src/ops/cuda/attention_mma.h",
     "tile_offset<D>(row0 + (lane >> 4) * 8 + (lane & 7), kd * 2 + ((lane >> 3) & 1))",
     "tile_offset<D>(row0 + ((lane >> 3) & 1) * 8 + (lane & 7), kd * 2 + ((lane >> 3) & 1))", ATTENTION_FORWARD),
    ("barrier-ds-store", "missing barrier between the dS store to shared memory and its ldmatrix (backward)",
     "src/ops/cuda/attention_backward.cu",
     "      __syncthreads();\n      uint32_t ds_frag[4][4];", "      uint32_t ds_frag[4][4];",
     [("test_ops_cuda", "AttentionCuda.BackwardMatchesCpu")]),
    ("mask-names-exited-lanes", "a full-warp shuffle reduction over row groups, some of whose lanes have returned",
     "src/core/cuda/reduce.cuh",
     "for (int offset = lanes / 2; offset > 0; offset /= 2) value += __shfl_xor_sync(mask, value, offset, lanes);",
     "for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);",
     [("test_ops_cuda", "*rmsnorm*")]),
    ("barrier-after-zeroing", "missing barrier after zeroing shared partials (rmsnorm backward)",
     "src/ops/cuda/rmsnorm.cu",
     "partial[i] = 0.f;\n  __syncthreads();", "partial[i] = 0.f;",
     [("test_ops_cuda", "*rmsnorm_backward*:CudaOpContracts.RmsNorm*")]),
    ("grid-off-by-one", "off-by-one grid: the last block of rows is never launched (rmsnorm forward)",
     "src/ops/cuda/rmsnorm.cu",
     "ceil_div(x.count, rows_per_block)", "ceil_div(x.count - 1, rows_per_block)",
     [("test_ops_cuda", "*rmsnorm_forward*:*rmsnorm_heads*")]),
    ("no-smem-attribute", "no cudaFuncSetAttribute for the decode kernel's > 48 KiB of dynamic shared memory",
     "src/ops/cuda/attention_decode.cu", "  static bool configured = false;", "  static bool configured = true;",
     [("test_ops_cuda", "AttentionCuda.DecodeAndQueryOffsetMatchCpu:AttentionCuda.PerRowStartsReadOnTheDevice")]),
    ("uninitialised-shared", "histogram bins in shared memory never zeroed (top-k / top-p sampling)",
     "src/ops/cuda/sampling.cu",
     "    shared.count[b] = 0;\n    shared.mass[b] = 0;\n", "",
     [("test_ops_cuda", "SamplingCuda.TopKTopPMatchesCpu")]),
    ("barrier-gemv-partials", "missing barrier before the warps' partial sums are added (NVFP4 GEMV)",
     "src/ops/cuda/nvfp4_linear.cu",
     "    partial[warp][g + 8][t * kTileColumns + 2 * c + 1] = acc[t][3];\n  }\n  __syncthreads();",
     "    partial[warp][g + 8][t * kTileColumns + 2 * c + 1] = acc[t][3];\n  }",
     [("test_ops_cuda", "Nvfp4LinearCuda.FusedKernelMatchesCpu:Nvfp4LinearCuda.DecodeFusions*")]),
    ("graph-wrong-stream", "the decode step's graph replayed on the legacy stream, unordered with its input copy",
     "src/core/cuda/graph.cpp",
     "cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream())",
     "cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), nullptr)",
     [("test_model_cuda", "Qwen3Cuda.DecodeGraphMatchesEagerAndForwardCached:Qwen3Cuda.GreedyGenerationAgreesWithCpu")]),
    ("host-read-in-capture", "a host read of the logits inside the captured decode step",
     "src/model/qwen3_decode_step.cpp",
     "  detail::qwen3_inference_forward(model_.config(), model_.weights(), *model_.workspace_, step, &state_->buffers);\n}",
     "  detail::qwen3_inference_forward(model_.config(), model_.weights(), *model_.workspace_, step, &state_->buffers);\n"
     "  (void)state_->buffers.logits.to(Device::cpu());\n}",
     [("test_model_cuda", "Qwen3Cuda.DecodeGraphMatchesEagerAndForwardCached:Qwen3Cuda.GreedyGenerationAgreesWithCpu")]),
    # Issue 34: bugs that passed every schedule before the global race check, the grid cap and the tie tests.
    ("amax-plain-max", "the tensor amax as a plain compare-and-store instead of atomicMax (blocks race)",
     "src/quant/cuda/nvfp4.cu",
     "  if (threadIdx.x == 0) atomicMax(&result->amax_bits, __float_as_uint(block));",
     "  if (threadIdx.x == 0 && __float_as_uint(block) > result->amax_bits) result->amax_bits = __float_as_uint(block);",
     [("test_quant_cuda", "TensorAmaxCuda.*:Nvfp4Cuda.LargeMatrixAmaxAndScale")]),
    ("embedding-grad-plain-add", "one block per position adds into the gradient row of a repeated id, non-atomically",
     "src/ops/cuda/embedding.cu",
     "    if (unique_ids.empty() || unique_ids.back() != id) {",
     "    if (true) {",
     [("test_ops_cuda", "CudaOpContracts.EmbeddingBackward*:*BackendOps.*embedding*")]),
    ("adamw8bit-loop-barrier", "no barrier at the end of the 8-bit AdamW grid-stride loop (shared maxima reused)",
     "src/train/optim/cuda/optim_kernels.cu",
     "    __syncthreads();  // warp_maxima is rewritten by the next block\n",
     "",
     [("test_train_cuda", "*OptimizerCuda*")], GRID_CAP),
    ("cross-entropy-last-tie", "the cross-entropy argmax keeps the last of tied maxima across warps",
     "src/ops/cuda/cross_entropy.cu",
     "(b.max == a.max && b.index < a.index)",
     "(b.max == a.max && b.index > a.index)",
     [("test_ops_cuda", "CudaOpContracts.CrossEntropy*")]),
    # Issue 50: per-token gradient scales (GRPO's policy-gradient loss), compacted like the rows.
    ("cross-entropy-row-scale", "every row of a cross-entropy chunk takes the first row's per-token gradient scale",
     "src/ops/cuda/cross_entropy.cu",
     "grad_scale * row_scales[blockIdx.x]",
     "grad_scale * row_scales[0]",
     [("test_ops_cuda", "*CudaMatchesCpu/lm_head_cross_entropy*")]),
    # Issue 26: attention decode merges its splits in the last CTA to arrive.
    ("decode-split-no-fence", "an attention decode split takes its ticket without publishing its partials",
     "src/ops/cuda/attention_decode.cu",
     "  NVFP4LM_SHARED(unsigned, ticket);\n  __threadfence();",
     "  NVFP4LM_SHARED(unsigned, ticket);",
     [("test_ops_cuda", "AttentionCuda.DecodeAndQueryOffsetMatchCpu:AttentionCuda.PerRowStartsReadOnTheDevice")]),
    ("decode-counter-not-reset", "the attention decode's arrival counter is not set back to 0 for the next launch",
     "src/ops/cuda/attention_decode.cu",
     "  if (threadIdx.x == 0) atomicExch(done, 0u);",
     "",
     [("test_ops_cuda", "AttentionCuda.DecodeAndQueryOffsetMatchCpu:AttentionCuda.PerRowStartsReadOnTheDevice")]),
    # Issue 30: the fused distillation loss.
    ("distill-max-scratch-reuse", "no barrier after a row maximum: the teacher's reduction overwrites the student's "
     "warp maxima while other warps still read them",
     "src/ops/cuda/distillation.cu",
     "  for (int w = 1; w < kRowWarps; ++w) m = merge(m, scratch[w]);\n  __syncthreads();",
     "  for (int w = 1; w < kRowWarps; ++w) m = merge(m, scratch[w]);",
     [("test_ops_cuda", "*BackendOps.*distillation*")]),
    ("distill-ce-onehot", "the cross-entropy share of the distillation gradient without its one-hot term",
     "src/ops/cuda/distillation.cu",
     "(q - p) + ce_scale * softmax - (j == target ? ce_scale : 0.f);",
     "(q - p) + ce_scale * softmax;",
     [("test_ops_cuda", "*BackendOps.*distillation*")]),
    ("distill-topk-rest", "distillation from a teacher cache: the teacher's rest mass spread over the tokens outside "
     "the top K by the student's whole distribution instead of its tail (r q_v, not r q_v / q_rest)",
     "src/ops/cuda/distillation.cu",
     "const float rest_shift = log_rest - tail_lse;",
     "const float rest_shift = log_rest - q_lse;",
     [("test_ops_cuda", "*BackendOps.*distillation_topk*")]),
    ("distill-topk-sort-barrier", "no barrier after the row's K tokens are sorted into shared memory: the passes "
     "search the sorted list while other threads still write it",
     "src/ops/cuda/distillation.cu",
     "    sorted_p[rank] = __expf(log_p[threadIdx.x]);\n  }\n  __syncthreads();",
     "    sorted_p[rank] = __expf(log_p[threadIdx.x]);\n  }",
     [("test_ops_cuda", "*BackendOps.*distillation_topk*")]),
    ("dropout-mask-index", "LoRA dropout: the mask indexed by the position within the chunk's row instead of the "
     "operand's row-major index, so rows share one mask (and a strided operand's mask differs from its copy's)",
     "src/ops/cuda/elementwise.cu",
     "const int64_t base = pos.row * mask_width + pos.col;",
     "const int64_t base = pos.col;",
     [("test_ops_cuda", "*BackendOps.*dropout*")]),
    ("mul-adds", "runtime LoRA's row selection: the elementwise product adds instead of multiplying",
     "src/ops/cuda/elementwise.cu",
     "op == Binary::Add ? x[k] + y[k] : x[k] * y[k]",
     "x[k] + y[k]",
     [("test_ops_cuda", "*BackendOps.*mul_inplace*")]),
    # Issue 47: Blackwell's block-scaled FP4 mma, in the emulator (checked against the PTX ISA's text and CUTLASS
    # cute's SM120 traits, tests/emu/test_mma_fp4.cpp) and in the kernel that feeds it (against the CPU).
    ("emu-fp4-scale-lane", "the emulated FP4 mma reads row m's scales from lane 4 (m % 8) + 2 (m / 8) (the thread-id "
     "selector's lane pair read as rows g, g + 8 of the upper pair)",
     "src/emu/warp_collectives.cpp",
     "const int lane = 4 * (m % 8) + 2 * first.thread_id_a + m / 8;",
     "const int lane = 4 * (m % 8) + first.thread_id_a + 2 * (m / 8);",
     [("test_emu", "MmaFp4*")]),
    ("emu-fp4-nibble-order", "the emulated FP4 mma takes A's elements high nibble first",
     "src/emu/warp_collectives.cpp",
     "a[g + 8 * (r % 2)][8 * t + j + 32 * (r / 2)] = e2m1_value(p.a[r], j);",
     "a[g + 8 * (r % 2)][8 * t + j + 32 * (r / 2)] = e2m1_value(p.a[r], 7 - j);",
     [("test_emu", "MmaFp4*")]),
    ("emu-fp4-fragment-row", "the emulated FP4 mma's A registers 1 and 2 swapped (row g + 8 read as k + 32)",
     "src/emu/warp_collectives.cpp",
     "a[g + 8 * (r % 2)][8 * t + j + 32 * (r / 2)] = e2m1_value(p.a[r], j);",
     "a[g + 8 * (r / 2)][8 * t + j + 32 * (r % 2)] = e2m1_value(p.a[r], j);",
     [("test_emu", "MmaFp4*")]),
    ("w4a4-scale-selector", "the W4A4 GEMM gives row g's scales from both lanes of the thread-id-a pair (row g + 8 "
     "gets row g's)",
     "src/ops/cuda/nvfp4_w4a4_gemm.cu",
     "scale_a[i] = load_scales(p.x_scales, p.m, p.k, row + 8 * (t % 2), k0);",
     "scale_a[i] = load_scales(p.x_scales, p.m, p.k, row + 8 * (t / 2), k0);",
     [("test_ops_cuda", "Nvfp4W4a4Cuda.*")]),
    ("w4a4-fragment-register", "the W4A4 GEMM fills A registers 1 and 2 the other way round (row g + 8 and k + 32)",
     "src/ops/cuda/nvfp4_w4a4_gemm.cu",
     "row + 8 * (r % 2), k0 + 8 * t + 32 * (r / 2)",
     "row + 8 * (r / 2), k0 + 8 * t + 32 * (r % 2)",
     [("test_ops_cuda", "Nvfp4W4a4Cuda.*")]),
    ("backward-one-stage-no-wait", "the attention backward's one-stage form (SM 12.x's 99 KiB of shared memory) "
     "reads the next query tile before its copies landed",
     "src/ops/cuda/attention_backward.cu",
     "        load_queries(next, 0);\n        cp_async_commit();\n        cp_async_wait_all();\n        __syncthreads();",
     "        load_queries(next, 0);\n        cp_async_commit();\n        __syncthreads();",
     [("test_ops_cuda", "AttentionCuda.BackwardFitsTheSharedMemoryOfAGb10")]),
    ("w4a4-store-past-n", "the W4A4 GEMM stores the columns of a ragged last tile past n",
     "src/ops/cuda/nvfp4_w4a4_gemm.cu",
     "          if (row < p.m && column < p.n)",
     "          if (row < p.m)",
     [("test_ops_cuda", "Nvfp4W4a4Cuda.*")]),
    ("invariant-prompt-decode", "batch-invariant mode still hands a short chunk of prompt rows to the decode kernel, "
     "so a prompt position's attention depends on its chunk",
     "src/ops/cuda/attention_decode.cu",
     "  if (shape.batch_invariant && shape.prompt_rows && shape.q_start_rows == nullptr) return 0;\n",
     "",
     [("test_ops_cuda", "BatchInvariantCuda.*"), ("test_infer_cuda", "*DeterministicCuda.*")]),
    ("decode-split-by-plan", "a decode row's keys split by the launch's planned maximum start instead of its own "
     "length, so its attention depends on the batch and the cache's capacity",
     "src/ops/cuda/attention_decode.cu",
     "    tiles_per_split = (tiles + p.splits - 1) / p.splits;\n",
     "",
     [("test_ops_cuda", "BatchInvariantCuda.*")]),
    ("qat-forward-rope", "the QAT forward leaves the keys unrotated (a training-path bug no inference path shares)",
     "src/model/qwen3_block_forward.cpp",
     "  rope_forward(a.k, *context.positions, *context.rope);\n  AttentionOptions options;",
     "  AttentionOptions options;",
     [("test_tools", "Parity.TheTrainingForwardIsWhatItsExportRuns")]),
    ("cublaslt-scale-layout", "the kernel laying out block scales for cuBLASLt swaps the 32-row groups and columns",
     "src/ops/cuda/nvfp4_block_scale_layout.cu",
     "    const int64_t c = (tile % column_tiles) * kScaleTileColumns + within % 4;",
     "    const int64_t c = (tile % column_tiles) * kScaleTileColumns + (within / 4) % 4;",
     [("test_ops_cuda", "Nvfp4CublasLtLayout.*:Nvfp4W4a4CublasLt.*")]),
    ("emu-cublaslt-scale-offset", "the emulated cuBLASLt reads a tile's 32-row groups where its rows are",
     "src/emu/cublaslt_api.cpp",
     "  return tile * 512 + (r % 32) * 16 + (r % 128 / 32) * 4 + c % 4;",
     "  return tile * 512 + (r % 32) * 4 + (r % 128 / 32) * 16 + c % 4;",
     [("test_ops_cuda", "Nvfp4W4a4CublasLt.*")]),
    # (A nibble-order mutation of the emulated cuBLASLt is equivalent, not missed: both K-major operands are read
    # with the same order, and a block's dot product does not depend on it.)
    ("emu-cublaslt-alpha", "the emulated cuBLASLt's block-scaled matmul drops alpha (the two tensor scales)",
     "src/emu/cublaslt_api.cpp",
     "          float value = alpha * static_cast<float>(sum);",
     "          float value = static_cast<float>(sum);",
     [("test_ops_cuda", "Nvfp4W4a4CublasLt.*")]),
    ("w4a4-inference-scale", "a W4A4 checkpoint's activations quantized with twice its input_scale",
     "src/model/qwen3_inference.cpp",
     "  quantize_nvfp4_static(x_rows, weight.input_scale, quantized);",
     "  quantize_nvfp4_static(x_rows, 2.0f * weight.input_scale, quantized);",
     [("test_model", "Qwen3W4a4.*")]),
]

SCHEDULES = ["warp-serial", "reverse", "round-robin"]


def run(command, cwd=None, env=None, timeout=None):
    try:
        result = subprocess.run(command, cwd=cwd, env=env, timeout=timeout, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        return result.returncode, result.stdout
    except subprocess.TimeoutExpired as expired:
        return 124, (expired.stdout or b"").decode(errors="replace") if isinstance(expired.stdout, bytes) else ""


def copy_tree(repo, tree):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=repo, check=True,
                           stdout=subprocess.PIPE, text=True).stdout.split("\n")
    for relative in filter(None, files):
        source, target = os.path.join(repo, relative), os.path.join(tree, relative)
        if not os.path.isfile(source):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # A changed file gets the time of the copy, not its own (shutil.copy2 kept it): an object built from the old
        # copy after the file was edited would otherwise look newer than the source, and make would not rebuild it.
        if not os.path.exists(target) or open(source, "rb").read() != open(target, "rb").read():
            shutil.copy(source, target)


def build(build_dir, targets):
    code, out = run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2), "--target", *targets])
    return code == 0, out


def run_tests(build_dir, tests, schedule, timeout, log=None, extra_env=None):
    """True when every selected test passed; the outcome line otherwise. The output goes to `log` if given."""
    env = dict(os.environ, NVFP4LM_EMU_SCHEDULE=schedule, **(extra_env or {}))
    for executable, gtest_filter in tests:
        # tests/<layer>/ executables land in tests/; the emulator's own (test_emu) in tests/emu/
        path = os.path.join(build_dir, "tests", executable)
        if not os.path.exists(path):
            path = os.path.join(build_dir, "tests", "emu", executable)
        code, out = run([path, "--gtest_filter=" + gtest_filter],
                        env=env, timeout=timeout)
        if log:
            with open(log, "a") as f:
                f.write(out)
        if code != 0:
            if code == 124:
                return "timeout"
            markers = [("global memory race", "global race"), ("shared memory race", "race"), ("uninitialised shared memory", "uninitialised read"),
                       ("out of bounds of the block's shared memory", "shared out of bounds"),
                       ("deadlock", "deadlock"), ("cudaFuncSetAttribute", "launch error"),
                       ("capture", "capture error"), ("device fault", "device fault"), ("[  FAILED  ]", "wrong result")]
            for marker, name in markers:
                if marker in out:
                    return name
            return f"exit {code}"
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default="/tmp/nvfp4lm-mutations")
    parser.add_argument("--only", default="")
    parser.add_argument("--schedules", default=",".join(SCHEDULES))
    parser.add_argument("--timeout", type=int, default=900, help="seconds per test executable run")
    args = parser.parse_args()
    repo = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, stdout=subprocess.PIPE,
                          text=True).stdout.strip()
    schedules = [s for s in args.schedules.split(",") if s]
    chosen = [m for m in MUTATIONS if not args.only or m[0] in args.only.split(",")]
    # The build directory sits inside the copied tree, as build/ does in a checkout: a compiler cache (ccache with
    # CCACHE_BASEDIR above both) then sees the same relative paths as in the developer's own build.
    tree = os.path.join(args.work, "tree")
    build_dir = os.path.join(tree, "build")
    logs = os.path.join(args.work, "logs")  # each mutation's test output, per schedule
    os.makedirs(tree, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    copy_tree(repo, tree)
    code, out = run(["cmake", "-S", tree, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DNVFP4LM_CUDA=EMULATE",
                     "-DNVFP4LM_CUDA_COMPILE_CHECK=OFF", "-DNVFP4LM_BENCH=OFF"])
    if code != 0:
        print(out)
        return 2
    chosen = [m if len(m) == 7 else m + ({},) for m in chosen]
    targets = sorted({executable for m in chosen for executable, _ in m[5]})
    ok, out = build(build_dir, targets)
    if not ok:
        print(out[-4000:])
        return 2
    for m in chosen:  # the selected tests must pass unmutated, or a "catch" means nothing
        outcome = run_tests(build_dir, m[5], schedules[0], args.timeout, extra_env=m[6])
        if outcome is not True:
            print(f"baseline: the tests of {m[0]} fail without the mutation ({outcome}); fix that first")
            return 2

    rows, caught_count = [], 0
    for ident, kind, relative, old, new, tests, extra_env in chosen:
        path = os.path.join(tree, relative)
        original = open(path).read()
        if original.count(old) != 1:
            rows.append((ident, kind, "mutation text not found exactly once: update this script", {}))
            continue
        start = time.time()
        open(path, "w").write(original.replace(old, new))
        try:
            ok, out = build(build_dir, targets)
            outcomes = {}
            if not ok:
                outcomes = {s: "does not compile" for s in schedules}
            else:
                for schedule in schedules:
                    log = os.path.join(logs, f"{ident}-{schedule}.log")
                    if os.path.exists(log):
                        os.remove(log)
                    outcomes[schedule] = run_tests(build_dir, tests, schedule, args.timeout, log, extra_env)
        finally:
            open(path, "w").write(original)
        caught = any(o is not True and o != "does not compile" for o in outcomes.values())
        caught_count += caught
        if extra_env:
            kind += " [" + " ".join(f"{k}={v}" for k, v in extra_env.items()) + "]"
        rows.append((ident, kind, f"{time.time() - start:.0f} s", outcomes))
        print(f"{ident}: " + ", ".join(f"{s} {'missed' if o is True else 'caught (' + o + ')'}"
                                      for s, o in outcomes.items()), flush=True)
    build(build_dir, targets)  # leave the scratch build unmutated

    print()
    print("| mutation | bug | " + " | ".join(schedules) + " |")
    print("|---|---|" + "---|" * len(schedules))
    for ident, kind, note, outcomes in rows:
        cells = []
        for s in schedules:
            o = outcomes.get(s)
            cells.append("—" if o is None else ("missed" if o is True else f"caught ({o})"))
        print(f"| {ident} | {kind} | " + " | ".join(cells) + " |")
    print(f"\n{caught_count} of {len(chosen)} mutations caught by at least one schedule")
    return 0 if caught_count >= len(chosen) - 1 else 1


if __name__ == "__main__":
    sys.exit(main())
