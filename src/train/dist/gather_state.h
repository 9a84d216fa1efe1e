// The sharded optimizer state of a data-parallel run (train/dist/data_parallel.h) brought together on rank 0, which
// writes the checkpoint: the same optimizer.safetensors one process writes (its tensors in parameter order, every
// rank's shard being a contiguous run of that order), so a checkpoint does not depend on the number of ranks and a
// run resumes on any other number (each rank then loads its shard's state: load_checkpoint's OptimizerShard).
#pragma once

#include <vector>

#include "model/parameter.h"
#include "train/dist/communicator.h"

namespace nvfp4lm {

// Every rank passes its optimizer's state_tensors() (CPU, or a GPU rank's: copied to host memory to travel). Rank 0
// gets every rank's, in rank order: its own as given (views), the others' as new host tensors; the other ranks get an
// empty list. The bytes travel in pieces (a rank's extra memory is one piece, rank 0's the other ranks' state).
std::vector<NamedTensor> gather_state_on_rank0(Communicator& comm, const std::vector<NamedTensor>& mine);

}  // namespace nvfp4lm
