// Internal: the loaded state behind nvfp4lm::Tokenizer (not part of the public API; include
// tokenizer/tokenizer.h instead). Built once by load_tokenizer_data() and never modified afterwards,
// except the word cache, which locks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace nvfp4lm::tokenizer {

// Cache of pre-tokenized word -> ids, sharded to keep lock contention low. Like HF's, it stops
// accepting words when full rather than evicting; only words up to kMaxWordBytes are cached.
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 128;
  static constexpr size_t kShards = 16;
  static constexpr size_t kWordsPerShard = 4096;

  // Appends the cached ids of `word` to `out` and returns true, or returns false.
  bool lookup(std::string_view word, std::vector<int32_t>& out) const;
  void insert(std::string_view word, const int32_t* ids, size_t count) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> words;
  };
  static size_t shard_of(std::string_view word) { return Hash{}(word) % kShards; }
  mutable std::array<Shard, kShards> shards_;
};

struct TokenizerData {
  std::string origin;

  // Per id: HF token string and raw bytes, stored back to back; flags.
  std::string text_pool;
  std::vector<uint32_t> text_offsets;  // size vocab_size + 1
  std::string bytes_pool;
  std::vector<uint32_t> bytes_offsets;
  enum Flag : uint8_t { kUsed = 1, kAdded = 2, kSpecial = 4 };
  std::vector<uint8_t> flags;
  size_t max_token_bytes = 0;  // the longest token's bytes (bounds how far BPE merges reach; tokenizer_prefix.cpp)

  // HF token string -> id: open addressing over ids (-1 = empty slot).
  std::vector<int32_t> id_slots;

  std::unique_ptr<BpeMerges> merges;
  std::vector<std::pair<int32_t, int32_t>> merge_list;  // (left, right) ids in file (rank) order
  std::unique_ptr<RegexSplitter> splitter;
  AddedTokenMatcher raw_added;         // normalized=false tokens, matched in the raw text
  AddedTokenMatcher normalized_added;  // normalized=true tokens, matched after normalisation
  bool nfc = false;

  SpecialTokenIds special;
  std::string chat_template;

  WordCache cache;

  size_t vocab_size() const { return flags.size(); }
  std::string_view text(int32_t id) const {
    return std::string_view(text_pool).substr(
        text_offsets[static_cast<size_t>(id)],
        text_offsets[static_cast<size_t>(id) + 1] - text_offsets[static_cast<size_t>(id)]);
  }
  std::string_view bytes(int32_t id) const {
    return std::string_view(bytes_pool)
        .substr(bytes_offsets[static_cast<size_t>(id)],
                bytes_offsets[static_cast<size_t>(id) + 1] - bytes_offsets[static_cast<size_t>(id)]);
  }
  int32_t find_id(std::string_view token_text) const;
  // Appends the byte-pair encoding of one pre-tokenizer piece, through the word cache for short ones.
  void encode_piece(std::string_view word, std::vector<int32_t>& ids) const;
};

// Error unless `text` is valid UTF-8 under 4 GiB (what every encode requires).
void check_encodable(std::string_view text);

// `chat_template_file`: the text of a chat_template.jinja beside tokenizer.json, which replaces tokenizer_config.json's
// "chat_template" (as transformers reads it).
std::shared_ptr<const TokenizerData> load_tokenizer_data(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json,
                                                         const std::string& origin,
                                                         const std::optional<std::string>& chat_template_file = {});

}  // namespace nvfp4lm::tokenizer
