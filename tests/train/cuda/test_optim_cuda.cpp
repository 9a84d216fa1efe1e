// Optimizers on the GPU vs the CPU reference (train/optim/cuda/optim_kernels.h):
//  - AdamW and AdamW8bit, F32 and BF16 masters, weight decay on and off, gradient multipliers != 1, parameters of
//    odd sizes and 2-D shapes: three steps from identical state give bit-identical masters and moments (8-bit codes
//    and block maxima too), checked after every step so a report names the first step that differs; the amax each
//    update measured (UpdatedMasterAmaxes) is the bits of tensor_amax of its master, whole and chunked, and a
//    non-finite updated master gives the CPU refresh pass's error;
//  - the state lives on the GPU, and a checkpoint written from the GPU resumes on the GPU and on the CPU exactly;
//  - global gradient norm (relative 1e-10: both sum in double, in different orders), bit-for-bit repeatable; clipping
//    multiplies exactly by the coefficient it reports; non-finite gradients are reported and left alone;
//  - parameters on different devices are an Error.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/numeric.h"
#include "quant/master_amax.h"
#include "quant/tensor_amax.h"
#include "train/checkpoint.h"
#include "train/optim/grad_clip.h"
#include "train/optim/optimizer.h"

namespace nvfp4lm::test_optim_cuda {
namespace {

const Device kGpu = Device::cuda(0);

// Odd sizes (shorter than a warp, a moment block, a sum tile; one past them) and 2-D shapes.
const Shape kShapes[] = {Shape{1},    Shape{15},     Shape{17},     Shape{1000},
                         Shape{4099}, Shape{33, 65}, Shape{7, 300}, Shape{70001}};

// ---- reporting ----------------------------------------------------------------------------------------------------

std::string element_text(const Tensor& t, int64_t k) {
  switch (t.dtype()) {
    case DType::F32: {
      const float v = t.data<float>()[k];
      return fmt::format("{:.9g} (bits 0x{:08x})", v, float_bits(v));
    }
    case DType::BF16: {
      const uint16_t bits = t.data<uint16_t>()[k];
      return fmt::format("{:.6g} (bf16 bits 0x{:04x})", bf16_to_float(bits), bits);
    }
    case DType::I8:
      return fmt::format("code 0x{:02x}", static_cast<uint8_t>(t.data<int8_t>()[k]));
    case DType::U8:
      return fmt::format("code 0x{:02x}", t.data<uint8_t>()[k]);
    default:
      return "?";
  }
}

// Bit-exact comparison of a GPU result with the CPU reference; on failure, how many elements differ and the first
// few, decoded.
void expect_same_bits(const Tensor& gpu_result, const Tensor& cpu_result, const std::string& what) {
  ASSERT_TRUE(gpu_result.device().is_cuda()) << what << " is on " << gpu_result.device().str() << ", expected the GPU";
  const Tensor gpu = gpu_result.to(Device::cpu()).contiguous();
  const Tensor cpu = cpu_result.contiguous();
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(gpu.shape(), cpu.shape()) << what;
  const size_t bytes = dtype_bytes(cpu.dtype());
  const auto* a = static_cast<const unsigned char*>(gpu.raw());
  const auto* b = static_cast<const unsigned char*>(cpu.raw());
  int64_t mismatches = 0;
  std::string first;
  for (int64_t k = 0; k < cpu.numel(); ++k) {
    if (std::memcmp(a + k * bytes, b + k * bytes, bytes) == 0) continue;
    if (++mismatches <= 5)
      first += fmt::format("\n  element {}: cuda {}, cpu {}", k, element_text(gpu, k), element_text(cpu, k));
  }
  if (mismatches > 0) {
    ADD_FAILURE() << what << " " << cpu.str() << ": " << mismatches << " of " << cpu.numel()
                  << " elements differ from the CPU reference, which they must match bit for bit." << first
                  << "\n  (last-bit differences in masters or moments: an FMA or a non-IEEE division/sqrt in the "
                     "kernel, see unfused_math.h; different codes under equal block maxima: the rounding noise's "
                     "seed or counter; different block maxima: the block reduction)";
  }
}

// ---- parameters ---------------------------------------------------------------------------------------------------

std::vector<Parameter> make_parameters(DType master, Rng& rng) {
  std::vector<Parameter> params;
  for (const Shape& shape : kShapes) {
    const size_t k = params.size();
    Parameter p;
    p.name = fmt::format("layers.{}.weight", k);
    const Tensor values = test::random_normal(shape, rng, k % 2 ? 1.0f : 0.02f);
    p.value = Tensor::empty(shape, master);
    convert_cpu(values, p.value);
    p.grad = Tensor::zeros(shape, DType::F32);
    p.weight_decay = k % 2 == 0;
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Parameter> copy_to(const std::vector<Parameter>& params, Device device) {
  std::vector<Parameter> out;
  for (const Parameter& p : params)
    out.push_back({p.name, p.value.to(device).clone(), p.grad.to(device).clone(), p.weight_decay});
  return out;
}

// New gradients for every parameter, of different magnitudes, with exact zeros; parameter 1 gets all zeros on
// step 0 (a moment block whose maximum is 0).
void fill_gradients(std::vector<Parameter>& params, Rng& rng, int step) {
  for (size_t k = 0; k < params.size(); ++k) {
    float* g = params[k].grad.data<float>();
    const float scale = std::ldexp(1.0f, -static_cast<int>(k % 5) * 3);
    for (int64_t i = 0; i < params[k].grad.numel(); ++i) g[i] = i % 13 == 5 ? 0.0f : scale * rng.normal();
    if (k == 1 && step == 0) std::fill(g, g + params[k].grad.numel(), 0.0f);
  }
}

void copy_gradients(const std::vector<Parameter>& from, std::vector<Parameter>& to) {
  for (size_t k = 0; k < from.size(); ++k) to[k].grad.copy_from(from[k].grad);
}

void expect_same_state(const std::vector<Parameter>& gpu, const Optimizer& gpu_optimizer,
                       const std::vector<Parameter>& cpu, const Optimizer& cpu_optimizer) {
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t k = 0; k < cpu.size(); ++k) expect_same_bits(gpu[k].value, cpu[k].value, "master " + cpu[k].name);
  const std::vector<NamedTensor> gpu_state = gpu_optimizer.state_tensors(), cpu_state = cpu_optimizer.state_tensors();
  ASSERT_EQ(gpu_state.size(), cpu_state.size());
  for (size_t k = 0; k < cpu_state.size(); ++k) {
    ASSERT_EQ(gpu_state[k].name, cpu_state[k].name);
    expect_same_bits(gpu_state[k].tensor, cpu_state[k].tensor, "state " + cpu_state[k].name);
  }
  EXPECT_EQ(gpu_optimizer.step_count(), cpu_optimizer.step_count());
}

// Each master's amax as the update measured it is the bits of a separate pass over the CPU result (the GPU's own
// pass gives the same: tests/quant/cuda/test_tensor_amax_cuda.cpp).
void expect_amaxes_of(UpdatedMasterAmaxes& updated, const std::vector<Parameter>& updated_masters,
                      const std::vector<Parameter>& cpu_masters, const std::string& what) {
  for (size_t k = 0; k < cpu_masters.size(); ++k) {
    const std::optional<float> amax = updated.take(updated_masters[k].value, cpu_masters[k].name);
    ASSERT_TRUE(amax.has_value()) << what << ": no amax for " << cpu_masters[k].name;
    const float expected = tensor_amax(cpu_masters[k].value, cpu_masters[k].name);
    EXPECT_EQ(float_bits(*amax), float_bits(expected))
        << what << " amax of " << cpu_masters[k].name << ": " << *amax << ", measured " << expected;
  }
}

// ---- optimizer steps ----------------------------------------------------------------------------------------------

struct OptimCase {
  const char* kind;
  DType master;
  double weight_decay;
};

std::string label(const OptimCase& c) {
  return fmt::format("{} {} master, weight decay {}", c.kind, dtype_name(c.master), c.weight_decay);
}

// How ctest and gtest print a case (instead of its bytes).
void PrintTo(const OptimCase& c, std::ostream* os) { *os << label(c); }

class OptimizerCuda : public ::testing::TestWithParam<OptimCase> {};

// Steps of the case's optimizer on the CPU (whole parameters) and on the GPU (`gpu_chunk_rows` rows a launch, 0:
// whole), from identical state; bit-identical masters and moments after every step.
void expect_gpu_steps_match_cpu(const OptimCase& c, uint64_t seed, int64_t gpu_chunk_rows,
                                const std::vector<std::pair<double, float>>& lr_and_multiplier) {
  Rng rng(seed);
  std::vector<Parameter> cpu = make_parameters(c.master, rng);
  std::vector<Parameter> gpu = copy_to(cpu, kGpu);
  AdamWOptions options;
  options.weight_decay = c.weight_decay;
  options.seed = seed * 11;
  std::unique_ptr<Optimizer> cpu_optimizer = make_optimizer(c.kind, cpu, options);
  std::unique_ptr<Optimizer> gpu_optimizer = make_optimizer(c.kind, gpu, options);
  gpu_optimizer->set_chunk_rows(gpu_chunk_rows);
  EXPECT_TRUE(gpu_optimizer->device() == kGpu) << gpu_optimizer->device().str();
  for (const NamedTensor& state : gpu_optimizer->state_tensors())
    ASSERT_TRUE(state.tensor.device().is_cuda()) << state.name << " is " << state.tensor.str();
  const Tensor start = cpu[4].value.clone();

  for (size_t step = 0; step < lr_and_multiplier.size(); ++step) {
    const auto [lr, multiplier] = lr_and_multiplier[step];
    SCOPED_TRACE(fmt::format("after step {} (lr {}, gradient multiplier {})", step + 1, lr, multiplier));
    fill_gradients(cpu, rng, static_cast<int>(step));
    copy_gradients(cpu, gpu);
    // Every GPU step measures the amaxes; the CPU every other step, so both CPU loops (with and without) run.
    UpdatedMasterAmaxes cpu_amaxes, gpu_amaxes;
    const bool cpu_measures = step % 2 == 0;
    cpu_optimizer->step(cpu, lr, multiplier, cpu_measures ? &cpu_amaxes : nullptr);
    gpu_optimizer->step(gpu, lr, multiplier, &gpu_amaxes);
    expect_same_state(gpu, *gpu_optimizer, cpu, *cpu_optimizer);
    expect_amaxes_of(gpu_amaxes, gpu, cpu, "GPU update");
    if (cpu_measures) expect_amaxes_of(cpu_amaxes, cpu, cpu, "CPU update");
    if (::testing::Test::HasFailure()) return;  // the first step that differs is the informative one
  }
  // The comparison is not vacuous: the masters moved.
  EXPECT_NE(std::memcmp(start.raw(), cpu[4].value.raw(), start.nbytes()), 0);
}

TEST_P(OptimizerCuda, StepsAreBitIdenticalToCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  SCOPED_TRACE(label(GetParam()));
  expect_gpu_steps_match_cpu(GetParam(), 101, 0, {{1e-2, 0.37f}, {3e-3, 1.0f}, {5e-4, 2.5f}});
}

// --step-chunk-rows on the GPU: one launch per chunk of rows (pointers and the rounding counters offset), the bits
// of the CPU's whole update. [33, 65] in chunks of 3 rows: 11 launches of 195 elements (8-bit: rounded up to 256).
TEST_P(OptimizerCuda, ChunkedStepsAreBitIdenticalToWholeCpuSteps) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  SCOPED_TRACE(label(GetParam()));
  expect_gpu_steps_match_cpu(GetParam(), 202, 3, {{3e-3, 1.0f}, {3e-3, 1.0f}});
}

INSTANTIATE_TEST_SUITE_P(KindsMastersDecay, OptimizerCuda,
                         ::testing::Values(OptimCase{"adamw", DType::F32, 0.1}, OptimCase{"adamw", DType::F32, 0.0},
                                           OptimCase{"adamw", DType::BF16, 0.1}, OptimCase{"adamw", DType::BF16, 0.0},
                                           OptimCase{"adamw8bit", DType::F32, 0.1},
                                           OptimCase{"adamw8bit", DType::F32, 0.0},
                                           OptimCase{"adamw8bit", DType::BF16, 0.1},
                                           OptimCase{"adamw8bit", DType::BF16, 0.0}),
                         [](const ::testing::TestParamInfo<OptimCase>& info) {
                           return fmt::format("{}_{}_{}", info.param.kind, dtype_name(info.param.master),
                                              info.param.weight_decay > 0 ? "decay" : "nodecay");
                         });

TEST(OptimizerCuda, CheckpointFromGpuResumesOnGpuAndCpu) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (const char* kind : {"adamw", "adamw8bit"}) {
    SCOPED_TRACE(kind);
    Rng rng(7);
    std::vector<Parameter> cpu_grads = make_parameters(DType::BF16, rng);  // gradients are filled here
    std::vector<Parameter> original = copy_to(cpu_grads, kGpu);
    AdamWOptions options;
    options.seed = 99;
    std::unique_ptr<Optimizer> original_optimizer = make_optimizer(kind, original, options);
    for (int step = 0; step < 2; ++step) {
      fill_gradients(cpu_grads, rng, step);
      copy_gradients(cpu_grads, original);
      original_optimizer->step(original, 1e-2, 0.5f);
    }
    test::TempDir dir;
    const fs::path saved = save_checkpoint(dir.path(), 2, original, *original_optimizer, nlohmann::json::object());

    // Different starting weights, zero state: everything must come from the checkpoint.
    Rng other(8);
    std::vector<Parameter> on_cpu = make_parameters(DType::BF16, other);
    std::vector<Parameter> on_gpu = copy_to(on_cpu, kGpu);
    std::unique_ptr<Optimizer> cpu_optimizer = make_optimizer(kind, on_cpu, options);
    std::unique_ptr<Optimizer> gpu_optimizer = make_optimizer(kind, on_gpu, options);
    load_checkpoint(saved, on_gpu, *gpu_optimizer);
    load_checkpoint(saved, on_cpu, *cpu_optimizer);
    expect_same_state(original, *original_optimizer, on_cpu, *cpu_optimizer);
    expect_same_state(on_gpu, *gpu_optimizer, on_cpu, *cpu_optimizer);
    for (int step = 2; step < 4; ++step) {
      fill_gradients(cpu_grads, rng, step);
      copy_gradients(cpu_grads, original);
      copy_gradients(cpu_grads, on_gpu);
      copy_gradients(cpu_grads, on_cpu);
      original_optimizer->step(original, 1e-2, 0.5f);
      gpu_optimizer->step(on_gpu, 1e-2, 0.5f);
      cpu_optimizer->step(on_cpu, 1e-2, 0.5f);
    }
    SCOPED_TRACE("two steps after resuming");
    expect_same_state(original, *original_optimizer, on_cpu, *cpu_optimizer);
    expect_same_state(on_gpu, *gpu_optimizer, on_cpu, *cpu_optimizer);
  }
}

TEST(OptimizerCuda, ParametersOnDifferentDevicesAreAnError) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(3);
  std::vector<Parameter> cpu = make_parameters(DType::F32, rng);
  std::vector<Parameter> mixed = copy_to(cpu, kGpu);
  mixed[2] = copy_to({cpu[2]}, Device::cpu())[0];
  for (const char* kind : {"adamw", "adamw8bit"}) {
    try {
      make_optimizer(kind, mixed, {});
      ADD_FAILURE() << kind << ": an optimizer over CPU and CUDA parameters was built";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cpu"), std::string::npos) << message;
      EXPECT_NE(message.find("cuda:0"), std::string::npos) << message;
    }
    // Built on the GPU, stepped with CPU parameters: refused before anything is updated.
    std::vector<Parameter> gpu = copy_to(cpu, kGpu);
    std::unique_ptr<Optimizer> optimizer = make_optimizer(kind, gpu, {});
    std::vector<Parameter> host = copy_to(cpu, Device::cpu());
    EXPECT_THROW(optimizer->step(host, 1e-3), Error) << kind;
    EXPECT_EQ(optimizer->step_count(), 0) << kind;
  }
  EXPECT_THROW(grad_norm(mixed), Error);
}

