// Host-memory collectives over a raw MPI communicator: the small messages of
// the control path (flags, scalars, strings, token ids, metrics rows) that
// never touch a backend buffer. Every raw MPI call of src/ outside the Comm
// implementations goes through here, checked by MPI_CHECK; the one exception
// is core/error.cpp's abort path, which sits below this layer and must work
// when MPI itself has failed. Each function is collective over `comm` unless
// it says otherwise (wtime, rank, size, send, recv are local).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pentad::host {

enum class Op { sum, min, max };

// The MPI datatype of T (float, double, char, int32, int64, uint64).
template <class T>
MPI_Datatype mpi_type();

double wtime();  // MPI_Wtime: seconds, local
int rank(MPI_Comm comm);
int size(MPI_Comm comm);
// This rank's index among the ranks of `comm` that share its node (its
// shared-memory domain), in `comm` rank order: picks the GPU, and the one
// rank per node that fsyncs. Collective over comm.
int node_rank(MPI_Comm comm);
// How many ranks of `comm` share this rank's node. Collective over comm.
int node_size(MPI_Comm comm);
// Completes `req` by polling MPI_Test and yielding the core between polls
// (wait_yielding, watchdog.hpp). Every blocking step of a collective or
// message in pentad's own code waits here, and the blocking calls libraries
// make (HDF5's) wait the same way through the watchdog's profiling layer:
// MPI's own waits poll without yielding, so on a node with more ranks than
// cores (a laptop, a login node, the test suite) a waiting rank would keep
// the core from the very peer it waits for, and a transfer that needs both
// sides to take turns would advance once per scheduler time slice. On a core
// of its own the yield returns at once. Arms the watchdog as `op` in comm's
// group (an enclosing scope names itself instead). Local: completes this
// rank's part only.
void complete(MPI_Request& req, MPI_Comm comm, const char* op);
void barrier(MPI_Comm comm);
// A barrier that sleeps instead of spinning, for ranks waiting while one rank
// does serial work (fsync, rename): on a node with more ranks than cores a
// spinning waiter takes the CPU from the rank doing the work.
void idle_barrier(MPI_Comm comm);

template <class T>
void allreduce(MPI_Comm comm, T* buf, int n, Op op);  // in place
template <class T>
T allreduce(MPI_Comm comm, T value, Op op) {
  allreduce(comm, &value, 1, op);
  return value;
}
template <class T>
void bcast(MPI_Comm comm, T* buf, int n, int root);
std::string bcast_string(MPI_Comm comm, const std::string& s, int root);
// recv (size n * ranks) gets every rank's n elements in rank order.
template <class T>
void allgather(MPI_Comm comm, const T* send, int n, T* recv);
// As allgather, to `root` only (recv is ignored elsewhere).
template <class T>
void gather(MPI_Comm comm, const T* send, int n, T* recv, int root);
// Every rank's string, in rank order (on every rank / on root only).
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root);
// Point to point (not collective): blocking send of n elements to `dest`,
// receive of n elements from `src`, with a tag naming the message.
template <class T>
void send(MPI_Comm comm, const T* buf, int n, int dest, int tag);
template <class T>
void recv(MPI_Comm comm, T* buf, int n, int src, int tag);

}  // namespace pentad::host

namespace pentad {

// Collective agreement over a communicator's ranks: if `ok` is false on any
// rank, every rank throws InputError carrying the message of the lowest
// failing rank. Collective over `comm`.
void agree_or_throw(bool ok, const std::string& msg, MPI_Comm comm);

}  // namespace pentad
