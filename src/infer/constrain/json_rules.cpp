// See json_rules.h.
#include "infer/constrain/json_rules.h"

#include <fmt/format.h>

#include "core/error.h"

namespace nvfp4lm::constrain {
namespace {

ByteSet hex_digits() { return ByteSet::range('0', '9').add_range('a', 'f').add_range('A', 'F'); }
ByteSet key_chars() { return ByteSet::range('0', '9').add_range('a', 'z').add_range('A', 'Z').add('_').add('-'); }

}  // namespace

JsonRules::JsonRules(GrammarBuilder& builder, int max_whitespace)
    : builder_(builder), max_whitespace_(max_whitespace) {}

int32_t JsonRules::cached(const std::string& name, const std::function<void(int32_t)>& define) {
  if (const auto found = rules_.find(name); found != rules_.end()) return found->second;
  const int32_t rule = builder_.new_rule(name);
  rules_[name] = rule;  // before defining it: a definition may refer to itself
  define(rule);
  return rule;
}

Symbol JsonRules::whitespace() {
  return GrammarBuilder::rule(cached("ws", [&](int32_t rule) {
    const Symbol space = builder_.bytes(ByteSet::of(' ').add('\n').add('\t'));
    for (int count = 0; count <= max_whitespace_; ++count) builder_.add_alternative(rule, Sequence(count, space));
  }));
}

Symbol JsonRules::string_char() {
  return GrammarBuilder::rule(cached("char", [&](int32_t rule) {
    GrammarBuilder& b = builder_;
    auto tail = [&] { return b.bytes(ByteSet::range(0x80, 0xbf)); };
    // Unescaped: anything from 0x20 but '"' and '\\'; then the well-formed UTF-8 sequences (RFC 3629 table).
    b.add_alternative(rule, {b.bytes(ByteSet::range(0x20, 0x7f).remove('"').remove('\\'))});
    b.add_alternative(rule, {b.bytes(ByteSet::range(0xc2, 0xdf)), tail()});
    b.add_alternative(rule, {b.byte(0xe0), b.bytes(ByteSet::range(0xa0, 0xbf)), tail()});
    b.add_alternative(rule, {b.bytes(ByteSet::range(0xe1, 0xec).add_range(0xee, 0xef)), tail(), tail()});
    b.add_alternative(rule, {b.byte(0xed), b.bytes(ByteSet::range(0x80, 0x9f)), tail()});
    b.add_alternative(rule, {b.byte(0xf0), b.bytes(ByteSet::range(0x90, 0xbf)), tail(), tail()});
    b.add_alternative(rule, {b.bytes(ByteSet::range(0xf1, 0xf3)), tail(), tail(), tail()});
    b.add_alternative(rule, {b.byte(0xf4), b.bytes(ByteSet::range(0x80, 0x8f)), tail(), tail()});
    const int32_t escape = b.new_rule("escape");
    b.add_alternative(rule, {b.byte('\\'), GrammarBuilder::rule(escape)});
    b.add_alternative(escape,
                      {b.bytes(ByteSet::of('"').add('\\').add('/').add('b').add('f').add('n').add('r').add('t'))});
    const Symbol hex = b.bytes(hex_digits());
    // \uXXXX outside the surrogates, or a high surrogate escape followed by a low one.
    b.add_alternative(escape, {b.byte('u'), b.bytes(hex_digits().remove('d').remove('D')), hex, hex, hex});
    b.add_alternative(escape,
                      {b.byte('u'), b.bytes(ByteSet::of('d').add('D')), b.bytes(ByteSet::range('0', '7')), hex, hex});
    b.add_alternative(escape, {b.byte('u'), b.bytes(ByteSet::of('d').add('D')),
                               b.bytes(ByteSet::range('8', '9').add_range('a', 'b').add_range('A', 'B')), hex, hex,
                               b.byte('\\'), b.byte('u'), b.bytes(ByteSet::of('d').add('D')),
                               b.bytes(ByteSet::range('c', 'f').add_range('C', 'F')), hex, hex});
  }));
}

Symbol JsonRules::string(int64_t min_length, std::optional<int64_t> max_length) {
  NVFP4LM_ASSERT(min_length >= 0 && min_length <= kMaxStringLengthBound, "string min length {}", min_length);
  NVFP4LM_ASSERT(!max_length || (*max_length >= min_length && *max_length <= kMaxStringLengthBound),
                 "string max length");
  const std::string name =
      fmt::format("string{}_{}", min_length, max_length ? std::to_string(*max_length) : std::string("inf"));
  return GrammarBuilder::rule(cached(name, [&](int32_t rule) {
    // body k: k code points written; '"' ends it once k >= min_length, another character while k < max_length.
    // Unbounded: the bodies from min_length on are one self-recursive rule.
    const int64_t last = max_length ? *max_length : min_length;
    std::vector<int32_t> bodies;
    for (int64_t k = 0; k <= last; ++k) bodies.push_back(builder_.new_rule(fmt::format("{}_body{}", name, k)));
    const Symbol character = string_char();
    for (int64_t k = 0; k <= last; ++k) {
      const int32_t body = bodies[static_cast<size_t>(k)];
      if (k >= min_length) builder_.add_alternative(body, {builder_.byte('"')});
      if (k < last)
        builder_.add_alternative(body, {character, GrammarBuilder::rule(bodies[static_cast<size_t>(k + 1)])});
      if (k == last && !max_length) builder_.add_alternative(body, {character, GrammarBuilder::rule(body)});
    }
    builder_.add_alternative(rule, {builder_.byte('"'), GrammarBuilder::rule(bodies[0])});
  }));
}

int32_t JsonRules::digits_between(const std::string& low, const std::string& high) {
  return cached("digits_" + low + "_" + high, [&](int32_t rule) {
    if (low.empty()) {
      builder_.add_alternative(rule, {});
      return;
    }
    const std::string low_rest = low.substr(1), high_rest = high.substr(1);
    if (low[0] == high[0]) {
      builder_.add_alternative(rule, {builder_.byte(static_cast<uint8_t>(low[0])),
                                      GrammarBuilder::rule(digits_between(low_rest, high_rest))});
      return;
    }
    const std::string zeros(low_rest.size(), '0'), nines(low_rest.size(), '9');
    builder_.add_alternative(
        rule, {builder_.byte(static_cast<uint8_t>(low[0])), GrammarBuilder::rule(digits_between(low_rest, nines))});
    if (low[0] + 1 <= high[0] - 1)
      builder_.add_alternative(
          rule, {builder_.bytes(ByteSet::range(static_cast<uint8_t>(low[0] + 1), static_cast<uint8_t>(high[0] - 1))),
                 GrammarBuilder::rule(digits_between(zeros, nines))});
    builder_.add_alternative(
        rule, {builder_.byte(static_cast<uint8_t>(high[0])), GrammarBuilder::rule(digits_between(zeros, high_rest))});
  });
}

int32_t JsonRules::non_negative(int64_t low, int64_t high) {
  return cached(fmt::format("uint_{}_{}", low, high), [&](int32_t rule) {
    // One alternative per digit count: [max(low, 10^(n-1)), min(high, 10^n - 1)] has n digits throughout.
    int64_t first = 0, last = 9;
    for (int digits = 1; digits <= 15; ++digits) {
      const int64_t from = std::max(low, first), to = std::min(high, last);
      if (from <= to)
        builder_.add_alternative(rule,
                                 {GrammarBuilder::rule(digits_between(std::to_string(from), std::to_string(to)))});
      first = last + 1;
      last = last * 10 + 9;
    }
  });
}

Symbol JsonRules::integer(int64_t min, int64_t max) {
  NVFP4LM_ASSERT(min <= max && min >= -kMaxIntegerMagnitude && max <= kMaxIntegerMagnitude, "integer range {}..{}", min,
                 max);
  return GrammarBuilder::rule(cached(fmt::format("integer_{}_{}", min, max), [&](int32_t rule) {
    if (max >= 0) builder_.add_alternative(rule, {GrammarBuilder::rule(non_negative(std::max<int64_t>(min, 0), max))});
    if (min < 0)  // magnitudes of the negative part; "-0" is never written
      builder_.add_alternative(rule,
                               {builder_.byte('-'), GrammarBuilder::rule(non_negative(max < 0 ? -max : 1, -min))});
  }));
}

Symbol JsonRules::number() {
  return GrammarBuilder::rule(cached("number", [&](int32_t rule) {
    GrammarBuilder& b = builder_;
    const Symbol magnitude = GrammarBuilder::rule(non_negative(0, kMaxIntegerMagnitude));
    const Symbol digit = b.bytes(ByteSet::range('0', '9'));
    // digits_k: up to k more digits.
    auto optional_digits = [&](int count) {
      int32_t next = b.new_rule("digits_upto0");
      b.add_alternative(next, {});
      for (int k = 1; k <= count; ++k) {
        const int32_t more = b.new_rule(fmt::format("digits_upto{}", k));
        b.add_alternative(more, {});
        b.add_alternative(more, {digit, GrammarBuilder::rule(next)});
        next = more;
      }
      return GrammarBuilder::rule(next);
    };
    const int32_t fraction = b.new_rule("fraction");
    b.add_alternative(fraction, {});
    b.add_alternative(fraction, {b.byte('.'), digit, optional_digits(14)});
    const int32_t exponent = b.new_rule("exponent");
    b.add_alternative(exponent, {});
    const Symbol e = b.bytes(ByteSet::of('e').add('E'));
    const Symbol exponent_digits = optional_digits(1);
    b.add_alternative(exponent, {e, digit, exponent_digits});
    b.add_alternative(exponent, {e, b.bytes(ByteSet::of('+').add('-')), digit, exponent_digits});
    b.add_alternative(rule, {magnitude, GrammarBuilder::rule(fraction), GrammarBuilder::rule(exponent)});
    b.add_alternative(rule, {b.byte('-'), magnitude, GrammarBuilder::rule(fraction), GrammarBuilder::rule(exponent)});
  }));
}

Symbol JsonRules::boolean() {
  return GrammarBuilder::rule(cached("boolean", [&](int32_t rule) {
    builder_.add_alternative(rule, builder_.literal("true"));
    builder_.add_alternative(rule, builder_.literal("false"));
  }));
}

Symbol JsonRules::null() {
  return GrammarBuilder::rule(
      cached("null", [&](int32_t rule) { builder_.add_alternative(rule, builder_.literal("null")); }));
}

Symbol JsonRules::literal_value(const nlohmann::json& value) {
  const std::string text = value.dump();
  return GrammarBuilder::rule(
      cached("literal " + text, [&](int32_t rule) { builder_.add_alternative(rule, builder_.literal(text)); }));
}

Symbol JsonRules::any_value() {
  return GrammarBuilder::rule(cached("value", [&](int32_t rule) {
    GrammarBuilder& b = builder_;
    const Symbol ws = whitespace(), value = GrammarBuilder::rule(rule);
    // array ::= '[' ws (']' | value ws items); items ::= ']' | ',' ws value ws items
    const int32_t array = b.new_rule("array"), items = b.new_rule("array_items");
    b.add_alternative(array, {b.byte('['), ws, b.byte(']')});
    b.add_alternative(array, {b.byte('['), ws, value, ws, GrammarBuilder::rule(items)});
    b.add_alternative(items, {b.byte(']')});
    b.add_alternative(items, {b.byte(','), ws, value, ws, GrammarBuilder::rule(items)});
    b.add_alternative(rule, {any_object()});
    b.add_alternative(rule, {GrammarBuilder::rule(array)});
    b.add_alternative(rule, {string(0, std::nullopt)});
    b.add_alternative(rule, {number()});
    b.add_alternative(rule, {boolean()});
    b.add_alternative(rule, {null()});
  }));
}

Symbol JsonRules::any_object() {
  return GrammarBuilder::rule(cached("object", [&](int32_t rule) {
    GrammarBuilder& b = builder_;
    const Symbol ws = whitespace();
    // object ::= '{' ws ('}' | member ws members); members ::= '}' | ',' ws member ws members
    const int32_t member = b.new_rule("member"), members = b.new_rule("members");
    b.add_alternative(member, {string(0, std::nullopt), ws, b.byte(':'), ws, any_value()});
    b.add_alternative(rule, {b.byte('{'), ws, b.byte('}')});
    b.add_alternative(rule, {b.byte('{'), ws, GrammarBuilder::rule(member), ws, GrammarBuilder::rule(members)});
    b.add_alternative(members, {b.byte('}')});
    b.add_alternative(members, {b.byte(','), ws, GrammarBuilder::rule(member), ws, GrammarBuilder::rule(members)});
  }));
}

Symbol JsonRules::other_key(const std::vector<std::string>& excluded) {
  std::string name = "other_key";
  for (const auto& key : excluded) name += "|" + key;
  return GrammarBuilder::rule(cached(name, [&](int32_t rule) {
    GrammarBuilder& b = builder_;
    const ByteSet allowed = key_chars();
    const int32_t free = b.new_rule("key_free");  // past any excluded name: any key characters, then '"'
    b.add_alternative(free, {b.byte('"')});
    b.add_alternative(free, {b.bytes(allowed), GrammarBuilder::rule(free)});
    // The excluded names as a prefix tree; at each node: continue along a name, leave the tree with a character no
    // name has there, or end when the prefix itself is not excluded (and not empty).
    auto node = [&](auto&& self, const std::string& prefix) -> int32_t {
      const int32_t at = b.new_rule("key_" + prefix);
      ByteSet children;
      bool is_name = false;
      for (const auto& key : excluded) {
        if (key.size() < prefix.size() || key.compare(0, prefix.size(), prefix) != 0) continue;
        if (key.size() == prefix.size())
          is_name = true;
        else
          children.add(static_cast<uint8_t>(key[prefix.size()]));
      }
      if (!is_name && !prefix.empty()) b.add_alternative(at, {b.byte('"')});
      ByteSet others = allowed;
      for (int c = 0; c < 256; ++c) {
        if (!children.contains(static_cast<uint8_t>(c))) continue;
        others.remove(static_cast<uint8_t>(c));
        if (allowed.contains(static_cast<uint8_t>(c)))
          b.add_alternative(
              at, {b.byte(static_cast<uint8_t>(c)), GrammarBuilder::rule(self(self, prefix + static_cast<char>(c)))});
      }
      if (!others.empty()) b.add_alternative(at, {b.bytes(others), GrammarBuilder::rule(free)});
      return at;
    };
    b.add_alternative(rule, {b.byte('"'), GrammarBuilder::rule(node(node, ""))});
  }));
}

}  // namespace nvfp4lm::constrain
