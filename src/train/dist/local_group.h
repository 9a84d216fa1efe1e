// N ranks as threads of one process, exchanging through shared memory: the tests' data-parallel group (every rank's
// code runs as it would under mpirun, in one process), and the stand-in for a collective library's semantics where
// the library cannot run (NCCL refuses two ranks on one GPU; issue 32).
//
// run_local_group(n, body) starts n threads, each calling body with its rank's Communicator, and returns when all
// have. A rank whose body throws marks the group failed: every collective another rank is in, or enters, throws
// Error("rank R failed: ...") instead of waiting for it, so a fault ends the whole group (as a dead MPI rank must);
// run_local_group then rethrows the first failure.
#pragma once

#include <functional>

#include "train/dist/communicator.h"

namespace nvfp4lm {

void run_local_group(int ranks, const std::function<void(Communicator&)>& body);

}  // namespace nvfp4lm
