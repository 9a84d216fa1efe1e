// See json_schema.h. One compile() per schema node: it resolves $ref, anyOf, enum/const and type lists first, then
// builds the rule of one type; every keyword a branch reads is listed, and any other one present is an Error.
#include "infer/constrain/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/json_text.h"
#include "infer/constrain/json_rules.h"

namespace nvfp4lm::constrain {
namespace {

// Ordered: properties are compiled in the order the schema writes them (as a client's dict declares them).
using ordered_json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;              // nested schemas (not $ref recursion, which is a rule)
constexpr size_t kMaxSymbols = 4'000'000;  // grammar size: a schema that unrolls further is refused
constexpr int64_t kMaxArrayBound = 1024;   // minItems / maxItems the grammar unrolls

const std::set<std::string, std::less<>> kAnnotations = {"title",    "description", "default",  "examples",
                                                         "$schema",  "$id",         "$comment", "deprecated",
                                                         "readOnly", "writeOnly",   "$defs",    "definitions"};

const std::map<std::string, std::set<std::string, std::less<>>, std::less<>> kTypeKeywords = {
    {"object", {"properties", "required", "additionalProperties"}},
    {"array", {"items", "minItems", "maxItems"}},
    {"string", {"minLength", "maxLength"}},
    {"integer", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
    {"number", {}},
    {"boolean", {}},
    {"null", {}}};

// Why some well-known keywords are refused (the rest get "unsupported keyword").
std::string refusal_reason(const std::string& keyword) {
  if (keyword == "pattern") return ": regular expressions are not supported (use enum, or describe the format)";
  if (keyword == "format") return ": string formats are not supported (use enum, or describe the format)";
  if (keyword == "oneOf") return ": use anyOf (exactly-one cannot be guaranteed)";
  if (keyword == "minimum" || keyword == "maximum" || keyword == "exclusiveMinimum" || keyword == "exclusiveMaximum")
    return ": bounds are supported on integers only";
  return "";
}

bool identifier(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
  });
}

std::string child_path(const std::string& path, const std::string& key) {
  return identifier(key) ? path + "." + key : path + "[" + ordered_json(key).dump() + "]";
}

bool value_has_type(const ordered_json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer")
    return value.is_number_integer() ||
           (value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>());
  return false;
}

class SchemaCompiler {
 public:
  struct Compiled {
    Symbol symbol;
    bool open_ended = false;  // a complete text may go on (numbers)
  };

  SchemaCompiler(const ordered_json& document, JsonRules& rules) : document_(document), rules_(rules) {}

  Compiled compile(const ordered_json& schema, const std::string& path, int depth) {
    NVFP4LM_CHECK(depth <= kMaxDepth, "the schema nests deeper than {} levels at {}", kMaxDepth, path);
    NVFP4LM_CHECK(rules_.builder().symbol_count() <= kMaxSymbols,
                  "the schema is too large: its grammar passes {} symbols at {}", kMaxSymbols, path);
    if (schema.is_boolean()) {
      NVFP4LM_CHECK(schema.get<bool>(), "the schema at {} is false: no value matches it", path);
      return {rules_.any_value(), true};
    }
    NVFP4LM_CHECK(schema.is_object(), "the schema at {} must be an object or a boolean, got {}", path,
                  json_excerpt(schema, 40));
    if (schema.contains("$ref")) {
      only(schema, path, {"$ref"});
      return compile_ref(schema["$ref"], path + ".$ref", depth);
    }
    if (schema.contains("anyOf")) {
      only(schema, path, {"anyOf"});
      const ordered_json& branches = schema["anyOf"];
      NVFP4LM_CHECK(branches.is_array() && !branches.empty(), "'anyOf' at {} must be a non-empty list of schemas",
                    path);
      const int32_t rule = rules_.builder().new_rule("anyOf " + path);
      bool open = false;
      for (size_t i = 0; i < branches.size(); ++i) {
        const Compiled branch = compile(branches[i], fmt::format("{}.anyOf[{}]", path, i), depth + 1);
        rules_.builder().add_alternative(rule, {branch.symbol});
        open = open || branch.open_ended;
      }
      return {GrammarBuilder::rule(rule), open};
    }
    std::vector<std::string> types = read_types(schema, path);
    if (schema.contains("enum") || schema.contains("const")) return compile_enum(schema, path, types);
    if (types.empty()) types = implied_types(schema);
    if (types.empty()) {  // no type and no type's keyword: any value
      only(schema, path, {});
      return {rules_.any_value(), true};
    }
    // Every keyword present must belong to one of the types.
    std::set<std::string, std::less<>> allowed = {"type"};
    for (const auto& type : types) allowed.insert(kTypeKeywords.at(type).begin(), kTypeKeywords.at(type).end());
    check_keywords(schema, path, allowed);
    if (types.size() == 1) return compile_type(schema, path, types[0], depth);
    const int32_t rule = rules_.builder().new_rule("types " + path);
    bool open = false;
    for (const auto& type : types) {
      const Compiled branch = compile_type(schema, path, type, depth);
      rules_.builder().add_alternative(rule, {branch.symbol});
      open = open || branch.open_ended;
    }
    return {GrammarBuilder::rule(rule), open};
  }

