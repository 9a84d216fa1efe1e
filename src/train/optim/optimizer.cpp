#include "train/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "io/checksum.h"
#include "train/optim/adamw.h"
#include "train/optim/adamw8bit.h"
#include "train/optim/stochastic_rounding.h"

namespace nvfp4lm {

void check_adamw_options(const AdamWOptions& o) {
  NVFP4LM_CHECK(o.beta1 >= 0 && o.beta1 < 1, "AdamW beta1 = {} must be in [0, 1)", o.beta1);
  NVFP4LM_CHECK(o.beta2 >= 0 && o.beta2 < 1, "AdamW beta2 = {} must be in [0, 1)", o.beta2);
  NVFP4LM_CHECK(o.eps > 0 && std::isfinite(o.eps), "AdamW eps = {} must be positive and finite", o.eps);
  NVFP4LM_CHECK(o.weight_decay >= 0 && std::isfinite(o.weight_decay),
                "AdamW weight decay = {} must be non-negative and finite", o.weight_decay);
}

Optimizer::Optimizer(std::span<const Parameter> parameters, const AdamWOptions& options) : options_(options) {
  check_adamw_options(options);
  check_parameters(parameters);
  if (!parameters.empty()) device_ = parameters.front().value.device();
  slots_.reserve(parameters.size());
  for (const Parameter& parameter : parameters) {
    NVFP4LM_CHECK(parameter.value.device() == device_,
                  "optimizer: parameter {} is on {} but {} is on {}; one optimizer updates parameters on one device",
                  parameter.name, parameter.value.device().str(), parameters.front().name, device_.str());
    slot_by_name_.emplace(parameter.name, slots_.size());
    slots_.push_back({parameter.name, parameter.value.shape(), parameter.weight_decay,
                      xxh64(parameter.name.data(), parameter.name.size())});
  }
}

void Optimizer::set_step_count(int64_t steps) {
  NVFP4LM_CHECK(steps >= 0, "optimizer step count {} must be non-negative", steps);
  step_count_ = steps;
}

size_t Optimizer::find_slot(const Parameter& parameter, size_t position) const {
  size_t index = position;
  if (index >= slots_.size() || slots_[index].name != parameter.name) {
    auto it = slot_by_name_.find(parameter.name);
    NVFP4LM_ASSERT(it != slot_by_name_.end(), "parameter {} was not given to the optimizer when it was built",
                   parameter.name);
    index = it->second;
  }
  NVFP4LM_ASSERT(slots_[index].shape == parameter.value.shape(), "parameter {} changed shape from {} to {}",
                 parameter.name, slots_[index].shape.str(), parameter.value.shape().str());
  return index;
}

void Optimizer::step(std::span<Parameter> parameters, double lr, float grad_multiplier, UpdatedMasterAmaxes* amaxes) {
  NVFP4LM_ASSERT(parameters.size() == slots_.size(), "optimizer built for {} parameters, step() given {}",
                 slots_.size(), parameters.size());
  begin_step(lr, grad_multiplier);
  try {
    update_parameters(parameters, amaxes);
  } catch (...) {
    pending_.reset();  // the checks run before any update: nothing changed, the optimizer stays usable
    throw;
  }
  end_step();
}

void Optimizer::begin_step(double lr, float grad_multiplier) {
  NVFP4LM_CHECK(std::isfinite(lr) && lr >= 0, "learning rate {} must be non-negative and finite", lr);
  NVFP4LM_ASSERT(std::isfinite(grad_multiplier), "gradient multiplier {} is not finite", grad_multiplier);
  NVFP4LM_ASSERT(!pending_, "optimizer step {} was begun and not ended", step_count_ + 1);
  pending_ = PendingStep{lr, grad_multiplier, std::vector<bool>(slots_.size(), false)};
}

void Optimizer::visit(std::span<const Parameter> parameters, std::vector<size_t>& slots) {
  NVFP4LM_ASSERT(pending_, "optimizer: parameters updated outside begin_step() / end_step()");
  check_parameters(parameters);
  // Devices and repeats are checked before any update, so an error leaves every parameter as it was.
  for (size_t position = 0; position < parameters.size(); ++position) {
    const Parameter& parameter = parameters[position];
    NVFP4LM_CHECK(parameter.value.device() == device_,
                  "optimizer: parameter {} is on {} but the optimizer's state is on {}; build the optimizer after "
                  "moving the model to the device it trains on",
                  parameter.name, parameter.value.device().str(), device_.str());
    const size_t index = find_slot(parameter, position);
    NVFP4LM_ASSERT(!pending_->visited[index], "optimizer step {}: parameter {} was already updated", step_count_ + 1,
                   parameter.name);
    slots.push_back(index);
  }
  for (size_t index : slots) pending_->visited[index] = true;
}

void Optimizer::update_parameters(std::span<Parameter> parameters, UpdatedMasterAmaxes* amaxes) {
  std::vector<size_t> slots;
  visit(parameters, slots);
  AmaxAccumulator* accumulators = nullptr;  // one per parameter, in order
  if (amaxes != nullptr) {
    std::vector<Tensor> masters;
    masters.reserve(parameters.size());
    for (const Parameter& parameter : parameters) masters.push_back(parameter.value);
    accumulators = amaxes->record(masters);
  }
  const int64_t t = step_count_ + 1;
  for (size_t position = 0; position < parameters.size(); ++position) {
    const size_t index = slots[position];
    const double decay = parameters[position].weight_decay ? options_.weight_decay : 0.0;
    const AdamWScalars scalars =
        adamw_scalars(pending_->lr, options_.beta1, options_.beta2, options_.eps, decay, t, pending_->grad_multiplier);
    const uint64_t seed = master_rounding_seed(options_.seed, static_cast<uint64_t>(t), slots_[index].key);
    const Tensor& value = parameters[position].value;
    const int64_t elements = value.numel();
    int64_t chunk = elements;
    if (chunk_rows_ > 0 && value.rank() >= 2 && value.dim(0) > 0) {  // rows of a matrix; vectors stay whole
      const int64_t align = chunk_alignment();
      chunk = std::min(elements, chunk_rows_ * (elements / value.dim(0)));
      chunk = std::max<int64_t>(align, (chunk + align - 1) / align * align);
    }
    int64_t begin = 0;
    do {
      const int64_t count = std::min(chunk, elements - begin);
      update(index, parameters[position], scalars, seed, {begin, count},
             accumulators != nullptr ? accumulators + position : nullptr);
      begin += count;
    } while (begin < elements);
  }
}

void Optimizer::skip_parameters(std::span<const Parameter> parameters) {
  std::vector<size_t> slots;
  visit(parameters, slots);
}

bool Optimizer::step_has_updates() const {
  return pending_ && std::find(pending_->visited.begin(), pending_->visited.end(), true) != pending_->visited.end();
}

void Optimizer::cancel_step() {
  NVFP4LM_ASSERT(pending_, "optimizer: cancel_step() without begin_step()");
  NVFP4LM_ASSERT(!step_has_updates(), "optimizer step {}: cannot cancel a step that has updated parameters",
                 step_count_ + 1);
  pending_.reset();
}

void Optimizer::end_step() {
  NVFP4LM_ASSERT(pending_, "optimizer: end_step() without begin_step()");
  for (size_t index = 0; index < slots_.size(); ++index)
    NVFP4LM_ASSERT(pending_->visited[index], "optimizer step {}: parameter {} was never updated", step_count_ + 1,
                   slots_[index].name);
  pending_.reset();
  ++step_count_;
}

void Optimizer::set_chunk_rows(int64_t rows) {
  NVFP4LM_CHECK(rows >= 0, "--step-chunk-rows must be >= 0 (0: whole parameters), got {}", rows);
  chunk_rows_ = rows;
}

size_t Optimizer::state_bytes() const {
  size_t bytes = 0;
  for (const NamedTensor& entry : state_tensors()) bytes += entry.tensor.nbytes();
  return bytes;
}

nlohmann::json Optimizer::describe() const {
  return {{"kind", std::string(kind())}, {"step", step_count_}, {"beta1", options_.beta1},
          {"beta2", options_.beta2},     {"eps", options_.eps}, {"weight_decay", options_.weight_decay},
          {"seed", options_.seed}};
}

float store_master(void* data, bool is_bf16, int64_t i, float value, uint64_t rounding_seed) {
  if (is_bf16) {
    const float uniform = counter_uniform(rounding_seed, static_cast<uint64_t>(i));
    const uint16_t bits = float_to_bf16_stochastic(value, uniform);
    static_cast<uint16_t*>(data)[i] = bits;
    return bf16_to_float(bits);
  }
  static_cast<float*>(data)[i] = value;
  return value;
}

std::unique_ptr<Optimizer> make_optimizer(std::string_view kind, std::span<const Parameter> parameters,
                                          const AdamWOptions& options) {
  if (kind == "adamw") return std::make_unique<AdamW>(parameters, options);
  if (kind == "adamw8bit") return std::make_unique<AdamW8bit>(parameters, options);
  NVFP4LM_FAIL("unknown optimizer \"{}\"; choose adamw or adamw8bit", kind);
}

}  // namespace nvfp4lm
