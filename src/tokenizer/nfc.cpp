// NFC = decompose (full canonical decomposition, Hangul algorithmically), sort each run of non-starters
// by combining class (stable), then compose left to right: a character combines with the last starter
// when nothing between them is a starter or has a combining class >= its own.
#include "tokenizer/nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace nvfp4lm::tokenizer {
namespace {

struct DecompEntry {
  uint32_t cp;
  uint16_t offset;
  uint8_t length;
};
struct CompEntry {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};

#include "tokenizer/nfc_tables.inc"

constexpr char32_t kHangulSBase = 0xAC00, kHangulLBase = 0x1100, kHangulVBase = 0x1161, kHangulTBase = 0x11A7;
constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount, kHangulSCount = kHangulLCount * kHangulNCount;

uint8_t combining_class(char32_t cp) { return kCccBlocks[kCccIndex[cp >> 8] * 256u + (cp & 0xFF)]; }

bool quick_safe(char32_t cp) {
  uint8_t byte = kSafeBlocks[kSafeIndex[cp >> 8] * 32u + ((cp & 0xFF) >> 3)];
  return (byte >> (cp & 7)) & 1;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kHangulSBase && cp < kHangulSBase + kHangulSCount) {
    char32_t index = cp - kHangulSBase;
    out.push_back(kHangulLBase + index / kHangulNCount);
    out.push_back(kHangulVBase + (index % kHangulNCount) / kHangulTCount);
    if (index % kHangulTCount != 0) out.push_back(kHangulTBase + index % kHangulTCount);
    return;
  }
  const auto* end = kDecomp + std::size(kDecomp);
  const auto* it = std::lower_bound(kDecomp, end, cp, [](const DecompEntry& e, char32_t c) { return e.cp < c; });
  if (it != end && it->cp == cp) {
    out.insert(out.end(), kDecompPool + it->offset, kDecompPool + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose_pair(char32_t first, char32_t second) {
  if (first >= kHangulLBase && first < kHangulLBase + kHangulLCount && second >= kHangulVBase &&
      second < kHangulVBase + kHangulVCount) {
    return kHangulSBase + ((first - kHangulLBase) * kHangulVCount + (second - kHangulVBase)) * kHangulTCount;
  }
  if (first >= kHangulSBase && first < kHangulSBase + kHangulSCount && (first - kHangulSBase) % kHangulTCount == 0 &&
      second > kHangulTBase && second < kHangulTBase + kHangulTCount) {
    return first + (second - kHangulTBase);
  }
  const auto* end = kComp + std::size(kComp);
  const auto* it = std::lower_bound(kComp, end, std::pair<char32_t, char32_t>{first, second},
                                    [](const CompEntry& e, const std::pair<char32_t, char32_t>& key) {
                                      return e.first < key.first || (e.first == key.first && e.second < key.second);
                                    });
  return (it != end && it->first == first && it->second == second) ? it->composite : 0;
}

}  // namespace

bool is_nfc_quick(std::string_view text) {
  size_t pos = 0;
  while ((pos = skip_ascii(text, pos)) < text.size())
    if (!quick_safe(decode_utf8(text, pos))) return false;
  return true;
}

namespace {

// Full NFC of one run of text (decompose, reorder, compose), appended to `out`.
void normalize_run(std::string_view text, std::string& out) {
  std::vector<char32_t> cps;
  cps.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) decompose(decode_utf8(text, pos), cps);

  // Canonical ordering: stable insertion sort of each run of non-starters by combining class.
  for (size_t i = 1; i < cps.size(); ++i) {
    uint8_t ccc = combining_class(cps[i]);
    if (ccc == 0) continue;
    size_t j = i;
    while (j > 0) {
      uint8_t prev = combining_class(cps[j - 1]);
      if (prev == 0 || prev <= ccc) break;
      std::swap(cps[j - 1], cps[j]);
      --j;
    }
  }

  // Canonical composition, in place: `out_len` code points kept so far.
  size_t out_len = 0;
  size_t starter = SIZE_MAX;  // index (in the kept prefix) of the last starter
  uint8_t last_ccc = 0;       // combining class of the last kept code point
  for (size_t i = 0; i < cps.size(); ++i) {
    char32_t cp = cps[i];
    uint8_t ccc = combining_class(cp);
    if (starter != SIZE_MAX) {
      bool adjacent = starter + 1 == out_len;
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        char32_t composite = compose_pair(cps[starter], cp);
        if (composite != 0) {
          cps[starter] = composite;
          continue;
        }
      }
    }
    if (ccc == 0) starter = out_len;
    last_ccc = ccc;
    cps[out_len++] = cp;
  }
  for (size_t i = 0; i < out_len; ++i) append_utf8(out, cps[i]);
}

}  // namespace

std::string nfc(std::string_view text) {
  if (is_nfc_quick(text)) return std::string(text);
  // NFC never acts across a boundary (a code point with NFC_QC=Yes and ccc=0), so only the runs around
  // code points that fail the quick check go through the full algorithm; the rest is copied.
  std::string out;
  out.reserve(text.size() + 16);
  size_t copied = 0;     // text[0, copied) is already in `out`
  size_t run_start = 0;  // start of the run the current code point belongs to
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {  // ASCII: always a boundary
      run_start = pos++;
      continue;
    }
    size_t next = pos;
    char32_t cp = decode_utf8(text, next);
    if (quick_safe(cp)) {
      run_start = pos;
      pos = next;
      continue;
    }
    // Extend the run to the next boundary, then normalise it.
    size_t run_end = next;
    while (run_end < text.size()) {
      size_t after = run_end;
      if (quick_safe(decode_utf8(text, after))) break;
      run_end = after;
    }
    out.append(text.substr(copied, run_start - copied));
    normalize_run(text.substr(run_start, run_end - run_start), out);
    copied = run_end;
    pos = run_end;
    run_start = run_end;
  }
  out.append(text.substr(copied));
  return out;
}

bool nfc_boundary_before(char32_t cp) { return quick_safe(cp); }

const char* nfc_unicode_version() { return kNfcUnicodeVersion; }

}  // namespace nvfp4lm::tokenizer
