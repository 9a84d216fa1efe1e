// JSON from files a user hands us (config.json, safetensors headers, trainer_state.json, training data, ...).
// Every such parse goes through parse_json, which limits nesting at parse time: nlohmann's copy, dump() and
// comparison recurse once per level, so a 200 KB file of 10^5 nested brackets would otherwise overflow the
// stack far from the parser. Messages quote values through json_excerpt, never a whole subtree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>

namespace nvfp4lm {

// Deeper than any real config, tokenizer or data file (they nest < 10 levels).
inline constexpr int kMaxJsonDepth = 64;

struct JsonParseResult {
  nlohmann::json value;
  std::string error;  // empty on success; otherwise a one-line reason ("syntax error at line 3, column 7: ...")
  bool ok() const { return error.empty(); }
};

// Parses `text`, or says why not (syntax, nesting deeper than kMaxJsonDepth). `also` (optional) sees every
// parse event as nlohmann's parser_callback_t does; it may throw Error to reject the document.
JsonParseResult try_parse_json(std::string_view text, const nlohmann::json::parser_callback_t& also = nullptr);

// An ordered object finds a key by a linear search, so parsing one of N keys costs O(N^2) (600,000 keys in an 8 MB
// request body took 457 s; issue 52): try_parse_ordered_json refuses an object of more keys than this, and a
// document whose objects together would take more key comparisons than two such objects (many objects of 5,000
// keys). OpenAI's structured outputs allow 5,000 object properties in a whole schema; logit_bias takes 1,024.
inline constexpr size_t kMaxOrderedJsonObjectKeys = 5000;

// try_parse_json keeping every object's keys in their order (what chat templates print with tojson, as Python's
// dicts keep them); an object of more than kMaxOrderedJsonObjectKeys keys is an error.
struct OrderedJsonParseResult {
  nlohmann::ordered_json value;
  std::string error;
  bool ok() const { return error.empty(); }
};
OrderedJsonParseResult try_parse_ordered_json(std::string_view text);

// Parses `text`; Error "<origin>: not valid JSON (<reason>)" otherwise.
nlohmann::json parse_json(std::string_view text, std::string_view origin,
                          const nlohmann::json::parser_callback_t& also = nullptr);

// read_text_file + parse_json, the path as origin.
nlohmann::json read_json_file(const std::filesystem::path& path);

[[noreturn]] void throw_json_field_type(std::string_view key, std::string_view expected, const nlohmann::json& found,
                                        std::string_view where);

// object[key] as T; `fallback` when `object` is not an object or has no `key`. A key present with another type is
// an Error naming `where` and the key (nlohmann's value() would throw its own type_error instead). An integer T
// takes only a JSON integer it can hold: nlohmann would convert 1e30 or 2.5 into a long by C conversion, which is
// undefined behaviour out of range (found by fuzz_checksums).
template <typename T>
T json_field_or(const nlohmann::json& object, std::string_view key, T fallback, std::string_view where) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    const bool fits = it->is_number_unsigned()
                          ? it->template get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                      : it->is_number_integer()
                          ? std::is_signed_v<T> ? it->template get<int64_t>() >= std::numeric_limits<T>::min() &&
                                                      it->template get<int64_t>() <= std::numeric_limits<T>::max()
                                                : it->template get<int64_t>() >= 0 &&
                                                      static_cast<uint64_t>(it->template get<int64_t>()) <=
                                                          static_cast<uint64_t>(std::numeric_limits<T>::max())
                          : false;
    if (!fits) throw_json_field_type(key, "whole number in range", *it, where);
  }
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    throw_json_field_type(key, nlohmann::json(fallback).type_name(), *it, where);
  }
}

// Compact JSON text of `value` in which invalid UTF-8 inside strings becomes U+FFFD instead of an exception: for text
// that quotes what a client or a model produced (nlohmann's dump() throws type_error 316 on such bytes).
std::string to_json_text(const nlohmann::json& value);

// A value for an error message: compact JSON cut to about `max_chars` ("[1,2,3,...] (array of 10^6)").
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 80);
std::string json_excerpt(const nlohmann::ordered_json& value, size_t max_chars = 80);

}  // namespace nvfp4lm
