#include "core/json_text.h"

#include <vector>

#include "core/error.h"
#include "core/files.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

// "[json.exception.parse_error.101] parse error at line 1, column 9: ..." -> the part after the bracketed id,
// cut so a huge offending token cannot make a huge message.
std::string short_reason(std::string_view message) {
  const size_t close = message.find("] ");
  if (close != std::string_view::npos) message.remove_prefix(close + 2);
  constexpr size_t kMaxReason = 240;
  if (message.size() <= kMaxReason) return std::string(message);
  return std::string(message.substr(0, kMaxReason)) + "...";
}

}  // namespace

namespace {

// The limits, checked by a SAX pass that builds nothing, before the document is built: nesting (nlohmann's recursive
// copy, dump and destructor overflow the stack at 10^5 levels) and, with max_keys > 0, the keys of an object and the
// comparisons an ordered object's insertions make (each compares with the keys before it), over all objects. (A
// parser_callback_t did this before, but nlohmann's callback parser scans the enclosing array at every object's end:
// 100,000 messages took 2.9 s.)
template <typename Json>
class LimitsPass final : public nlohmann::json_sax<Json> {
 public:
  using Number = typename Json::number_integer_t;
  using Unsigned = typename Json::number_unsigned_t;
  using Float = typename Json::number_float_t;
  using String = typename Json::string_t;
  using Binary = typename Json::binary_t;

  explicit LimitsPass(size_t max_keys) : max_keys_(max_keys), max_comparisons_(uint64_t{max_keys} * max_keys) {}

  std::string error;  // empty when the document is within the limits and well formed

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(Number) override { return true; }
  bool number_unsigned(Unsigned) override { return true; }
  bool number_float(Float, const String&) override { return true; }
  bool string(String&) override { return true; }
  bool binary(Binary&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.push_back(0);
    return deeper();
  }
  bool key(String&) override {
    if (max_keys_ == 0) return true;
    size_t& count = keys_.back();
    comparisons_ += count;
    if (++count <= max_keys_ && comparisons_ <= max_comparisons_) return true;
    error = fmt::format("an object has more than {} keys, or its objects together hold too many", max_keys_);
    return false;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    keys_.push_back(0);
    return deeper();
  }
  bool end_array() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = short_reason(e.what());
    return false;
  }

 private:
  bool deeper() {
    if (++depth_ <= kMaxJsonDepth) return true;
    error = fmt::format("nested deeper than {} levels; no real file nests this deep", kMaxJsonDepth);
    return false;
  }

  size_t max_keys_;
  uint64_t max_comparisons_, comparisons_ = 0;
  int depth_ = 0;
  std::vector<size_t> keys_;  // per open object or array (arrays' entries unused)
};

// try_parse_json for either JSON type (Result: JsonParseResult or OrderedJsonParseResult); max_keys > 0 bounds
// the keys of each object (LimitsPass).
template <typename Result, typename Json = decltype(Result::value)>
Result parse_limited(std::string_view text, const typename Json::parser_callback_t& also, size_t max_keys = 0) {
  Result result;
  LimitsPass<Json> limits(max_keys);
  if (!Json::sax_parse(text, &limits) || !limits.error.empty()) {
    result.error = limits.error.empty() ? std::string("not valid JSON") : limits.error;
    return result;
  }
  try {
    result.value = also ? Json::parse(text, also) : Json::parse(text);
  } catch (const typename Json::exception& e) {
    result.value = Json();
    result.error = short_reason(e.what());
  }
  return result;
}

}  // namespace

JsonParseResult try_parse_json(std::string_view text, const json::parser_callback_t& also) {
  return parse_limited<JsonParseResult>(text, also);
}

OrderedJsonParseResult try_parse_ordered_json(std::string_view text) {
  return parse_limited<OrderedJsonParseResult>(text, nullptr, kMaxOrderedJsonObjectKeys);
}

json parse_json(std::string_view text, std::string_view origin, const json::parser_callback_t& also) {
  JsonParseResult result = try_parse_json(text, also);
  NVFP4LM_CHECK(result.ok(), "{}: not valid JSON ({})", origin, result.error);
  return std::move(result.value);
}

json read_json_file(const std::filesystem::path& path) { return parse_json(read_text_file(path), path.string()); }

void throw_json_field_type(std::string_view key, std::string_view expected, const json& found, std::string_view where) {
  NVFP4LM_FAIL("{}: \"{}\" must be {} {}, found {}", where, key,
               expected == "array" || expected == "object" ? "an" : "a", expected, json_excerpt(found));
}

std::string to_json_text(const json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string json_excerpt(const nlohmann::ordered_json& value, size_t max_chars) {
  return json_excerpt(json(value), max_chars);
}

std::string json_excerpt(const json& value, size_t max_chars) {
  // dump() of a value from parse_json is bounded in depth; its length is bounded by the input. Containers are
  // summarised first so a million-element array is not printed just to be cut.
  std::string text;
  if (value.is_array() && value.size() > max_chars) {
    text = fmt::format("(array of {} values)", value.size());
  } else if (value.is_object() && value.size() > max_chars) {
    text = fmt::format("(object of {} keys)", value.size());
  } else {
    text = value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  }
  if (text.size() > max_chars) {
    text.resize(max_chars);
    text += fmt::format("... ({})", value.type_name());
  }
  return text;
}

}  // namespace nvfp4lm
