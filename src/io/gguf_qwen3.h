// A Qwen3 model as llama.cpp's "qwen3" architecture describes it in GGUF: tensor names, hyperparameters and the
// tokenizer (what llama.cpp's convert_hf_to_gguf.py writes for a Qwen3 checkpoint, re-derived from gguf-py's
// key names and llama.cpp's loader).
//  - names: model.embed_tokens -> token_embd, model.layers.N.{input_layernorm -> attn_norm, self_attn.q_proj ->
//    attn_q, k_proj -> attn_k, v_proj -> attn_v, o_proj -> attn_output, q_norm -> attn_q_norm, k_norm ->
//    attn_k_norm, post_attention_layernorm -> ffn_norm, mlp.gate_proj -> ffn_gate, up_proj -> ffn_up, down_proj ->
//    ffn_down} as blk.N.*, model.norm -> output_norm, lm_head -> output (absent when tied: llama.cpp then reads
//    token_embd). Qwen3 uses NeoX RoPE in llama.cpp, so q/k rows are not permuted.
//  - hyperparameters: qwen3.{context_length, embedding_length, block_count, feed_forward_length,
//    attention.head_count, attention.head_count_kv, attention.key_length, attention.value_length, rope.freq_base,
//    attention.layer_norm_rms_epsilon}.
//  - tokenizer: tokenizer.ggml.model "gpt2" (byte-level BPE), pre "qwen2" (Qwen3's pre-tokenizer regex is
//    Qwen2's), tokens for every id of the embedding (ids the tokenizer does not define are "[PAD<id>]", UNUSED),
//    token types (added tokens that are special or look like "<|...|>" are CONTROL, other added tokens
//    USER_DEFINED, the rest NORMAL), merges as "left right", eos / padding / bos ids, add_bos_token false,
//    tokenizer.chat_template.
#pragma once

#include <string>
#include <string_view>

#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm {

// The GGUF name of a Qwen3 weight (HF name); Error for a name llama.cpp's qwen3 has no tensor for.
std::string gguf_tensor_name(std::string_view hf_name);

// general.* and qwen3.* keys. `file_type` is the type of the model's large matrices (general.file_type).
void add_qwen3_gguf_metadata(GgufWriter& writer, const Qwen3Config& config, std::string_view model_name,
                             gguf::GgmlType file_type);

// tokenizer.* keys for `tokenizer` padded to the model's vocabulary. Error when the tokenizer has ids the
// embedding does not.
void add_tokenizer_gguf_metadata(GgufWriter& writer, const Tokenizer& tokenizer, const Qwen3Config& config);

}  // namespace nvfp4lm
