// See http_connection.h.
#include "serve/http_connection.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <cstdint>
#include <limits>

namespace nvfp4lm::serve {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;

// While an answer is written, bytes of pipelined requests are read ahead up to this much; past it the socket is
// left alone until the answer ends (a client that goes away meanwhile is then seen when a write fails).
constexpr size_t kReadAheadBytes = 64 * 1024;
constexpr size_t kReadChunkBytes = 16 * 1024;
// How long a closing connection's input is read and dropped after the answer (see Closing in the header).
constexpr std::chrono::milliseconds kLinger{2'000};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

double seconds(std::chrono::milliseconds duration) { return std::chrono::duration<double>(duration).count(); }

}  // namespace

HttpConnection::HttpConnection(asio::ip::tcp::socket socket, HttpConnectionHost& host, const HttpLimits& limits)
    : socket_(std::move(socket)), deadline_(socket_.get_executor()), host_(host), limits_(limits) {
  error_code error;
  const auto remote = socket_.remote_endpoint(error);
  peer_ = error ? "an unknown peer" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
}

HttpConnection::~HttpConnection() { host_.ended(this); }

void HttpConnection::start() {
  post([this] {
    arm(limits_.idle);
    read();
  });
}

void HttpConnection::post(std::function<void()> task) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), task = std::move(task)] { task(); });
}

void HttpConnection::drain(bool close_unanswered) {
  post([this, close_unanswered] {
    draining_ = true;
    if (state_ == State::Answering) {
      close_after_ = true;
    } else if (close_unanswered) {
      close_now();
    }
  });
}

void HttpConnection::close() {
  post([this] { close_now(); });
}

// ---- reading

void HttpConnection::read() {
  if (reading_ || state_ == State::Closed) return;
  if (state_ == State::Answering && buffer_.size() >= kReadAheadBytes) return;
  reading_ = true;
  socket_.async_read_some(
      buffer_.prepare(kReadChunkBytes),
      [self = shared_from_this()](const error_code& error, size_t bytes) { self->on_read(error, bytes); });
}

void HttpConnection::on_read(const error_code& error, size_t bytes) {
  reading_ = false;
  if (state_ == State::Closed) return;
  if (error) {
    // End of stream or a reset. While answering it means the client went away (as curl's Ctrl-C or a closed
    // browser tab do); an answer already complete in the write queue still goes out, then the connection closes.
    if (state_ == State::Answering && (answer_ended_ || !on_gone_)) {
      close_after_ = true;
      return;
    }
    close_now();
    return;
  }
  buffer_.commit(bytes);
  switch (state_) {
    case State::Idle:
      begin_request();
      parse();
      break;
    case State::Header:
    case State::Body:
      parse();
      break;
    case State::Answering:
      read();  // read ahead, and keep watching for the client going away
      break;
    case State::Closing:
      buffer_.consume(buffer_.size());
      read();
      break;
    case State::Closed:
      break;
  }
}

void HttpConnection::begin_request() {
  state_ = State::Header;
  request_start_ = std::chrono::steady_clock::now();
  arm(limits_.header);
  parser_.emplace();
  parser_->header_limit(limits_.max_header_bytes);
  // The header alone first (not eager), with no body limit yet: the host may refuse the request on its header
  // (refuse_header) before a Content-Length past the limit is a 413; then the body, with the limit.
  // (No limit is the largest one: Beast compares a Content-Length with an empty optional as larger than it.)
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  parser_->eager(false);
}

void HttpConnection::parse() {
  while (buffer_.size() > 0) {
    error_code error;
    const size_t used = parser_->put(buffer_.data(), error);
    buffer_.consume(used);
    if (error == http::error::need_more) break;
    if (error) return refuse_unreadable(error);
    if (state_ == State::Header && parser_->is_header_done()) {
      state_ = State::Body;
      arm(limits_.body);
      const HttpRequest& request = parser_->get();
      if (std::optional<HttpReply> refused = host_.refuse_header(request)) return refuse(*refused);
      if (parser_->content_length().value_or(0) > limits_.max_body_bytes)
        return refuse_unreadable(http::error::body_limit);
      parser_->body_limit(limits_.max_body_bytes);  // counts the bytes of a chunked body too
      parser_->eager(true);
      if (request.version() == 11 && !parser_->is_done() &&
          boost::beast::iequals(request[http::field::expect], "100-continue"))
        send_continue();
    }
    if (parser_->is_done()) return dispatch();
    if (used == 0) break;
  }
  read();
}

