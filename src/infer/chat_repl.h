// The read-eval-print loop behind `nvfp4lm chat`, on streams so tests can drive it: reads a line, runs a
// command (/reset, /system TEXT, /exit, /help) or a chat turn, streams the answer to `out` (flushed per piece)
// followed by a newline, and writes notices and the per-turn statistics line to `err`. Ends at /exit or end of
// input (Ctrl-D). When `interactive` (a terminal), a "> " prompt marker is written to `out` before each read;
// under a pipe nothing but answers goes to `out`. A turn that fails with an Error (e.g. the context is full) is
// reported on `err` and the loop goes on.
#pragma once

#include <iosfwd>

#include "infer/chat_session.h"

namespace nvfp4lm {

struct ChatReplStats {
  int turns = 0;
  int errors = 0;
};

ChatReplStats run_chat_repl(ChatSession& session, std::istream& in, std::ostream& out, std::ostream& err,
                            bool interactive);

// The /help text.
const char* chat_help_text();

}  // namespace nvfp4lm
