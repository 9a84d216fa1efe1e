// Tokenizer::encode_prefix (tokenizer.h): the first N tokens of a text, with work and memory that grow with N.
//
// encode() runs each stage over the whole text; here every stage is lazy and stops once N tokens exist:
//   - added tokens are found one at a time (AddedTokenMatcher::find_next), so a segment is known up to the next
//     match only;
//   - a segment is normalised and split in a window that doubles while more pieces are needed. The regex runs in
//     PCRE2's partial-hard mode (RegexSplitter::split_certain): a match that looked at the window's end is not
//     taken, so every piece taken is the piece the whole text gives. A window ends at an NFC boundary, where
//     NFC of the window is a prefix of NFC of the segment;
//   - a piece longer than kLongPieceBytes (a run of 64 MB of NUL bytes is one piece) is byte-pair encoded in
//     windows of a few KiB: of each window's tokens only those ending at least `margin` bytes (twice the longest
//     token) before the window's end are kept, and the next window starts where they end. BPE merges are local:
//     a merge far from the window's end never sees it, so those tokens, and the boundary after them, are the
//     whole piece's (checked on long pieces of every kind against the whole-piece encoding in
//     tests/tokenizer/test_encode_prefix.cpp). A piece still unfinished at the window's end (the regex wants
//     more text) is encoded the same way from its start, once it is long enough to matter.
// Tokenizers with normalized=true added tokens (none of Qwen's) encode a segment whole, then cut.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm {
namespace {

using tokenizer::TokenizerData;

// Pieces up to this long are encoded whole, as encode() does (bounded memory either way).
constexpr size_t kLongPieceBytes = 4096;

// Appends the tokens of word[from, ...) until ids.size() reaches `limit`; `complete`: the piece ends at
// word.size() (else more of it may follow past the window). Returns where the appended tokens end, a token
// boundary of the whole piece; sets `more` when tokens of the piece were left out because of the limit.
size_t encode_long_piece(const TokenizerData& data, std::string_view word, size_t from, bool complete, size_t limit,
                         std::vector<int32_t>& ids, bool& more) {
  const size_t margin = 2 * data.max_token_bytes + 16;
  const size_t window = std::max(kLongPieceBytes, 4 * margin);
  std::vector<int32_t> tokens;
  size_t done = from;
  while (done < word.size()) {
    if (ids.size() >= limit) {
      more = true;
      break;
    }
    const size_t end = std::min(word.size(), done + window);
    const bool last = complete && end == word.size();
    tokens.clear();
    data.merges->encode_word(word.substr(done, end - done), tokens);
    size_t next = done;
    for (const int32_t id : tokens) {
      const size_t token_end = next + data.bytes(id).size();
      if (!last && token_end + margin > end) break;  // may still merge with what follows the window
      if (ids.size() >= limit) break;
      ids.push_back(id);
      next = token_end;
    }
    if (next == done) break;  // nothing certain here: the piece's text ends at the window, more is needed
    done = next;
  }
  return done;
}

// Where a window of `text` may end at or after `target`: a code point boundary, and an NFC boundary when the
// tokenizer normalises (so that the window normalises on its own).
size_t window_end(std::string_view text, size_t target, bool nfc) {
  size_t end = std::min(target, text.size());
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  if (!nfc) return end;
  while (end < text.size()) {
    size_t next = end;
    if (tokenizer::nfc_boundary_before(tokenizer::decode_utf8(text, next))) break;
    end = next;
  }
  return end;
}

}  // namespace

