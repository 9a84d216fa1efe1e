// See grammar.h.
#include "infer/constrain/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace nvfp4lm::constrain {
namespace {

std::string describe_set(const ByteSet& set) {
  auto shown = [](int byte) {
    if (byte >= 0x21 && byte < 0x7f && byte != '\\' && byte != ']' && byte != '-') return std::string(1, char(byte));
    return fmt::format("\\x{:02x}", byte);
  };
  int count = 0;
  for (int byte = 0; byte < 256; ++byte) count += set.contains(static_cast<uint8_t>(byte));
  if (count == 1)
    for (int byte = 0; byte < 256; ++byte)
      if (set.contains(static_cast<uint8_t>(byte))) return fmt::format("'{}'", shown(byte));
  std::string text = "[";
  for (int byte = 0; byte < 256;) {
    if (!set.contains(static_cast<uint8_t>(byte))) {
      ++byte;
      continue;
    }
    int last = byte;
    while (last + 1 < 256 && set.contains(static_cast<uint8_t>(last + 1))) ++last;
    text += last == byte ? shown(byte) : fmt::format("{}-{}", shown(byte), shown(last));
    byte = last + 1;
  }
  return text + "]";
}

}  // namespace

ByteSet& ByteSet::add_range(uint8_t low, uint8_t high) {
  for (int byte = low; byte <= high; ++byte) add(static_cast<uint8_t>(byte));
  return *this;
}

std::span<const int32_t> Grammar::alternatives(int32_t rule) const {
  const auto begin = static_cast<size_t>(rule_offsets_[static_cast<size_t>(rule)]);
  const auto end = static_cast<size_t>(rule_offsets_[static_cast<size_t>(rule) + 1]);
  return std::span<const int32_t>(alternative_starts_).subspan(begin, end - begin);
}

std::string Grammar::describe() const {
  std::string text;
  for (size_t rule = 0; rule < rule_names_.size(); ++rule) {
    text += rule_names_[rule] + " ::=";
    bool first = true;
    for (int32_t start : alternatives(static_cast<int32_t>(rule))) {
      text += first ? " " : " | ";
      first = false;
      if (elements_[static_cast<size_t>(start)].kind == Element::Kind::End) text += "\"\"";
      for (auto at = static_cast<size_t>(start); elements_[at].kind != Element::Kind::End; ++at) {
        if (static_cast<int32_t>(at) != start) text += " ";
        const Element& element = elements_[at];
        text += element.kind == Element::Kind::Rule ? rule_names_[static_cast<size_t>(element.index)]
                                                    : describe_set(byte_sets_[static_cast<size_t>(element.index)]);
      }
    }
    text += "\n";
  }
  return text;
}

int32_t GrammarBuilder::new_rule(std::string name) {
  rules_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<int32_t>(rules_.size() - 1);
}

void GrammarBuilder::add_alternative(int32_t rule, Sequence sequence) {
  symbols_ += sequence.size() + 1;
  rules_[static_cast<size_t>(rule)].push_back(std::move(sequence));
}

Symbol GrammarBuilder::bytes(const ByteSet& set) {
  NVFP4LM_ASSERT(!set.empty(), "an empty byte set matches nothing");
  const auto found = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  if (found != byte_sets_.end()) return {Symbol::Kind::Bytes, static_cast<int32_t>(found - byte_sets_.begin())};
  byte_sets_.push_back(set);
  return {Symbol::Kind::Bytes, static_cast<int32_t>(byte_sets_.size() - 1)};
}

void GrammarBuilder::append_literal(Sequence& sequence, std::string_view text) {
  for (char c : text) sequence.push_back(byte(static_cast<uint8_t>(c)));
}

