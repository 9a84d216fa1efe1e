// Run by ctest as `mpirun -np N test_dist_mpi N` (tests/CMakeLists.txt, label mpi): the ranks of MPI_COMM_WORLD sum
// 3 rounds of N terms each with reduce_scatter_ordered and gather the result with all_gather_shards (pieces of 5
// elements, so a round takes several collectives); every rank must hold, bit for bit, what one process adding the
// 3N terms one after the other holds, and all_reduce_ordered must give every rank the same sum. Exit 0 on every rank
// when all of that holds; a rank that finds a difference prints it and exits 1 (mpirun then fails the test).
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "train/dist/mpi_communicator.h"
#include "train/dist/ordered_reduce.h"
#include "train/dist_test_terms.h"

int main(int argc, char** argv) {
  using namespace nvfp4lm;
  const int expected_ranks = argc > 1 ? std::atoi(argv[1]) : 0;
  try {
    if (!launched_as_ranks()) {
      std::fprintf(stderr, "launched_as_ranks() is false under mpirun\n");
      return 1;
    }
    const std::unique_ptr<Communicator> comm = mpi_world();
    if (comm->size() != expected_ranks) {
      std::fprintf(stderr, "rank %d: %d ranks, expected %d\n", comm->rank(), comm->size(), expected_ranks);
      return 1;
    }
    int failures = 0;
    for (const int64_t n : {int64_t{1}, int64_t{37}, int64_t{1000}}) {
      const int rounds = 3;
      const std::vector<float> expected = test::dist_sequential_sum(n, rounds * comm->size());
      const ShardRange mine = shard_range(n, comm->size(), comm->rank());
      std::vector<float> sum(static_cast<size_t>(mine.size()), 0.0f);
      for (int round = 0; round < rounds; ++round)
        reduce_scatter_ordered(*comm, test::dist_term(n, static_cast<uint64_t>(round * comm->size() + comm->rank())),
                               sum, 5);
      std::vector<float> whole(static_cast<size_t>(n));
      all_gather_shards(*comm, sum, whole, 5);
      for (int64_t i = 0; i < n; ++i)
        if (std::bit_cast<uint32_t>(whole[static_cast<size_t>(i)]) !=
            std::bit_cast<uint32_t>(expected[static_cast<size_t>(i)])) {
          if (failures++ < 5)
            std::fprintf(stderr, "rank %d, n %lld, element %lld: %.9g, one process %.9g\n", comm->rank(),
                         static_cast<long long>(n), static_cast<long long>(i), whole[static_cast<size_t>(i)],
                         expected[static_cast<size_t>(i)]);
        }
    }
    const double total = all_reduce_ordered(*comm, 0.1 * (comm->rank() + 1));
    double expected_total = 0;
    for (int r = 0; r < comm->size(); ++r) expected_total += 0.1 * (r + 1);
    if (total != expected_total) {
      std::fprintf(stderr, "rank %d: all_reduce_ordered %.17g, expected %.17g\n", comm->rank(), total, expected_total);
      ++failures;
    }
    if (comm->rank() == 0 && failures == 0)
      std::printf("%s: ordered sums equal one process's\n", comm->describe().c_str());
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
