// See mpi_communicator.h.
#include "train/dist/mpi_communicator.h"

#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.h"

#if NVFP4LM_HAS_MPI
// The C interface only: the deprecated C++ bindings that mpi.h pulls into C++ need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace nvfp4lm {

bool mpi_available() { return NVFP4LM_HAS_MPI != 0; }

bool launched_as_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 1) return true;
  }
  return false;
}

int local_rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::atoi(value);
  }
  return -1;
}

#if NVFP4LM_HAS_MPI
namespace {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  NVFP4LM_FAIL("{} failed: {}", call, std::string(text, static_cast<size_t>(length)));
}

int count_of(size_t bytes, const char* call) {
  NVFP4LM_ASSERT(bytes <= static_cast<size_t>(INT_MAX), "{} of {} bytes: MPI counts are int (callers send pieces)",
                 call, bytes);
  return static_cast<int>(bytes);
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      std::atexit(finalize_at_exit);
    }
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    library_ = std::string(version, static_cast<size_t>(length));
    library_ = library_.substr(0, library_.find_first_of(",\n"));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "MPI (" + library_ + "), " + std::to_string(size_) + " rank" + (size_ == 1 ? "" : "s");
  }
  void all_gather(std::span<const std::byte> send, std::span<std::byte> recv) override {
    NVFP4LM_ASSERT(recv.size() == send.size() * static_cast<size_t>(size_), "all_gather: {} bytes into {}", send.size(),
                   recv.size());
    const int count = count_of(send.size(), "MPI_Allgather");
    check_mpi(MPI_Allgather(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, MPI_COMM_WORLD),
              "MPI_Allgather");
  }
  void all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) override {
    NVFP4LM_ASSERT(send.size() % static_cast<size_t>(size_) == 0 && recv.size() == send.size(),
                   "all_to_all: {} bytes into {} over {} ranks", send.size(), recv.size(), size_);
    const int count = count_of(send.size() / static_cast<size_t>(size_), "MPI_Alltoall");
    check_mpi(MPI_Alltoall(send.data(), count, MPI_BYTE, recv.data(), count, MPI_BYTE, MPI_COMM_WORLD), "MPI_Alltoall");
  }
  void broadcast(std::span<std::byte> data, int root) override {
    check_mpi(MPI_Bcast(data.data(), count_of(data.size(), "MPI_Bcast"), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  void gather(std::span<const std::byte> send, std::span<std::byte> recv, int root) override {
    NVFP4LM_ASSERT(rank_ != root || recv.size() == send.size() * static_cast<size_t>(size_), "gather: {} bytes into {}",
                   send.size(), recv.size());
    const int count = count_of(send.size(), "MPI_Gather");
    check_mpi(MPI_Gather(send.data(), count, MPI_BYTE, rank_ == root ? recv.data() : nullptr, count, MPI_BYTE, root,
                         MPI_COMM_WORLD),
              "MPI_Gather");
  }

 private:
  int rank_ = 0, size_ = 1;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> mpi_world() { return std::make_unique<MpiWorld>(); }

std::string mpi_rank_label() {
  int initialized = 0, finalized = 0, size = 1, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return "";
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return size > 1 ? "rank " + std::to_string(rank) + " of " + std::to_string(size) : "";
}

void abort_mpi_job(int exit_code) {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
}

#else

std::unique_ptr<Communicator> mpi_world() {
  NVFP4LM_FAIL(
      "this nvfp4lm was built without MPI: install an MPI (Debian: apt-get install libopenmpi-dev openmpi-bin) and "
      "build again (CMake finds it; -DNVFP4LM_MPI=OFF leaves it out)");
}

std::string mpi_rank_label() { return ""; }

void abort_mpi_job(int) {}

#endif

}  // namespace nvfp4lm
