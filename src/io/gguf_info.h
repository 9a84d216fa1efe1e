// What `nvfp4lm info FILE.gguf` reports about a GGUF file (io/gguf_reader.h): version, alignment, every metadata
// entry (scalars with their values; arrays by element type and length, with the first few strings), every tensor
// (name, ggml type, shape, bytes) and the bytes per tensor type.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "io/gguf_reader.h"

namespace nvfp4lm {

nlohmann::ordered_json gguf_info_json(const GgufFile& file);
// Human-readable rendering of gguf_info_json's result. (Strings hold the file's bytes, which may not be UTF-8:
// dump JSON with error_handler_t::replace.)
std::string gguf_info_text(const nlohmann::ordered_json& info);

}  // namespace nvfp4lm
