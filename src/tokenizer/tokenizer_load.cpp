// Building TokenizerData from tokenizer.json (read by tokenizer_json_reader) + tokenizer_config.json.
// Everything the file says is checked; unsupported features are errors that name the entry, never
// silently different tokens.
#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "core/logging.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_data.h"
#include "tokenizer/tokenizer_json_reader.h"
#include "tokenizer/utf8.h"

namespace nvfp4lm::tokenizer {
namespace {

using json = nlohmann::json;

std::string type_of(const json& node) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) return "";
  return node["type"].get<std::string>();
}

bool flag(const json& node, const char* name, bool fallback) {
  if (!node.contains(name) || node[name].is_null()) return fallback;
  return node[name].is_boolean() ? node[name].get<bool>() : fallback;
}

// normalizer: null, NFC, or a Sequence of those.
bool read_normalizer(const json& node, const std::string& origin) {
  if (node.is_null()) return false;
  std::string type = type_of(node);
  if (type == "NFC") return true;
  if (type == "Sequence" && node.contains("normalizers") && node["normalizers"].is_array()) {
    bool nfc = false;
    for (const json& child : node["normalizers"]) nfc = read_normalizer(child, origin) || nfc;
    return nfc;
  }
  NVFP4LM_FAIL("{}: normalizer of type \"{}\" is not supported (nvfp4lm supports NFC or none)", origin, type);
}

// pre_tokenizer: the regex to split with ("" = no split). Supports Split(Isolated) + ByteLevel(use_regex=false)
// as Qwen2/3 files have it, and a lone ByteLevel(use_regex=true) as GPT-2 files have it.
std::string read_pre_tokenizer(const json& node, const std::string& origin) {
  NVFP4LM_CHECK(!node.is_null(), "{}: pre_tokenizer is null; a byte-level BPE tokenizer needs ByteLevel", origin);
  std::vector<const json*> steps;
  if (type_of(node) == "Sequence") {
    NVFP4LM_CHECK(node.contains("pretokenizers") && node["pretokenizers"].is_array(),
                  "{}: pre_tokenizer Sequence has no pretokenizers array", origin);
    for (const json& child : node["pretokenizers"]) steps.push_back(&child);
  } else {
    steps.push_back(&node);
  }
  std::string pattern;
  bool byte_level = false;
  for (const json* step : steps) {
    std::string type = type_of(*step);
    if (type == "Split") {
      NVFP4LM_CHECK(pattern.empty() && !byte_level, "{}: only one Split before ByteLevel is supported", origin);
      const std::string behavior = json_field_or(*step, "behavior", std::string(), origin + ": pre_tokenizer Split");
      NVFP4LM_CHECK(behavior == "Isolated", "{}: pre_tokenizer Split behavior \"{}\" is not supported (only Isolated)",
                    origin, behavior);
      NVFP4LM_CHECK(!flag(*step, "invert", false), "{}: pre_tokenizer Split with invert=true is not supported", origin);
      // find(), not the const operator[]: that is undefined behaviour for a missing key.
      const auto found = step->find("pattern");
      const json& p = found != step->end() ? *found : json::object();
      if (p.contains("Regex") && p["Regex"].is_string()) {
        pattern = p["Regex"].get<std::string>();
      } else if (p.contains("String") && p["String"].is_string()) {
        pattern = "\\Q" + p["String"].get<std::string>() + "\\E";
      } else {
        NVFP4LM_FAIL("{}: pre_tokenizer Split has no Regex or String pattern", origin);
      }
    } else if (type == "ByteLevel") {
      NVFP4LM_CHECK(!flag(*step, "add_prefix_space", false),
                    "{}: ByteLevel pre_tokenizer with add_prefix_space=true is not supported", origin);
      if (flag(*step, "use_regex", true)) {
        NVFP4LM_CHECK(pattern.empty(), "{}: ByteLevel use_regex=true after a Split is not supported", origin);
        pattern = std::string(kGpt2Pattern);
      }
      byte_level = true;
    } else {
      NVFP4LM_FAIL("{}: pre_tokenizer of type \"{}\" is not supported (expected Split + ByteLevel)", origin, type);
    }
  }
  NVFP4LM_CHECK(byte_level, "{}: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", origin);
  return pattern;
}

