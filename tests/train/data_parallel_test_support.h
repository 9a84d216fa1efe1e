// N Trainers as threads of one process (LocalGroup: the code every rank runs under mpirun), for the data-parallel
// tests on the CPU (test_trainer_data_parallel.cpp) and on the emulated GPU (cuda/test_data_parallel_cuda.cpp).
#pragma once

#include <omp.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/logging.h"
#include "train/dist/local_group.h"
#include "train/trainer.h"
#include "train/trainer_test_support.h"

namespace nvfp4lm::test {

struct RankResult {
  std::vector<double> losses;
  size_t optimizer_state_bytes = 0;
};

// `ranks` Trainers of `options`, one a thread with one OpenMP thread (OpenBLAS's GEMM sums depend on its thread
// count); every rank's losses and optimizer state size.
inline std::vector<RankResult> train_on_ranks(const TrainOptions& options, int ranks,
                                              const std::set<std::string>& given = {}) {
  std::vector<RankResult> results(static_cast<size_t>(ranks));
  const QuietInfoLogs quiet;  // once for all the ranks: the log level is the process's
  run_local_group(ranks, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::optional<Trainer> trainer;
    trainer.emplace(options, given, &comm);
    RankResult& result = results[static_cast<size_t>(comm.rank())];
    Trainer::Progress progress;
    progress.on_step = [&](const StepMetrics& m) { result.losses.push_back(m.loss); };
    trainer->run(progress);
    result.optimizer_state_bytes = trainer->optimizer().state_bytes();
  });
  return results;
}

}  // namespace nvfp4lm::test