// A non-finite master after the update (NaN stays NaN, -inf stays -inf): the amax the GPU update measured gives the
// error of the CPU's refresh pass over the CPU result, word for word: the first non-finite element by its index in
// the whole parameter (so also from the 7th chunk of a chunked update). [33, 65]: NaN at row 20, column 7, -inf at
// row 30, column 1.
TEST_P(OptimizerCuda, NonFiniteUpdatedMasterIsTheRefreshPassError) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  SCOPED_TRACE(label(GetParam()));
  for (int64_t chunk_rows : {0, 3}) {
    Rng rng(303);
    std::vector<Parameter> cpu = make_parameters(GetParam().master, rng);
    Parameter& poisoned = cpu[5];  // [33, 65]
    ASSERT_EQ(poisoned.value.shape(), Shape({33, 65}));
    Tensor values = Tensor::empty(poisoned.value.shape(), DType::F32);
    convert_cpu(poisoned.value, values);
    values.data<float>()[20 * 65 + 7] = std::numeric_limits<float>::quiet_NaN();
    values.data<float>()[30 * 65 + 1] = -std::numeric_limits<float>::infinity();
    convert_cpu(values, poisoned.value);
    std::vector<Parameter> gpu = copy_to(cpu, kGpu);
    fill_gradients(cpu, rng, 1);
    copy_gradients(cpu, gpu);
    std::unique_ptr<Optimizer> cpu_optimizer = make_optimizer(GetParam().kind, cpu, AdamWOptions{});
    std::unique_ptr<Optimizer> gpu_optimizer = make_optimizer(GetParam().kind, gpu, AdamWOptions{});
    gpu_optimizer->set_chunk_rows(chunk_rows);
    UpdatedMasterAmaxes updated;
    cpu_optimizer->step(cpu, 1e-3);
    gpu_optimizer->step(gpu, 1e-3, 1.0f, &updated);
    auto message = [](const std::function<void()>& run) {
      try {
        run();
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string();
    };
    const std::string measured = message([&] { tensor_amax(poisoned.value, poisoned.name); });
    EXPECT_NE(measured.find("row 20, column 7"), std::string::npos) << measured;
    EXPECT_EQ(message([&] { updated.take(gpu[5].value, poisoned.name); }), measured) << "chunks of " << chunk_rows;
  }
}

