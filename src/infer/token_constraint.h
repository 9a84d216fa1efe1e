// TokenConstraint: the hook through which something outside the sampler limits which tokens a sequence may choose
// next (a grammar: constrain/grammar_constraint.h). The batch engine (batch_engine.h) asks it to mask the raw logits
// before every other sampling step (bias, penalties, temperature, top-k/p, greedy argmax), tells it the token
// chosen, and ends the answer once it says the text is closed. Without a constraint nothing of this runs, so
// unconstrained sequences are chosen exactly as before.
#pragma once

#include <cstdint>
#include <span>

namespace nvfp4lm {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logit of every token that may not come next to -inf. `remaining_tokens`: how many tokens the answer
  // may still have, this one included (the constraint keeps the text closable within them).
  virtual void mask_logits(std::span<float> logits, int64_t remaining_tokens) = 0;
  // The token chosen; false (and nothing changes) when it was not allowed.
  virtual bool accept(int32_t token) = 0;
  // The text is complete and nothing may follow: the answer ends with the token just accepted.
  virtual bool closed() const = 0;
};

}  // namespace nvfp4lm
