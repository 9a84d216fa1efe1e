// The weights of a Qwen3 model as the forward passes use them, on one device.
//
// A linear is either dense ([out, in] in the compute dtype) or NVFP4 (packed codes + E4M3 block scales + tensor
// scale, kept packed; dequantized per use into a scratch buffer or consumed by a fused kernel). Embeddings and
// norms are always dense (norm weights F32). When tie_word_embeddings is set, lm_head aliases embed_tokens.
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/model_files.h"
#include "quant/nvfp4.h"

namespace nvfp4lm {

struct LinearWeight {
  int64_t out_features = 0;
  int64_t in_features = 0;
  Tensor dense;       // [out, in], compute dtype — set for dense linears
  Nvfp4Tensor nvfp4;  // set for NVFP4 linears
  // > 0: a W4A4 linear (a calibrated checkpoint's input_scale, loaded with W4A4 activations on): its input is quantized
  // to NVFP4 with this fixed tensor scale before the product (model/qwen3_inference.cpp). 0: 16-bit activations.
  float input_scale = 0.0f;
  bool is_nvfp4() const { return nvfp4.defined(); }
  bool is_w4a4() const { return input_scale > 0.0f; }
};

struct Qwen3LayerWeights {
  Tensor input_norm, post_attention_norm, q_norm, k_norm;  // F32
  LinearWeight q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
  // The seven projections in the order above.
  std::array<const LinearWeight*, 7> linears() const {
    return {&q_proj, &k_proj, &v_proj, &o_proj, &gate_proj, &up_proj, &down_proj};
  }
  std::array<LinearWeight*, 7> linears() {
    return {&q_proj, &k_proj, &v_proj, &o_proj, &gate_proj, &up_proj, &down_proj};
  }
};

struct Qwen3Weights {
  Tensor embed_tokens;  // [V, H], compute dtype (on the CPU BF16 when stored so: qwen3_weights.cpp)
  std::vector<Qwen3LayerWeights> layers;
  Tensor final_norm;     // [H], F32
  LinearWeight lm_head;  // dense view of embed_tokens when tied
  bool any_nvfp4() const;
  // The widest input of a W4A4 layer linear (0: none is W4A4): the size of the activation quantizer's buffers.
  int64_t w4a4_max_in_features() const;
  size_t nbytes() const;
};

// The dtype activations and dense weights take on `device`: fp32 on the CPU (the reference), bf16 on CUDA.
DType compute_dtype_for(Device device);

// Loads every weight of `files` onto `device`: dense weights converted to `compute_dtype`, NVFP4 kept packed
// (or, with dequantize_nvfp4, dequantized once into dense `compute_dtype` linears: the cpu/dense and
// cuda/dense-bf16 paths over the same weights). w4a4_activations: the decoder layers' linears of a W4A4 checkpoint
// keep their input_scale (LinearWeight::input_scale), dequantized or not; off, every linear runs W4A16.
Qwen3Weights load_qwen3_weights(const ModelFiles& files, Device device, DType compute_dtype,
                                bool dequantize_nvfp4 = false, bool w4a4_activations = true);

}  // namespace nvfp4lm
