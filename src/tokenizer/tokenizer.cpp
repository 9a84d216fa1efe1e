// Tokenizer: encode (added tokens -> NFC -> regex pieces -> cached BPE) and decode. See tokenizer.h.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/mapped_file.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm {

using tokenizer::TokenizerData;

namespace tokenizer {

bool WordCache::lookup(std::string_view word, std::vector<int32_t>& out) const {
  Shard& shard = shards_[shard_of(word)];
  std::lock_guard lock(shard.mutex);
  auto it = shard.words.find(word);
  if (it == shard.words.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, const int32_t* ids, size_t count) const {
  Shard& shard = shards_[shard_of(word)];
  std::lock_guard lock(shard.mutex);
  if (shard.words.size() >= kWordsPerShard) return;
  shard.words.emplace(std::string(word), std::vector<int32_t>(ids, ids + count));
}

void check_encodable(std::string_view text) {
  NVFP4LM_CHECK(text.size() < (1ull << 32), "encode: text of {} bytes is too long (limit 4 GiB)", text.size());
  size_t bad = find_invalid_utf8(text);
  NVFP4LM_CHECK(bad == text.size(),
                "encode: text is not valid UTF-8 at byte {} (byte 0x{:02X}); convert it with to_valid_utf8() first",
                bad, static_cast<unsigned char>(text[bad]));
}

void TokenizerData::encode_piece(std::string_view word, std::vector<int32_t>& ids) const {
  const size_t first = ids.size();
  if (word.size() <= WordCache::kMaxWordBytes) {
    if (!cache.lookup(word, ids)) {
      merges->encode_word(word, ids);
      cache.insert(word, ids.data() + first, ids.size() - first);
    }
  } else {
    merges->encode_word(word, ids);
  }
}

}  // namespace tokenizer

namespace {

// A stretch of normalised text and where it came from: identity stretches map byte for byte, others (runs
// that NFC changed) map as a whole.
struct Alignment {
  uint32_t normalized_begin;
  uint32_t original_begin;
  bool identity;
};

// NFC of `text` in independent runs (each starting at a code point with a boundary before it), recording
// the alignment. Gives the same string as tokenizer::nfc(text).
std::string nfc_aligned(std::string_view text, std::vector<Alignment>& alignment) {
  std::string out;
  out.reserve(text.size() + 16);
  size_t pos = 0;
  while (pos < text.size()) {
    // A run: one boundary code point (or the text's start) plus the code points without a boundary before them.
    size_t run_begin = pos;
    size_t next = pos;
    tokenizer::decode_utf8(text, next);
    size_t run_end = next;
    size_t code_points = 1;
    while (run_end < text.size()) {
      size_t after = run_end;
      char32_t cp = tokenizer::decode_utf8(text, after);
      if (tokenizer::nfc_boundary_before(cp)) break;
      run_end = after;
      ++code_points;
    }
    std::string_view run = text.substr(run_begin, run_end - run_begin);
    std::string normalized = code_points == 1 && tokenizer::is_nfc_quick(run) ? std::string(run) : tokenizer::nfc(run);
    bool identity = normalized == run;
    if (!identity || alignment.empty() || !alignment.back().identity) {
      alignment.push_back({static_cast<uint32_t>(out.size()), static_cast<uint32_t>(run_begin), identity});
    }
    out += normalized;
    pos = run_end;
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerData> data) : data_(std::move(data)) {}

Tokenizer Tokenizer::load(const std::filesystem::path& model_or_tokenizer_path) {
  return load(find_tokenizer_files(model_or_tokenizer_path));
}

Tokenizer Tokenizer::load(const TokenizerFiles& files) {
  // Parsed in place from a pre-faulted mapping: tokenizer.json is ~11 MB, and copying it or faulting it in page by
  // page was a large part of the load time.
  const MappedFile::Options text_file{.max_bytes = kMaxTextFileBytes, .populate = true};
  const std::shared_ptr<MappedFile> json = MappedFile::open(files.tokenizer_json, text_file);
  std::string config;
  if (!files.tokenizer_config_json.empty()) {
    config = std::string(MappedFile::open(files.tokenizer_config_json, text_file)->text());
  } else {
    log::warn("tokenizer: no tokenizer_config.json beside {}; eos/pad default to <|im_end|>/<|endoftext|>",
              files.tokenizer_json.string());
  }
  std::optional<std::string> chat_template;
  if (!files.chat_template_jinja.empty())
    chat_template = std::string(MappedFile::open(files.chat_template_jinja, text_file)->text());
  return from_json(json->text(), config, files.tokenizer_json.string(), chat_template);
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               const std::string& origin, const std::optional<std::string>& chat_template_file) {
  Tokenizer tok(tokenizer::load_tokenizer_data(tokenizer_json, tokenizer_config_json, origin, chat_template_file));
  log::debug("tokenizer: {} tokens, NFC {}, regex JIT {}", tok.vocab_size(), tok.data_->nfc ? "on" : "off",
             tok.data_->splitter && tok.data_->splitter->jit() ? "yes" : "no");
  return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_impl(text, allow_special, ids, nullptr);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids, bool allow_special) const {
  encode_impl(text, allow_special, ids, nullptr);
}

EncodedText Tokenizer::encode_with_offsets(std::string_view text, bool allow_special) const {
  EncodedText result;
  encode_impl(text, allow_special, result.ids, &result.offsets);
  return result;
}

void Tokenizer::encode_impl(std::string_view text, bool allow_special, std::vector<int32_t>& ids,
                            std::vector<std::pair<uint32_t, uint32_t>>* offsets) const {
  tokenizer::check_encodable(text);
  std::vector<tokenizer::AddedMatch> matches;
  data_->raw_added.find(text, !allow_special, matches);
  uint32_t cursor = 0;
  for (const tokenizer::AddedMatch& match : matches) {
    if (match.begin > cursor)
      encode_segment(text.substr(cursor, match.begin - cursor), cursor, allow_special, ids, offsets);
    ids.push_back(match.id);
    if (offsets) offsets->push_back({match.begin, match.end});
    cursor = match.end;
  }
  if (cursor < text.size()) encode_segment(text.substr(cursor), cursor, allow_special, ids, offsets);
}

void Tokenizer::encode_segment(std::string_view text, uint32_t base, bool allow_special, std::vector<int32_t>& ids,
                               std::vector<std::pair<uint32_t, uint32_t>>* offsets) const {
  std::string normalized_storage;
  std::vector<Alignment> alignment;
  std::string_view normalized = text;
  if (data_->nfc && !tokenizer::is_nfc_quick(text)) {
    normalized_storage = offsets ? nfc_aligned(text, alignment) : tokenizer::nfc(text);
    normalized = normalized_storage;
  }
  const size_t first = ids.size();
  std::vector<uint32_t> ends;  // normalised byte offset where each token ends
  std::vector<uint32_t>* ends_ptr = offsets ? &ends : nullptr;
  if (data_->normalized_added.empty()) {
    encode_normalized(normalized, ids, ends_ptr);
  } else {
    std::vector<tokenizer::AddedMatch> matches;
    data_->normalized_added.find(normalized, !allow_special, matches);  // normalized=true tokens (none in Qwen)
    uint32_t cursor = 0;
    for (const tokenizer::AddedMatch& match : matches) {
      if (match.begin > cursor) {
        size_t before = ends.size();
        encode_normalized(normalized.substr(cursor, match.begin - cursor), ids, ends_ptr);
        for (size_t i = before; i < ends.size(); ++i) ends[i] += cursor;
      }
      ids.push_back(match.id);
      if (offsets) ends.push_back(match.end);
      cursor = match.end;
    }
    if (cursor < normalized.size()) {
      size_t before = ends.size();
      encode_normalized(normalized.substr(cursor), ids, ends_ptr);
      for (size_t i = before; i < ends.size(); ++i) ends[i] += cursor;
    }
  }
  if (!offsets) return;
  // Normalised offsets -> original offsets.
  auto to_original = [&](uint32_t normalized_offset, bool is_end) -> uint32_t {
    if (alignment.empty()) return normalized_offset;
    // The stretch containing the byte at normalized_offset (for an end: the byte before it).
    uint32_t probe = is_end ? normalized_offset - 1 : normalized_offset;
    auto it = std::upper_bound(alignment.begin(), alignment.end(), probe,
                               [](uint32_t v, const Alignment& a) { return v < a.normalized_begin; });
    const Alignment& a = *(it - 1);
    if (a.identity) return a.original_begin + (normalized_offset - a.normalized_begin);
    if (!is_end) return a.original_begin;
    return it == alignment.end() ? static_cast<uint32_t>(text.size()) : it->original_begin;
  };
  uint32_t begin = 0;
  for (size_t i = first; i < ids.size(); ++i) {
    uint32_t end = ends[i - first];
    offsets->push_back({base + to_original(begin, false), base + to_original(end, true)});
    begin = end;
  }
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& ids,
                                  std::vector<uint32_t>* token_ends) const {
  if (text.empty()) return;
  std::vector<tokenizer::Piece> pieces;
  if (data_->splitter) {
    pieces.reserve(text.size() / 4 + 1);
    data_->splitter->split(text, pieces);
  } else {
    pieces.push_back({0, static_cast<uint32_t>(text.size())});
  }
  for (const tokenizer::Piece& piece : pieces) {
    const size_t first = ids.size();
    data_->encode_piece(text.substr(piece.begin, piece.end - piece.begin), ids);
    if (token_ends) {
      uint32_t end = piece.begin;
      for (size_t i = first; i < ids.size(); ++i) {
        end += static_cast<uint32_t>(data_->bytes(ids[i]).size());
        token_ends->push_back(end);
      }
    }
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    std::string_view token = token_bytes(id);  // checks the id
    if (skip_special && is_special(id)) continue;
    bytes.append(token);
  }
  return tokenizer::to_valid_utf8(bytes);
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  int32_t id = data_->find_id(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  NVFP4LM_CHECK(id >= 0 && static_cast<size_t>(id) < vocab_size() &&
                    (data_->flags[static_cast<size_t>(id)] & TokenizerData::kUsed),
                "token id {} is not in the vocabulary of {} ({} ids)", id, data_->origin, vocab_size());
  return data_->text(id);
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  NVFP4LM_CHECK(id >= 0 && static_cast<size_t>(id) < vocab_size() &&
                    (data_->flags[static_cast<size_t>(id)] & TokenizerData::kUsed),
                "token id {} is not in the vocabulary of {} ({} ids)", id, data_->origin, vocab_size());
  return data_->bytes(id);
}

size_t Tokenizer::vocab_size() const { return data_->vocab_size(); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size() &&
         (data_->flags[static_cast<size_t>(id)] & TokenizerData::kSpecial);
}

bool Tokenizer::is_used(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size() &&
         (data_->flags[static_cast<size_t>(id)] & TokenizerData::kUsed);
}

size_t Tokenizer::merge_count() const { return data_->merge_list.size(); }

std::pair<int32_t, int32_t> Tokenizer::merge(size_t rank) const {
  NVFP4LM_CHECK(rank < data_->merge_list.size(), "merge rank {} of {} ({} merges)", rank, data_->origin,
                data_->merge_list.size());
  return data_->merge_list[rank];
}

bool Tokenizer::is_added(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size() &&
         (data_->flags[static_cast<size_t>(id)] & TokenizerData::kAdded);
}

const SpecialTokenIds& Tokenizer::special_ids() const { return data_->special; }
const std::string& Tokenizer::chat_template_source() const { return data_->chat_template; }
bool Tokenizer::normalizes_nfc() const { return data_->nfc; }
const std::string& Tokenizer::origin() const { return data_->origin; }

void check_tokenizer_fits_model(const Tokenizer& tokenizer, int64_t model_vocab_size, const std::string& model) {
  NVFP4LM_CHECK(static_cast<int64_t>(tokenizer.vocab_size()) <= model_vocab_size,
                "the tokenizer {} has {} tokens but the model {} has only {} embeddings; pass the model's own "
                "tokenizer with --tokenizer DIR",
                tokenizer.origin(), tokenizer.vocab_size(), model, model_vocab_size);
}

}  // namespace nvfp4lm
