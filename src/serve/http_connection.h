// One client connection of the HTTP server (http_server.h): HTTP/1.0 and 1.1 over a TCP socket, driven by Asio
// completion handlers on the connection's strand, so no thread waits for a client, however slow or idle.
//
// States and their deadlines (one timer; a deadline that passes closes the connection, with a log line and a count
// in /metrics through HttpConnectionHost::closed_by_limit):
//   Idle       no byte of the next request yet (a fresh connection, or keep-alive)            idle deadline
//   Header     from the request's first byte to the end of its header (at most max_header_bytes: else 431)
//                                                                                               header deadline
//   Body       the body, Content-Length or chunked (at most max_body_bytes, chunked too: else 413)   body deadline
//   Answering  the host has the request. Each write of the answer has the write deadline; waiting for the model
//              has none. The socket is still read meanwhile, so a client that goes away (end of stream or a reset
//              while its answer is not done) is seen at once and the answer's on_gone callback runs.
//   Closing    after an answer marked "Connection: close": the send side is shut and input read and dropped for a
//              moment, so the client reads the answer instead of a reset; then the socket closes.
// Requests are answered one at a time, in order: the bytes of pipelined requests wait in the read buffer (read
// ahead while answering, up to kReadAheadBytes) and are parsed once the answer before them is written.
//
// Answers: reply() writes a whole answer with Content-Length. A stream (server-sent events) is begin_stream(),
// stream() per piece, end_stream(): chunked transfer encoding for HTTP/1.1 clients; for HTTP/1.0 clients, which
// cannot read chunks, no length at all and the connection closes at its end. HEAD gets the head only.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nvfp4lm::serve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;

struct HttpLimits {
  std::chrono::milliseconds idle{60'000}, header{10'000}, body{60'000}, write{30'000};
  uint64_t max_body_bytes = uint64_t{8} << 20;
  uint32_t max_header_bytes = 64 * 1024;
};

// A whole answer (or, for begin_stream, the head of one: its body is not used).
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Allow, Retry-After, Cache-Control, ...
};

class HttpConnection;

// What a connection needs from its server. Called on the connection's strand, except ended() (any thread).
class HttpConnectionHost {
 public:
  // A complete request: answer it through the connection's reply() or begin_stream(), now or later.
  virtual void handle(const std::shared_ptr<HttpConnection>& connection, HttpRequest& request) = 0;
  // The answer to a request that could not be read as HTTP (400, 413 body too large, 431 header too large).
  virtual HttpReply unreadable_request(int status, const std::string& message) = 0;
  // Called when a request's header is complete, before its body is read: an answer here (a missing Host, a wrong
  // API key) is sent without reading the body, and the connection then closes.
  virtual std::optional<HttpReply> refuse_header(const HttpRequest& request) = 0;
  // An answer ended: written whole (`completed`), or cut short because the client went away or the connection
  // closed. For the access log: the request line, the status sent (0: none), body bytes written, seconds taken.
  virtual void answered(const HttpConnection& connection, const std::string& request_line, int status, uint64_t bytes,
                        double seconds, bool completed) = 0;
  // The connection is being closed because it passed a limit; `reason` is the metric label ("idle_timeout", ...).
  virtual void closed_by_limit(const HttpConnection& connection, std::string_view reason, const std::string& why) = 0;
  // The connection object is going away.
  virtual void ended(const HttpConnection* connection) = 0;

 protected:
  ~HttpConnectionHost() = default;
};

class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  // The socket's executor must be a strand (or the only I/O thread): every handler of the connection runs on it.
  HttpConnection(boost::asio::ip::tcp::socket socket, HttpConnectionHost& host, const HttpLimits& limits);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // ---- from any thread
  void start();
  // Runs `task` on the connection's strand.
  void post(std::function<void()> task);
  // The server is shutting down: every answer from now on closes the connection ("Connection: close"). With
  // `close_unanswered`, a connection not being answered (idle, reading a request, closing) closes at once.
  void drain(bool close_unanswered = false);
  // Closes at once (an unfinished answer's on_gone runs).
  void close();

  // ---- on the strand, for the request being answered (calls after the client went away do nothing)
  void reply(HttpReply reply);
  void begin_stream(HttpReply head);
  void stream(std::string_view data);
  void end_stream();
  // Headers every answer to the current request carries (CORS), set before reply() / begin_stream().
  void add_answer_headers(std::vector<std::pair<std::string, std::string>> headers);
  // Runs once if the client goes away, a write fails or passes its deadline, or the server closes the connection
  // before the answer ended.
  void on_gone(std::function<void()> callback);
  bool gone() const { return state_ == State::Closed; }

  const std::string& peer() const { return peer_; }

 private:
  enum class State { Idle, Header, Body, Answering, Closing, Closed };

  void read();
  void on_read(const boost::system::error_code& error, size_t bytes);
  void begin_request();
  void parse();
  void dispatch();
  void refuse_unreadable(const boost::system::error_code& error);
  // Answers `reply` to the request being read and closes after it (the rest of the request is not read).
  void refuse(const HttpReply& reply);
  void send_continue();
  std::string head(const HttpReply& reply, std::optional<uint64_t> content_length, bool chunked);
  void flush();
  void on_written(const boost::system::error_code& error);
  void answer_done();
  void start_closing();
  void arm(std::chrono::milliseconds timeout);
  void disarm();
  void deadline_passed();
  void close_now();

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  uint64_t deadline_generation_ = 0;  // a timer handler of an older arm() finds it changed and does nothing
  HttpConnectionHost& host_;
  HttpLimits limits_;
  std::string peer_;

  State state_ = State::Idle;
  boost::beast::flat_buffer buffer_;  // read, not yet parsed (the rest of a request, pipelined ones)
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool reading_ = false;  // an async_read_some is pending
  bool writing_ = false;  // an async_write is pending
  bool draining_ = false;
  std::string out_;      // being written
  std::string pending_;  // to write once out_ is written

  // The request being answered.
  unsigned version_ = 11;  // 10 or 11
  bool head_only_ = false;
  bool close_after_ = false;  // "Connection: close": the client's wish, HTTP/1.0 without keep-alive, or shutdown
  bool streaming_ = false;
  bool chunked_ = false;
  bool answer_ended_ = false;  // everything of the answer is in out_ / pending_
  std::function<void()> on_gone_;
  std::vector<std::pair<std::string, std::string>> answer_headers_;
  // For the access log.
  std::string request_line_;  // "POST /v1/completions HTTP/1.1"
  int status_ = 0;            // sent; 0 before the head went out
  uint64_t body_bytes_ = 0;   // of the answer's body, as queued
  std::chrono::steady_clock::time_point request_start_{};
  void log_answer(bool completed);
};

}  // namespace nvfp4lm::serve