void check_model(const json& model, const std::string& origin) {
  NVFP4LM_CHECK(model.is_object(), "{}: no \"model\" object", origin);
  NVFP4LM_CHECK(type_of(model) == "BPE" || !model.contains("type"), "{}: model type \"{}\" is not supported (only BPE)",
                origin, type_of(model));
  auto empty_or_null = [&](const char* name) {
    return !model.contains(name) || model[name].is_null() ||
           (model[name].is_string() && model[name].get<std::string>().empty());
  };
  NVFP4LM_CHECK(empty_or_null("continuing_subword_prefix") && empty_or_null("end_of_word_suffix"),
                "{}: BPE continuing_subword_prefix / end_of_word_suffix are not supported", origin);
  NVFP4LM_CHECK(!flag(model, "byte_fallback", false), "{}: BPE byte_fallback=true is not supported", origin);
  NVFP4LM_CHECK(!flag(model, "ignore_merges", false), "{}: BPE ignore_merges=true is not supported", origin);
  bool no_dropout = !model.contains("dropout") || model["dropout"].is_null() ||
                    (model["dropout"].is_number() && model["dropout"].get<double>() == 0.0);
  NVFP4LM_CHECK(no_dropout, "{}: BPE dropout is not supported", origin);
}

void check_decoder_and_post_processor(const json& root, const std::string& origin) {
  const json& decoder = root.contains("decoder") ? root["decoder"] : json();
  NVFP4LM_CHECK(type_of(decoder) == "ByteLevel", "{}: decoder of type \"{}\" is not supported (expected ByteLevel)",
                origin, decoder.is_null() ? "null" : type_of(decoder));
  const json& post = root.contains("post_processor") ? root["post_processor"] : json();
  NVFP4LM_CHECK(post.is_null() || type_of(post) == "ByteLevel",
                "{}: post_processor of type \"{}\" is not supported (it would add tokens; expected ByteLevel or null)",
                origin, type_of(post));
}

std::vector<AddedToken> read_added_tokens(const json& root, const std::string& origin) {
  std::vector<AddedToken> tokens;
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return tokens;
  NVFP4LM_CHECK(root["added_tokens"].is_array(), "{}: added_tokens is not an array", origin);
  size_t index = 0;
  for (const json& entry : root["added_tokens"]) {
    NVFP4LM_CHECK(entry.is_object() && entry.contains("id") && entry["id"].is_number_integer() &&
                      entry.contains("content") && entry["content"].is_string(),
                  "{}: added_tokens[{}] needs an integer id and a string content", origin, index);
    AddedToken token;
    int64_t id = entry["id"].get<int64_t>();
    NVFP4LM_CHECK(id >= 0 && id < kMaxTokenId, "{}: added_tokens[{}] has id {}, expected 0..{}", origin, index, id,
                  kMaxTokenId - 1);
    token.id = static_cast<int32_t>(id);
    token.content = entry["content"].get<std::string>();
    NVFP4LM_CHECK(!token.content.empty() && is_valid_utf8(token.content),
                  "{}: added_tokens[{}] has empty or invalid content", origin, index);
    token.special = flag(entry, "special", false);
    token.lstrip = flag(entry, "lstrip", false);
    token.rstrip = flag(entry, "rstrip", false);
    token.single_word = flag(entry, "single_word", false);
    token.normalized = flag(entry, "normalized", !token.special);
    tokens.push_back(std::move(token));
    ++index;
  }
  return tokens;
}

// tokenizer_config.json token fields are a string, {"content": ...} or null.
std::string config_token(const json& config, const char* name) {
  if (!config.contains(name)) return "";
  const json& v = config[name];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

std::string config_chat_template(const json& config, const std::string& origin) {
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return "";
  const json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const json& named : t) {
      if (named.is_object() &&
          json_field_or(named, "name", std::string(), "tokenizer_config.json chat_template") == "default" &&
          named.contains("template") && named["template"].is_string()) {
        return named["template"].get<std::string>();
      }
    }
  }
  log::warn("{}: chat_template has no default template; chat rendering uses the built-in ChatML", origin);
  return "";
}

size_t hash_text(std::string_view s) { return std::hash<std::string_view>{}(s); }

}  // namespace

