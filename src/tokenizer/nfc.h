// Unicode NFC normalisation without ICU, for tokenizers whose normalizer is {"type": "NFC"} (Qwen2/3).
// Tables are generated from Python's unicodedata by gen_nfc_tables.py into nfc_tables.inc. Most text is
// already NFC: is_nfc_quick() decides that with one bitmap lookup per code point (ASCII is skipped 8
// bytes at a time) and nfc() returns its input unchanged in that case.
#pragma once

#include <string>
#include <string_view>

namespace nvfp4lm::tokenizer {

// True when every code point is NFC_QC=Yes with combining class 0: such text is NFC. False means
// "maybe not" (the full algorithm decides). Input must be valid UTF-8.
bool is_nfc_quick(std::string_view text);

// Canonical decomposition, canonical ordering, canonical composition (UAX #15). Input must be valid
// UTF-8; the output is valid UTF-8.
std::string nfc(std::string_view text);

// True when NFC never changes text across a boundary placed just before `cp` (NFC_QC=Yes, ccc=0): the
// text can be normalised in independent runs that each start at such a code point.
bool nfc_boundary_before(char32_t cp);

// Unicode version of the tables (for messages and tests).
const char* nfc_unicode_version();

}  // namespace nvfp4lm::tokenizer