void HttpConnection::refuse_unreadable(const error_code& error) {
  int status = 400;
  std::string message = fmt::format("the request could not be read as HTTP/1.1: {}", error.message());
  if (error == http::error::body_limit) {
    status = 413;
    message = fmt::format("the request body is larger than this server's limit of {} bytes", limits_.max_body_bytes);
  } else if (error == http::error::header_limit) {
    status = 431;
    message =
        fmt::format("the request header is larger than this server's limit of {} bytes", limits_.max_header_bytes);
  }
  refuse(host_.unreadable_request(status, message));
}

void HttpConnection::refuse(const HttpReply& reply) {
  // The rest of the request is not read, so the connection cannot carry another one.
  state_ = State::Answering;
  disarm();
  version_ = parser_->is_header_done() ? parser_->get().version() : 11;
  request_line_ = parser_->is_header_done()
                      ? fmt::format("{} {} HTTP/{}.{}", std::string_view(parser_->get().method_string()),
                                    std::string_view(parser_->get().target()), version_ / 10, version_ % 10)
                      : "-";
  status_ = 0;
  body_bytes_ = 0;
  answer_headers_.clear();
  head_only_ = false;
  close_after_ = true;
  streaming_ = false;
  answer_ended_ = false;
  on_gone_ = nullptr;
  parser_.reset();
  this->reply(reply);
}

void HttpConnection::send_continue() {
  if (writing_) return;
  writing_ = true;
  asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                    [self = shared_from_this()](const error_code& error, size_t) {
                      self->writing_ = false;
                      if (self->state_ == State::Closed) return;
                      if (error) return self->close_now();
                      if (!self->pending_.empty()) self->flush();
                    });
}

void HttpConnection::dispatch() {
  state_ = State::Answering;
  disarm();
  HttpRequest request = parser_->release();
  parser_.reset();
  version_ = request.version() == 10 ? 10 : 11;
  request_line_ = fmt::format("{} {} HTTP/{}.{}", std::string_view(request.method_string()),
                              std::string_view(request.target()), request.version() / 10, request.version() % 10);
  status_ = 0;
  body_bytes_ = 0;
  answer_headers_.clear();
  head_only_ = request.method() == http::verb::head;
  close_after_ = !request.keep_alive() || draining_;
  streaming_ = false;
  chunked_ = false;
  answer_ended_ = false;
  on_gone_ = nullptr;
  read();  // see the client go away while the answer is prepared
  host_.handle(shared_from_this(), request);
}

// ---- answering

std::string HttpConnection::head(const HttpReply& reply, std::optional<uint64_t> content_length, bool chunked) {
  const auto status = static_cast<http::status>(reply.status);
  std::string text = fmt::format("HTTP/1.1 {} {}\r\n", reply.status, std::string_view(http::obsolete_reason(status)));
  status_ = reply.status;
  if (!reply.content_type.empty()) text += fmt::format("Content-Type: {}\r\n", reply.content_type);
  for (const auto& [name, value] : reply.headers) text += fmt::format("{}: {}\r\n", name, value);
  for (const auto& [name, value] : answer_headers_) text += fmt::format("{}: {}\r\n", name, value);
  if (content_length) text += fmt::format("Content-Length: {}\r\n", *content_length);
  if (chunked) text += "Transfer-Encoding: chunked\r\n";
  if (close_after_ || draining_) {
    close_after_ = true;
    text += "Connection: close\r\n";
  } else if (version_ == 10) {
    text += "Connection: keep-alive\r\n";
  }
  return text + "\r\n";
}

void HttpConnection::reply(HttpReply reply) {
  if (state_ != State::Answering || streaming_ || answer_ended_) return;
  pending_ += head(reply, reply.body.size(), /*chunked=*/false);
  if (!head_only_) pending_ += reply.body;
  body_bytes_ = head_only_ ? 0 : reply.body.size();
  answer_ended_ = true;
  flush();
}

void HttpConnection::begin_stream(HttpReply reply) {
  if (state_ != State::Answering || streaming_ || answer_ended_) return;
  streaming_ = true;
  chunked_ = version_ == 11 && !head_only_;
  if (!chunked_) close_after_ = true;  // HTTP/1.0: the end of the connection ends the answer
  pending_ += head(reply, std::nullopt, chunked_);
  if (head_only_) answer_ended_ = true;
  flush();
}

