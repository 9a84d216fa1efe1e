// The values a chat template computes with, modelled on the Python objects Jinja2 (and so Hugging Face's
// apply_chat_template) works with: Undefined, None, bool, int, float, str, list, dict and callables.
//
// Conventions kept from Python / Jinja2:
//  - lists and dicts are shared by reference (copying a Value copies the handle), so `namespace` objects
//    and nested containers can be changed through any name that holds them;
//  - dicts keep insertion order (like Python 3.7+ dicts); their keys are strings (all JSON gives) or, from a dict
//    literal, any hashable value (int, float, bool, None, tuple: Seed-OSS keys a dict by integers), found by
//    Python's == (1, 1.0 and True are one key);
//  - strings are UTF-8 bytes; lengths, indexing and slicing count code points, as Python's str does;
//  - Undefined (a name or key that does not exist) prints as nothing, is falsy and iterates as empty,
//    as Jinja2's default Undefined does;
//  - integers are 64-bit: arithmetic that leaves the range is an Error (Python's are unbounded), and an integer
//    from JSON beyond it (a tool call's 20-digit id) is a BigInt, kept as its digits: printed, dumped as JSON and
//    compared exactly, not computed with.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace nvfp4lm::jinja {

struct Value;
struct CallArgs;
using List = std::vector<Value>;
using Function = std::function<Value(CallArgs&)>;

struct Dict {
  std::vector<std::pair<Value, Value>> items;       // (key, value) in insertion order
  const Value* find(const std::string& key) const;  // a string key
  const Value* find_key(const Value& key) const;    // any key, by Python's ==
  void set(const std::string& key, Value value);
  void set_key(Value key, Value value);
  // A callable object (a recursive for loop's `loop`): called as a function, read as a dict.
  std::shared_ptr<Function> call;
};

// Arguments of a call: positional, then keyword (in the order written).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Undefined {};
struct None {};
struct BigInt {
  std::string digits;  // decimal, with a leading '-' when negative
};

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>, std::shared_ptr<Dict>,
               std::shared_ptr<Function>, BigInt>
      data;
  bool is_namespace = false;  // a namespace(...) object: the only dict whose attributes `set` may assign
  bool is_tuple = false;      // a list that Python would hold as a tuple: printed (a, b), never equal to a list

  Value() = default;
  Value(None) : data(None{}) {}
  Value(bool b) : data(b) {}
  Value(int64_t i) : data(i) {}
  Value(int i) : data(int64_t{i}) {}
  Value(double d) : data(d) {}
  Value(std::string s) : data(std::move(s)) {}
  Value(const char* s) : data(std::string(s)) {}
  Value(List list) : data(std::make_shared<List>(std::move(list))) {}
  Value(Dict dict) : data(std::make_shared<Dict>(std::move(dict))) {}
  Value(Function f) : data(std::make_shared<Function>(std::move(f))) {}
  Value(BigInt big) : data(std::move(big)) {}

  bool is_undefined() const { return std::holds_alternative<Undefined>(data); }
  bool is_none() const { return std::holds_alternative<None>(data); }
  bool is_bool() const { return std::holds_alternative<bool>(data); }
  bool is_int() const { return std::holds_alternative<int64_t>(data); }
  bool is_float() const { return std::holds_alternative<double>(data); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(data); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(data); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Function>>(data); }
  bool is_big_int() const { return std::holds_alternative<BigInt>(data); }

  bool as_bool() const { return std::get<bool>(data); }
  int64_t as_int() const { return std::get<int64_t>(data); }
  double as_number() const { return is_int() ? static_cast<double>(as_int()) : std::get<double>(data); }
  const std::string& as_string() const { return std::get<std::string>(data); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(data); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data); }
  Function& as_callable() const { return *std::get<std::shared_ptr<Function>>(data); }
  const std::string& big_int_digits() const { return std::get<BigInt>(data).digits; }
};

// Python's type name of a value ("str", "dict", "undefined"...), for error messages.
const char* type_name(const Value& value);

// Python truthiness: empty strings / containers, 0, None, Undefined and False are false.
bool truthy(const Value& value);

// What {{ value }} prints: Python's str() (True, None, ['a', 1], {'k': 'v'}); Undefined prints nothing.
std::string to_output(const Value& value);

// Python's repr(): strings quoted as Python quotes them.
std::string python_repr(const Value& value);

// Whether Python could hash the value (a dict key): not lists, dicts or Undefined; tuples of hashable values.
bool is_hashable(const Value& value);

// Python's == (1 == 1.0 and True == 1 hold; lists and dicts compare element-wise).
bool equals(const Value& a, const Value& b);

// Python's a < b where Python defines it: numbers (bool, int, float) by value, strings by code point, lists with
// lists and tuples with tuples item by item; anything else (None, dicts, a number and a string) is an Error, as
// Python's TypeError. `line` is the template line for the message (0: none known).
bool python_less(const Value& a, const Value& b, int line);

// A Python tuple: a list flagged to print as one.
Value make_tuple(List items);

// JSON (parsed with nlohmann::ordered_json, so object keys keep their order) -> Value.
Value from_json(const nlohmann::ordered_json& json);

// UTF-8 code points of a string, as the byte offset each one starts at (plus the end), for Python's
// code-point indexing and slicing.
std::vector<size_t> code_point_offsets(const std::string& text);

}  // namespace nvfp4lm::jinja
