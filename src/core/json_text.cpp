#include "core/json_text.h"

#include <vector>

#include "core/error.h"
#include "core/files.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

// Thrown by the depth and key-count checks inside the parser callback, caught below (never leave this file).
struct TooDeep {
  int depth;
};
struct TooManyKeys {};

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

// try_parse_json for either JSON type (Result: JsonParseResult or OrderedJsonParseResult); max_keys > 0 bounds
// the keys of each object.
template <typename Result, typename Json = decltype(Result::value)>
Result parse_limited(std::string_view text, const typename Json::parser_callback_t& also, size_t max_keys = 0) {
  Result result;
  // nlohmann reports object_start/array_start with the depth of the enclosing value (0 for the document), and an
  // object's keys one level deeper: keys[d] counts those of the object open at depth d - 1.
  std::vector<size_t> keys(static_cast<size_t>(kMaxJsonDepth) + 2, 0);
  // The comparisons an ordered object's insertions make (each compares with the keys before it), over all objects.
  uint64_t comparisons = 0;
  const uint64_t max_comparisons = static_cast<uint64_t>(max_keys) * max_keys;
  typename Json::parser_callback_t limit = [&also, &keys, &comparisons, max_keys, max_comparisons](
                                               int depth, typename Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw TooDeep{depth + 1};
    }
    if (max_keys > 0) {
      if (event == Json::parse_event_t::object_start) keys[static_cast<size_t>(depth) + 1] = 0;
      if (event == Json::parse_event_t::key) {
        size_t& count = keys[static_cast<size_t>(depth)];
        comparisons += count;
        if (++count > max_keys || comparisons > max_comparisons) throw TooManyKeys{};
      }
    }
    return also ? also(depth, event, parsed) : true;
  };
  try {
    result.value = Json::parse(text, limit);
  } catch (const TooDeep& deep) {
    result.value = Json();
    result.error = fmt::format("nested deeper than {} levels; no real file nests this deep", kMaxJsonDepth);
  } catch (const TooManyKeys&) {
    result.value = Json();
    result.error = fmt::format("an object has more than {} keys, or its objects together hold too many", max_keys);
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
