// Attribute, item and slice lookup, iteration and call arguments (declared in builtins.h): the parts of
// Python's data model that Jinja2 templates lean on, with Python's negative indices and slice clamping.
#include <algorithm>
#include <charconv>

#include "core/error.h"
#include "tokenizer/jinja/builtins.h"

namespace nvfp4lm::jinja {

Value argument(const CallArgs& args, size_t position, const char* name, Value fallback) {
  if (position < args.positional.size()) return args.positional[position];
  for (const auto& [key, value] : args.keyword) {
    if (key == name) return value;
  }
  return fallback;
}

Value get_attribute(const Value& object, const std::string& name, int line) {
  NVFP4LM_CHECK(!object.is_undefined(), "chat template line {}: cannot read .{} of an undefined value", line, name);
  if (object.is_dict()) {
    const Value* found = object.as_dict().find(name);
    return found ? *found : Value();
  }
  // Jinja2 tries obj[name] next, which for a list needs an integer: `list.0`.
  if (object.is_list() && !name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
    int64_t index = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), index);
    if (error != std::errc() || end != name.data() + name.size()) return Value();  // beyond 64 bits: no such item
    return get_item(object, Value(index), line);
  }
  return Value();
}

namespace {

// Python index normalisation; -1 when out of range.
int64_t normalize_index(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  return index >= 0 && index < static_cast<int64_t>(size) ? index : -1;
}

}  // namespace

Value get_item(const Value& object, const Value& key, int line) {
  NVFP4LM_CHECK(!object.is_undefined(), "chat template line {}: cannot index [{}] into an undefined value", line,
                python_repr(key));
  if (object.is_dict()) {
    if (!is_hashable(key)) return Value();  // Jinja2's getitem turns Python's TypeError into Undefined
    const Value* found = object.as_dict().find_key(key);
    return found ? *found : Value();
  }
  if (!key.is_int() && !key.is_bool()) {
    return key.is_string() ? get_attribute(object, key.as_string(), line) : Value();
  }
  const int64_t raw = key.is_bool() ? int64_t{key.as_bool()} : key.as_int();
  if (object.is_list()) {
    const int64_t index = normalize_index(raw, object.as_list().size());
    return index < 0 ? Value() : object.as_list()[static_cast<size_t>(index)];
  }
  if (object.is_string()) {
    const std::string& text = object.as_string();
    const std::vector<size_t> offsets = code_point_offsets(text);
    const int64_t index = normalize_index(raw, offsets.size() - 1);
    if (index < 0) return Value();
    const auto at = static_cast<size_t>(index);
    return Value(text.substr(offsets[at], offsets[at + 1] - offsets[at]));
  }
  return Value();
}

Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, int line) {
  const auto integer = [&](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    NVFP4LM_CHECK(v.is_int(), "chat template line {}: slice {} must be an integer, not {}", line, what, type_name(v));
    return v.as_int();
  };
  const int64_t step_value = integer(step, "step").value_or(1);
  NVFP4LM_CHECK(step_value != 0, "chat template line {}: slice step cannot be zero", line);
  NVFP4LM_CHECK(object.is_list() || object.is_string(), "chat template line {}: cannot slice a {}", line,
                type_name(object));
  const std::vector<size_t> offsets =
      object.is_string() ? code_point_offsets(object.as_string()) : std::vector<size_t>{};
  const auto size = static_cast<int64_t>(object.is_string() ? offsets.size() - 1 : object.as_list().size());
  // Python's PySlice_AdjustIndices.
  const auto clamp = [&](std::optional<int64_t> index, int64_t fallback) {
    if (!index) return fallback;
    int64_t i = *index;
    if (i < 0) i += size;
    if (step_value > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  const int64_t first = clamp(integer(start, "start"), step_value > 0 ? 0 : size - 1);
  const int64_t last = clamp(integer(stop, "stop"), step_value > 0 ? size : -1);
  std::vector<size_t> picked;
  for (int64_t i = first; step_value > 0 ? i < last : i > last; i += step_value)
    picked.push_back(static_cast<size_t>(i));
  if (object.is_list()) {
    List out;
    for (const size_t i : picked) out.push_back(object.as_list()[i]);
    return Value(std::move(out));
  }
  std::string out;
  for (const size_t i : picked) out += object.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]);
  return Value(std::move(out));
}

List iterate(const Value& value, int line) {
  if (value.is_list()) return value.as_list();
  if (value.is_undefined()) return {};
  if (value.is_dict()) {
    List keys;
    for (const auto& item : value.as_dict().items) keys.push_back(item.first);
    return keys;
  }
  if (value.is_string()) {
    const std::string& text = value.as_string();
    const std::vector<size_t> offsets = code_point_offsets(text);
    List characters;
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      characters.emplace_back(text.substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    return characters;
  }
  NVFP4LM_FAIL("chat template line {}: cannot iterate over a {}", line, type_name(value));
}

}  // namespace nvfp4lm::jinja
