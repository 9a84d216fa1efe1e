// Data-parallel training on GPUs (train/dist/data_parallel.h's CUDA form) with the host-staged transport standing in
// for NCCL, whose semantics it has (device_collectives.h): NCCL cannot run here (no GPU; on one GPU it refuses two
// ranks), so the ranks are threads of this process sharing the (emulated) device. The transport reduces onto the root
// in rank order and leaves the other ranks' buffers alone, and broadcasts any dtype; two GPU ranks train as one GPU
// does (within fp32 rounding in general; bit for bit here), hold half of its optimizer state each, and write a
// checkpoint that one GPU resumes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/test_util.h"
#include "core/device.h"
#include "core/numeric.h"
#include "io/safetensors_reader.h"
#include "train/checkpoint.h"
#include "train/data_parallel_test_support.h"
#include "train/dist/device_collectives.h"

namespace nvfp4lm::test::test_data_parallel_cuda {
namespace {

Tensor on_device(const std::vector<float>& values) {
  Tensor host = Tensor::empty(Shape({static_cast<int64_t>(values.size())}), DType::F32, Device::cpu());
  std::copy(values.begin(), values.end(), host.data<float>());
  return host.to(Device::cuda(0));
}

std::vector<float> on_host(const Tensor& tensor) { return to_float_vector(tensor.to(Device::cpu())); }

TEST(DeviceCollectivesCuda, HostStagedReducesOntoTheRootInRankOrderAndBroadcasts) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1000;
  // Rank order decides the bits: ((0 + 1) + 1e8) - 1e8 is 0 in fp32, (1e8 - 1e8) + 1 is 1.
  auto contribution = [](int rank, size_t i) {
    const float scale = static_cast<float>(1 + i % 7);
    return rank == 0 ? scale : rank == 1 ? 1e8f * scale : -1e8f * scale;
  };
  std::vector<std::vector<float>> reduced(kRanks), second(kRanks), broadcast(kRanks);
  run_local_group(kRanks, [&](Communicator& comm) {
    const int rank = comm.rank();
    std::vector<float> mine(kCount), other(kCount, static_cast<float>(rank + 1));
    for (size_t i = 0; i < kCount; ++i) mine[i] = contribution(rank, i);
    Tensor a = on_device(mine), b = on_device(other);
    Tensor weights = Tensor::empty(Shape({333}), DType::BF16, Device::cpu());
    for (int64_t i = 0; i < weights.numel(); ++i)
      weights.data<uint16_t>()[i] = float_to_bf16(static_cast<float>(rank * 64 + i % 64));  // exact in bf16
    Tensor weights_on_device = weights.to(Device::cuda(0));
    const std::unique_ptr<DeviceCollectives> collectives = make_host_staged_collectives(comm);
    collectives->group_start();  // two reductions onto different roots in one group, as a step issues them
    collectives->reduce_sum(a, 1);
    collectives->reduce_sum(b, 2);
    collectives->group_end();
    collectives->broadcast(weights_on_device, 2);
    reduced[static_cast<size_t>(rank)] = on_host(a);
    second[static_cast<size_t>(rank)] = on_host(b);
    broadcast[static_cast<size_t>(rank)] = on_host(weights_on_device);
  });
  int order_shows = 0;
  for (size_t i = 0; i < kCount; ++i) {
    const float expected = ((0.0f + contribution(0, i)) + contribution(1, i)) + contribution(2, i);
    ASSERT_EQ(reduced[1][i], expected) << "element " << i << ": the root's sum in rank order";
    ASSERT_EQ(reduced[0][i], contribution(0, i)) << "a rank that is not the root keeps its buffer";
    ASSERT_EQ(reduced[2][i], contribution(2, i));
    order_shows += expected != (contribution(2, i) + contribution(1, i)) + contribution(0, i);
    ASSERT_EQ(second[2][i], 6.0f);
    ASSERT_EQ(second[0][i], 1.0f);
  }
  EXPECT_GT(order_shows, 0) << "the values did not tell the orders apart";
  for (int rank = 0; rank < kRanks; ++rank)
    for (size_t i = 0; i < broadcast[0].size(); ++i)
      ASSERT_EQ(broadcast[static_cast<size_t>(rank)][i], static_cast<float>(128 + i % 64)) << rank << " " << i;
}

// On a GPU machine (scripts/device-check.sh) the NCCL transport itself: the library loads, a communicator of one rank
// forms on this GPU, and its reduce and broadcast run (a one-rank group leaves the tensor as it is). NCCL's sums
// across GPUs wait for a machine with several.
TEST(DeviceCollectivesCuda, NcclRunsOnThisGpuWithOneRank) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  if (!nccl_unavailable_reason().empty()) GTEST_SKIP() << nccl_unavailable_reason();
  SingleProcess one;
  const std::unique_ptr<DeviceCollectives> nccl = make_device_collectives(one, Device::cuda(0));
  EXPECT_NE(nccl->describe().find("with NCCL 2."), std::string::npos) << nccl->describe();
  Tensor a = on_device({1.5f, -2.0f, 3.25f});
  nccl->group_start();
  nccl->reduce_sum(a, 0);
  nccl->group_end();
  nccl->broadcast(a, 0);
  EXPECT_EQ(on_host(a), (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST(DeviceCollectivesCuda, TheTransportAskedForIsTakenOrRefused) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  SingleProcess one;
  setenv("NVFP4LM_GPU_TRANSPORT", "host", 1);
  EXPECT_NE(make_device_collectives(one, Device::cuda(0))->describe().find("NVFP4LM_GPU_TRANSPORT=host"),
            std::string::npos);
  setenv("NVFP4LM_GPU_TRANSPORT", "infiniband", 1);
  EXPECT_NE(error_message([&] {
              make_device_collectives(one, Device::cuda(0));
            }).find("NVFP4LM_GPU_TRANSPORT=infiniband: use nccl, host"),
            std::string::npos);
  if (!nccl_unavailable_reason().empty()) {
    setenv("NVFP4LM_GPU_TRANSPORT", "nccl", 1);
    EXPECT_NE(error_message([&] {
                make_device_collectives(one, Device::cuda(0));
              }).find("NVFP4LM_GPU_TRANSPORT=nccl, but " + nccl_unavailable_reason()),
              std::string::npos);
  }
  unsetenv("NVFP4LM_GPU_TRANSPORT");
}

// Largest |a - b| over every tensor of two safetensors files with the same names and shapes.
double largest_difference(const fs::path& a, const fs::path& b) {
  const auto fa = SafetensorsFile::open(a), fb = SafetensorsFile::open(b);
  EXPECT_EQ(fa->entries().size(), fb->entries().size()) << a << " vs " << b;
  double worst = 0;
  for (const SafetensorsEntry& entry : fa->entries()) {
    const Tensor x = fa->tensor(entry), y = fb->tensor(entry.name);
    EXPECT_EQ(x.shape(), y.shape()) << entry.name;
    if (x.dtype() != DType::F32 && x.dtype() != DType::BF16) continue;  // 8-bit state: its scales are F32
    const std::vector<float> u = to_float_vector(x), v = to_float_vector(y);
    for (size_t i = 0; i < std::min(u.size(), v.size()); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(u[i] - v[i])));
  }
  return worst;
}

double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / b[i]);
  return worst;
}

