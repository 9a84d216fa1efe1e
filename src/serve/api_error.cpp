// See api_error.h.
#include "serve/api_error.h"

namespace nvfp4lm::serve {

nlohmann::json ApiError::body() const {
  nlohmann::json error = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) error["param"] = param_;
  if (!code_.empty()) error["code"] = code_;
  return {{"error", error}};
}

ApiError invalid_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, "invalid_request_error", message, param, code);
}

}  // namespace nvfp4lm::serve
