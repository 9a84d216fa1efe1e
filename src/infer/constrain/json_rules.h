// The lexical pieces of JSON as grammar rules (grammar.h), shared by the schema compiler (json_schema.h): bounded
// whitespace, strings (valid UTF-8 and valid escapes only, optionally with a length range in code points), integers
// in a range, numbers, literal values and "any JSON value". Each piece is built once per grammar and reused.
//
// Bounds that keep every answer parseable by common JSON parsers without loss, and keep a random model from
// running on forever inside one token kind (the token budget ends the rest, token_constraint.h):
//  - integers have at most 15 digits (every one is exact in a double, so JavaScript reads it unchanged);
//  - numbers: at most 15 integer digits, 15 fraction digits, 2 exponent digits (no overflow to infinity);
//  - whitespace: at most `max_whitespace` bytes of space / newline / tab in each gap JSON allows one;
//  - \u escapes: no lone surrogate (a high surrogate escape must be followed by a low one), which strict parsers
//    (nlohmann::json, Python's json with surrogatepass off) reject.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "infer/constrain/grammar.h"

namespace nvfp4lm::constrain {

constexpr int64_t kMaxIntegerMagnitude = 999'999'999'999'999;  // 15 digits
constexpr int64_t kMaxStringLengthBound = 8192;                // minLength / maxLength the grammar unrolls

class JsonRules {
 public:
  JsonRules(GrammarBuilder& builder, int max_whitespace);

  Symbol whitespace();   // 0..max_whitespace bytes
  Symbol string_char();  // one code point of a string's content: a UTF-8 character or an escape
  // A quoted string of min_length..max_length code points (no max: unbounded).
  Symbol string(int64_t min_length, std::optional<int64_t> max_length);
  // An integer in [min, max] (both within +-kMaxIntegerMagnitude; min <= max).
  Symbol integer(int64_t min, int64_t max);
  Symbol number();
  Symbol boolean();
  Symbol null();
  // Exactly `value` as compact JSON (nlohmann's dump: objects with sorted keys).
  Symbol literal_value(const nlohmann::json& value);
  Symbol any_value();
  Symbol any_object();
  // A string that is none of `excluded` (an object's declared property names), made of [A-Za-z0-9_-] only so that
  // no escape can spell an excluded name.
  Symbol other_key(const std::vector<std::string>& excluded);

  GrammarBuilder& builder() { return builder_; }

 private:
  int32_t cached(const std::string& name, const std::function<void(int32_t)>& define);
  // Digit strings of exactly low.size() digits between low and high (same length).
  int32_t digits_between(const std::string& low, const std::string& high);
  // Non-negative integers in [low, high], no leading zeros.
  int32_t non_negative(int64_t low, int64_t high);

  GrammarBuilder& builder_;
  int max_whitespace_;
  std::map<std::string, int32_t> rules_;  // by name
};

}  // namespace nvfp4lm::constrain