TEST(DataParallelCuda, TwoGpuRanksTrainAsOneGpuAndOneGpuResumesTheirRun) {
  NVFP4LM_SKIP_WITHOUT_GPU();
  // A real GPU build would take NCCL, which refuses two ranks on one GPU: this test asks for the stand-in (and
  // leaves the environment as it found it, whatever fails).
  struct HostTransport {
    HostTransport() { setenv("NVFP4LM_GPU_TRANSPORT", "host", 1); }
    ~HostTransport() { unsetenv("NVFP4LM_GPU_TRANSPORT"); }
  } host_transport;
  TempDir dir;
  const fs::path data = write_pairs_jsonl(dir.path() / "pairs.jsonl", 16);
  TrainOptions o = tiny_train_options(data, dir.path() / "one");
  o.device = "cuda";
  o.grad_accum = 2;  // one micro-batch a rank a step
  o.max_steps = 4;
  o.save_every = 2;
  o.keep = 2;
  const std::vector<RankResult> one = train_on_ranks(o, 1);
  o.output = (dir.path() / "two").string();
  const std::vector<RankResult> two = train_on_ranks(o, 2);
  ASSERT_EQ(one[0].losses.size(), 4u);
  EXPECT_EQ(two[0].losses, two[1].losses) << "every rank logs the whole step's loss";
  // Measured on the emulated device: 0, bit for bit — with one micro-batch a rank, every gradient kernel adds its
  // whole contribution to the gradient once, so 0 + g0 + g1 in rank order is one GPU's sum. On GPUs NCCL's order
  // and the attention backward's atomics make it fp32 rounding.
  const double losses = worst_relative(two[0].losses, one[0].losses);
  const double masters = largest_difference(checkpoint_dir(dir.path() / "two", 4) / kModelFileName,
                                            checkpoint_dir(dir.path() / "one", 4) / kModelFileName);
  const double moments = largest_difference(checkpoint_dir(dir.path() / "two", 4) / kOptimizerFileName,
                                            checkpoint_dir(dir.path() / "one", 4) / kOptimizerFileName);
  std::fprintf(stderr, "[2 GPU ranks vs 1] losses rel %.3g, masters abs %.3g, optimizer state abs %.3g\n", losses,
               masters, moments);
  const double bound = cuda_is_emulated() ? 0.0 : 1e-4;  // a wrong update moves weights by ~lr = 2e-3
  EXPECT_LE(losses, bound);
  EXPECT_LE(masters, bound);
  EXPECT_LE(moments, bound);
  // ZeRO-1 on the GPU: the two shards add up to one GPU's state, neither holds much more than half.
  EXPECT_EQ(two[0].optimizer_state_bytes + two[1].optimizer_state_bytes, one[0].optimizer_state_bytes);
  EXPECT_LE(static_cast<double>(std::max(two[0].optimizer_state_bytes, two[1].optimizer_state_bytes)),
            static_cast<double>(one[0].optimizer_state_bytes) * 0.55);

  // The two ranks' step-2 checkpoint (their shards gathered) resumed by one GPU follows the two ranks' run.
  fs::remove_all(checkpoint_dir(dir.path() / "two", 4));
  o.resume = true;
  const std::vector<RankResult> resumed = train_on_ranks(o, 1, {"output", "resume"});
  ASSERT_EQ(resumed[0].losses.size(), 2u);
  const double resumed_losses = worst_relative(resumed[0].losses, {two[0].losses.begin() + 2, two[0].losses.end()});
  std::fprintf(stderr, "[resumed on 1 GPU] losses rel %.3g\n", resumed_losses);
  EXPECT_LE(resumed_losses, bound);
}

}  // namespace
}  // namespace nvfp4lm::test::test_data_parallel_cuda
