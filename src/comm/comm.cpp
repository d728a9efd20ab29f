// Backend-independent part of Comm: group bookkeeping and host-scalar reductions.
#include "comm/comm.hpp"

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

void Comm::alltoallv(const float*, const std::vector<int>&, float*, const std::vector<int>&) {
  PENTAD_FATAL("comm '" + name_ + "' has no all-to-all (needed by expert parallelism)");
}

void Comm::allreduce_sum_host(double* buf, int n) {
  if (size_ > 1) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, comm_));
}

void Comm::allreduce_max_host(double* buf, int n) {
  if (size_ > 1) MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_MAX, comm_));
}

void Comm::alltoall_host(const int* send, int* recv, int n_per_rank) {
  MPI_CHECK(MPI_Alltoall(send, n_per_rank, MPI_INT, recv, n_per_rank, MPI_INT, comm_));
  bytes_sent_ += double(size_ - 1) * n_per_rank * sizeof(int);
}

void Comm::allgather_host(const int* send, int* recv, int n_per_rank) {
  MPI_CHECK(MPI_Allgather(send, n_per_rank, MPI_INT, recv, n_per_rank, MPI_INT, comm_));
  bytes_sent_ += double(size_ - 1) * n_per_rank * sizeof(int);
}

}  // namespace pentad
