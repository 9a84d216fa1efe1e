// The teacher top-K cache (train/distill_cache.h), on the tiny fixture models (the untied one as student, the tied one
// as teacher):
//  - a sample has one key wherever it lies (a packed row beside others, or a row of its own), and only samples with
//    trained targets have one;
//  - written from the teacher and attached to the batch, the cache gives the distillation loss the K + 1-outcome KL
//    of the teacher's and the student's own logits, computed here in double (plain and packed batches, one cache);
//  - a sample the cache lacks, a damaged file and a file that is not a cache are Errors; a model is not a cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>

#include "model/model_test_util.h"
#include "ops/cross_entropy.h"
#include "train/distill_cache.h"

namespace nvfp4lm::test::test_distill_cache {
namespace {

// Two samples, A (5 tokens, 3 trained) and B (4 tokens, 2 trained), and C (3 tokens, none trained): packed into one
// row [A B C pad], or one a row.
TrainBatch two_ways(bool packed) {
  const std::vector<int32_t> a = {11, 12, 13, 14, 15}, b = {21, 22, 23, 24}, c = {31, 32, 33};
  const std::vector<int32_t> ta = {12, 13, 14, -100, -100}, tb = {-100, 23, 24, -100}, tc = {-100, -100, -100};
  // Written out by hand: rows of 13 tokens, pad id 0 with target -100, segments numbered across the batch.
  auto row = [](std::vector<std::vector<int32_t>> pieces, std::vector<std::vector<int32_t>> targets, int32_t& segment,
                std::vector<int32_t>& ids, std::vector<int32_t>& tgt, std::vector<int32_t>& pos,
                std::vector<int32_t>& seg) {
    int64_t used = 0;
    for (size_t i = 0; i < pieces.size(); ++i, ++segment) {
      for (size_t t = 0; t < pieces[i].size(); ++t) {
        ids.push_back(pieces[i][t]);
        tgt.push_back(targets[i][t]);
        pos.push_back(static_cast<int32_t>(t));
        seg.push_back(segment);
        ++used;
      }
    }
    for (int32_t t = 0; used < 13; ++used, ++t) {
      ids.push_back(0);
      tgt.push_back(kIgnoreIndex);
      pos.push_back(t);
      seg.push_back(segment);
    }
    ++segment;
  };
  std::vector<int32_t> ids, targets, positions, segments;
  int32_t segment = 0;
  if (packed) {
    row({a, b, c}, {ta, tb, tc}, segment, ids, targets, positions, segments);
  } else {
    row({a}, {ta}, segment, ids, targets, positions, segments);
    row({b}, {tb}, segment, ids, targets, positions, segments);
    row({c}, {tc}, segment, ids, targets, positions, segments);
  }
  const int64_t rows = packed ? 1 : 3;
  return {Tensor::from_ints(ids, {rows, 13}),
          Tensor::from_ints(targets, {rows, 13}),
          Tensor::from_ints(positions, {rows, 13}),
          Tensor::from_ints(segments, {rows, 13}),
          {}};
}

TEST(DistillCache, ASampleHasOneKeyWhereverItLies) {
  const std::vector<BatchSample> packed = trained_samples(two_ways(true));
  const std::vector<BatchSample> alone = trained_samples(two_ways(false));
  ASSERT_EQ(packed.size(), 2u);  // C has nothing trained, the padding neither
  ASSERT_EQ(alone.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(packed[i].key, alone[i].key) << i;
  EXPECT_NE(packed[0].key, packed[1].key);
  EXPECT_EQ(packed[0].trained, 3);
  EXPECT_EQ(packed[1].trained, 2);
  EXPECT_EQ(packed[1].begin, 5);
  EXPECT_EQ(packed[1].end, 9);
  EXPECT_EQ(alone[1].row, 1);
  // Another target (a masked token trained) is another sample.
  TrainBatch changed = two_ways(false);
  changed.targets.data<int32_t>()[3] = 15;
  EXPECT_NE(trained_samples(changed)[0].key, alone[0].key);
}

// Σ over the targeted positions of the K + 1-outcome KL (ops/distillation.h) at τ, in double from both models' logits.
double topk_kl_from_logits(const Tensor& student_logits, const Tensor& teacher_logits, const Tensor& targets, int64_t k,
                           double tau) {
  const int64_t vocab = student_logits.dim(2), rows = student_logits.numel() / vocab;
  const float* z = student_logits.data<float>();
  const float* t = teacher_logits.data<float>();
  const int32_t* target = targets.data<int32_t>();
  auto softmax = [&](const float* x) {
    std::vector<double> p(static_cast<size_t>(vocab));
    const double max = *std::max_element(x, x + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += p[static_cast<size_t>(v)] = std::exp((x[v] - max) / tau);
    for (double& value : p) value /= sum;
    return p;
  };
  double kl = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (target[i] == kIgnoreIndex) continue;
    const std::vector<double> p = softmax(t + i * vocab), q = softmax(z + i * vocab);
    std::vector<size_t> order(p.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double p_rest = 1, q_rest = 1;
    for (int64_t j = 0; j < k; ++j) {
      const size_t v = order[static_cast<size_t>(j)];
      kl += p[v] * std::log(p[v] / q[v]);
      p_rest -= p[v];
      q_rest -= q[v];
    }
    if (p_rest > 0) kl += p_rest * std::log(p_rest / q_rest);
  }
  return kl;
}

TEST(DistillCache, TheCachedLossIsTheTopKKlOfTheTeachersLogits) {
  TempDir dir;
  const Reference ref(false);
  Qwen3Trainable teacher = frozen_tiny_teacher(true, 8.0f);
  Qwen3Trainable student = Qwen3Trainable::from_files(*open_tiny(false), TrainModelOptions{QatMode::Off});
  const std::vector<TrainBatch> batches = {ref.batch(false), ref.batch(true)};
  const int64_t k = 4;
  const float tau = 1.5f;
  DistillCacheWriteOptions options;
  options.output = dir.path() / "cache.safetensors";
  options.top_k = k;
  options.temperature = tau;
  options.teacher = "tied fixture";
  const DistillCacheStats stats = write_distill_cache(teacher, batches, options);
  EXPECT_GT(stats.samples, 2);
  EXPECT_GT(stats.mean_rest, 1e-3);  // the K leave something out: the rest term is exercised
  ASSERT_TRUE(is_distill_cache(options.output));
  const DistillCache cache = DistillCache::open(options.output);
  EXPECT_EQ(cache.info().top_k, k);
  EXPECT_EQ(cache.info().positions, stats.positions);

  TrainLoss loss;
  loss.cached_teacher = true;
  loss.distillation = {tau, 1.0f};
  for (TrainBatch batch : batches) {
    const bool packed = batch.segment_ids.defined();
    cache.attach(batch);
    const Tensor* positions = packed ? &batch.positions : nullptr;
    const Tensor* segments = packed ? &batch.segment_ids : nullptr;
    const Tensor z = student.inference_model().forward(batch.ids, positions, segments);
    const Tensor t = teacher.inference_model().forward(batch.ids, positions, segments);
    const double kl = topk_kl_from_logits(z, t, batch.targets, k, tau);
    const LossStats got = student.evaluate(batch, loss);
    EXPECT_GT(kl, 0.05 * static_cast<double>(got.tokens));
    EXPECT_NEAR(got.kl_sum, kl, 1e-4 * kl) << "packed " << packed;
    EXPECT_NEAR(got.loss_sum, tau * tau * kl, 1e-4 * tau * tau * kl);
    EXPECT_EQ(got.tokens, batch.teacher_top_k.rows());
  }
}

// A top-4 cache of two_ways' samples from the tied tiny teacher, written to dir/cache.safetensors.
fs::path write_small_cache(const TempDir& dir) {
  Qwen3Trainable teacher = frozen_tiny_teacher(true, 8.0f);
  DistillCacheWriteOptions options;
  options.output = dir.path() / "cache.safetensors";
  options.top_k = 4;
  write_distill_cache(teacher, std::vector<TrainBatch>{two_ways(false)}, options);
  return options.output;
}

// A copy of `cache` at `damaged` with `bytes` written over the start of tensor `name`'s data.
void copy_with_damage(const fs::path& cache, const fs::path& damaged, const char* name, const void* bytes,
                      size_t count) {
  std::error_code ec;
  fs::remove(damaged, ec);
  fs::copy_file(cache, damaged);
  const uint64_t offset = SafetensorsFile::open(damaged)->at(name).offset;
  std::fstream out(damaged, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(static_cast<std::streamoff>(offset));
  out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(count));
}

TEST(DistillCache, MissingSamplesDamagedFilesAndModelsAreRefused) {
  TempDir dir;
  const fs::path cache_file = write_small_cache(dir);
  const DistillCache cache = DistillCache::open(cache_file);
  TrainBatch packed = two_ways(true);
  cache.attach(packed);  // the same samples, packed
  EXPECT_EQ(packed.teacher_top_k.rows(), 5);
  TrainBatch other = two_ways(false);
  other.ids.data<int32_t>()[13] = 77;  // sample B's first token
  try {
    cache.attach(other);
    ADD_FAILURE() << "a sample the cache lacks was attached";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not in this teacher cache"), std::string::npos) << e.what();
  }

  // An id outside the vocabulary in the file (its first entry's first id).
  const fs::path damaged = dir.path() / "damaged.safetensors";
  const int32_t bad = 512;
  copy_with_damage(cache_file, damaged, "ids", &bad, sizeof bad);
  TrainBatch again = two_ways(false);
  EXPECT_THROW(DistillCache::open(damaged).attach(again), Error);

  EXPECT_FALSE(is_distill_cache(tiny_model_dir(false)));
  EXPECT_FALSE(is_distill_cache(tiny_model_dir(false) / "model.safetensors"));
  EXPECT_THROW(DistillCache::open(tiny_model_dir(false) / "model.safetensors"), Error);
}

// Issue 53 item 5: a damaged cache was trained on (NaN, +inf or positive log-probabilities, K tokens of probability 1,
// a NaN or positive log_rest: every step skipped and exit 0, or losses of 9,616). Opening it is now an Error naming
// the position; a cache as written opens.
TEST(DistillCache, DamagedProbabilitiesAreRefusedWhenTheCacheIsOpened) {
  TempDir dir;
  const fs::path cache = write_small_cache(dir);
  EXPECT_NO_THROW(DistillCache::open(cache));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Damage {
    const char* what;
    const char* tensor;
    std::vector<float> values;  // written from the tensor's first element
    const char* named;
  };
  const std::vector<Damage> damages = {
      {"a NaN log-probability", "log_probs", {nan}, "log_probs[0]"},
      {"+inf", "log_probs", {inf}, "log_probs[0]"},
      {"a positive log-probability", "log_probs", {0.5f}, "log_probs[0]"},
      {"K tokens of probability 1", "log_probs", {0, 0, 0, 0}, "sum to"},
      {"a NaN rest", "log_rest", {nan}, "log_rest"},
      {"a positive rest", "log_rest", {2.0f}, "log_rest"},
      {"+inf rest", "log_rest", {inf}, "log_rest"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    const fs::path damaged = dir.path() / "damaged.safetensors";
    copy_with_damage(cache, damaged, damage.tensor, damage.values.data(), damage.values.size() * sizeof(float));
    try {
      DistillCache::open(damaged);
      ADD_FAILURE() << "opened";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("position 0"), std::string::npos) << message;
      EXPECT_NE(message.find(damage.named), std::string::npos) << message;
      EXPECT_NE(message.find("damaged"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace nvfp4lm::test::test_distill_cache
