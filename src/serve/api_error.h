// ApiError: a failed request as the OpenAI API reports it — an HTTP status and the error object
//   {"error": {"message": "...", "type": "...", "param": ... | null, "code": ... | null}}
// which the official clients turn into their typed exceptions (BadRequestError for 400, NotFoundError for 404, ...).
// The message is one line that says what was wrong with the request and what to do.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace nvfp4lm::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {}, std::string code = {})
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // the request field at fault, or empty
  const std::string& code() const { return code_; }    // e.g. "model_not_found", or empty

  // The body: {"error": {...}}.
  nlohmann::json body() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// 400 invalid_request_error, naming the field at fault.
ApiError invalid_request(const std::string& message, const std::string& param = {}, const std::string& code = {});

}  // namespace nvfp4lm::serve
