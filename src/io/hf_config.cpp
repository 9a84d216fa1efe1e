#include "io/hf_config.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/json_text.h"

namespace nvfp4lm {
namespace {

using json = nlohmann::json;

const json* field(const json& config, const char* name) {
  auto it = config.find(name);
  return (it == config.end() || it->is_null()) ? nullptr : &*it;
}

int64_t int_field(const json& config, const char* name, const std::string& where, std::optional<int64_t> fallback) {
  const json* value = field(config, name);
  if (!value) {
    NVFP4LM_CHECK(fallback.has_value(), "{}: required field '{}' is missing", where, name);
    return *fallback;
  }
  NVFP4LM_CHECK(value->is_number_integer(), "{}: field '{}' must be an integer, got {}", where, name, value->dump());
  return value->get<int64_t>();
}

double number_field(const json& config, const char* name, const std::string& where, double fallback) {
  const json* value = field(config, name);
  if (!value) return fallback;
  NVFP4LM_CHECK(value->is_number(), "{}: field '{}' must be a number, got {}", where, name, value->dump());
  return value->get<double>();
}

bool bool_field(const json& config, const char* name, const std::string& where, bool fallback) {
  const json* value = field(config, name);
  if (!value) return fallback;
  NVFP4LM_CHECK(value->is_boolean(), "{}: field '{}' must be true or false, got {}", where, name, value->dump());
  return value->get<bool>();
}

// An int, a list of ints, or absent/null.
std::vector<int64_t> token_ids(const json& config, const char* name, const std::string& where) {
  const json* value = field(config, name);
  if (!value) return {};
  if (value->is_number_integer()) return {value->get<int64_t>()};
  NVFP4LM_CHECK(value->is_array(), "{}: field '{}' must be a token id or a list of token ids, got {}", where, name,
                value->dump());
  std::vector<int64_t> ids;
  for (const json& id : *value) {
    NVFP4LM_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0,
                  "{}: field '{}' must list non-negative token ids, got {}", where, name, value->dump());
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

std::optional<int64_t> optional_token(const json& config, const char* name, const std::string& where) {
  const json* value = field(config, name);
  if (!value) return std::nullopt;
  NVFP4LM_CHECK(value->is_number_integer() && value->get<int64_t>() >= 0,
                "{}: field '{}' must be a non-negative token id, got {}", where, name, value->dump());
  return value->get<int64_t>();
}

void check_architecture(const json& config, const std::string& where) {
  std::string model_type;
  if (const json* type = field(config, "model_type")) {
    NVFP4LM_CHECK(type->is_string(), "{}: field 'model_type' must be a string, got {}", where, type->dump());
    model_type = type->get<std::string>();
  }
  std::vector<std::string> architectures;
  if (const json* list = field(config, "architectures")) {
    NVFP4LM_CHECK(list->is_array(), "{}: field 'architectures' must be a list of strings", where);
    for (const json& name : *list) {
      NVFP4LM_CHECK(name.is_string(), "{}: field 'architectures' must be a list of strings", where);
      architectures.push_back(name.get<std::string>());
    }
  }
  const bool qwen3 = model_type == "qwen3" ||
                     std::find(architectures.begin(), architectures.end(), "Qwen3ForCausalLM") != architectures.end();
  if (qwen3) return;
  std::string found = model_type.empty() ? std::string("no model_type") : "model_type '" + model_type + "'";
  if (!architectures.empty()) found += fmt::format(", architectures {}", fmt::join(architectures, ", "));
  NVFP4LM_FAIL("{}: {} is not supported; only Qwen3 (model_type 'qwen3', Qwen3ForCausalLM) is", where, found);
}

// Rope variants: only the plain rotation (rope_type "default", or none) is implemented.
void check_rope(const json& config, const std::string& where, const char* name) {
  const json* rope = field(config, name);
  if (!rope) return;
  NVFP4LM_CHECK(rope->is_object(), "{}: field '{}' must be an object or null, got {}", where, name, rope->dump());
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (rope->contains(key) && (*rope)[key].is_string()) type = (*rope)[key].get<std::string>();
  }
  NVFP4LM_CHECK(type == "default", "{}: {} type '{}' is not supported (only plain RoPE; remove {} to use it)", where,
                name, type, name);
}

}  // namespace

int64_t Qwen3Config::total_parameters() const {
  return embedding_parameters() +
         num_hidden_layers *
             (attention_parameters_per_layer() + mlp_parameters_per_layer() + norm_parameters_per_layer()) +
         hidden_size + lm_head_parameters();
}

void Qwen3Config::validate(const std::string& where) const {
  auto check_range = [&](const char* name, int64_t value, int64_t max) {
    NVFP4LM_CHECK(value > 0 && value <= max, "{}: {} = {} is out of range (1..{})", where, name, value, max);
  };
  check_range("vocab_size", vocab_size, int64_t{1} << 24);
  check_range("hidden_size", hidden_size, int64_t{1} << 17);
  check_range("intermediate_size", intermediate_size, int64_t{1} << 19);
  check_range("num_hidden_layers", num_hidden_layers, 1024);
  check_range("num_attention_heads", num_attention_heads, 1024);
  check_range("num_key_value_heads", num_key_value_heads, 1024);
  check_range("head_dim", head_dim, 4096);
  check_range("max_position_embeddings", max_position_embeddings, int64_t{1} << 31);
  NVFP4LM_CHECK(num_attention_heads % num_key_value_heads == 0,
                "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", where, num_attention_heads,
                num_key_value_heads);
  NVFP4LM_CHECK(head_dim % 2 == 0, "{}: head_dim {} must be even (RoPE rotates pairs)", where, head_dim);
  NVFP4LM_CHECK(std::isfinite(rms_norm_eps) && rms_norm_eps > 0 && rms_norm_eps < 1,
                "{}: rms_norm_eps {} must be a small positive number", where, rms_norm_eps);
  NVFP4LM_CHECK(std::isfinite(rope_theta) && rope_theta > 0, "{}: rope_theta {} must be positive", where, rope_theta);
  for (int64_t id : eos_token_ids)
    NVFP4LM_CHECK(id >= 0 && id < vocab_size, "{}: eos token id {} is outside the vocabulary (size {})", where, id,
                  vocab_size);
  NVFP4LM_CHECK(!bos_token_id || (*bos_token_id >= 0 && *bos_token_id < vocab_size),
                "{}: bos_token_id {} is outside the vocabulary (size {})", where, bos_token_id.value_or(-1),
                vocab_size);
}

Qwen3Config parse_qwen3_config(const json& config, const std::string& where) {
  NVFP4LM_CHECK(config.is_object(), "{}: expected a JSON object, got {}", where, config.type_name());
  check_architecture(config, where);
  NVFP4LM_CHECK(!bool_field(config, "attention_bias", where, false),
                "{}: attention_bias is true; Qwen3 with attention biases is not supported", where);
  NVFP4LM_CHECK(!bool_field(config, "use_sliding_window", where, false),
                "{}: use_sliding_window is true; sliding-window attention is not supported", where);
  if (const json* layer_types = field(config, "layer_types")) {
    NVFP4LM_CHECK(layer_types->is_array(), "{}: field 'layer_types' must be a list", where);
    for (const json& type : *layer_types)
      NVFP4LM_CHECK(type == "full_attention", "{}: layer type {} is not supported (only full_attention)", where,
                    json_excerpt(type));
  }
  check_rope(config, where, "rope_scaling");
  check_rope(config, where, "rope_parameters");
  if (const json* act = field(config, "hidden_act")) {
    NVFP4LM_CHECK(act->is_string() && act->get<std::string>() == "silu",
                  "{}: hidden_act {} is not supported (Qwen3 uses silu)", where, act->dump());
  }

  Qwen3Config c;
  c.vocab_size = int_field(config, "vocab_size", where, std::nullopt);
  c.hidden_size = int_field(config, "hidden_size", where, std::nullopt);
  c.intermediate_size = int_field(config, "intermediate_size", where, std::nullopt);
  c.num_hidden_layers = int_field(config, "num_hidden_layers", where, std::nullopt);
  c.num_attention_heads = int_field(config, "num_attention_heads", where, std::nullopt);
  c.num_key_value_heads = int_field(config, "num_key_value_heads", where, c.num_attention_heads);
  NVFP4LM_CHECK(c.num_attention_heads > 0, "{}: num_attention_heads = {} must be positive", where,
                c.num_attention_heads);
  c.head_dim = int_field(config, "head_dim", where, c.hidden_size / c.num_attention_heads);
  c.rms_norm_eps = number_field(config, "rms_norm_eps", where, 1e-6);
  double theta = number_field(config, "rope_theta", where, 10000.0);
  if (const json* rope = field(config, "rope_parameters")) theta = number_field(*rope, "rope_theta", where, theta);
  c.rope_theta = theta;
  c.max_position_embeddings = int_field(config, "max_position_embeddings", where, 32768);
  c.tie_word_embeddings = bool_field(config, "tie_word_embeddings", where, false);
  c.bos_token_id = optional_token(config, "bos_token_id", where);
  c.eos_token_ids = token_ids(config, "eos_token_id", where);
  for (const char* name : {"torch_dtype", "dtype"}) {
    if (const json* dtype = field(config, name)) {
      NVFP4LM_CHECK(dtype->is_string(), "{}: field '{}' must be a string, got {}", where, name, dtype->dump());
      c.torch_dtype = dtype->get<std::string>();
    }
  }
  c.validate(where);
  return c;
}

Qwen3Config load_qwen3_config(const fs::path& path) {
  const json config = read_json_file(path);
  return parse_qwen3_config(config, path.string());
}

json qwen3_config_to_json(const Qwen3Config& c) {
  json config = {
      {"architectures", {"Qwen3ForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"initializer_range", 0.02},
      {"intermediate_size", c.intermediate_size},
      {"max_position_embeddings", c.max_position_embeddings},
      {"max_window_layers", c.num_hidden_layers},
      {"model_type", "qwen3"},
      {"num_attention_heads", c.num_attention_heads},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_key_value_heads", c.num_key_value_heads},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_scaling", nullptr},
      {"sliding_window", nullptr},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"use_cache", true},
      {"use_sliding_window", false},
      {"vocab_size", c.vocab_size},
  };
  // An integral theta is written as an integer, as the Qwen configs do (5000000, not 5000000.0).
  if (c.rope_theta == std::floor(c.rope_theta) && c.rope_theta < 9e15)
    config["rope_theta"] = static_cast<int64_t>(c.rope_theta);
  else
    config["rope_theta"] = c.rope_theta;
  if (c.bos_token_id) config["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) config["eos_token_id"] = c.eos_token_ids[0];
  if (c.eos_token_ids.size() > 1) config["eos_token_id"] = c.eos_token_ids;
  if (!c.torch_dtype.empty()) config["torch_dtype"] = c.torch_dtype;
  return config;
}

GenerationConfig load_generation_config(const fs::path& path) {
  const json config = read_json_file(path);
  const std::string where = path.string();
  NVFP4LM_CHECK(config.is_object(), "{}: expected a JSON object", where);
  GenerationConfig generation;
  generation.bos_token_id = optional_token(config, "bos_token_id", where);
  generation.eos_token_ids = token_ids(config, "eos_token_id", where);
  generation.pad_token_id = optional_token(config, "pad_token_id", where);
  return generation;
}

json generation_config_to_json(const Qwen3Config& c) {
  json config = json::object();
  if (c.bos_token_id) {
    config["bos_token_id"] = *c.bos_token_id;
    config["pad_token_id"] = *c.bos_token_id;
  }
  std::vector<int64_t> eos = c.eos_token_ids;
  // Qwen3 instruct models stop on <|im_end|> and on <|endoftext|> (the bos id).
  if (c.bos_token_id && std::find(eos.begin(), eos.end(), *c.bos_token_id) == eos.end() && !eos.empty())
    eos.push_back(*c.bos_token_id);
  if (eos.size() == 1) config["eos_token_id"] = eos[0];
  if (eos.size() > 1) config["eos_token_id"] = eos;
  return config;
}

Qwen3Config qwen3_preset(std::string_view name) {
  Qwen3Config c;
  c.vocab_size = 151936;  // the Qwen3 tokenizer's embedding size
  c.tie_word_embeddings = true;
  c.rms_norm_eps = 1e-6;
  c.bos_token_id = 151643;     // <|endoftext|>
  c.eos_token_ids = {151645};  // <|im_end|>
  c.torch_dtype = "bfloat16";
  if (name == "tiny") {
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.intermediate_size = 128;
    c.rope_theta = 1e6;
    c.max_position_embeddings = 4096;
  } else if (name == "small") {
    c.hidden_size = 512;
    c.num_hidden_layers = 8;
    c.num_attention_heads = 8;
    c.num_key_value_heads = 4;
    c.head_dim = 64;
    c.intermediate_size = 1536;
    c.rope_theta = 1e6;
    c.max_position_embeddings = 32768;
  } else if (name == "qwen3-4b") {  // Qwen3-4B-Instruct-2507
    c.hidden_size = 2560;
    c.num_hidden_layers = 36;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 9728;
    c.rope_theta = 5e6;
    c.max_position_embeddings = 262144;
  } else {
    NVFP4LM_FAIL("unknown model preset '{}' (choose {})", name, fmt::join(qwen3_preset_names(), ", "));
  }
  return c;
}

std::vector<std::string> qwen3_preset_names() { return {"tiny", "small", "qwen3-4b"}; }

}  // namespace nvfp4lm