// ---- gradient norm and clipping -----------------------------------------------------------------------------------

std::vector<Parameter> gradient_set(Rng& rng) {
  std::vector<Parameter> params;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back(Shape{(int64_t{1} << 24) + 3});  // more than 1024 partial sums: the final pass loops
  for (const Shape& shape : shapes) {
    const float scale = std::ldexp(1.0f, -static_cast<int>(params.size() % 4) * 4);
    params.push_back({fmt::format("g{}", params.size()), Tensor::zeros(shape, DType::F32),
                      test::random_uniform(shape, rng, -scale, scale), true});
  }
  return params;
}

TEST(GradClipCuda, NormMatchesCpuAndIsRepeatable) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(5);
  const std::vector<Parameter> cpu = gradient_set(rng);
  const std::vector<Parameter> gpu = copy_to(cpu, kGpu);
  const double expected = grad_norm(cpu);
  const double first = grad_norm(gpu);
  // Both add the fp32 squares (exact in double) in double, in different orders: ~1e-15 apart.
  EXPECT_NEAR(first, expected, 1e-10 * expected) << "cuda " << first << ", cpu " << expected;
  EXPECT_EQ(grad_norm(gpu), first) << "fixed tiles and trees: the same bits every time";
  for (size_t k = 0; k < cpu.size(); ++k) {  // one parameter at a time: every size on its own
    const double one_cpu = grad_norm(std::span<const Parameter>(&cpu[k], 1));
    const double one_gpu = grad_norm(std::span<const Parameter>(&gpu[k], 1));
    EXPECT_NEAR(one_gpu, one_cpu, 1e-10 * one_cpu) << cpu[k].grad.str();
  }
}

