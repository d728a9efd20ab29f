// The local fatal path (see error.hpp); the collective one is agree_or_throw
// (comm/host.hpp).
#include "core/error.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace pentad {

namespace {
MPI_Comm g_job_comm = MPI_COMM_NULL;  // set by main: the communicator MPI_Abort ends

// The rank in the job comm, or -1 when there is none (not registered, MPI not
// running).
int job_rank(int* size) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || g_job_comm == MPI_COMM_NULL) return -1;
  int rank = -1;
  MPI_Comm_rank(g_job_comm, &rank);
  if (size) MPI_Comm_size(g_job_comm, size);
  return rank;
}
}  // namespace

void set_job_comm(MPI_Comm comm) { g_job_comm = comm; }

// A job of one process does not call MPI_Abort: MPICH's MPI_Abort on a
// communicator of size 1 calls exit(), which runs every atexit handler, and
// HDF5's (H5_term_library) then closes the files still open, flushing an
// MPI-IO file through an MPI that is half torn down: a segfault in
// H5F__close_cb, rc 139, instead of this message and rc 3. _Exit runs no
// handlers; there is no other rank to bring down.
void fatal_at(const char* file, int line, const std::string& what) {
  int size = 0;
  const int rank = job_rank(&size);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  std::fflush(stdout);  // what the rank printed before comes first
  std::fprintf(stderr, "pentad: fatal error on rank %d (host %s) at %s:%d: %s\n", rank, host, file,
               line, what.c_str());
  std::fflush(stderr);
  // MPI_Abort makes the launcher kill every rank at once, this one included;
  // hydra then drops what it has not yet forwarded from this rank's stderr
  // pipe, the message above among it (seen about 1 run in 3 on 2 ranks).
  // A quarter second lets the message reach the launcher first.
  // MPI_Abort asks the launcher to end the job; on a node cut off from it
  // (its link down) that request never completes and MPI_Abort blocks
  // forever, so a timer ends this rank after 10 s whatever MPI does.
  if (rank >= 0 && size > 1) {
    exit_if_still_running_after(10, 3, "rank " + std::to_string(rank) +
                                           ": MPI_Abort did not end the job within 10 s (launcher unreachable?); exiting");
    ::usleep(250000);
    MPI_Abort(g_job_comm, 3);
  }
  std::_Exit(3);
}

void exit_if_still_running_after(double seconds, int code, const std::string& message) {
  std::thread([seconds, code, message] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    std::fprintf(stderr, "pentad: %s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }).detach();
}

void warn_once_per_job(const std::string& what) {
  if (job_rank(nullptr) > 0) return;
  std::printf("warning: %s\n", what.c_str());
  std::fflush(stdout);
}

}  // namespace pentad
