// The local fatal path (see error.hpp); the collective one is agree_or_throw
// (comm/host.hpp).
#include "core/error.hpp"

#include <unistd.h>

#include <cstdio>

namespace pentad {

namespace {
MPI_Comm g_job_comm = MPI_COMM_NULL;  // set by main: the communicator MPI_Abort ends
}

void set_job_comm(MPI_Comm comm) { g_job_comm = comm; }

void fatal_at(const char* file, int line, const std::string& what) {
  int rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool live = initialized && !finalized && g_job_comm != MPI_COMM_NULL;
  if (live) MPI_Comm_rank(g_job_comm, &rank);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "pentad: fatal error on rank %d (host %s) at %s:%d: %s\n", rank, host, file,
               line, what.c_str());
  std::fflush(stderr);
  if (live) MPI_Abort(g_job_comm, 3);
  std::_Exit(3);
}

}  // namespace pentad
