#include <gtest/gtest.h>

#include "common/test_util.h"
#include "core/memory.h"
#include "core/numeric.h"
#include "core/tensor.h"

namespace nvfp4lm::test_tensor {
namespace {

TEST(Tensor, EmptyHasContiguousStrides) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::F32);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.stride(1), 4);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.str(), "F32[2, 3, 4] cpu");
}

TEST(Tensor, NarrowSelectTransposeAreViews) {
  std::vector<float> values(12);
  for (int i = 0; i < 12; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor t = Tensor::from_floats(values, {3, 4});
  Tensor rows = t.narrow(0, 1, 2);
  EXPECT_EQ(rows.data<float>()[0], 4.0f);
  EXPECT_EQ(rows.storage(), t.storage());
  Tensor col = t.select(1, 2);
  EXPECT_EQ(col.shape(), Shape({3}));
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(to_float_vector(col), (std::vector<float>{2, 6, 10}));
  Tensor tr = t.transpose(0, 1);
  EXPECT_EQ(tr.shape(), Shape({4, 3}));
  Tensor c = tr.contiguous();
  EXPECT_EQ(to_float_vector(c), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  rows.data<float>()[0] = 100.0f;  // writes through to the parent
  EXPECT_EQ(t.data<float>()[4], 100.0f);
}

TEST(Tensor, CopyFromStridedSource) {
  Tensor t = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor dst = Tensor::zeros({3, 2}, DType::F32);
  dst.copy_from(t.transpose(0, 1));
  EXPECT_EQ(to_float_vector(dst), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Tensor, ConvertRoundTripsThroughBf16AndF16) {
  Tensor t = Tensor::from_floats({1.0f, -2.5f, 3.140625f, 65504.0f, 1e-8f}, {5});
  Tensor bf = Tensor::empty({5}, DType::BF16);
  convert_cpu(t, bf);
  Tensor back = Tensor::empty({5}, DType::F32);
  convert_cpu(bf, back);
  EXPECT_EQ(back.data<float>()[0], 1.0f);
  EXPECT_EQ(back.data<float>()[1], -2.5f);
  EXPECT_EQ(back.data<float>()[2], 3.140625f);
  Tensor half = Tensor::empty({5}, DType::F16);
  convert_cpu(t, half);
  convert_cpu(half, back);
  EXPECT_EQ(back.data<float>()[3], 65504.0f);
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), float_to_bf16(1.0f));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Numeric, F16AllValuesRoundTrip) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t h = static_cast<uint16_t>(bits);
    float f = f16_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16(f), h) << "bits " << bits;
  }
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
}

TEST(Memory, LimitFailsBeforeAllocating) {
  auto& tracker = MemoryTracker::instance();
  size_t before = tracker.current_bytes(Device::cpu());
  tracker.set_limit(Device::cpu(), before + 1024);
  EXPECT_THROW(Tensor::empty({1024}, DType::F32), Error);
  EXPECT_EQ(tracker.current_bytes(Device::cpu()), before);
  tracker.set_limit(Device::cpu(), 0);
  {
    MemoryPhase phase("unit-test-phase");
    Tensor t = Tensor::empty({1024}, DType::F32);
    EXPECT_GE(tracker.current_bytes(Device::cpu()), before + 4096);
  }
  bool found = false;
  for (const auto& p : tracker.phase_peaks())
    if (p.phase == "unit-test-phase" && p.device == Device::cpu()) found = p.peak_bytes >= before + 4096;
  EXPECT_TRUE(found);
  EXPECT_EQ(tracker.current_bytes(Device::cpu()), before);
}

// A GPU whose memory is the host's (the DGX Spark's GB10): --max-memory on it limits the CPU's and the GPU's tensors
// together, and the joint peak is kept. cuda:7 is a bookkeeping key here: nothing is allocated on it.
TEST(Memory, AGpuWhoseMemoryIsTheHostsSharesItsLimitWithTheCpu) {
  auto& tracker = MemoryTracker::instance();
  const Device gpu = Device::cuda(7);
  tracker.share_with_host(gpu);
  EXPECT_TRUE(tracker.shares_with_host(gpu));
  EXPECT_FALSE(tracker.shares_with_host(Device::cuda(6)));
  const size_t cpu_before = tracker.current_bytes(Device::cpu());
  constexpr size_t kMiB = size_t{1} << 20;
  tracker.set_limit(gpu, cpu_before + 3 * kMiB);
  tracker.reserve(gpu, 2 * kMiB, "weights");
  // 2 MiB on the GPU and 2 MiB more on the CPU pass the limit although each alone would not.
  const std::string message = test::error_message([] { Tensor::empty({int64_t{1} << 19}, DType::F32); });
  EXPECT_NE(message.find("cuda:7's memory is the host's, so the limit counts both"), std::string::npos) << message;
  EXPECT_EQ(tracker.current_bytes(Device::cpu()), cpu_before);
  {
    const Tensor fits = Tensor::empty({int64_t{1} << 17}, DType::F32);  // 0.5 MiB
    EXPECT_GE(tracker.shared_peak_bytes(), cpu_before + 2 * kMiB + kMiB / 2);
  }
  EXPECT_THROW(tracker.reserve(gpu, 2 * kMiB, "more weights"), Error);
  tracker.release(gpu, 2 * kMiB);
  tracker.set_limit(gpu, 0);
}

TEST(Device, ParsesNames) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(Rng, ReproducibleAndRestorable) {
  Rng a(42), b(42);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  auto state = a.state();
  float x = a.normal();
  b.set_state(state);
  EXPECT_EQ(b.normal(), x);
  double mean = 0;
  for (int i = 0; i < 100000; ++i) mean += a.uniform();
  EXPECT_NEAR(mean / 100000, 0.5, 0.01);
}

}  // namespace
}  // namespace nvfp4lm::test_tensor
