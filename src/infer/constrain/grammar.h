// A context-free grammar over bytes, the form every constraint (JSON Schema, "any JSON object", framed tool calls)
// is compiled to before generation, and what the matcher (grammar_matcher.h) runs.
//
// Shape (the one llama.cpp's GBNF sampler uses): rules, each a list of alternatives, each alternative a sequence of
// symbols; a symbol is a set of bytes (matches one byte) or a reference to a rule. Repetition is written as right
// recursion (`items ::= item items | ""`), which the matcher runs as a tail call, so its stacks stay shallow.
// Left recursion (a rule that can reach itself without consuming a byte) is refused at build time: the matcher
// expands references eagerly and would never stop.
//
// Every rule also gets its minimal completion length in bytes (the shortest text it matches), and every position
// inside an alternative the bytes still needed to finish that alternative. The matcher adds these up along a stack
// to know how few bytes can still close the value — what keeps a constrained answer inside its token budget.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nvfp4lm::constrain {

// A length in bytes no text reaches: a rule that only recurses, or no completion known yet.
inline constexpr int32_t kUnboundedBytes = std::numeric_limits<int32_t>::max();
// a + b, kUnboundedBytes when either is or the sum would pass it.
constexpr int32_t add_saturating(int32_t a, int32_t b) {
  return (a == kUnboundedBytes || b == kUnboundedBytes || a > kUnboundedBytes - b) ? kUnboundedBytes : a + b;
}

struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet of(uint8_t byte) { return ByteSet{}.add(byte); }
  static ByteSet range(uint8_t low, uint8_t high) { return ByteSet{}.add_range(low, high); }
  ByteSet& add(uint8_t byte) {
    words[byte >> 6] |= uint64_t{1} << (byte & 63);
    return *this;
  }
  ByteSet& add_range(uint8_t low, uint8_t high);
  ByteSet& remove(uint8_t byte) {
    words[byte >> 6] &= ~(uint64_t{1} << (byte & 63));
    return *this;
  }
  bool contains(uint8_t byte) const { return (words[byte >> 6] >> (byte & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

// A symbol of an alternative while a grammar is being built.
struct Symbol {
  enum class Kind : uint8_t { Bytes, Rule };
  Kind kind = Kind::Bytes;
  int32_t index = 0;  // a byte set (GrammarBuilder::bytes) or a rule id
};
using Sequence = std::vector<Symbol>;

// The most symbols one grammar may hold: about 12 bytes each once built, plus the rules' names, so a request's
// response_format or tools cannot make one grammar of more than ~60 MB (24 queued 4 MB schemas held 2.24 GB; issue 52).
inline constexpr size_t kMaxGrammarSymbols = size_t{4} << 20;

// A built grammar: alternatives flattened into one element array, each alternative ended by an End element.
class Grammar {
 public:
  struct Element {
    enum class Kind : uint8_t { End, Bytes, Rule };
    Kind kind = Kind::End;
    int32_t index = 0;  // byte set or rule id
  };

  int32_t root() const { return root_; }
  const std::vector<Element>& elements() const { return elements_; }
  // The first element of each alternative of `rule`.
  std::span<const int32_t> alternatives(int32_t rule) const;
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[static_cast<size_t>(index)]; }
  const std::string& rule_name(int32_t rule) const { return rule_names_[static_cast<size_t>(rule)]; }
  size_t rule_count() const { return rule_names_.size(); }
  // Bytes still needed to finish the alternative that element `element` is in, from that element on.
  int32_t rest_bytes(int32_t element) const { return rest_bytes_[static_cast<size_t>(element)]; }
  // The shortest text the root matches, in bytes.
  int32_t min_bytes() const { return rule_min_bytes_[static_cast<size_t>(root_)]; }
  // Whether a complete text may still go on (a number: "12" then "3"), so the end must be said with an
  // end-of-sequence token; false when the text ends itself once complete ("}" closes an object).
  bool needs_end_token() const { return needs_end_token_; }
  // The rules in a GBNF-like notation, for messages and tests.
  std::string describe() const;
  // The bytes the grammar holds (for the server's budget of waiting requests' grammars).
  size_t memory_bytes() const;

 private:
  friend class GrammarBuilder;
  int32_t root_ = 0;
  std::vector<Element> elements_;
  std::vector<int32_t> alternative_starts_;  // rule r's alternatives: [rule_offsets_[r], rule_offsets_[r + 1])
  std::vector<int32_t> rule_offsets_;
  std::vector<ByteSet> byte_sets_;
  std::vector<std::string> rule_names_;
  std::vector<int32_t> rest_bytes_;
  std::vector<int32_t> rule_min_bytes_;
  bool needs_end_token_ = true;
};

class GrammarBuilder {
 public:
  // A new rule without alternatives yet (so rules may refer to each other before they are defined).
  int32_t new_rule(std::string name);
  void add_alternative(int32_t rule, Sequence sequence);
  bool has_alternatives(int32_t rule) const { return !rules_[static_cast<size_t>(rule)].empty(); }

  Symbol bytes(const ByteSet& set);  // equal sets share one index
  Symbol byte(uint8_t value) { return bytes(ByteSet::of(value)); }
  static Symbol rule(int32_t id) { return {Symbol::Kind::Rule, id}; }
  // Appends one symbol per byte of `text`.
  void append_literal(Sequence& sequence, std::string_view text);
  Sequence literal(std::string_view text) {
    Sequence sequence;
    append_literal(sequence, text);
    return sequence;
  }
  size_t symbol_count() const { return symbols_; }

  // Error when a rule has no alternative, matches no finite text, or is left-recursive (names the rule), or when the
  // grammar holds more than kMaxGrammarSymbols symbols.
  Grammar build(int32_t root, bool needs_end_token) const;

 private:
  std::vector<std::vector<Sequence>> rules_;
  std::vector<std::string> names_;
  std::vector<ByteSet> byte_sets_;
  size_t symbols_ = 0;
};

}  // namespace nvfp4lm::constrain