TEST(GradClipCuda, ClipsByTheReportedCoefficient) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  Rng rng(6);
  std::vector<Parameter> cpu;
  for (const Shape& shape : kShapes)
    cpu.push_back({fmt::format("g{}", cpu.size()), Tensor::zeros(shape, DType::F32),
                   test::random_normal(shape, rng, 0.1f), true});
  const double norm = grad_norm(cpu);

  std::vector<Parameter> loose = copy_to(cpu, kGpu);
  const ClipResult unclipped = clip_grad_norm(loose, 2 * norm);
  EXPECT_TRUE(unclipped.finite);
  EXPECT_EQ(unclipped.coefficient, 1.0f);
  for (size_t k = 0; k < cpu.size(); ++k) expect_same_bits(loose[k].grad, cpu[k].grad, "unclipped " + cpu[k].name);

  std::vector<Parameter> tight = copy_to(cpu, kGpu);
  const ClipResult clipped = clip_grad_norm(tight, norm / 4);
  EXPECT_TRUE(clipped.finite);
  EXPECT_NEAR(clipped.norm, norm, 1e-10 * norm);
  EXPECT_NEAR(clipped.coefficient, clip_coefficient(norm, norm / 4), 1e-6);
  EXPECT_LT(clipped.coefficient, 0.3f);
  for (size_t k = 0; k < cpu.size(); ++k) {  // grad * coefficient, one fp32 multiply, as the CPU does
    Tensor expected = cpu[k].grad.clone();
    for (int64_t i = 0; i < expected.numel(); ++i) expected.data<float>()[i] *= clipped.coefficient;
    expect_same_bits(tight[k].grad, expected, "clipped " + cpu[k].name);
  }
}

TEST(GradClipCuda, NonFiniteGradientsAreReportedAndLeftAlone) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(bad);
    Rng rng(9);
    std::vector<Parameter> cpu;
    for (const Shape& shape : kShapes)
      cpu.push_back({fmt::format("g{}", cpu.size()), Tensor::zeros(shape, DType::F32),
                     test::random_normal(shape, rng, 0.1f), true});
    cpu[4].grad.data<float>()[4098] = bad;
    std::vector<Parameter> gpu = copy_to(cpu, kGpu);
    const double norm = grad_norm(gpu);
    EXPECT_FALSE(std::isfinite(norm)) << norm;
    if (std::isinf(bad)) {
      EXPECT_TRUE(std::isinf(norm)) << norm;
    }
    const ClipResult result = clip_grad_norm(gpu, 1e-3);
    EXPECT_FALSE(result.finite);
    EXPECT_EQ(result.coefficient, 1.0f);
    for (size_t k = 0; k < cpu.size(); ++k) expect_same_bits(gpu[k].grad, cpu[k].grad, "left alone " + cpu[k].name);
  }
}

}  // namespace
}  // namespace nvfp4lm::test_optim_cuda
