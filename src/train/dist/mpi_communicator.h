// MPI as the transport of a data-parallel run: the ranks `mpirun -np N` or Slurm's `srun` start (issue 32). Built
// when CMake finds an MPI (Debian: libopenmpi-dev; NVFP4LM_HAS_MPI); without it, asking for it is an Error that says
// how to get it. Only byte movement goes through MPI (MPI_Allgather, MPI_Alltoall, MPI_Bcast, MPI_Gather); the sums are
// ordered_reduce.h's, so the result does not depend on the MPI library's reduction algorithm.
//
// MPI's default error handler stays (errors are fatal: the job is aborted), and mpirun ends every rank when one
// dies, so a killed rank stops the run instead of leaving the others waiting in a collective.
#pragma once

#include <memory>
#include <string>

#include "train/dist/communicator.h"

namespace nvfp4lm {

// Whether this nvfp4lm was built with MPI.
bool mpi_available();
// Whether the environment says this process is one rank of several (Open MPI's OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE,
// Slurm's SLURM_NTASKS under srun) — checked before MPI is initialised, so a plain run never starts it.
bool launched_as_ranks();
// This rank's index among the ranks on its node, from the launcher's environment (Open MPI's
// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, Slurm's SLURM_LOCALID, PMI_LOCAL_RANK); -1 when none says.
// A GPU rank trains on the GPU of that index (one GPU a rank, as NCCL needs).
int local_rank_from_environment();
// MPI_COMM_WORLD, MPI initialised on the first call (MPI_THREAD_FUNNELED: only the calling thread communicates) and
// finalised at exit. Error when built without MPI.
std::unique_ptr<Communicator> mpi_world();
// A failed rank of a multi-rank MPI job ends the whole job now (MPI_Abort with `exit_code`: mpirun / srun stop every
// rank) instead of leaving the others waiting in a collective. Returns when MPI is not running or has one rank.
void abort_mpi_job(int exit_code);
// "rank 1 of 3" in a running multi-rank MPI job, else "": for error messages.
std::string mpi_rank_label();

}  // namespace nvfp4lm
