// See chat_repl.h.
#include "infer/chat_repl.h"

#include <istream>
#include <ostream>
#include <string>

#include "core/error.h"

namespace nvfp4lm {

const char* chat_help_text() {
  return "commands: /reset (forget the conversation), /system TEXT (set the system prompt and start over), "
         "/exit or Ctrl-D (quit), /help; start a message with // to send a leading '/'";
}

ChatReplStats run_chat_repl(ChatSession& session, std::istream& in, std::ostream& out, std::ostream& err,
                            bool interactive) {
  ChatReplStats stats;
  if (interactive) err << chat_help_text() << "\n";
  std::string line;
  for (;;) {
    if (interactive) out << "> " << std::flush;
    if (!std::getline(in, line)) {
      if (interactive) out << "\n";
      break;
    }
    const ChatInput input = parse_chat_input(line);
    switch (input.kind) {
      case ChatInput::Kind::Empty:
        continue;
      case ChatInput::Kind::Exit:
        return stats;
      case ChatInput::Kind::Help:
        err << chat_help_text() << "\n";
        continue;
      case ChatInput::Kind::Unknown:
        err << "unknown command '" << input.text << "'; " << chat_help_text() << "\n";
        continue;
      case ChatInput::Kind::Reset:
        session.reset();
        err << "[conversation reset]\n";
        continue;
      case ChatInput::Kind::System:
        session.set_system(input.text);
        err << (input.text.empty() ? "[system prompt removed; new conversation]\n"
                                   : "[system prompt set; new conversation]\n");
        continue;
      case ChatInput::Kind::Message:
        break;
    }
    try {
      const GenerationResult result = session.reply(input.text, [&](std::string_view piece) {
        out.write(piece.data(), static_cast<std::streamsize>(piece.size())).flush();
      });
      out << "\n" << std::flush;
      ++stats.turns;
      err << "[" << format_generation_stats(result.stats, session.generator().lm().device())
          << ", stop: " << stop_reason_name(result.stop_reason) << "]\n";
    } catch (const Error& e) {
      out << "\n" << std::flush;
      ++stats.errors;
      err << "error: " << e.what() << "\n";
    }
  }
  return stats;
}

}  // namespace nvfp4lm
