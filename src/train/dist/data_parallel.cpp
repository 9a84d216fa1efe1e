// See data_parallel.h.
#include "train/dist/data_parallel.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "train/optim/grad_clip.h"

namespace nvfp4lm {
namespace {

constexpr size_t kStatsFields = 12;  // LossStats as doubles (the counts are far below 2^53)

void append_stats(std::vector<double>& out, const LossStats& s) {
  out.insert(out.end(), {s.loss_sum, static_cast<double>(s.tokens), static_cast<double>(s.correct), s.kl_sum,
                         static_cast<double>(s.agree), static_cast<double>(s.pairs), s.chosen_reward_sum,
                         s.rejected_reward_sum, s.chosen_logp_sum, s.rejected_logp_sum,
                         static_cast<double>(s.preferred), static_cast<double>(s.clipped)});
}

LossStats stats_at(const std::vector<double>& all, size_t index) {
  const double* v = all.data() + index * kStatsFields;
  LossStats s;
  s.loss_sum = v[0];
  s.tokens = static_cast<int64_t>(v[1]);
  s.correct = static_cast<int64_t>(v[2]);
  s.kl_sum = v[3];
  s.agree = static_cast<int64_t>(v[4]);
  s.pairs = static_cast<int64_t>(v[5]);
  s.chosen_reward_sum = v[6];
  s.rejected_reward_sum = v[7];
  s.chosen_logp_sum = v[8];
  s.rejected_logp_sum = v[9];
  s.preferred = static_cast<int64_t>(v[10]);
  s.clipped = static_cast<int64_t>(v[11]);
  return s;
}

std::span<float> floats_of(const Tensor& t) {
  return {const_cast<Tensor&>(t).data<float>(), static_cast<size_t>(t.numel())};
}

}  // namespace

ParameterShards ParameterShards::balance(std::span<const Parameter> parameters, int ranks) {
  NVFP4LM_ASSERT(ranks >= 1, "{} ranks", ranks);
  int64_t total = 0;
  for (const Parameter& p : parameters) total += p.value.numel();
  ParameterShards shards;
  shards.first.push_back(0);
  size_t next = 0;
  int64_t done = 0;
  for (int r = 1; r < ranks; ++r) {
    // The elements ranks 0 .. r-1 should hold between them: r / ranks of all, rounded to a parameter boundary.
    const int64_t target = total * r / ranks;
    while (next < parameters.size() && done + parameters[next].value.numel() / 2 < target) {
      done += parameters[next].value.numel();
      ++next;
    }
    shards.first.push_back(next);
  }
  shards.first.push_back(parameters.size());
  return shards;
}

DataParallel::DataParallel(Communicator& comm, std::span<Parameter> parameters, DeviceCollectives* device)
    : comm_(&comm), parameters_(parameters), shards_(ParameterShards::balance(parameters, comm.size())) {
  check_parameters(parameters);
  const Device where = parameters.empty() ? Device::cpu() : parameters.front().value.device();
  for (const Parameter& p : parameters) {
    NVFP4LM_ASSERT(p.value.device() == where && p.grad.device() == where, "{} is on {}, the first parameter on {}",
                   p.name, p.value.device().str(), where.str());
    NVFP4LM_ASSERT(p.value.is_contiguous() && p.grad.is_contiguous(), "{}: master or gradient not contiguous", p.name);
  }
  if (where.is_cuda()) {
    NVFP4LM_ASSERT(device != nullptr, "DataParallel: parameters on {} and no device collectives", where.str());
    device_ = device;
  }
  element_bounds_.push_back(0);
  byte_bounds_.push_back(0);
  for (int r = 0; r < size(); ++r) {
    int64_t elements = 0, bytes = 0;
    for (size_t i = shards_.begin(r); i < shards_.end(r); ++i) {
      elements += parameters[i].value.numel();
      bytes += static_cast<int64_t>(parameters[i].value.nbytes());
    }
    element_bounds_.push_back(element_bounds_.back() + elements);
    byte_bounds_.push_back(byte_bounds_.back() + bytes);
  }
  for (size_t i = shards_.begin(rank()); i < shards_.end(rank()); ++i)
    owned_.push_back({parameters[i].name, parameters[i].value, parameters[i].grad, parameters[i].weight_decay});
}

void DataParallel::ensure_accumulators() {
  if (accumulators_) return;
  for (Parameter& p : owned_) p.grad = Tensor::zeros(p.value.shape(), DType::F32, Device::cpu());
  accumulators_ = true;
}

std::span<Parameter> DataParallel::owned() { return owned_; }

int64_t DataParallel::owned_elements() const { return element_bounds_[rank() + 1] - element_bounds_[rank()]; }

std::string DataParallel::describe_shard() const {
  const int64_t total = element_bounds_.back();
  return fmt::format("rank {} of {} owns {} of {} parameters ({:.1f} % of the elements)", rank(), size(), owned_.size(),
                     parameters_.size(),
                     total > 0 ? 100.0 * static_cast<double>(owned_elements()) / static_cast<double>(total) : 0.0);
}

std::string DataParallel::describe_exchange() const {
  if (device_ == nullptr) return "gradients summed in one process's order";
  return "gradients reduced onto their owners " + device_->describe();
}

void DataParallel::accumulate_on_device(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches,
                                        float grad_scale, const TrainLoss& loss, std::vector<double>& stats) {
  // The gradients (zeroed by the caller) add up in place over this rank's micro-batches, as on one GPU; then each
  // goes to its owner.
  for (size_t i = static_cast<size_t>(rank()); i < micro_batches.size(); i += static_cast<size_t>(size()))
    append_stats(stats, model.forward_backward(micro_batches[i], grad_scale, loss));
  device_->group_start();
  for (int owner = 0; owner < size(); ++owner)
    for (size_t i = shards_.begin(owner); i < shards_.end(owner); ++i) device_->reduce_sum(parameters_[i].grad, owner);
  device_->group_end();
}

DataParallel::StepOutcome DataParallel::accumulate(Qwen3Trainable& model, std::span<const TrainBatch> micro_batches,
                                                   float grad_scale, const TrainLoss& loss) {
  NVFP4LM_ASSERT(model.parameters().data() == parameters_.data(), "DataParallel: another model's parameters");
  const size_t k = micro_batches.size(), ranks = static_cast<size_t>(size());
  NVFP4LM_ASSERT(k >= 1, "a step of no micro-batches");
  StepOutcome outcome;
  std::vector<double> mine;  // this rank's micro-batches' statistics, in their order
  if (device_ != nullptr) {
    accumulate_on_device(model, micro_batches, grad_scale, loss, mine);
    outcome.update = owned_;
  } else if (ranks == 1 && k == 1) {
    // The gradient of the one micro-batch is the step's sum; the optimizer takes the model's own.
    model.zero_grad();
    append_stats(mine, model.forward_backward(micro_batches[0], grad_scale, loss));
    outcome.update = parameters_;
  } else {
    ensure_accumulators();
    for (Parameter& p : owned_) p.grad.zero();
    std::vector<std::span<float>> grads, sums;
    for (const Parameter& p : parameters_) grads.push_back(floats_of(p.grad));
    for (const Parameter& p : owned_) sums.push_back(floats_of(p.grad));
    const Segments<float> contribution(std::move(grads)), shard_sum(std::move(sums));
    for (size_t round = 0; round * ranks < k; ++round) {
      const size_t index = round * ranks + static_cast<size_t>(rank());
      model.zero_grad();
      if (index < k) append_stats(mine, model.forward_backward(micro_batches[index], grad_scale, loss));
      const int contributors = static_cast<int>(std::min(ranks, k - round * ranks));
      if (ranks == 1) {
        // One process: the same sum, without the exchange's copies.
        for (size_t i = 0; i < owned_.size(); ++i) {
          float* acc = owned_[i].grad.data<float>();
          const float* g = parameters_[i].grad.data<float>();
          const int64_t n = owned_[i].grad.numel();
#pragma omp parallel for schedule(static) if (n > 65536)
          for (int64_t e = 0; e < n; ++e) acc[e] += g[e];
        }
      } else {
        reduce_scatter_ordered(*comm_, contribution, element_bounds_, shard_sum, contributors);
      }
    }
    outcome.update = owned_;
  }
  outcome.stats = stats_in_order(mine, k);
  // The gradient norm: every rank's chunk partials, in parameter order.
  // (On CUDA each rank's sum of squares of its shard, summed on the device; a rank may own nothing.)
  const std::vector<double> partials = device_ == nullptr ? grad_square_partials(outcome.update)
                                       : outcome.update.empty()
                                           ? std::vector<double>{0.0}
                                           : std::vector<double>{grad_sum_of_squares(outcome.update)};
  outcome.grad_norm = std::sqrt(sum_in_order(ranks == 1 ? partials : all_gather_concatenated(*comm_, partials)));
  return outcome;
}

LossStats DataParallel::stats_in_order(const std::vector<double>& mine, size_t count) const {
  const size_t ranks = static_cast<size_t>(size());
  const std::vector<double> all = ranks == 1 ? mine : all_gather_concatenated(*comm_, mine);
  std::vector<size_t> start(ranks + 1, 0);  // where rank r's entries begin in `all`
  for (size_t r = 0; r < ranks; ++r) start[r + 1] = start[r] + (count > r ? (count - r + ranks - 1) / ranks : 0);
  NVFP4LM_ASSERT(all.size() == start[ranks] * kStatsFields, "gathered {} statistics values for {} items", all.size(),
                 count);
  LossStats total;
  for (size_t i = 0; i < count; ++i) total += stats_at(all, start[i % ranks] + i / ranks);
  return total;
}

LossStats DataParallel::sum_dealt(size_t count, const std::function<LossStats(size_t)>& compute) const {
  std::vector<double> mine;
  for (size_t i = static_cast<size_t>(rank()); i < count; i += static_cast<size_t>(size()))
    append_stats(mine, compute(i));
  return stats_in_order(mine, count);
}

void DataParallel::share_masters() {
  if (size() == 1) return;
  if (device_ != nullptr) {
    device_->group_start();
    for (int owner = 0; owner < size(); ++owner)
      for (size_t i = shards_.begin(owner); i < shards_.end(owner); ++i)
        device_->broadcast(parameters_[i].value, owner);
    device_->group_end();
    return;
  }
  std::vector<std::span<std::byte>> masters;
  for (Parameter& p : parameters_) masters.push_back({static_cast<std::byte*>(p.value.raw()), p.value.nbytes()});
  all_gather_shards(*comm_, Segments<std::byte>(std::move(masters)), byte_bounds_);
}

}  // namespace nvfp4lm
