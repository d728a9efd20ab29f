// What tests/lib/gtest_mpi_main.cpp offers the MPI test files: the job's
// rank and size, the arguments GTest left over, and extra modes (a test
// binary that is also a tool for a script, e.g. test_checkpoint
// --write-loop) that run instead of the tests when argv[1] names them.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace pentad::test {

inline int job_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int job_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// argv[1..] after MPI_Init and InitGoogleTest took theirs.
const std::vector<std::string>& test_args();

// A mode: test_binary FLAG ARGS... runs fn({FLAG, ARGS...}) instead of the
// tests; its return value is the exit code (the mode agrees it over the
// job itself). Register at namespace scope: `const bool k = add_mode(...)`.
using Mode = int (*)(const std::vector<std::string>& args);
bool add_mode(const char* flag, Mode fn);

}  // namespace pentad::test