 private:
  // Error for a keyword that is neither an annotation nor in `allowed`.
  static void check_keywords(const ordered_json& schema, const std::string& path,
                             const std::set<std::string, std::less<>>& allowed) {
    for (const auto& [key, value] : schema.items())
      if (!kAnnotations.contains(key) && !allowed.contains(key))
        NVFP4LM_FAIL("unsupported keyword '{}' at {}{}", key, path, refusal_reason(key));
  }
  static void only(const ordered_json& schema, const std::string& path, std::initializer_list<const char*> keys) {
    std::set<std::string, std::less<>> allowed;
    for (const char* key : keys) allowed.insert(key);
    for (const auto& [key, value] : schema.items())
      if (!kAnnotations.contains(key) && !allowed.contains(key))
        NVFP4LM_FAIL("unsupported keyword '{}' at {}{}", key, path,
                     allowed.empty() ? refusal_reason(key)
                                     : fmt::format(" (beside '{}': combine them inside its branches)", *keys.begin()));
  }

  static std::vector<std::string> read_types(const ordered_json& schema, const std::string& path) {
    std::vector<std::string> types;
    const auto it = schema.find("type");
    if (it == schema.end()) return types;
    const ordered_json list = it->is_array() ? *it : ordered_json::array({*it});
    NVFP4LM_CHECK(!list.empty(), "'type' at {} is an empty list", path);
    for (const ordered_json& type : list) {
      NVFP4LM_CHECK(type.is_string() && kTypeKeywords.contains(type.get<std::string>()),
                    "'type' at {} must be object, array, string, integer, number, boolean or null, got {}", path,
                    json_excerpt(type, 40));
      if (std::find(types.begin(), types.end(), type.get<std::string>()) == types.end())
        types.push_back(type.get<std::string>());
    }
    return types;
  }

  static std::vector<std::string> implied_types(const ordered_json& schema) {
    for (const auto& [type, keywords] : kTypeKeywords)
      for (const auto& keyword : keywords)
        if (schema.contains(keyword)) return {type == "integer" ? "number" : type};
    return {};
  }

  Compiled compile_ref(const ordered_json& ref, const std::string& path, int depth) {
    NVFP4LM_CHECK(ref.is_string() && ref.get<std::string>().starts_with("#"),
                  "'$ref' at {} must be a reference into this schema (\"#\", \"#/$defs/Name\"), got {}", path,
                  json_excerpt(ref, 60));
    const std::string pointer = ref.get<std::string>().substr(1);
    if (const auto found = refs_.find(pointer); found != refs_.end()) return found->second;
    const ordered_json* target = nullptr;
    try {
      const ordered_json::json_pointer at(pointer);
      if (document_.contains(at)) target = &document_.at(at);
    } catch (const ordered_json::exception&) {
    }
    NVFP4LM_CHECK(target != nullptr, "'$ref' at {} names {}, which is not in the schema", path, json_excerpt(ref, 60));
    // The rule exists before its body is compiled, so a recursive schema refers to it. Until the body is known it
    // counts as open-ended (needing an end token: the safe side).
    const int32_t rule = rules_.builder().new_rule("ref " + pointer);
    refs_[pointer] = {GrammarBuilder::rule(rule), true};
    std::string target_path = "$";
    for (const auto& token : split_pointer(pointer)) target_path = child_path(target_path, token);
    const Compiled body = compile(*target, target_path, depth + 1);
    rules_.builder().add_alternative(rule, {body.symbol});
    refs_[pointer].open_ended = body.open_ended;
    return refs_[pointer];
  }

