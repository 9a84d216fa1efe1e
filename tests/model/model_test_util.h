// Helpers for the model tests: the committed PyTorch fixtures (tests/fixtures/qwen3-tiny{,-tied}, made by
// tests/reference/make_fixtures.py in float64), batches built from them, and the error measure the tests use:
//   relative error of a tensor = max |actual - expected| / max |expected|   (per tensor)
// printed with the max absolute error when a check fails.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "io/activation_calibration.h"
#include "io/model_files.h"
#include "io/quantize_model.h"
#include "io/safetensors_reader.h"
#include "io/weight_names.h"
#include "model/qwen3_trainable.h"

namespace nvfp4lm::test {

inline fs::path tiny_model_dir(bool tied) { return fixture_path(tied ? "qwen3-tiny-tied" : "qwen3-tiny"); }

// reference.safetensors of a fixture model.
class Reference {
 public:
  explicit Reference(bool tied) : file_(SafetensorsFile::open(tiny_model_dir(tied) / "reference.safetensors")) {}
  Tensor get(const std::string& name) const { return file_->tensor(name); }
  bool has(const std::string& name) const { return file_->find(name) != nullptr; }
  nlohmann::json adamw() const { return nlohmann::json::parse(file_->metadata().at("adamw")); }

  // The fixture batch: plain (targets, default positions) or packed (segments, reset positions, packed targets).
  TrainBatch batch(bool packed) const {
    TrainBatch b;
    b.ids = get("input_ids").clone();
    b.targets = get(packed ? "packed_targets" : "targets").clone();
    if (packed) {
      b.positions = get("positions").clone();
      b.segment_ids = get("segment_ids").clone();
    }
    return b;
  }

 private:
  std::shared_ptr<SafetensorsFile> file_;
};

struct RelError {
  double max_abs = 0;
  double max_ref = 0;
  double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

inline RelError rel_error(const Tensor& actual, const Tensor& expected) {
  const std::vector<float> a = to_float_vector(actual.to(Device::cpu()));
  const std::vector<float> e = to_float_vector(expected.to(Device::cpu()));
  RelError r;
  if (a.size() != e.size()) {
    r.max_abs = INFINITY;
    return r;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - e[i]);
    r.max_abs = std::isnan(d) ? INFINITY : std::max(r.max_abs, d);
    r.max_ref = std::max(r.max_ref, std::fabs(static_cast<double>(e[i])));
  }
  return r;
}

// Fails (naming the tensor, max abs error and max |expected|) when max|a - e| / max|e| >= bound.
inline void expect_rel_close(const Tensor& actual, const Tensor& expected, double bound, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape())
      << what << ": " << actual.shape().str() << " vs " << expected.shape().str();
  const RelError r = rel_error(actual, expected);
  if (std::getenv("NVFP4LM_TEST_VERBOSE") != nullptr)
    std::fprintf(stderr, "%s: max abs %.3g, max |ref| %.3g, rel %.3g\n", what.c_str(), r.max_abs, r.max_ref, r.rel());
  EXPECT_LT(r.rel(), bound) << what << ": max abs error " << r.max_abs << ", max |reference| " << r.max_ref
                            << ", relative " << r.rel();
}

// Targets (not -100) that are the argmax (first maximum) of their row of logits [B, T, V].
inline int64_t argmax_hits(const Tensor& logits, const Tensor& targets) {
  const int64_t vocab = logits.dim(2);
  const Tensor z = logits.contiguous();
  const float* values = z.data<float>();
  const int32_t* t = targets.data<int32_t>();
  int64_t hits = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (t[i] == -100) continue;
    const float* row = values + i * vocab;
    hits += std::max_element(row, row + vocab) - row == t[i] ? 1 : 0;
  }
  return hits;
}

inline std::unique_ptr<ModelFiles> open_tiny(bool tied) { return open_model(tiny_model_dir(tied)); }