bool Tokenizer::encode_prefix(std::string_view text, size_t max_tokens, std::vector<int32_t>& ids,
                              bool allow_special) const {
  tokenizer::check_encodable(text);
  const size_t limit = ids.size() + std::min(max_tokens, SIZE_MAX / 2);
  tokenizer::AddedTokenMatcher::MatchCursor cursor;
  size_t begin = 0;
  while (begin < text.size()) {
    if (ids.size() >= limit) return true;
    const std::optional<tokenizer::AddedMatch> match = data_->raw_added.find_next(text, !allow_special, cursor);
    const size_t segment_end = match ? match->begin : text.size();
    if (segment_end > begin) {
      if (encode_segment_prefix(text.substr(begin, segment_end - begin), allow_special, limit, ids)) return true;
      if (ids.size() >= limit) return segment_end < text.size();
    }
    if (!match) return false;
    ids.push_back(match->id);
    begin = match->end;
  }
  return false;
}

// One segment between added tokens; returns true when it has tokens past `limit`.
bool Tokenizer::encode_segment_prefix(std::string_view text, bool allow_special, size_t limit,
                                      std::vector<int32_t>& ids) const {
  const TokenizerData& data = *data_;
  if (!data.normalized_added.empty()) {
    std::vector<int32_t> all;
    encode_segment(text, 0, allow_special, all, nullptr);
    const size_t take = std::min(all.size(), limit - ids.size());
    ids.insert(ids.end(), all.begin(), all.begin() + static_cast<std::ptrdiff_t>(take));
    return take < all.size();
  }
  std::string normalized_storage;
  auto normalize = [&](size_t raw_end) -> std::string_view {
    const std::string_view raw = text.substr(0, raw_end);
    if (!data.nfc || tokenizer::is_nfc_quick(raw)) return raw;
    normalized_storage = tokenizer::nfc(raw);
    return normalized_storage;
  };
  bool more = false;
  if (!data.splitter) {  // the segment is one piece
    const std::string_view word = normalize(text.size());
    const size_t done = encode_long_piece(data, word, 0, true, limit, ids, more);
    return more || done < word.size();
  }

  // ~4 bytes a token in ordinary text; the window doubles when that is not enough.
  const size_t initial = std::clamp<size_t>((limit - ids.size()) * 8, 256, size_t{1} << 20);
  size_t raw_end = 0;
  std::string_view window;
  size_t pos = 0;                // in the (normalised) window: where the next piece starts
  size_t open_piece = SIZE_MAX;  // a piece the window cut, begun at this position ...
  size_t open_piece_done = 0;    // ... and encoded up to here
  std::vector<tokenizer::Piece> pieces;
  while (true) {
    raw_end = window_end(text, raw_end + std::max(initial, 2 * (window.size() - pos)), data.nfc);
    window = normalize(raw_end);
    const bool more_follows = raw_end < text.size();
    size_t open_match = SIZE_MAX;
    do {
      pieces.clear();
      const size_t split_end =
          data.splitter->split_certain(window, pos, more_follows, limit - ids.size(), pieces, open_match);
      for (const tokenizer::Piece& piece : pieces) {
        const std::string_view word = window.substr(piece.begin, piece.end - piece.begin);
        if (piece.begin == open_piece) {
          encode_long_piece(data, word, open_piece_done - piece.begin, true, limit, ids, more);
          open_piece = SIZE_MAX;
        } else if (word.size() > kLongPieceBytes) {
          encode_long_piece(data, word, 0, true, limit, ids, more);
        } else {
          data.encode_piece(word, ids);
        }
        if (ids.size() >= limit) {
          more = more || ids.size() > limit || piece.end < window.size() || more_follows;
          ids.resize(limit);
          return more;
        }
      }
      pos = split_end;
    } while (!pieces.empty() && pos < window.size());
    if (!more_follows) return false;  // the whole segment is encoded
    // A match the window cut, long enough to matter: its certain head now, so a huge piece costs no more than
    // the tokens taken from it.
    if (open_match == pos && window.size() - pos > kLongPieceBytes) {
      const size_t from = open_piece == pos ? open_piece_done : pos;
      open_piece = pos;
      open_piece_done = pos + encode_long_piece(data, window.substr(pos), from - pos, false, limit, ids, more);
      if (ids.size() >= limit) return true;  // the piece goes on past the window
    }
  }
}

}  // namespace nvfp4lm