int32_t TokenizerData::find_id(std::string_view token_text) const {
  const size_t mask = id_slots.size() - 1;
  for (size_t i = hash_text(token_text) & mask;; i = (i + 1) & mask) {
    int32_t id = id_slots[i];
    if (id < 0) return -1;
    if (text(id) == token_text) return id;
  }
}

std::shared_ptr<const TokenizerData> load_tokenizer_data(std::string_view tokenizer_json,
                                                         std::string_view tokenizer_config_json,
                                                         const std::string& origin,
                                                         const std::optional<std::string>& chat_template_file) {
  TokenizerJsonParts parsed = read_tokenizer_json(tokenizer_json, origin);
  const json& root = parsed.rest;
  NVFP4LM_CHECK(root.is_object() && root.contains("model"), "{}: not a tokenizer.json (no \"model\")", origin);
  check_model(root["model"], origin);
  NVFP4LM_CHECK(parsed.has_vocab && !parsed.vocab.empty(), "{}: model.vocab is missing or empty", origin);
  NVFP4LM_CHECK(parsed.has_merges, "{}: model.merges is missing", origin);
  check_decoder_and_post_processor(root, origin);

  auto data = std::make_shared<TokenizerData>();
  data->origin = origin;
  data->nfc = read_normalizer(root.contains("normalizer") ? root["normalizer"] : json(), origin);
  std::string pattern = read_pre_tokenizer(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json(), origin);
  if (!pattern.empty()) data->splitter = std::make_unique<RegexSplitter>(pattern, origin + " pre_tokenizer");
  std::vector<AddedToken> added = read_added_tokens(root, origin);

  // Per-id texts.
  int64_t max_id = -1;
  for (const auto& [span, id] : parsed.vocab) max_id = std::max(max_id, id);
  for (const AddedToken& t : added) max_id = std::max<int64_t>(max_id, t.id);
  const size_t vocab_size = static_cast<size_t>(max_id + 1);
  std::vector<std::string_view> texts(vocab_size);
  data->flags.assign(vocab_size, 0);
  for (const auto& [span, id] : parsed.vocab) {
    std::string_view text = parsed.vocab_text(span);
    NVFP4LM_CHECK(data->flags[static_cast<size_t>(id)] == 0, "{}: model.vocab has id {} twice (\"{}\" and \"{}\")",
                  origin, id, texts[static_cast<size_t>(id)], text);
    texts[static_cast<size_t>(id)] = text;
    data->flags[static_cast<size_t>(id)] = TokenizerData::kUsed;
  }
  for (const AddedToken& t : added) {
    texts[static_cast<size_t>(t.id)] = t.content;
    data->flags[static_cast<size_t>(t.id)] =
        TokenizerData::kUsed | TokenizerData::kAdded | (t.special ? TokenizerData::kSpecial : 0);
  }
  data->text_offsets.resize(vocab_size + 1);
  data->bytes_offsets.resize(vocab_size + 1);
  data->text_pool.reserve(parsed.vocab_pool.size() + 1024);
  data->bytes_pool.reserve(parsed.vocab_pool.size());
  std::string bytes;
  for (size_t id = 0; id < vocab_size; ++id) {
    data->text_offsets[id] = static_cast<uint32_t>(data->text_pool.size());
    data->bytes_offsets[id] = static_cast<uint32_t>(data->bytes_pool.size());
    data->text_pool.append(texts[id]);
    // As HF's ByteLevel decoder: a token all of whose characters are in the byte alphabet decodes to those
    // bytes; any other token (e.g. an added token with CJK text) decodes to its own UTF-8.
    if (byte_level_to_bytes(texts[id], bytes)) {
      data->bytes_pool.append(bytes);
    } else {
      data->bytes_pool.append(texts[id]);
    }
    data->max_token_bytes = std::max(data->max_token_bytes, data->bytes_pool.size() - data->bytes_offsets[id]);
  }
  data->text_offsets[vocab_size] = static_cast<uint32_t>(data->text_pool.size());
  data->bytes_offsets[vocab_size] = static_cast<uint32_t>(data->bytes_pool.size());

  // Token text -> id. Model vocab entries first, so an added token never hides a vocab entry of the same text
  // for merge resolution (HF resolves merges against model.vocab).
  data->id_slots.assign(std::bit_ceil(std::max<size_t>(16, vocab_size * 2)), -1);
  const size_t mask = data->id_slots.size() - 1;
  auto insert_id = [&](int32_t id) {
    std::string_view text = data->text(id);
    for (size_t i = hash_text(text) & mask;; i = (i + 1) & mask) {
      if (data->id_slots[i] < 0) {
        data->id_slots[i] = id;
        return;
      }
      if (data->text(data->id_slots[i]) == text) return;  // first one wins
    }
  };
  for (size_t id = 0; id < vocab_size; ++id) {
    if ((data->flags[id] & TokenizerData::kUsed) && !(data->flags[id] & TokenizerData::kAdded))
      insert_id(static_cast<int32_t>(id));
  }
  for (size_t id = 0; id < vocab_size; ++id) {
    if (data->flags[id] & TokenizerData::kAdded) insert_id(static_cast<int32_t>(id));
  }

  // Merges.
  std::vector<int32_t> byte_tokens(256);
  for (int b = 0; b < 256; ++b) {
    std::string text = bytes_to_byte_level(std::string(1, static_cast<char>(b)));
    int32_t id = data->find_id(text);
    NVFP4LM_CHECK(id >= 0, "{}: model.vocab has no token for byte 0x{:02X} (\"{}\"); not a byte-level BPE vocab",
                  origin, b, text);
    byte_tokens[static_cast<size_t>(b)] = id;
  }
  data->merges = std::make_unique<BpeMerges>(byte_tokens, parsed.merges.size());
  data->merge_list.reserve(parsed.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < parsed.merges.size(); ++rank) {
    auto [a_span, b_span] = parsed.merges[rank];
    std::string_view a = parsed.merge_text(a_span), b = parsed.merge_text(b_span);
    joined.assign(a).append(b);
    int32_t left = data->find_id(a), right = data->find_id(b), result = data->find_id(joined);
    NVFP4LM_CHECK(left >= 0 && right >= 0 && result >= 0,
                  "{}: model.merges[{}] (\"{}\", \"{}\") uses a token that is not in model.vocab (\"{}\")", origin,
                  rank, a, b,
                  left < 0    ? a
                  : right < 0 ? b
                              : std::string_view(joined));
    data->merges->add(left, right, static_cast<int32_t>(rank), result);
    data->merge_list.emplace_back(left, right);
  }

  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& t : added) (t.normalized && data->nfc ? normalized : raw).push_back(t);
  data->raw_added = AddedTokenMatcher(std::move(raw));
  data->normalized_added = AddedTokenMatcher(std::move(normalized));

  // tokenizer_config.json: eos / pad / chat template.
  auto added_id = [&](const std::string& content) {
    for (const AddedToken& t : added) {
      if (t.content == content) return t.id;
    }
    return -1;
  };
  data->special.im_start = added_id("<|im_start|>");
  data->special.im_end = added_id("<|im_end|>");
  data->special.endoftext = added_id("<|endoftext|>");
  if (!tokenizer_config_json.empty()) {
    std::string config_origin = origin + " (tokenizer_config.json)";
    const json config = parse_json(tokenizer_config_json, config_origin);
    NVFP4LM_CHECK(config.is_object(), "{}: not a JSON object", config_origin);
    // The special tokens it names (bos and unk only reach chat templates: apply_chat_template passes the special
    // tokens map); a name that is no token of tokenizer.json is an error.
    for (auto [key, id] : {std::pair{"eos_token", &data->special.eos}, std::pair{"pad_token", &data->special.pad},
                           std::pair{"bos_token", &data->special.bos}, std::pair{"unk_token", &data->special.unk}}) {
      const std::string text = config_token(config, key);
      if (text.empty()) continue;
      *id = data->find_id(text);
      NVFP4LM_CHECK(*id >= 0, "{}: {} \"{}\" is not a token of tokenizer.json", config_origin, key, text);
    }
    NVFP4LM_CHECK(!flag(config, "add_bos_token", false) || config_token(config, "bos_token").empty(),
                  "{}: add_bos_token=true is not supported", config_origin);
    data->chat_template = config_chat_template(config, config_origin);
  } else {
    data->special.eos = data->special.im_end >= 0 ? data->special.im_end : data->special.endoftext;
    data->special.pad = data->special.endoftext;
  }
  if (chat_template_file) data->chat_template = *chat_template_file;
  return data;
}

}  // namespace nvfp4lm::tokenizer