  static std::vector<std::string> split_pointer(const std::string& pointer) {
    std::vector<std::string> tokens;
    ordered_json::json_pointer at(pointer);
    while (!at.empty()) {
      tokens.insert(tokens.begin(), at.back());
      at.pop_back();
    }
    return tokens;
  }

  Compiled compile_enum(const ordered_json& schema, const std::string& path, const std::vector<std::string>& types) {
    const bool is_const = schema.contains("const");
    NVFP4LM_CHECK(!(is_const && schema.contains("enum")), "'enum' and 'const' at {}: use one of them", path);
    check_keywords(schema, path, {"type", is_const ? "const" : "enum"});
    ordered_json values = is_const ? ordered_json::array({schema["const"]}) : schema["enum"];
    NVFP4LM_CHECK(values.is_array(), "'enum' at {} must be a list of values", path);
    const int32_t rule = rules_.builder().new_rule("enum " + path);
    bool any = false, open = false;
    for (const ordered_json& value : values) {
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](const std::string& type) {
                           return value_has_type(value, type);
                         });
      if (!typed) continue;  // such a value would not validate: leave it out
      rules_.builder().add_alternative(rule, {rules_.literal_value(nlohmann::json(value))});
      any = true;
      open = open || value.is_number();
    }
    NVFP4LM_CHECK(any, "'{}' at {} has no value of the schema's type", is_const ? "const" : "enum", path);
    return {GrammarBuilder::rule(rule), open};
  }

  Compiled compile_type(const ordered_json& schema, const std::string& path, const std::string& type, int depth) {
    if (type == "object") return {compile_object(schema, path, depth), false};
    if (type == "array") return {compile_array(schema, path, depth), false};
    if (type == "string") {
      const int64_t min = read_count(schema, "minLength", path, kMaxStringLengthBound).value_or(0);
      const std::optional<int64_t> max = read_count(schema, "maxLength", path, kMaxStringLengthBound);
      NVFP4LM_CHECK(!max || *max >= min, "'maxLength' {} at {} is below 'minLength' {}", max.value_or(0), path, min);
      return {rules_.string(min, max), false};
    }
    if (type == "integer") return {compile_integer(schema, path), true};
    if (type == "number") return {rules_.number(), true};
    if (type == "boolean") return {rules_.boolean(), false};
    return {rules_.null(), false};
  }

  static std::optional<int64_t> read_count(const ordered_json& schema, const char* key, const std::string& path,
                                           int64_t limit) {
    const auto it = schema.find(key);
    if (it == schema.end()) return std::nullopt;
    NVFP4LM_CHECK(value_has_type(*it, "integer") && it->get<double>() >= 0,
                  "'{}' at {} must be a non-negative integer, got {}", key, path, json_excerpt(*it, 40));
    NVFP4LM_CHECK(it->get<double>() <= static_cast<double>(limit), "'{}' at {} is {}; at most {} is supported", key,
                  path, json_excerpt(*it, 40), limit);
    return static_cast<int64_t>(it->get<double>());
  }

  Symbol compile_integer(const ordered_json& schema, const std::string& path) {
    auto bound = [&](const char* key) -> std::optional<double> {
      const auto it = schema.find(key);
      if (it == schema.end()) return std::nullopt;
      NVFP4LM_CHECK(it->is_number(), "'{}' at {} must be a number, got {}", key, path, json_excerpt(*it, 40));
      return it->get<double>();
    };
    double low = -static_cast<double>(kMaxIntegerMagnitude), high = static_cast<double>(kMaxIntegerMagnitude);
    if (const auto v = bound("minimum")) low = std::max(low, std::ceil(*v));
    if (const auto v = bound("exclusiveMinimum")) low = std::max(low, std::floor(*v) + 1);
    if (const auto v = bound("maximum")) high = std::min(high, std::floor(*v));
    if (const auto v = bound("exclusiveMaximum")) high = std::min(high, std::ceil(*v) - 1);
    NVFP4LM_CHECK(low <= high, "no integer at {} is within its bounds (and within +-{}, the 15 digits supported)", path,
                  kMaxIntegerMagnitude);
    return rules_.integer(static_cast<int64_t>(low), static_cast<int64_t>(high));
  }

  Symbol compile_array(const ordered_json& schema, const std::string& path, int depth) {
    const int64_t min = read_count(schema, "minItems", path, kMaxArrayBound).value_or(0);
    std::optional<int64_t> max = read_count(schema, "maxItems", path, kMaxArrayBound);
    NVFP4LM_CHECK(!max || *max >= min, "'maxItems' {} at {} is below 'minItems' {}", max.value_or(0), path, min);
    const Symbol item =
        schema.contains("items") ? compile(schema["items"], path + ".items", depth + 1).symbol : rules_.any_value();
    GrammarBuilder& b = rules_.builder();
    const Symbol ws = rules_.whitespace();
    // tail k: k items written; ']' once k >= min, ',' and another while k < max (unbounded: one self-loop from
    // max(min, 1) on).
    const int64_t last = max ? *max : std::max<int64_t>(min, 1);
    std::vector<int32_t> tails;
    for (int64_t k = 0; k <= last; ++k) tails.push_back(b.new_rule(fmt::format("array {} tail{}", path, k)));
    for (int64_t k = 0; k <= last; ++k) {
      const int32_t tail = tails[static_cast<size_t>(k)];
      if (k >= min) b.add_alternative(tail, {b.byte(']')});
      Sequence more;
      if (k > 0) more = {b.byte(','), ws};
      more.push_back(item);
      more.push_back(ws);
      if (k < last) {
        more.push_back(GrammarBuilder::rule(tails[static_cast<size_t>(k + 1)]));
        b.add_alternative(tail, more);
      } else if (!max) {
        more.push_back(GrammarBuilder::rule(tail));
        b.add_alternative(tail, more);
      }
    }
    const int32_t rule = b.new_rule("array " + path);
    b.add_alternative(rule, {b.byte('['), ws, GrammarBuilder::rule(tails[0])});
    return GrammarBuilder::rule(rule);
  }

  Symbol compile_object(const ordered_json& schema, const std::string& path, int depth) {
    GrammarBuilder& b = rules_.builder();
    const Symbol ws = rules_.whitespace();
    std::vector<std::string> names;
    std::vector<Symbol> values;
    if (const auto it = schema.find("properties"); it != schema.end()) {
      NVFP4LM_CHECK(it->is_object(), "'properties' at {} must be an object of schemas", path);
      // In the order the schema writes them (ordered_json), as OpenAI's structured outputs keep them.
      for (const auto& [name, property] : it->items()) {
        names.push_back(name);
        values.push_back(compile(property, child_path(path + ".properties", name), depth + 1).symbol);
      }
    }
    std::set<std::string> required;
    const std::set<std::string> declared(names.begin(), names.end());  // (a list search made N required names O(N^2))
    if (const auto it = schema.find("required"); it != schema.end()) {
      NVFP4LM_CHECK(it->is_array(), "'required' at {} must be a list of property names", path);
      for (const ordered_json& name : *it) {
        NVFP4LM_CHECK(name.is_string(), "'required' at {} must be a list of property names", path);
        NVFP4LM_CHECK(declared.contains(name.get<std::string>()),
                      "'required' at {} names '{}', which is not in 'properties'", path, name.get<std::string>());
        required.insert(name.get<std::string>());
      }
    }
    std::optional<Symbol> extra_value;
    const auto additional = schema.find("additionalProperties");
    if (additional == schema.end()) {
      if (!schema.contains("properties")) extra_value = rules_.any_value();
    } else if (!(additional->is_boolean() && !additional->get<bool>())) {
      extra_value = compile(*additional, path + ".additionalProperties", depth + 1).symbol;
    }
    // member i: "name" ws ':' ws value ws. first(i): members i.. with none written yet; after(i): with one written,
    // each then preceded by ',' ws. An optional property may be skipped; extra members come after the declared ones.
    const size_t count = names.size();
    std::vector<int32_t> first(count + 1), after(count + 1);
    for (size_t i = 0; i <= count; ++i) {
      first[i] = b.new_rule(fmt::format("object {} first{}", path, i));
      after[i] = b.new_rule(fmt::format("object {} after{}", path, i));
    }
    b.add_alternative(first[count], {});
    b.add_alternative(after[count], {});
    if (extra_value) {
      const int32_t member = b.new_rule("object " + path + " extra");
      b.add_alternative(member, {rules_.other_key(names), ws, b.byte(':'), ws, *extra_value, ws});
      b.add_alternative(first[count], {GrammarBuilder::rule(member), GrammarBuilder::rule(after[count])});
      b.add_alternative(after[count],
                        {b.byte(','), ws, GrammarBuilder::rule(member), GrammarBuilder::rule(after[count])});
    }
    for (size_t i = count; i-- > 0;) {
      const int32_t member = b.new_rule("object " + child_path(path, names[i]));
      Sequence text = b.literal(ordered_json(names[i]).dump());
      text.insert(text.end(), {ws, b.byte(':'), ws, values[i], ws});
      b.add_alternative(member, text);
      b.add_alternative(first[i], {GrammarBuilder::rule(member), GrammarBuilder::rule(after[i + 1])});
      b.add_alternative(after[i], {b.byte(','), ws, GrammarBuilder::rule(member), GrammarBuilder::rule(after[i + 1])});
      if (!required.contains(names[i])) {
        b.add_alternative(first[i], {GrammarBuilder::rule(first[i + 1])});
        b.add_alternative(after[i], {GrammarBuilder::rule(after[i + 1])});
      }
    }
    const int32_t rule = b.new_rule("object " + path);
    b.add_alternative(rule, {b.byte('{'), ws, GrammarBuilder::rule(first[0]), b.byte('}')});
    return GrammarBuilder::rule(rule);
  }

  const ordered_json& document_;
  JsonRules& rules_;
  std::map<std::string, Compiled> refs_;  // by JSON pointer
};

