// Direct preference optimization's losses (DPO, Rafailov et al. 2023; IPO, Azar et al. 2023) for one pair of
// completions of one prompt, as TRL's DPOTrainer computes them (trl/trainer/dpo_trainer.py, _compute_loss, at
// huggingface/trl f2cd577): with the summed log-probabilities of each completion's tokens under the policy (π) and
// the reference (π_ref),
//   chosen_logratio   = log π(chosen)   - log π_ref(chosen)
//   rejected_logratio = log π(rejected) - log π_ref(rejected)
//   sigmoid (DPO):  loss = -log σ(β · (chosen_logratio - rejected_logratio))
//   ipo:            loss = (chosen_logratio / n_chosen - rejected_logratio / n_rejected - 1 / (2β))²
// (IPO's log-ratios are per completion token: TRL divides by the completion's length, as the IPO authors' results
// do). Rewards, the metrics TRL logs under rewards/chosen and rewards/rejected, are β · the summed log-ratios for
// both losses; a pair is "accurate" when its chosen reward is the larger.
//
// The derivatives with respect to the two policy log-probabilities are what the loss head needs: the gradient of a
// completion's summed log-probability is minus its cross-entropy's, so each completion's token rows get the
// cross-entropy gradient scaled by -d_chosen or -d_rejected (model/train_loss.cpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace nvfp4lm {

enum class PreferenceLossType { Sigmoid, Ipo };
std::string_view preference_loss_name(PreferenceLossType type);   // "sigmoid", "ipo" (TRL's loss_type)
PreferenceLossType parse_preference_loss(std::string_view name);  // Error naming --dpo-loss and the choices

struct PreferenceSettings {
  PreferenceLossType type = PreferenceLossType::Sigmoid;
  double beta = 0.1;  // TRL's default
};

// One pair's log-probabilities (summed over its completion's trained tokens) and token counts.
struct PreferencePair {
  double chosen_logp = 0, rejected_logp = 0;          // policy
  double ref_chosen_logp = 0, ref_rejected_logp = 0;  // reference
  int64_t chosen_tokens = 0, rejected_tokens = 0;
};

struct PreferencePairLoss {
  double loss = 0;
  double d_chosen = 0;                            // d loss / d chosen_logp
  double d_rejected = 0;                          // d loss / d rejected_logp
  double chosen_reward = 0, rejected_reward = 0;  // β · log-ratio
};

// In double, stable for any |β · Δ| (log σ and σ without overflow). Token counts must be positive.
PreferencePairLoss preference_pair_loss(const PreferenceSettings& settings, const PreferencePair& pair);

// GRPO's clipped policy-gradient loss per completion token, as TRL's GRPOTrainer computes it
// (trl/trainer/grpo_trainer.py, _compute_loss, at huggingface/trl f2cd577), for the token-level loss types (dapo,
// bnpo, grpo differ only in what the sum is divided by):
//   r    = exp(log π - log π_old)                       (π_old: the policy that sampled; r = 1 when it is this one)
//   loss = -min(r · A, clamp(r, 1 - ε_low, 1 + ε_high) · A) + β · (exp(log π_ref - log π) - (log π_ref - log π) - 1)
// with A the completion's advantage and the last term the k3 estimate of KL(π ‖ π_ref) (β = 0: none, TRL's default).
struct PolicyGradientSettings {
  double epsilon_low = 0.2, epsilon_high = 0.2;  // TRL's epsilon (epsilon_high defaults to it)
  double beta = 0.0;                             // the KL term's weight
};

struct PolicyGradientToken {
  double loss = 0;
  double d_logp = 0;     // d loss / d log π
  double kl = 0;         // the k3 term (0 without a reference)
  bool clipped = false;  // the clipped branch was taken: no policy-gradient signal (TRL's clip_ratio counts these)
};

// One token: log π, log π_old, A, and log π_ref (only read when settings.beta > 0).
PolicyGradientToken policy_gradient_token(const PolicyGradientSettings& settings, double logp, double old_logp,
                                          double advantage, double ref_logp);

}  // namespace nvfp4lm
