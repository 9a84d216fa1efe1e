// Qwen3Model (inference) against the PyTorch fixtures: full-forward logits (plain, tied, packed), KV-cache decoding
// and chunked prefill against the full forward, the context guard, and NVFP4 models (ModelOpt export of the
// fixture model vs the "qat." logits, which PyTorch computed with the same quantized weights; a .dat export's
// packed path vs the same weights dequantized into a dense model).
#include <gtest/gtest.h>

#include "infer/qwen3_cached_lm.h"
#include "io/quantize_model.h"
#include "model/qwen3_model.h"
#include "model_test_util.h"

namespace nvfp4lm::test::test_qwen3_forward {
namespace {

constexpr double kLogitsBound = 1e-4;  // fp32 vs the float64 reference
constexpr double kCacheBound = 1e-5;   // decode vs full forward, both fp32

TEST(Qwen3Forward, LogitsMatchPyTorch) {
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Qwen3Model model = Qwen3Model::load(tiny_model_dir(tied));
    EXPECT_EQ(model.compute_path(), "cpu/dense");
    const Tensor logits = model.forward(ref.get("input_ids"));
    expect_rel_close(logits, ref.get("logits"), kLogitsBound, tied ? "tied logits" : "logits");
  }
}

TEST(Qwen3Forward, PackedRowsMatchPyTorch) {
  const Reference ref(false);
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  const Tensor positions = ref.get("positions"), segments = ref.get("segment_ids");
  const Tensor logits = model.forward(ref.get("input_ids"), &positions, &segments);
  expect_rel_close(logits, ref.get("packed.logits"), kLogitsBound, "packed logits");
  // And the segments matter: without them the logits differ.
  EXPECT_GT(rel_error(model.forward(ref.get("input_ids")), ref.get("packed.logits")).rel(), 1e-2);
}

// Logits of positions [start, start + count) of a [B, T, V] tensor, as [B, count, V].
Tensor slice_tokens(const Tensor& logits, int64_t start, int64_t count) {
  return logits.narrow(1, start, count).contiguous();
}

void check_cached_decoding(const Qwen3Model& model, const Tensor& ids, const std::string& what) {
  const Tensor full = model.forward(ids);
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  // Prefill 5 tokens (last-position logits), then one token at a time.
  KVCache cache = model.make_cache(batch, tokens);
  const int64_t prefill = 5;
  Tensor last = model.forward_cached(ids.narrow(1, 0, prefill).contiguous(), cache);
  ASSERT_EQ(last.shape(), (Shape{batch, model.config().vocab_size}));
  expect_rel_close(last, full.select(1, prefill - 1).contiguous(), kCacheBound, what + ": prefill last logits");
  EXPECT_EQ(cache.length(), prefill);
  for (int64_t t = prefill; t < tokens; ++t) {
    const Tensor step = model.forward_cached(ids.narrow(1, t, 1).contiguous(), cache);
    expect_rel_close(step, full.select(1, t).contiguous(), kCacheBound, what + ": decode step " + std::to_string(t));
  }
  EXPECT_EQ(cache.length(), tokens);
  // Chunked prefill with all logits: chunks of 4, 3, 5.
  cache.reset();
  int64_t start = 0;
  for (int64_t chunk : {4, 3, 5}) {
    const Tensor out = model.forward_cached(ids.narrow(1, start, chunk).contiguous(), cache, /*all_logits=*/true);
    expect_rel_close(out, slice_tokens(full, start, chunk), kCacheBound, what + ": chunk at " + std::to_string(start));
    start += chunk;
  }
}

TEST(Qwen3Forward, KvCacheDecodingMatchesFullForward) {
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    const Qwen3Model model = Qwen3Model::load(tiny_model_dir(tied));
    check_cached_decoding(model, ref.get("input_ids"), tied ? "tied" : "untied");
  }
}

TEST(Qwen3Forward, ContextGuardNamesTheLimit) {
  const Reference ref(false);
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  KVCache cache = model.make_cache(2, 8);
  model.forward_cached(ref.get("input_ids").narrow(1, 0, 6).contiguous(), cache);
  try {
    model.forward_cached(ref.get("input_ids").narrow(1, 6, 3).contiguous(), cache);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length(), 6);  // unchanged by the refused call
}

TEST(Qwen3Forward, RejectsBadInput) {
  const Qwen3Model model = Qwen3Model::load(tiny_model_dir(false));
  EXPECT_THROW(model.forward(Tensor::from_floats({1, 2}, {1, 2})), Error);  // not I32
  EXPECT_THROW(model.forward(Tensor::from_ints({1, 600}, {1, 2})), Error);  // id outside the vocabulary
  const Tensor ids = Tensor::from_ints({1, 2, 3}, {1, 3});
  const Tensor bad_positions = Tensor::from_ints({0, -1, 2}, {1, 3});
  EXPECT_THROW(model.forward(ids, &bad_positions), Error);
}

