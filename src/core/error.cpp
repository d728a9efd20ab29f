// The local fatal path and the collective agreement helper (see error.hpp).
#include "core/error.hpp"

#include <unistd.h>

#include <cstdio>
#include <vector>

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

void agree_or_throw(bool ok, const std::string& msg, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  // The lowest failing rank's message wins.
  const int mine = ok ? 1 << 30 : rank;
  int first_bad = 0;
  MPI_CHECK(MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, comm));
  if (first_bad == 1 << 30) return;
  int len = rank == first_bad ? static_cast<int>(msg.size()) : 0;
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, first_bad, comm));
  std::vector<char> buf(static_cast<size_t>(len));
  if (rank == first_bad) buf.assign(msg.begin(), msg.end());
  if (len > 0) MPI_CHECK(MPI_Bcast(buf.data(), len, MPI_CHAR, first_bad, comm));
  throw InputError(std::string(buf.begin(), buf.end()));
}

}  // namespace pentad
