// Loading Qwen3Weights from any ModelFiles (see qwen3_weights.h).
//  - Dense weights become the compute dtype on the target device. On the CPU an F32 file tensor is used as the
//    zero-copy read-only view ModelFiles returns (inference never writes weights), anything else is converted.
//  - NVFP4 linears stay packed (codes + block scales moved to the device as they are), unless the caller asks for
//    them dequantized (exact in F32; rounded once to BF16 on CUDA).
//  - An NVFP4 tensor where the model needs a dense one (an embedding or norm quantized by some other tool) is
//    dequantized: exact, just larger.
//  - On the CPU a BF16 embedding (and a BF16 untied lm_head) stays BF16 as stored: the CPU ops widen it exactly
//    (ops/embedding.h, lm_head_logits), so the values are the fp32 reference's at half the bytes a decode step reads.
#include "model/qwen3_weights.h"

#include <algorithm>

#include "core/logging.h"
#include "io/weight_names.h"
#include "ops/elementwise.h"

namespace nvfp4lm {
namespace {

// `tensor` as a contiguous tensor of `dtype` on `device`.
Tensor to_dense(const Tensor& tensor, DType dtype, Device device) {
  if (tensor.dtype() == dtype && tensor.is_contiguous()) return tensor.to(device);
  if (device.is_cpu()) {
    Tensor out = Tensor::empty(tensor.shape(), dtype, Device::cpu());
    convert_cpu(tensor, out);
    return out;
  }
  const Tensor on_device = tensor.contiguous().to(device);
  Tensor out = Tensor::empty(tensor.shape(), dtype, device);
  cast(on_device, out);
  return out;
}

// A BF16 table stays BF16 on the CPU (see the file comment).
DType table_dtype(const ModelFiles& files, const std::string& name, DType dtype, Device device) {
  const WeightInfo& info = files.at(name);
  return device.is_cpu() && !info.nvfp4 && info.dtype == DType::BF16 ? DType::BF16 : dtype;
}

// A weight copied to a GPU no longer needs the file's pages: dropped, so the host does not hold the model a second
// time (on an integrated GPU, the GB10, host and device memory are the same LPDDR5x). The CPU's weights are views of
// those pages.
void release_if_copied(const ModelFiles& files, const std::string& name, Device device) {
  if (device.is_cuda()) files.release(name);
}

Tensor load_dense(const ModelFiles& files, const std::string& name, DType dtype, Device device) {
  const ModelWeight weight = files.load(name);
  Tensor dense;
  if (weight.is_nvfp4()) {
    log::warn("{}: '{}' is stored as NVFP4; dequantizing it (this weight must be dense)", files.path().string(), name);
    dense = to_dense(dequantize_nvfp4(weight.nvfp4, DType::F32), dtype, device);
  } else {
    dense = to_dense(weight.dense, dtype, device);
  }
  release_if_copied(files, name, device);
  return dense;
}

LinearWeight load_linear(const ModelFiles& files, const std::string& name, DType dtype, Device device, bool dequantize,
                         bool w4a4_activations = false) {
  const WeightInfo& info = files.at(name);
  LinearWeight linear;
  linear.out_features = info.shape[0];
  linear.in_features = info.shape[1];
  const ModelWeight weight = files.load(name);
  if (w4a4_activations) linear.input_scale = weight.input_scale;
  if (weight.is_nvfp4() && dequantize) {
    linear.dense = to_dense(dequantize_nvfp4(weight.nvfp4, DType::F32), dtype, device);
  } else if (weight.is_nvfp4()) {
    linear.nvfp4 = weight.nvfp4;
    linear.nvfp4.codes = weight.nvfp4.codes.to(device);
    linear.nvfp4.block_scales = weight.nvfp4.block_scales.to(device);
  } else {
    linear.dense = to_dense(weight.dense, dtype, device);
  }
  release_if_copied(files, name, device);
  return linear;
}

size_t linear_bytes(const LinearWeight& linear) {
  return linear.is_nvfp4() ? linear.nvfp4.nbytes() : linear.dense.nbytes();
}

}  // namespace

bool Qwen3Weights::any_nvfp4() const {
  if (lm_head.is_nvfp4()) return true;
  for (const Qwen3LayerWeights& layer : layers) {
    for (const LinearWeight* linear : layer.linears())
      if (linear->is_nvfp4()) return true;
  }
  return false;
}

int64_t Qwen3Weights::w4a4_max_in_features() const {
  int64_t widest = 0;
  for (const Qwen3LayerWeights& layer : layers) {
    for (const LinearWeight* linear : layer.linears())
      if (linear->is_w4a4()) widest = std::max(widest, linear->in_features);
  }
  return widest;
}

size_t Qwen3Weights::nbytes() const {
  size_t bytes = embed_tokens.nbytes() + final_norm.nbytes();
  // A tied lm_head is a view of embed_tokens: count its storage once.
  if (lm_head.is_nvfp4() || lm_head.dense.storage() != embed_tokens.storage()) bytes += linear_bytes(lm_head);
  for (const Qwen3LayerWeights& layer : layers) {
    for (const Tensor* norm : {&layer.input_norm, &layer.post_attention_norm, &layer.q_norm, &layer.k_norm})
      bytes += norm->nbytes();
    for (const LinearWeight* linear : layer.linears()) bytes += linear_bytes(*linear);
  }
  return bytes;
}

DType compute_dtype_for(Device device) { return device.is_cpu() ? DType::F32 : DType::BF16; }

Qwen3Weights load_qwen3_weights(const ModelFiles& files, Device device, DType compute_dtype, bool dequantize_nvfp4,
                                bool w4a4_activations) {
  const Qwen3Config& config = files.config();
  Qwen3Weights weights;
  const std::string embedding(kEmbeddingWeightName);
  weights.embed_tokens = load_dense(files, embedding, table_dtype(files, embedding, compute_dtype, device), device);
  weights.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    Qwen3LayerWeights& layer = weights.layers[static_cast<size_t>(i)];
    auto norm = [&](LayerWeight w) { return load_dense(files, layer_weight_name(i, w), DType::F32, device); };
    auto linear = [&](LayerWeight w) {
      return load_linear(files, layer_weight_name(i, w), compute_dtype, device, dequantize_nvfp4, w4a4_activations);
    };
    layer.input_norm = norm(LayerWeight::InputNorm);
    layer.post_attention_norm = norm(LayerWeight::PostAttentionNorm);
    layer.q_norm = norm(LayerWeight::QNorm);
    layer.k_norm = norm(LayerWeight::KNorm);
    layer.q_proj = linear(LayerWeight::QProj);
    layer.k_proj = linear(LayerWeight::KProj);
    layer.v_proj = linear(LayerWeight::VProj);
    layer.o_proj = linear(LayerWeight::OProj);
    layer.gate_proj = linear(LayerWeight::GateProj);
    layer.up_proj = linear(LayerWeight::UpProj);
    layer.down_proj = linear(LayerWeight::DownProj);
  }
  weights.final_norm = load_dense(files, std::string(kFinalNormWeightName), DType::F32, device);
  if (config.tie_word_embeddings) {
    weights.lm_head.out_features = config.vocab_size;
    weights.lm_head.in_features = config.hidden_size;
    weights.lm_head.dense = weights.embed_tokens;
  } else {
    const std::string lm_head(kLmHeadWeightName);
    weights.lm_head =
        load_linear(files, lm_head, table_dtype(files, lm_head, compute_dtype, device), device, dequantize_nvfp4);
  }
  return weights;
}

}  // namespace nvfp4lm
