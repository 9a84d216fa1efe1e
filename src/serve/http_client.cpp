// See http_client.h. Asynchronous Beast operations on a private io_context, run to completion by each call, so
// that beast::tcp_stream's deadline covers the connect, the write and the read.
#include "serve/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <optional>

namespace nvfp4lm::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using boost::system::error_code;

}  // namespace

std::string HttpClientResponse::header(const std::string& name) const {
  for (const auto& [key, value] : headers)
    if (beast::iequals(key, name)) return value;
  return {};
}

struct HttpClient::Impl {
  std::string host;
  int port = 0;
  std::chrono::milliseconds timeout;
  std::string bearer;
  asio::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void close() {
    if (stream) {
      error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
      stream->close();
    }
    stream.reset();
    buffer.clear();
  }

  // Runs what was started on io until it is done.
  void run() {
    io.restart();
    io.run();
  }

  error_code connect() {
    error_code result;
    tcp::resolver resolver(io);
    const auto endpoints = resolver.resolve(host, std::to_string(port), result);
    if (result) return result;
    stream.emplace(io);
    stream->expires_after(timeout);
    stream->async_connect(endpoints, [&](const error_code& error, const tcp::endpoint&) { result = error; });
    run();
    if (result) stream.reset();
    return result;
  }

  // One exchange on the open connection; `sent` says whether the request was written whole.
  error_code exchange(http::request<http::string_body>& request, http::response<http::string_body>& response,
                      bool& sent) {
    error_code result;
    sent = false;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    parser.header_limit(1u << 20);
    stream->expires_after(timeout);
    http::async_write(*stream, request, [&](const error_code& error, size_t) {
      result = error;
      if (error) return;
      sent = true;
      stream->expires_after(timeout);
      http::async_read(*stream, buffer, parser, [&](const error_code& read_error, size_t) { result = read_error; });
    });
    run();
    if (!result) response = parser.release();
    return result;
  }
};

HttpClient::HttpClient(std::string host, int port, double timeout_s) : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
  set_timeout(timeout_s);
}

HttpClient::~HttpClient() {
  if (impl_) impl_->close();
}
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;

void HttpClient::set_bearer_token(std::string key) { impl_->bearer = std::move(key); }

void HttpClient::set_timeout(double seconds) {
  impl_->timeout = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

HttpClientResponse HttpClient::get(const std::string& path) { return request("GET", path); }

HttpClientResponse HttpClient::post(const std::string& path, const std::string& body, const std::string& content_type) {
  return request("POST", path, body, {{"Content-Type", content_type}});
}

HttpClientResponse HttpClient::request(const std::string& method, const std::string& path, const std::string& body,
                                       const std::vector<std::pair<std::string, std::string>>& headers) {
  Impl& impl = *impl_;
  http::request<http::string_body> request;
  request.method_string(method);
  request.target(path);
  request.version(11);
  request.set(http::field::host, impl.host + ":" + std::to_string(impl.port));
  if (!impl.bearer.empty()) request.set(http::field::authorization, "Bearer " + impl.bearer);
  for (const auto& [name, value] : headers) request.set(name, value);
  request.body() = body;
  if (!body.empty() || method == "POST" || method == "PUT") request.prepare_payload();
  request.keep_alive(true);

  HttpClientResponse result;
  http::response<http::string_body> response;
  error_code error;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool reused = impl.stream.has_value();
    if (!reused && (error = impl.connect())) break;
    bool sent = false;
    error = impl.exchange(request, response, sent);
    if (!error) break;
    impl.close();
    // A kept-alive connection the server closed meanwhile fails at once: open a new one and send again.
    const bool stale = reused && (error == http::error::end_of_stream || error == asio::error::connection_reset ||
                                  error == asio::error::broken_pipe || error == asio::error::eof);
    if (!stale) break;
  }
  if (error) {
    impl.close();
    result.error = error == beast::error::timeout ? "timed out" : error.message();
    return result;
  }
  result.status = static_cast<int>(response.result_int());
  result.body = std::move(response.body());
  for (const auto& field : response)
    result.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  if (!response.keep_alive()) impl.close();
  return result;
}

}  // namespace nvfp4lm::serve
