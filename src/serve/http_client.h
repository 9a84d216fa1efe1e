// A small blocking HTTP/1.1 client (Boost.Beast) for loopback use: `bench serve` and the tests talk to the server
// through it. One connection, kept alive between requests and opened again when the server closed it; every
// request has a deadline. Not for the open internet: no TLS, no redirects, no proxy.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nvfp4lm::serve {

struct HttpClientResponse {
  int status = 0;  // 0 when no answer came: see error
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string error;  // why no (whole) answer came: "connection refused", "timed out", ...
  bool ok() const { return status != 0; }
  // The first header called `name` (any case), or "".
  std::string header(const std::string& name) const;
};

class HttpClient {
 public:
  HttpClient(std::string host, int port, double timeout_s = 60);
  ~HttpClient();
  HttpClient(HttpClient&&) noexcept;
  HttpClient& operator=(HttpClient&&) noexcept;

  // Sent as "Authorization: Bearer KEY" with every request.
  void set_bearer_token(std::string key);
  void set_timeout(double seconds);

  HttpClientResponse get(const std::string& path);
  HttpClientResponse post(const std::string& path, const std::string& body,
                          const std::string& content_type = "application/json");
  HttpClientResponse request(const std::string& method, const std::string& path, const std::string& body = {},
                             const std::vector<std::pair<std::string, std::string>>& headers = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvfp4lm::serve
