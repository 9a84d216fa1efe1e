// See grammar.h.
#include "infer/constrain/grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

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

size_t Grammar::memory_bytes() const {
  size_t bytes = sizeof(*this) + elements_.capacity() * sizeof(Element) +
                 (alternative_starts_.capacity() + rule_offsets_.capacity() + rest_bytes_.capacity() +
                  rule_min_bytes_.capacity()) *
                     sizeof(int32_t) +
                 byte_sets_.capacity() * sizeof(ByteSet) + rule_names_.capacity() * sizeof(std::string);
  for (const std::string& name : rule_names_) bytes += name.capacity() > 15 ? name.capacity() + 1 : 0;
  return bytes;
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
  NVFP4LM_CHECK(symbols_ <= kMaxGrammarSymbols,
                "the grammar would hold {} symbols, more than the {} one answer's grammar may (a smaller schema?)",
                symbols_, kMaxGrammarSymbols);

  // Minimal lengths, and which rules match a finite text at all: Knuth's generalisation of Dijkstra's algorithm
  // (Inf. Process. Lett. 6(1), 1977), since a sequence's length is a sum, which never falls below its parts. Rules are
  // settled shortest first; an alternative is ready when every rule in it is settled, and then offers its owner its
  // length. O(size log size): a fixed point by passes took one pass per link of a chain (N optional properties of a
  // json_schema: N passes over N rules, 36 s for 20,000; issue 52). A rule never settled only recurses; one settled at
  // kUnboundedBytes has a shortest text past 2 GiB.
  std::vector<int32_t> min_bytes(rules, kUnboundedBytes);
  std::vector<uint8_t> finite(rules, 0);
  {
    struct Alternative {
      size_t owner;
      int32_t length = 0;  // bytes plus the settled rules' lengths so far
      size_t pending = 0;  // rule symbols not settled yet
    };
    std::vector<Alternative> alternatives;
    std::vector<std::vector<size_t>> used_in(rules);  // rule -> alternatives it appears in, once per appearance
    for (size_t rule = 0; rule < rules; ++rule)
      for (const Sequence& sequence : rules_[rule]) {
        Alternative alternative{rule};
        for (const Symbol& symbol : sequence) {
          if (symbol.kind == Symbol::Kind::Bytes) {
            alternative.length = add_saturating(alternative.length, 1);
          } else {
            ++alternative.pending;
            used_in[static_cast<size_t>(symbol.index)].push_back(alternatives.size());
          }
        }
        alternatives.push_back(alternative);
      }
    using Offer = std::pair<int32_t, size_t>;  // length, rule
    std::priority_queue<Offer, std::vector<Offer>, std::greater<>> offers;
    for (const Alternative& alternative : alternatives)
      if (alternative.pending == 0) offers.emplace(alternative.length, alternative.owner);
    while (!offers.empty()) {
      const auto [length, rule] = offers.top();
      offers.pop();
      if (finite[rule]) continue;
      finite[rule] = 1;
      min_bytes[rule] = length;
      for (size_t index : used_in[rule]) {
        Alternative& alternative = alternatives[index];
        alternative.length = add_saturating(alternative.length, length);
        if (--alternative.pending == 0 && !finite[alternative.owner])
          offers.emplace(alternative.length, alternative.owner);
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
      const size_t first = grammar.rest_bytes_.size();
      for (const Symbol& symbol : alternative) {
        grammar.elements_.push_back(
            {symbol.kind == Symbol::Kind::Bytes ? Grammar::Element::Kind::Bytes : Grammar::Element::Kind::Rule,
             symbol.index});
        grammar.rest_bytes_.push_back(0);
      }
      // rest_bytes_: the fewest bytes from each symbol to the end of its alternative, summed from the end.
      int32_t rest = 0;
      for (size_t i = alternative.size(); i-- > 0;) {
        const Symbol& symbol = alternative[i];
        rest =
            add_saturating(rest, symbol.kind == Symbol::Kind::Bytes ? 1 : min_bytes[static_cast<size_t>(symbol.index)]);
        grammar.rest_bytes_[first + i] = rest;
      }
      grammar.elements_.push_back({Grammar::Element::Kind::End, 0});
      grammar.rest_bytes_.push_back(0);
    }
    grammar.rule_offsets_.push_back(static_cast<int32_t>(grammar.alternative_starts_.size()));
  }
  return grammar;
}

}  // namespace nvfp4lm::constrain
