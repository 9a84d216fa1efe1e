// nvfp4lm::Tokenizer: a Hugging Face `tokenizer.json` byte-level BPE tokenizer (Qwen2/Qwen3 and
// GPT-2-style files), giving the same ids as HF `tokenizers` for any valid UTF-8 text.
//
// Pipeline of encode(text), as HF runs it:
//   1. added tokens (`<|im_start|>`, `<|im_end|>`, `<think>`, ...) are cut out of the raw text first
//      (leftmost-longest; see added_tokens.h for the lstrip/rstrip/single_word/normalized flags);
//   2. each remaining segment is normalised (NFC when the file's normalizer says so; nfc.h);
//   3. pre-tokenised with the file's Split regex ("Isolated") via PCRE2 (pretokenizer.h);
//   4. each piece is byte-pair encoded by merge rank (bpe.h); results for short pieces are cached.
// No BOS/EOS is added (Qwen files have none to add; files whose post_processor adds tokens are rejected).
//
// decode(ids) concatenates the tokens' bytes and turns invalid UTF-8 into U+FFFD, like HF's ByteLevel
// decoder; StreamingDecoder (streaming_decoder.h) does the same incrementally. Chat rendering is in
// chat.h, locating the files of a model in tokenizer_files.h.
//
// Thread safety: a Tokenizer is immutable after load (the word cache is internally locked), so every
// const method may be called from many threads at once. Copies are cheap and share the loaded data.
//
// Example:
//   Tokenizer tok = Tokenizer::load("models/qwen3-tokenizer");
//   std::vector<int32_t> ids = tok.encode("Hello world");    // {9707, 1879}
//   std::string text = tok.decode(ids);                      // "Hello world"
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_files.h"

namespace nvfp4lm {

namespace tokenizer {
struct TokenizerData;
}

// Ids of tokens other code needs by meaning; -1 when the tokenizer has no such token.
struct SpecialTokenIds {
  int32_t im_start = -1;   // "<|im_start|>"
  int32_t im_end = -1;     // "<|im_end|>"
  int32_t endoftext = -1;  // "<|endoftext|>"
  int32_t eos = -1;        // tokenizer_config.json eos_token (Qwen3 instruct: <|im_end|>)
  int32_t pad = -1;        // tokenizer_config.json pad_token (Qwen3: <|endoftext|>)
  int32_t bos = -1;        // tokenizer_config.json bos_token (Qwen3: none), for chat templates that print it
  int32_t unk = -1;        // tokenizer_config.json unk_token (Qwen3: none)
};

// Token ids plus, for each token, the byte range [begin, end) of the input text it came from. Tokens of
// a segment that NFC changed get the span of the smallest independently normalised run containing them.
struct EncodedText {
  std::vector<int32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
};

class Tokenizer {
 public:
  // Loads from a model path (HF dir, ModelOpt dir, .dat file, tokenizer dir, or tokenizer.json itself):
  // see find_tokenizer_files() for where it looks. Throws Error naming the file and entry on bad input.
  static Tokenizer load(const std::filesystem::path& model_or_tokenizer_path);
  static Tokenizer load(const TokenizerFiles& files);
  // From the JSON texts (tokenizer_config may be empty); `origin` names them in error messages.
  // `chat_template_file`: a chat_template.jinja's text, which replaces the config's "chat_template".
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                             const std::string& origin = "tokenizer.json",
                             const std::optional<std::string>& chat_template_file = std::nullopt);

  // Text (UTF-8; invalid UTF-8 is an Error naming the byte offset: clean untrusted input first with
  // tokenizer::to_valid_utf8 from tokenizer/utf8.h) -> ids.
  // allow_special=false encodes special tokens written in the text as plain text (HF's
  // encode_special_tokens / split_special_tokens=True); non-special added tokens such as <think> are
  // still matched then, exactly as in HF.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Appends to `ids` (no reallocation of a caller's buffer per call).
  void encode_append(std::string_view text, std::vector<int32_t>& ids, bool allow_special = true) const;
  // The first tokens of encode(text, allow_special), at most max_tokens of them, appended to `ids`; returns
  // true when the text has more tokens than that. Work and memory grow with the tokens produced, not with the
  // text (a 7 MB prompt checked against a 4,096-token context stops after 4,097 tokens): the text is
  // normalised and pre-tokenized window by window, and a piece longer than a few KiB (64 MB of NUL bytes is one)
  // is byte-pair encoded window by window too (tokenizer_prefix.cpp says why the result is still a prefix).
  // Only the UTF-8 check and the scan for the next added token read ahead, without copying.
  bool encode_prefix(std::string_view text, size_t max_tokens, std::vector<int32_t>& ids,
                     bool allow_special = true) const;
  // The same ids plus each token's source byte range (used for training masks; see chat.h).
  EncodedText encode_with_offsets(std::string_view text, bool allow_special = true) const;

  // Ids -> UTF-8 text. skip_special drops special added tokens (special=true), as HF does.
  // Throws Error for an id outside [0, vocab_size()) or an unused id.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // HF token string <-> id ("Ġthe" is " the"; added tokens by content). nullopt when unknown.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The HF token string of `id` (byte-level alphabet for BPE tokens, content for added tokens).
  std::string_view token_text(int32_t id) const;
  // The raw bytes `id` decodes to (may be a partial UTF-8 character).
  std::string_view token_bytes(int32_t id) const;

  // One past the largest id (151669 for Qwen3; the model's embedding table may be larger).
  size_t vocab_size() const;
  bool is_special(int32_t id) const;  // an added token with special=true
  bool is_added(int32_t id) const;    // any added token
  bool is_used(int32_t id) const;     // an id the file defines (a vocabulary may have gaps)
  // model.merges in rank order, as (left, right) token ids (GGUF writes them back as "left right" texts).
  size_t merge_count() const;
  std::pair<int32_t, int32_t> merge(size_t rank) const;
  const SpecialTokenIds& special_ids() const;
  // The chat template: chat_template.jinja beside tokenizer.json when there is one (transformers saves it so and
  // prefers it), else tokenizer_config.json "chat_template" (the default one when it is a list), else "".
  const std::string& chat_template_source() const;
  bool normalizes_nfc() const;
  // Where it was loaded from (for messages).
  const std::string& origin() const;

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer::TokenizerData> data);
  void encode_impl(std::string_view text, bool allow_special, std::vector<int32_t>& ids,
                   std::vector<std::pair<uint32_t, uint32_t>>* offsets) const;
  void encode_segment(std::string_view text, uint32_t base, bool allow_special, std::vector<int32_t>& ids,
                      std::vector<std::pair<uint32_t, uint32_t>>* offsets) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& ids, std::vector<uint32_t>* token_ends) const;
  bool encode_segment_prefix(std::string_view text, bool allow_special, size_t limit, std::vector<int32_t>& ids) const;

  std::shared_ptr<const tokenizer::TokenizerData> data_;
};

// The one check that a tokenizer suits a model: every id it produces must have an embedding (a model's vocabulary may
// be larger than its tokenizer, padded for the GEMMs, never smaller). Error naming both, and the fix.
void check_tokenizer_fits_model(const Tokenizer& tokenizer, int64_t model_vocab_size, const std::string& model);

}  // namespace nvfp4lm
