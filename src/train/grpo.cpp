// See grpo.h.
#include "train/grpo.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "core/error.h"
#include "core/rng.h"
#include "core/text_excerpt.h"
#include "data/dataset_records.h"
#include "ops/cross_entropy.h"

namespace nvfp4lm {
namespace {

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

// A number written as in answers ("1,234", "-3.50", "42."); nullopt for anything else.
std::optional<double> as_number(std::string_view text) {
  std::string digits;
  for (char c : trim(text))
    if (c != ',') digits += c;
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

bool answers_match(const std::string& got, const nlohmann::json& expected) {
  const std::string want = expected.is_string() ? expected.get<std::string>() : expected.dump();
  const std::optional<double> a = as_number(got), b = as_number(want);
  if (a && b) return std::fabs(*a - *b) <= 1e-9 * std::max(1.0, std::fabs(*b));
  return trim(got) == trim(want);
}

// Runs `command` under /bin/sh with `input` on its stdin; its stdout, or an Error naming the command (exit status,
// or the timeout, after which the command's process group is killed).
std::string run_reward_command(const std::string& command, const std::string& input, double timeout_seconds) {
  int to_child[2], from_child[2];
  NVFP4LM_CHECK(pipe(to_child) == 0 && pipe(from_child) == 0, "--reward command: cannot create pipes");
  const pid_t pid = fork();
  NVFP4LM_CHECK(pid >= 0, "--reward command: cannot start {}", quoted_excerpt(command));
  if (pid == 0) {
    setpgid(0, 0);
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    close(to_child[1]);
    close(from_child[0]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  fcntl(to_child[1], F_SETFL, O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);  // a command that stops reading must not end this process
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::string output;
  size_t written = 0;
  int in_fd = to_child[1];
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  bool open_out = true, timed_out = false;
  while (open_out) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{from_child[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
    const int ready = poll(fds, in_fd >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0) continue;
    if (in_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[65536];
      const ssize_t n = read(from_child[0], buffer, sizeof(buffer));
      if (n > 0) {
        output.append(buffer, static_cast<size_t>(n));
      } else {
        open_out = false;
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(from_child[0]);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  NVFP4LM_CHECK(!timed_out, "--reward command {} took more than {:g} s (--reward-timeout) for {} completions",
                quoted_excerpt(command), timeout_seconds, std::count(input.begin(), input.end(), '\n'));
  NVFP4LM_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "--reward command {} failed ({})",
                quoted_excerpt(command),
                WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status)) : std::string("killed"));
  return output;
}

}  // namespace

uint64_t rollout_seed(uint64_t seed, int64_t step, int64_t completion) {
  return mix64(seed ^
               mix64(0x6772706f00000000ULL + (static_cast<uint64_t>(step) << 24) + static_cast<uint64_t>(completion)));
}

RewardSpec parse_reward_spec(std::string_view text) {
  RewardSpec spec;
  auto with_argument = [&](std::string_view prefix, RewardKind kind) {
    if (text.substr(0, prefix.size()) != prefix) return false;
    spec.kind = kind;
    spec.argument = std::string(text.substr(prefix.size()));
    NVFP4LM_CHECK(!spec.argument.empty(), "--reward {}: give the {} after the colon", text,
                  kind == RewardKind::Regex ? "pattern" : "command");
    return true;
  };
  if (text == "exact") {
    spec.kind = RewardKind::Exact;
  } else if (text == "json") {
    spec.kind = RewardKind::Json;
  } else if (!with_argument("regex:", RewardKind::Regex) && !with_argument("command:", RewardKind::Command)) {
    NVFP4LM_FAIL("unknown --reward {}; use exact (the record's \"answer\"), regex:PATTERN, json or command:CMD",
                 quoted_excerpt(text));
  }
  if (spec.kind == RewardKind::Regex) {
    try {
      std::regex check(spec.argument);
    } catch (const std::regex_error& e) {
      NVFP4LM_FAIL("--reward regex:{}: not an ECMAScript regular expression ({})", spec.argument, e.what());
    }
  }
  return spec;
}

std::string reward_spec_text(const RewardSpec& spec) {
  switch (spec.kind) {
    case RewardKind::Exact:
      return "exact";
    case RewardKind::Json:
      return "json";
    case RewardKind::Regex:
      return "regex:" + spec.argument;
    case RewardKind::Command:
      return "command:" + spec.argument;
  }
  return "?";
}

std::string extract_final_answer(std::string_view text) {
  if (const size_t at = text.rfind("####"); at != std::string_view::npos) return std::string(trim(text.substr(at + 4)));
  if (const size_t at = text.rfind("\\boxed{"); at != std::string_view::npos) {
    int depth = 1;
    for (size_t i = at + 7; i < text.size(); ++i) {
      depth += text[i] == '{' ? 1 : (text[i] == '}' ? -1 : 0);
      if (depth == 0) return std::string(trim(text.substr(at + 7, i - at - 7)));
    }
  }
  static const std::regex number(R"(-?\d[\d,]*(\.\d+)?)");
  std::string last;
  for (auto it = std::cregex_iterator(text.data(), text.data() + text.size(), number); it != std::cregex_iterator();
       ++it)
    last = it->str();
  return last;
}

namespace {

// What --reward exact compares with: the record's "answer".
bool has_answer(const nlohmann::json& record) {
  return record.is_object() && record.contains("answer") && !record["answer"].is_null();
}

}  // namespace

void check_prompts_for_reward(const RewardSpec& spec, const std::vector<nlohmann::json>& records,
                              const std::vector<Sample>& samples, const std::string& file) {
  if (spec.kind != RewardKind::Exact) return;
  NVFP4LM_ASSERT(records.size() == samples.size(), "{} records, {} prompts", records.size(), samples.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& record = records[i];
    NVFP4LM_CHECK(has_answer(record),
                  "{}: --reward exact compares with each prompt's \"answer\", and this one has none: {}",
                  data::where(file, samples[i].source_line), quoted_excerpt(record.dump(), 120));
  }
}

std::vector<double> score_completions(const RewardSpec& spec, const std::vector<const nlohmann::json*>& records,
                                      const std::vector<const Completion*>& completions) {
  NVFP4LM_ASSERT(records.size() == completions.size(), "{} records for {} completions", records.size(),
                 completions.size());
  std::vector<double> rewards(completions.size(), 0.0);
  if (spec.kind == RewardKind::Command) {
    std::string input;
    for (size_t i = 0; i < completions.size(); ++i) {
      nlohmann::json line = *records[i];
      line["completion"] = completions[i]->text;
      input += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    const std::string output = run_reward_command(spec.argument, input, spec.timeout_seconds);
    size_t at = 0;
    for (size_t i = 0; i < completions.size(); ++i) {
      NVFP4LM_CHECK(at < output.size(), "--reward command {} printed {} lines for {} completions (one number a line)",
                    quoted_excerpt(spec.argument), i, completions.size());
      const size_t end = std::min(output.find('\n', at), output.size());
      const std::optional<double> value = as_number(std::string_view(output).substr(at, end - at));
      NVFP4LM_CHECK(value.has_value(), "--reward command {}: line {} of its output is {}, not a number",
                    quoted_excerpt(spec.argument), i + 1, quoted_excerpt(output.substr(at, end - at)));
      rewards[i] = *value;
      at = end + 1;
    }
    NVFP4LM_CHECK(trim(std::string_view(output).substr(std::min(at, output.size()))).empty(),
                  "--reward command {} printed more lines than the {} completions", quoted_excerpt(spec.argument),
                  completions.size());
    return rewards;
  }
  std::optional<std::regex> pattern;
  if (spec.kind == RewardKind::Regex) pattern.emplace(spec.argument);
  for (size_t i = 0; i < completions.size(); ++i) {
    const std::string& text = completions[i]->text;
    switch (spec.kind) {
      case RewardKind::Exact: {
        const nlohmann::json& record = *records[i];
        NVFP4LM_CHECK(has_answer(record),
                      "--reward exact compares with each prompt's \"answer\", and a prompt has none: {}",
                      quoted_excerpt(record.dump(), 120));
        rewards[i] = answers_match(extract_final_answer(text), record["answer"]) ? 1.0 : 0.0;
        break;
      }
      case RewardKind::Regex:
        rewards[i] = std::regex_search(text, *pattern) ? 1.0 : 0.0;
        break;
      case RewardKind::Json:
        rewards[i] = nlohmann::json::accept(text) ? 1.0 : 0.0;
        break;
      case RewardKind::Command:
        break;
    }
  }
  return rewards;
}

std::vector<float> group_advantages(const std::vector<double>& rewards, int64_t group) {
  NVFP4LM_ASSERT(group >= 1 && rewards.size() % static_cast<size_t>(group) == 0, "{} rewards in groups of {}",
                 rewards.size(), group);
  std::vector<float> advantages(rewards.size());
  for (size_t first = 0; first < rewards.size(); first += static_cast<size_t>(group)) {
    double mean = 0;
    for (int64_t k = 0; k < group; ++k) mean += rewards[first + static_cast<size_t>(k)];
    mean /= static_cast<double>(group);
    double squares = 0;
    for (int64_t k = 0; k < group; ++k) squares += std::pow(rewards[first + static_cast<size_t>(k)] - mean, 2);
    const double std_dev = group > 1 ? std::sqrt(squares / static_cast<double>(group - 1)) : 0.0;
    for (int64_t k = 0; k < group; ++k)
      advantages[first + static_cast<size_t>(k)] =
          static_cast<float>((rewards[first + static_cast<size_t>(k)] - mean) / (std_dev + 1e-4));
  }
  return advantages;
}

TrainBatch completion_batch(const std::vector<const std::vector<int32_t>*>& prompts,
                            const std::vector<const Completion*>& completions, const std::vector<float>& advantages,
                            int32_t pad_id) {
  const auto rows = static_cast<int64_t>(completions.size());
  NVFP4LM_ASSERT(rows > 0 && prompts.size() == completions.size() && advantages.size() == completions.size(),
                 "completion_batch: {} prompts, {} completions, {} advantages", prompts.size(), completions.size(),
                 advantages.size());
  int64_t width = 1;
  for (int64_t r = 0; r < rows; ++r)
    width = std::max<int64_t>(width, prompts[r]->size() + completions[r]->tokens.size());
  TrainBatch batch;
  batch.ids = Tensor::empty({rows, width}, DType::I32);
  batch.targets = Tensor::empty({rows, width}, DType::I32);
  int32_t* ids = batch.ids.data<int32_t>();
  int32_t* targets = batch.targets.data<int32_t>();
  std::fill_n(ids, rows * width, pad_id);
  std::fill_n(targets, rows * width, kIgnoreIndex);
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<int32_t>& prompt = *prompts[r];
    const std::vector<int32_t>& answer = completions[r]->tokens;
    int32_t* row = ids + r * width;
    std::copy(prompt.begin(), prompt.end(), row);
    std::copy(answer.begin(), answer.end(), row + prompt.size());
    // Position t predicts token t + 1: the completion's tokens are predicted from the prompt's last position on.
    for (size_t k = 0; k < answer.size(); ++k)
      targets[r * width + static_cast<int64_t>(prompt.size() + k) - 1] = answer[k];
  }
  batch.advantages = advantages;
  return batch;
}

}  // namespace nvfp4lm
