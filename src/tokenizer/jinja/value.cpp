// See value.h.
#include "tokenizer/jinja/value.h"

#include <cstdio>

#include "core/error.h"
#include "tokenizer/jinja/json_dump.h"

namespace nvfp4lm::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [name, value] : items) {
    if (name.is_string() && name.as_string() == key) return &value;
  }
  return nullptr;
}

const Value* Dict::find_key(const Value& key) const {
  if (key.is_string()) return find(key.as_string());
  for (const auto& [name, value] : items) {
    if (equals(name, key)) return &value;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) { set_key(Value(key), std::move(value)); }

void Dict::set_key(Value key, Value value) {
  for (auto& item : items) {
    if (equals(item.first, key)) {
      item.second = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool is_hashable(const Value& value) {
  if (value.is_list()) {
    if (!value.is_tuple) return false;
    for (const Value& item : value.as_list()) {
      if (!is_hashable(item)) return false;
    }
    return true;
  }
  return !value.is_dict() && !value.is_undefined();
}

Value make_tuple(List items) {
  Value tuple(std::move(items));
  tuple.is_tuple = true;
  return tuple;
}

const char* type_name(const Value& value) {
  if (value.is_undefined()) return "undefined";
  if (value.is_none()) return "none";
  if (value.is_bool()) return "bool";
  if (value.is_int() || value.is_big_int()) return "int";
  if (value.is_float()) return "float";
  if (value.is_string()) return "str";
  if (value.is_list()) return value.is_tuple ? "tuple" : "list";
  if (value.is_dict()) return value.is_namespace ? "namespace" : "dict";
  return "callable";
}

bool truthy(const Value& value) {
  if (value.is_bool()) return value.as_bool();
  if (value.is_int()) return value.as_int() != 0;
  if (value.is_big_int()) return true;  // beyond 64 bits: never 0
  if (value.is_float()) return value.as_number() != 0.0;
  if (value.is_string()) return !value.as_string().empty();
  if (value.is_list()) return !value.as_list().empty();
  if (value.is_dict()) return value.is_namespace || !value.as_dict().items.empty();
  return value.is_callable();
}

std::string python_repr(const Value& value) {
  if (!value.is_string()) {
    if (value.is_undefined()) return "Undefined";
    return to_output(value);
  }
  const std::string& text = value.as_string();
  const bool has_single = text.find('\'') != std::string::npos;
  const char quote = has_single && text.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escape;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string to_output(const Value& value) {
  if (value.is_undefined()) return "";
  if (value.is_none()) return "None";
  if (value.is_bool()) return value.as_bool() ? "True" : "False";
  if (value.is_int()) return std::to_string(value.as_int());
  if (value.is_big_int()) return value.big_int_digits();
  if (value.is_float()) return python_float_repr(value.as_number());
  if (value.is_string()) return value.as_string();
  if (value.is_list()) {
    std::string out = value.is_tuple ? "(" : "[";
    const List& list = value.as_list();
    for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + python_repr(list[i]);
    if (value.is_tuple) return out + (list.size() == 1 ? ",)" : ")");
    return out + "]";
  }
  if (value.is_dict()) {
    if (value.is_namespace) return "<Namespace>";
    std::string out = "{";
    const Dict& dict = value.as_dict();
    for (size_t i = 0; i < dict.items.size(); ++i) {
      out += (i ? ", " : "") + python_repr(dict.items[i].first) + ": " + python_repr(dict.items[i].second);
    }
    return out + "}";
  }
  return "<function>";
}

bool equals(const Value& a, const Value& b) {
  const auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    const auto as_double = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number(); };
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return as_double(a) == as_double(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_big_int() && b.is_big_int()) return a.big_int_digits() == b.big_int_digits();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    if (a.is_tuple != b.is_tuple) return false;
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!equals(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const Dict &x = a.as_dict(), &y = b.as_dict();
    if (x.items.size() != y.items.size()) return false;
    for (const auto& [key, value] : x.items) {
      const Value* other = y.find_key(key);
      if (other == nullptr || !equals(value, *other)) return false;
    }
    return true;
  }
  if (a.is_callable() && b.is_callable()) return &a.as_callable() == &b.as_callable();
  return false;
}

namespace {

// -1, 0, 1: a BigInt (beyond 64 bits) against another number.
int compare_big(const Value& a, const Value& b) {
  const auto sign = [](const Value& v) { return v.big_int_digits()[0] == '-' ? -1 : 1; };
  if (a.is_big_int() && b.is_big_int()) {
    if (sign(a) != sign(b)) return sign(a) < sign(b) ? -1 : 1;
    const std::string &x = a.big_int_digits(), &y = b.big_int_digits();
    const int magnitude = x.size() != y.size() ? (x.size() < y.size() ? -1 : 1) : (x < y ? -1 : x > y ? 1 : 0);
    return sign(a) * magnitude;
  }
  return a.is_big_int() ? sign(a) : -sign(b);  // a 64-bit number is between the negative and positive BigInts
}

}  // namespace

bool python_less(const Value& a, const Value& b, int line) {
  const auto numeric = [](const Value& v) { return v.is_number() || v.is_bool() || v.is_big_int(); };
  if (numeric(a) && numeric(b)) {
    if (a.is_big_int() || b.is_big_int()) return compare_big(a, b) < 0;
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    const auto as_double = [](const Value& v) { return v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number(); };
    return as_double(a) < as_double(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return python_less(x[i], y[i], line);
    }
    return x.size() < y.size();
  }
  const std::string where = line > 0 ? "chat template line " + std::to_string(line) : std::string("chat template");
  NVFP4LM_FAIL("{}: '<' not supported between a {} and a {}", where, type_name(a), type_name(b));
}

Value from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value(None{});
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto value = json.get<uint64_t>();
      if (value > static_cast<uint64_t>(INT64_MAX)) return Value(BigInt{std::to_string(value)});
      return Value(static_cast<int64_t>(value));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      for (const auto& item : json) list.push_back(from_json(item));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [key, item] : json.items()) dict.items.emplace_back(Value(key), from_json(item));
      return Value(std::move(dict));
    }
    default:
      return Value();
  }
}

std::vector<size_t> code_point_offsets(const std::string& text) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(text.size());
  return offsets;
}

}  // namespace nvfp4lm::jinja