std::shared_ptr<const Grammar> build_framed(std::span<const FramedSchema> alternatives,
                                            const JsonGrammarOptions& options) {
  NVFP4LM_CHECK(options.max_whitespace >= 0 && options.max_whitespace <= 16,
                "whitespace per gap must be from 0 to 16 bytes, got {}", options.max_whitespace);
  NVFP4LM_CHECK(!alternatives.empty(), "a framed JSON grammar needs at least one alternative");
  GrammarBuilder builder;
  const int32_t root = builder.new_rule("root");
  JsonRules rules(builder, options.max_whitespace);
  bool needs_end = false;
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const FramedSchema& framed = alternatives[i];
    SchemaCompiler compiler(framed.schema, rules);
    const SchemaCompiler::Compiled value =
        compiler.compile(framed.schema, alternatives.size() == 1 ? "$" : fmt::format("$[{}]", i), 0);
    Sequence sequence = builder.literal(framed.prefix);
    sequence.push_back(value.symbol);
    builder.append_literal(sequence, framed.suffix);
    builder.add_alternative(root, sequence);
    needs_end = needs_end || (value.open_ended && framed.suffix.empty());
  }
  return std::make_shared<const Grammar>(builder.build(root, needs_end));
}

}  // namespace

std::shared_ptr<const Grammar> json_schema_grammar(const ordered_json& schema, const JsonGrammarOptions& options) {
  const FramedSchema framed{"", schema, ""};
  return build_framed({&framed, 1}, options);
}

std::shared_ptr<const Grammar> json_object_grammar(const JsonGrammarOptions& options) {
  return json_schema_grammar(ordered_json{{"type", "object"}}, options);
}

std::shared_ptr<const Grammar> framed_json_grammar(std::span<const FramedSchema> alternatives,
                                                   const JsonGrammarOptions& options) {
  return build_framed(alternatives, options);
}

}  // namespace nvfp4lm::constrain