Grammar GrammarBuilder::build(int32_t root, bool needs_end_token) const {
  const size_t rules = rules_.size();
  NVFP4LM_ASSERT(root >= 0 && static_cast<size_t>(root) < rules, "grammar root {} of {} rules", root, rules);
  for (size_t rule = 0; rule < rules; ++rule)
    NVFP4LM_CHECK(!rules_[rule].empty(), "grammar rule '{}' has no alternative", names_[rule]);

  // Minimal lengths: a fixed point from "unbounded" down (each pass can only lower a rule's minimum).
  std::vector<int32_t> min_bytes(rules, kUnboundedBytes);
  auto sequence_min = [&](const Sequence& sequence, size_t from) {
    int32_t total = 0;
    for (size_t i = from; i < sequence.size(); ++i)
      total = add_saturating(
          total, sequence[i].kind == Symbol::Kind::Bytes ? 1 : min_bytes[static_cast<size_t>(sequence[i].index)]);
    return total;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t rule = 0; rule < rules; ++rule)
      for (const Sequence& alternative : rules_[rule]) {
        const int32_t length = sequence_min(alternative, 0);
        if (length < min_bytes[rule]) {
          min_bytes[rule] = length;
          changed = true;
        }
      }
  }
  // A minimum that saturated is either a rule that only recurses or one whose shortest text passes 2 GiB (a schema's
  // minLength of a billion): which one, a second fixed point without lengths says (a rule is finite when one of its
  // alternatives holds bytes and finite rules only).
  std::vector<uint8_t> finite(rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t rule = 0; rule < rules; ++rule) {
      if (finite[rule]) continue;
      for (const Sequence& alternative : rules_[rule]) {
        const bool all = std::all_of(alternative.begin(), alternative.end(), [&](const Symbol& symbol) {
          return symbol.kind == Symbol::Kind::Bytes || finite[static_cast<size_t>(symbol.index)];
        });
        if (all) {
          finite[rule] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  for (size_t rule = 0; rule < rules; ++rule) {
    NVFP4LM_CHECK(finite[rule], "grammar rule '{}' matches no finite text (it only recurses)", names_[rule]);
    NVFP4LM_CHECK(min_bytes[rule] != kUnboundedBytes,
                  "grammar rule '{}' matches nothing shorter than 2 GiB (its shortest text is longer than any answer "
                  "can be: a minimum length or count too large?)",
                  names_[rule]);
  }

  // Left recursion: rule r "starts with" s when s follows only nullable rules at the start of an alternative of r.
  std::vector<std::vector<int32_t>> starts_with(rules);
  for (size_t rule = 0; rule < rules; ++rule)
    for (const Sequence& alternative : rules_[rule])
      for (const Symbol& symbol : alternative) {
        if (symbol.kind == Symbol::Kind::Bytes) break;
        starts_with[rule].push_back(symbol.index);
        if (min_bytes[static_cast<size_t>(symbol.index)] > 0) break;
      }
  std::vector<uint8_t> color(rules, 0);  // 0 unvisited, 1 on the path, 2 done
  auto visit = [&](auto&& self, size_t rule) -> void {
    color[rule] = 1;
    for (int32_t next : starts_with[rule]) {
      const auto at = static_cast<size_t>(next);
      NVFP4LM_CHECK(color[at] != 1, "grammar rule '{}' is left-recursive (it reaches '{}' without a byte)",
                    names_[rule], names_[at]);
      if (color[at] == 0) self(self, at);
    }
    color[rule] = 2;
  };
  for (size_t rule = 0; rule < rules; ++rule)
    if (color[rule] == 0) visit(visit, rule);

  Grammar grammar;
  grammar.root_ = root;
  grammar.byte_sets_ = byte_sets_;
  grammar.rule_names_ = names_;
  grammar.rule_min_bytes_ = min_bytes;
  grammar.needs_end_token_ = needs_end_token;
  grammar.elements_.reserve(symbols_);
  grammar.rest_bytes_.reserve(symbols_);
  grammar.rule_offsets_.push_back(0);
  for (size_t rule = 0; rule < rules; ++rule) {
    for (const Sequence& alternative : rules_[rule]) {
      grammar.alternative_starts_.push_back(static_cast<int32_t>(grammar.elements_.size()));
      for (size_t i = 0; i < alternative.size(); ++i) {
        const Symbol& symbol = alternative[i];
        grammar.elements_.push_back(
            {symbol.kind == Symbol::Kind::Bytes ? Grammar::Element::Kind::Bytes : Grammar::Element::Kind::Rule,
             symbol.index});
        grammar.rest_bytes_.push_back(sequence_min(alternative, i));
      }
      grammar.elements_.push_back({Grammar::Element::Kind::End, 0});
      grammar.rest_bytes_.push_back(0);
    }
    grammar.rule_offsets_.push_back(static_cast<int32_t>(grammar.alternative_starts_.size()));
  }
  return grammar;
}

}  // namespace nvfp4lm::constrain
