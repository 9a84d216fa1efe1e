// See tokenizer_json_reader.h. The handler keeps a stack of the DOM containers it is filling; when the value
// about to start is root["model"]["vocab"] or ["merges"], it stores null in the DOM and switches to a mode
// that appends the entries to the pools instead.
#include "tokenizer/tokenizer_json_reader.h"

#include <limits>

#include "core/error.h"
#include "core/json_text.h"

namespace nvfp4lm::tokenizer {
namespace {

using json = nlohmann::json;

// SAX handler: model.vocab and model.merges are captured into pools; everything else builds parts.rest.
class TokenizerJsonHandler : public nlohmann::json_sax<json> {
 public:
  explicit TokenizerJsonHandler(std::string origin) : origin_(std::move(origin)) {}

  TokenizerJsonParts parts;
  std::string error;

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab)
      return vocab_id(v > static_cast<uint64_t>(kMaxTokenId) ? kMaxTokenId : static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ != Mode::Dom) fail_entry("a number that is not an integer");
    return value(json(v));
  }
  bool string(string_t& v) override {
    if (mode_ == Mode::Vocab) fail_entry("a string where an id was expected");
    if (mode_ == Mode::Merges) return merge_string(v);
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return value(json(nullptr)); }
  bool start_object(std::size_t) override {
    if (mode_ == Mode::Vocab || mode_ == Mode::Merges) fail_entry("an object");
    if (entering("vocab")) {
      mode_ = Mode::Vocab;
      parts.has_vocab = true;
      return value(json(nullptr));
    }
    return open(json::object());
  }
  bool key(string_t& k) override {
    if (mode_ == Mode::Vocab) {
      pending_vocab_ = append(parts.vocab_pool, k);
      return true;
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::Dom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab) fail_entry("an array where an id was expected");
    if (mode_ == Mode::Merges) {
      NVFP4LM_CHECK(!in_merge_pair_, "{}: model.merges[{}] is nested too deeply; expected [\"a\", \"b\"]", origin_,
                    parts.merges.size());
      in_merge_pair_ = true;
      pair_parts_ = 0;
      return true;
    }
    if (entering("merges")) {
      mode_ = Mode::Merges;
      parts.has_merges = true;
      return value(json(nullptr));
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::Merges) {
      if (in_merge_pair_) {
        NVFP4LM_CHECK(pair_parts_ == 2, "{}: model.merges[{}] has {} strings, expected 2", origin_, parts.merges.size(),
                      pair_parts_);
        parts.merges.push_back({pair_[0], pair_[1]});
        in_merge_pair_ = false;
      } else {
        mode_ = Mode::Dom;
      }
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    std::string reason = e.what();
    if (reason.size() > 240) reason = reason.substr(0, 240) + "...";
    error = fmt::format("{}: invalid JSON near byte {}: {}", origin_, position, reason);
    return false;
  }

 private:
  enum class Mode { Dom, Vocab, Merges };

  // True when the value about to start is root["model"][name].
  bool entering(const char* name) const {
    return mode_ == Mode::Dom && containers_.size() == 2 && container_keys_[1] == "model" && key_ == name &&
           containers_[1]->is_object();
  }
  static PoolSpan append(std::string& pool, std::string_view s) {
    NVFP4LM_CHECK(pool.size() + s.size() < std::numeric_limits<uint32_t>::max(), "tokenizer.json is too large");
    PoolSpan span{static_cast<uint32_t>(pool.size()), static_cast<uint32_t>(s.size())};
    pool.append(s);
    return span;
  }
  bool vocab_id(int64_t id) {
    NVFP4LM_CHECK(id >= 0 && id < kMaxTokenId, "{}: model.vocab entry {} has id {}, expected 0..{}", origin_,
                  std::string_view(parts.vocab_pool).substr(pending_vocab_.offset, pending_vocab_.length), id,
                  kMaxTokenId - 1);
    parts.vocab.push_back({pending_vocab_, id});
    return true;
  }
  bool merge_string(const std::string& s) {
    if (in_merge_pair_) {
      NVFP4LM_CHECK(pair_parts_ < 2, "{}: model.merges[{}] has more than 2 strings", origin_, parts.merges.size());
      pair_[pair_parts_++] = append(parts.merges_pool, s);
      return true;
    }
    // Older format: "a b" with exactly one space.
    size_t space = s.find(' ');
    NVFP4LM_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                  "{}: model.merges[{}] is \"{}\", expected two tokens separated by one space", origin_,
                  parts.merges.size(), s.substr(0, 80));
    parts.merges.push_back({append(parts.merges_pool, std::string_view(s).substr(0, space)),
                            append(parts.merges_pool, std::string_view(s).substr(space + 1))});
    return true;
  }
  [[noreturn]] void fail_entry(const char* what) const {
    NVFP4LM_FAIL("{}: model.{} contains {}", origin_, mode_ == Mode::Vocab ? "vocab" : "merges", what);
  }
  bool value(json v) {
    if (containers_.empty()) {
      parts.rest = std::move(v);
    } else if (containers_.back()->is_object()) {
      (*containers_.back())[key_] = std::move(v);
    } else {
      containers_.back()->push_back(std::move(v));
    }
    return true;
  }
  bool open(json v) {
    // nlohmann's DOM recurses per level when copied or destroyed: limit nesting like parse_json does.
    NVFP4LM_CHECK(containers_.size() < static_cast<size_t>(kMaxJsonDepth),
                  "{}: JSON nested deeper than {} levels; not a tokenizer.json", origin_, kMaxJsonDepth);
    std::string key = containers_.empty() || !containers_.back()->is_object() ? std::string() : key_;
    value(std::move(v));
    json* child = containers_.empty()               ? &parts.rest
                  : containers_.back()->is_object() ? &(*containers_.back())[key]
                                                    : &containers_.back()->back();
    containers_.push_back(child);
    container_keys_.push_back(std::move(key));
    return true;
  }
  bool close() {
    containers_.pop_back();
    container_keys_.pop_back();
    return true;
  }

  std::string origin_;
  Mode mode_ = Mode::Dom;
  std::vector<json*> containers_;
  std::vector<std::string> container_keys_;
  std::string key_;
  PoolSpan pending_vocab_{0, 0};
  bool in_merge_pair_ = false;
  int pair_parts_ = 0;
  PoolSpan pair_[2]{};
};

}  // namespace

TokenizerJsonParts read_tokenizer_json(std::string_view text, const std::string& origin) {
  TokenizerJsonHandler handler(origin);
  // Nearly all of the file is vocab and merges text: reserve once instead of growing.
  handler.parts.vocab_pool.reserve(text.size() / 5);
  handler.parts.merges_pool.reserve(text.size() / 5);
  handler.parts.vocab.reserve(text.size() / 64);
  handler.parts.merges.reserve(text.size() / 64);
  bool ok = json::sax_parse(text.begin(), text.end(), &handler);
  NVFP4LM_CHECK(ok, "{}", handler.error.empty() ? origin + ": invalid JSON" : handler.error);
  return std::move(handler.parts);
}

}  // namespace nvfp4lm::tokenizer