// d loss / d parameter for the element of largest gradient in each trainable tensor, after forward_backward with
// grad_scale, against (L(θ+ε) - L(θ-ε)) / 2ε of the model's own loss (evaluate, fp32): the whole chain through the loss
// head. Fails naming the parameter and element; returns how many tensors were checked. `what` labels the failures.
inline int check_gradients_by_finite_differences(Qwen3Trainable& model, const TrainBatch& batch, const TrainLoss& loss,
                                                 float grad_scale, const std::string& what = {}) {
  model.forward_backward(batch, grad_scale, loss);
  int checked = 0;
  for (const Parameter& p : model.parameters()) {
    const float* grad = p.grad.data<float>();
    const int64_t at =
        std::max_element(grad, grad + p.grad.numel(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) -
        grad;
    const double analytic = grad[at];
    float* value = p.value.data<float>() + at;
    const float original = *value;
    const float eps = std::max(1e-3f, 1e-2f * std::fabs(original));
    *value = original + eps;
    model.refresh_quantized();
    const double up = model.evaluate(batch, loss).loss_sum * grad_scale;
    *value = original - eps;
    model.refresh_quantized();
    const double down = model.evaluate(batch, loss).loss_sum * grad_scale;
    *value = original;
    model.refresh_quantized();
    const double numeric = (up - down) / (2.0 * static_cast<double>(eps));
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::fabs(numeric) + 2e-5) << p.name << "[" << at << "] " << what;
    ++checked;
  }
  return checked;
}

// A frozen teacher from a fixture. sharpen > 1 multiplies its embedding (the tied fixture's lm_head too): randomly
// initialised, both fixtures give nearly uniform distributions, whose KL is too small to check much.
inline Qwen3Trainable frozen_tiny_teacher(bool tied, float sharpen = 1.0f) {
  TrainModelOptions options;
  options.qat = QatMode::Off;
  options.train_last_layers = 0;
  Qwen3Trainable model = Qwen3Trainable::from_files(*open_tiny(tied), options);
  if (sharpen != 1.0f) {
    for (const NamedTensor& master : model.master_weights()) {
      if (master.name != "model.embed_tokens.weight") continue;
      float* v = master.tensor.data<float>();
      for (int64_t i = 0; i < master.tensor.numel(); ++i) v[i] *= sharpen;
    }
    model.refresh_quantized();
  }
  return model;
}

// The fixture model quantized to NVFP4 (ModelOpt layout) at dir / "nvfp4"; returns that path.
inline fs::path quantize_tiny_modelopt(const TempDir& dir, bool tied, bool quantize_lm_head = false) {
  QuantizeOptions options;
  options.format = ModelFormat::ModeloptNvfp4;
  options.quantize_lm_head = quantize_lm_head;
  quantize_model(*open_tiny(tied), dir / "nvfp4", options);
  return dir / "nvfp4";
}

// The fixture model as a W4A4 checkpoint (ModelOpt quant_algo NVFP4) at dir / "w4a4": every projection's input_scale
// amax / (6 * 448) for the given amax (the tiny models' layer inputs reach ~4, so 2 saturates some blocks); returns
// that path.
inline fs::path quantize_tiny_w4a4(const TempDir& dir, bool tied, float amax = 2.0f) {
  const std::unique_ptr<ModelFiles> source = open_tiny(tied);
  QuantizeOptions options;
  options.format = ModelFormat::ModeloptNvfp4;
  ActivationCalibration calibration;
  calibration.source = "test: fixed amax";
  calibration.tokens = 1;
  for (const ExpectedWeight& weight : qwen3_expected_weights(source->config()))
    if (is_nvfp4_projection(weight.kind)) calibration.observe(weight.name, amax);
  options.calibration = calibration;
  quantize_model(*source, dir / "w4a4", options);
  return dir / "w4a4";
}

// The ids at position t of every row of ids I32 [B, T] (one decode step's input).
inline std::vector<int32_t> ids_at(const Tensor& ids, int64_t t) {
  std::vector<int32_t> out;
  for (int64_t b = 0; b < ids.dim(0); ++b) out.push_back(ids.data<int32_t>()[b * ids.dim(1) + t]);
  return out;
}

}  // namespace nvfp4lm::test