TEST(Qwen3Forward, ModeloptNvfp4MatchesQatReference) {
  for (bool tied : {false, true}) {
    const Reference ref(tied);
    TempDir dir;
    const Qwen3Model model = Qwen3Model::load(quantize_tiny_modelopt(dir, tied));
    EXPECT_TRUE(model.weights().any_nvfp4());
    EXPECT_TRUE(model.weights().layers[0].q_proj.is_nvfp4());
    EXPECT_EQ(model.compute_path(), "cpu/dequant-gemm");
    // 24 rows: the batched (dequantize + sgemm) path.
    expect_rel_close(model.forward(ref.get("input_ids")), ref.get("qat.logits"), kLogitsBound,
                     tied ? "tied NVFP4 logits" : "NVFP4 logits");
    // Decode steps use the fused row-by-row path.
    check_cached_decoding(model, ref.get("input_ids"), tied ? "tied NVFP4" : "NVFP4");
  }
}

// The fast CPU path (cpu/nvfp4-int8, generate's default): decode steps with int8 activations and, for the tied BF16
// embedding, an int8 lm_head copy. Close to the fp32 reference's decode steps, not equal to them.
TEST(Qwen3Forward, Int8DecodeStepsStayCloseToTheReference) {
  const Reference ref(true);
  TempDir dir;
  const fs::path path = quantize_tiny_modelopt(dir, true);
  ModelOptions options;
  options.cpu_matmul = CpuMatmul::Int8Activations;
  const Qwen3Model fast = Qwen3Model::load(path, options);
  const Qwen3Model reference = Qwen3Model::load(path);
  EXPECT_EQ(fast.compute_path(), "cpu/nvfp4-int8");
  const Qwen3Config& c = fast.config();
  ASSERT_FALSE(fast.weights().lm_head.is_nvfp4());  // the tied embedding (F32 in this fixture)
  const int64_t padded = (c.hidden_size + 255) / 256 * 256;
  EXPECT_EQ(fast.int8_lm_head_bytes(), static_cast<uint64_t>(c.vocab_size * padded + c.vocab_size * padded / 8));
  EXPECT_EQ(reference.int8_lm_head_bytes(), 0u);
  EXPECT_NE(fast.precision().find("the lm_head's decode steps int8"), std::string::npos) << fast.precision();
  EXPECT_EQ(decode_weight_bytes(fast.weights()) - decode_weight_bytes(fast),
            fast.weights().lm_head.dense.nbytes() - fast.int8_lm_head_bytes());

  const Tensor ids = ref.get("input_ids");
  const int64_t batch = ids.dim(0), tokens = ids.dim(1);
  KVCache fast_cache = fast.make_cache(batch, tokens), reference_cache = reference.make_cache(batch, tokens);
  double max_diff = 0, max_logit = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const Tensor id = ids.narrow(1, t, 1).contiguous();
    const std::vector<float> a = to_float_vector(fast.forward_cached(id, fast_cache));
    const std::vector<float> b = to_float_vector(reference.forward_cached(id, reference_cache));
    for (size_t i = 0; i < a.size(); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
      max_logit = std::max(max_logit, std::abs(static_cast<double>(b[i])));
    }
  }
  EXPECT_GT(max_diff, 0.0) << "the int8 kernels ran";
  EXPECT_LT(max_diff, 0.02 * max_logit) << "max |logit| " << max_logit;
}

// A dense copy of an NVFP4 model's weights (every packed linear dequantized).
Qwen3Model dequantized_copy(const Qwen3Model& model) {
  Qwen3Weights weights = model.weights();
  auto densify = [](LinearWeight& w) {
    if (!w.is_nvfp4()) return;
    w.dense = dequantize_nvfp4(w.nvfp4, DType::F32);
    w.nvfp4 = Nvfp4Tensor{};
  };
  for (Qwen3LayerWeights& layer : weights.layers) {
    for (LinearWeight* w : {&layer.q_proj, &layer.k_proj, &layer.v_proj, &layer.o_proj, &layer.gate_proj,
                            &layer.up_proj, &layer.down_proj})
      densify(*w);
  }
  densify(weights.lm_head);
  return Qwen3Model(model.config(), std::move(weights));
}

TEST(Qwen3Forward, DatExportPackedPathMatchesDequantizedWeights) {
  const Reference ref(false);
  TempDir dir;
  QuantizeOptions options;
  options.format = ModelFormat::Dat;
  options.quantize_lm_head = true;  // the lm_head goes through the packed path too (in row blocks)
  quantize_model(*open_tiny(false), dir / "dat", options);
  const Qwen3Model packed = Qwen3Model::load(dir / "dat");
  ASSERT_TRUE(packed.weights().lm_head.is_nvfp4());
  const Qwen3Model dense = dequantized_copy(packed);
  EXPECT_EQ(dense.compute_path(), "cpu/dense");
  const Tensor ids = ref.get("input_ids");
  const Tensor expected = dense.forward(ids);
  expect_rel_close(packed.forward(ids), expected, 1e-5, ".dat packed vs dense");
  // And the quantization did something: the dense fp32 model's logits differ by far more.
  EXPECT_GT(rel_error(expected, ref.get("logits")).rel(), 1e-3);
  KVCache cache = packed.make_cache(2, 13);
  const Tensor last = packed.forward_cached(ids, cache);
  expect_rel_close(last, expected.select(1, 11).contiguous(), 1e-5, ".dat packed prefill");
  const Tensor one = packed.forward_cached(Tensor::from_ints({7, 9}, {2, 1}), cache);
  EXPECT_EQ(one.shape(), (Shape{2, 512}));
}

}  // namespace
}  // namespace nvfp4lm::test::test_qwen3_forward
