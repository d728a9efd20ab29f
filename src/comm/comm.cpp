// Backend-independent part of Comm: group bookkeeping and host-scalar reductions.
#include "comm/comm.hpp"

#include "comm/host.hpp"
#include "core/error.hpp"

namespace pentad {

Comm::Comm(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
}

bool Comm::supports(CommOp) const { return false; }

// The guards behind supports(): a caller that did not ask stops here.
Comm::Request Comm::isend(const float*, size_t, int, int) {
  PENTAD_FATAL("comm '" + name_ + "' has no non-blocking send (needed by pipeline and context parallelism)");
}

Comm::Request Comm::irecv(float*, size_t, int, int) {
  PENTAD_FATAL("comm '" + name_ + "' has no non-blocking receive (needed by pipeline and context parallelism)");
}

Comm::Exchange Comm::isendrecv(const float* send, float* recv, size_t n, int to, int from, int tag) {
  Exchange x;
  x.send = isend(send, n, to, tag);
  x.recv = irecv(recv, n, from, tag);
  return x;
}

void Comm::wait_exchange(const Exchange& x) {
  if (x.send >= 0) wait(x.send);
  if (x.recv >= 0) wait(x.recv);
}

Comm::Group Comm::start_group(const std::vector<P2pOp>& ops) {
  constexpr int kTag = 0;  // pairing by order, as NCCL pairs (no tags there)
  Group g;
  g.reserve(ops.size());
  for (const P2pOp& o : ops) g.push_back(o.send ? isend(o.send, o.n, o.peer, kTag) : irecv(o.recv, o.n, o.peer, kTag));
  return g;
}

void Comm::wait_group(const Group& g) {
  for (Request r : g) wait(r);
}

void Comm::alltoallv(const float*, const std::vector<int>&, float*, const std::vector<int>&) {
  PENTAD_FATAL("comm '" + name_ + "' has no all-to-all (needed by expert parallelism)");
}

void Comm::allreduce_sum_host(double* buf, int n) {
  if (size_ > 1) host::allreduce(comm_, buf, n, host::Op::sum);
}

void Comm::allreduce_max_host(double* buf, int n) {
  if (size_ > 1) host::allreduce(comm_, buf, n, host::Op::max);
}

void Comm::alltoall_host(const int* send, int* recv, int n_per_rank) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ialltoall(send, n_per_rank, MPI_INT, recv, n_per_rank, MPI_INT, comm_, &req));
  host::complete(req, comm_, "MPI_Ialltoall");
  bytes_sent_ += double(size_ - 1) * n_per_rank * sizeof(int);
}

void Comm::allgather_host(const int* send, int* recv, int n_per_rank) {
  host::allgather(comm_, send, n_per_rank, recv);
  bytes_sent_ += double(size_ - 1) * n_per_rank * sizeof(int);
}

}  // namespace pentad