void HttpConnection::stream(std::string_view data) {
  if (state_ != State::Answering || !streaming_ || answer_ended_ || data.empty()) return;
  body_bytes_ += data.size();
  if (chunked_) {
    pending_ += fmt::format("{:x}\r\n", data.size());
    pending_ += data;
    pending_ += "\r\n";
  } else {
    pending_ += data;
  }
  flush();
}

void HttpConnection::end_stream() {
  if (state_ != State::Answering || !streaming_ || answer_ended_) return;
  if (chunked_) pending_ += "0\r\n\r\n";
  answer_ended_ = true;
  flush();
}

void HttpConnection::add_answer_headers(std::vector<std::pair<std::string, std::string>> headers) {
  for (auto& header : headers) answer_headers_.push_back(std::move(header));
}

void HttpConnection::log_answer(bool completed) {
  if (request_line_.empty()) return;
  host_.answered(*this, request_line_, status_, body_bytes_,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - request_start_).count(), completed);
  request_line_.clear();
}

void HttpConnection::on_gone(std::function<void()> callback) {
  if (state_ == State::Closed) {
    if (callback) callback();
    return;
  }
  on_gone_ = std::move(callback);
}

void HttpConnection::flush() {
  if (writing_ || state_ == State::Closed) return;
  if (pending_.empty()) {
    if (answer_ended_ && state_ == State::Answering) answer_done();
    return;
  }
  out_.swap(pending_);
  pending_.clear();
  writing_ = true;
  if (state_ == State::Answering) arm(limits_.write);
  asio::async_write(socket_, asio::buffer(out_),
                    [self = shared_from_this()](const error_code& error, size_t) { self->on_written(error); });
}

void HttpConnection::on_written(const error_code& error) {
  writing_ = false;
  out_.clear();
  if (state_ == State::Closed) return;
  if (error) return close_now();
  if (state_ == State::Answering) disarm();
  flush();
}

void HttpConnection::answer_done() {
  log_answer(/*completed=*/true);
  on_gone_ = nullptr;
  streaming_ = false;
  if (close_after_ || draining_) return start_closing();
  if (buffer_.size() > 0) {
    begin_request();  // a pipelined request is waiting
    parse();
    return;
  }
  state_ = State::Idle;
  arm(limits_.idle);
  read();
}

void HttpConnection::start_closing() {
  state_ = State::Closing;
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  arm(kLinger);
  read();
}

// ---- deadlines and closing

void HttpConnection::arm(std::chrono::milliseconds timeout) {
  const uint64_t generation = ++deadline_generation_;
  deadline_.expires_after(timeout);
  deadline_.async_wait([self = shared_from_this(), generation](const error_code& error) {
    if (!error && generation == self->deadline_generation_) self->deadline_passed();
  });
}

void HttpConnection::disarm() {
  ++deadline_generation_;
  deadline_.cancel();
}

void HttpConnection::deadline_passed() {
  switch (state_) {
    case State::Idle:
      host_.closed_by_limit(*this, "idle_timeout",
                            fmt::format("no request within {:g} s (--idle-timeout)", seconds(limits_.idle)));
      break;
    case State::Header:
      host_.closed_by_limit(
          *this, "header_timeout",
          fmt::format("the request header did not arrive within {:g} s (--header-timeout)", seconds(limits_.header)));
      break;
    case State::Body:
      host_.closed_by_limit(
          *this, "body_timeout",
          fmt::format("the request body did not arrive within {:g} s (--body-timeout)", seconds(limits_.body)));
      break;
    case State::Answering:
      host_.closed_by_limit(
          *this, "write_timeout",
          fmt::format("the client read nothing of its answer for {:g} s (--write-timeout)", seconds(limits_.write)));
      break;
    case State::Closing:
    case State::Closed:
      break;
  }
  close_now();
}

void HttpConnection::close_now() {
  if (state_ == State::Closed) return;
  state_ = State::Closed;
  disarm();
  error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  parser_.reset();
  pending_.clear();
  log_answer(/*completed=*/false);
  if (!answer_ended_ && on_gone_) {
    std::function<void()> gone = std::move(on_gone_);
    on_gone_ = nullptr;
    gone();
  }
  on_gone_ = nullptr;
}

}  // namespace nvfp4lm::serve
