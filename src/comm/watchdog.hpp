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
// (All)gather(v), Scatterv, Alltoall, Barrier, Send, Recv, Wait, Waitall,
// Probe, Mprobe (HDF5's shared filtered chunks) and Comm_dup of the program
// is armed, and the collective MPI-IO calls HDF5 makes (File_open, close,
// set_size, set_view, read/write_at_all, set_atomicity, sync): watchdog.cpp
// defines them over MPI's profiling interface (PMPI_X). host::idle_barrier
// arms itself. The blocking calls of that list before Comm_dup (HDF5's) run
// as their nonblocking forms completed by wait_yielding, as pentad's own
// collectives are: MPI's blocking calls spin, and with more ranks than cores
// a spinning rank holds a core its peers need (one 4-rank checkpoint of a
// 45 KiB model on 2 cores took 8 s; docs/running.md).

// Completes req: MPI_Test at full speed for 50 us (a message already on its
// way), then a sched_yield between tests, so that a waiting rank gives its
// core to a rank that has work. MPI's error code.
int wait_yielding(MPI_Request* req, MPI_Status* status);
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

// Names the group of the unnamed communicators used inside its scope:
// libraries (HDF5's MPI-IO driver) duplicate the communicator they are given,
// and MPI does not copy a name to a duplicate, so a stuck call there would be
// reported in group '?'. The checkpoint code opens one around each parallel
// file, naming its own communicator and the file. Scopes nest (the innermost
// names). Call from the thread that calls MPI.
class WatchGroupScope {
 public:
  explicit WatchGroupScope(std::string group);
  ~WatchGroupScope();
  const std::string& group() const { return group_; }
  WatchGroupScope(const WatchGroupScope&) = delete;
  WatchGroupScope& operator=(const WatchGroupScope&) = delete;

 private:
  std::string group_;
  const WatchGroupScope* outer_;
};

// The MPI name of comm, or "unnamed communicator".
std::string comm_name(MPI_Comm comm);

}  // namespace pentad
