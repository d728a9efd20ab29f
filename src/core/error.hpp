// The two fatal paths (ARCHITECTURE.md section 9).
//  * InputError: every rank detects it the same way (bad deck, bad layout,
//    bad data file read by all ranks). main() prints it once from rank 0 and
//    every rank exits non-zero.
//  * fatal(): this rank alone failed (a library call, a file write). It prints
//    rank, host and file:line, then MPI_Abort brings the job down (a job of
//    one process just ends, without running exit handlers: see error.cpp).
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace pentad {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// main() registers the job-wide communicator that fatal() aborts.
void set_job_comm(MPI_Comm comm);

[[noreturn]] void fatal_at(const char* file, int line, const std::string& what);

// A timer for a call that may never return (MPI_Abort on a node the launcher
// cannot reach, MPI_Finalize in a known MPI hang): if this process is still
// running `seconds` from now, it prints "pentad: <message>" to stderr and
// exits with `code`, running no handlers. Arm it just before the call.
void exit_if_still_running_after(double seconds, int code, const std::string& message);

// A warning from code that holds no communicator (e.g. resolving a checkpoint
// path, which every rank may do): printed to stdout by rank 0 of the job comm
// only (by every process before main registers one), as "warning: <what>".
void warn_once_per_job(const std::string& what);

}  // namespace pentad

#define PENTAD_FATAL(msg) ::pentad::fatal_at(__FILE__, __LINE__, (msg))

#define MPI_CHECK(call)                                                        \
  do {                                                                         \
    int mpi_rc_ = (call);                                                      \
    if (mpi_rc_ != MPI_SUCCESS) {                                              \
      ::pentad::fatal_at(__FILE__, __LINE__,                                   \
                         std::string(#call) + " failed with code " +          \
                             std::to_string(mpi_rc_));                         \
    }                                                                          \
  } while (0)

#define HDF5_CHECK(call)                                                       \
  ([&]() {                                                                     \
    auto h5_rc_ = (call);                                                      \
    if (h5_rc_ < 0) ::pentad::fatal_at(__FILE__, __LINE__, std::string(#call) + " failed"); \
    return h5_rc_;                                                             \
  }())
