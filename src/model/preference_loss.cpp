// See preference_loss.h.
#include "model/preference_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/text_excerpt.h"

namespace nvfp4lm {

std::string_view preference_loss_name(PreferenceLossType type) {
  return type == PreferenceLossType::Ipo ? "ipo" : "sigmoid";
}

PreferenceLossType parse_preference_loss(std::string_view name) {
  if (name == "sigmoid") return PreferenceLossType::Sigmoid;
  if (name == "ipo") return PreferenceLossType::Ipo;
  NVFP4LM_FAIL("unknown --dpo-loss {}; use sigmoid (DPO) or ipo", quoted_excerpt(name));
}

PreferencePairLoss preference_pair_loss(const PreferenceSettings& settings, const PreferencePair& pair) {
  NVFP4LM_ASSERT(pair.chosen_tokens > 0 && pair.rejected_tokens > 0, "a preference pair with an empty completion");
  const double beta = settings.beta;
  const double chosen_logratio = pair.chosen_logp - pair.ref_chosen_logp;
  const double rejected_logratio = pair.rejected_logp - pair.ref_rejected_logp;
  PreferencePairLoss out;
  out.chosen_reward = beta * chosen_logratio;
  out.rejected_reward = beta * rejected_logratio;
  if (settings.type == PreferenceLossType::Sigmoid) {
    // loss = -log σ(z) = log(1 + e^-z), z = β (chosen - rejected); d loss / dz = -σ(-z).
    const double z = beta * (chosen_logratio - rejected_logratio);
    out.loss = z > 0 ? std::log1p(std::exp(-z)) : -z + std::log1p(std::exp(z));
    const double sigma_minus_z = z > 0 ? std::exp(-z) / (1 + std::exp(-z)) : 1 / (1 + std::exp(z));
    out.d_chosen = -beta * sigma_minus_z;
    out.d_rejected = beta * sigma_minus_z;
  } else {
    const auto n_chosen = static_cast<double>(pair.chosen_tokens);
    const auto n_rejected = static_cast<double>(pair.rejected_tokens);
    const double h = chosen_logratio / n_chosen - rejected_logratio / n_rejected - 1 / (2 * beta);
    out.loss = h * h;
    out.d_chosen = 2 * h / n_chosen;
    out.d_rejected = -2 * h / n_rejected;
  }
  return out;
}

PolicyGradientToken policy_gradient_token(const PolicyGradientSettings& settings, double logp, double old_logp,
                                          double advantage, double ref_logp) {
  PolicyGradientToken out;
  const double ratio = std::exp(logp - old_logp);
  const double unclipped = ratio * advantage;
  const double clipped = std::clamp(ratio, 1.0 - settings.epsilon_low, 1.0 + settings.epsilon_high) * advantage;
  // min picks the clipped term only where it is smaller, i.e. outside the range in the direction A pushes: there
  // the clamp's derivative is 0. Inside the range both are r · A, whose derivative in log π is r · A.
  out.clipped = clipped < unclipped;
  out.loss = -std::min(unclipped, clipped);
  out.d_logp = out.clipped ? 0.0 : -unclipped;
  if (settings.beta > 0) {
    const double delta = ref_logp - logp;
    out.kl = std::exp(delta) - delta - 1;
    out.loss += settings.beta * out.kl;
    out.d_logp += settings.beta * (1 - std::exp(delta));  // d k3 / d log π = -e^δ + 1
  }
  return out;
}

}  // namespace nvfp4lm
