// The MPI watchdog: one thread per rank that ends the job when a blocking
// MPI call (a collective, a point-to-point wait) has not returned within
// parallel.comm_timeout_s. MPI blocks forever on a frozen or dead peer; the
// NCCL comm polls its own events instead and does not use this.
#pragma once

#include <mpi.h>

#include <string>

namespace pentad {

// Starts the watchdog thread (once per process; later calls only change the
// timeout). Without it, WatchScope records nothing costly and never fires.
void start_comm_watchdog(double timeout_s);
// The training step the rank is in (0: setup), named in the message.
void set_watchdog_step(int step);

// Besides the scopes the MPI Comm opens, every blocking MPI_Allreduce, Bcast,
// (All)gather(v), Alltoall, Barrier, Send and Recv of the program is armed
// (watchdog.cpp defines them over MPI's profiling interface, PMPI_X).
// Arms the watchdog for the scope of one blocking call: if the scope is still
// open timeout_s later, the watchdog prints the group, the operation, the
// step and the rank, then aborts the job (MPI_Abort; mpiexec kills every
// rank, a stopped one too). `group` must outlive the scope. Scopes nest:
// only the outermost arms (a Comm call names itself, not the MPI_X inside).
// Call from the thread that calls MPI.
class WatchScope {
 public:
  WatchScope(const std::string& group, const char* op);
  WatchScope(MPI_Comm comm, const char* op);  // the group: the communicator's MPI name
  ~WatchScope();
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;
};

}  // namespace pentad
