// Collectives over MPI on host memory (the CPU backend's communication).
// Large buffers are split into calls of at most 2^30 elements (MPI counts are int).
#include <algorithm>
#include <climits>

#include "comm.hpp"
#include "error.hpp"

namespace pentad {
namespace {

constexpr size_t kMaxCount = size_t(1) << 30;

class MpiComm final : public Comm {
 public:
  using Comm::Comm;

  void allreduce_sum(float* buf, size_t n) override { allreduce(buf, n, MPI_SUM); }
  void allreduce_max(float* buf, size_t n) override { allreduce(buf, n, MPI_MAX); }

  void allgather(const float* send, float* recv, size_t n_per_rank) override {
    if (n_per_rank > size_t(INT_MAX)) PENTAD_FATAL("allgather: shard too large for MPI");
    MPI_CHECK(MPI_Allgather(send, int(n_per_rank), MPI_FLOAT, recv, int(n_per_rank), MPI_FLOAT, comm_));
    bytes_sent_ += double(size_ - 1) * double(n_per_rank) * sizeof(float);
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t n_per_rank) override {
    if (n_per_rank > size_t(INT_MAX)) PENTAD_FATAL("reduce_scatter: shard too large for MPI");
    MPI_CHECK(MPI_Reduce_scatter_block(send, recv, int(n_per_rank), MPI_FLOAT, MPI_SUM, comm_));
    bytes_sent_ += double(size_ - 1) * double(n_per_rank) * sizeof(float);
  }

  void broadcast(float* buf, size_t n, int root) override {
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_CHECK(MPI_Bcast(buf + off, c, MPI_FLOAT, root, comm_));
    }
    if (rank_ == root) bytes_sent_ += double(n) * sizeof(float);
  }

  void send(const float* buf, size_t n, int peer, int tag) override {
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_CHECK(MPI_Send(buf + off, c, MPI_FLOAT, peer, tag, comm_));
    }
    bytes_sent_ += double(n) * sizeof(float);
  }

  void recv(float* buf, size_t n, int peer, int tag) override {
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_CHECK(MPI_Recv(buf + off, c, MPI_FLOAT, peer, tag, comm_, MPI_STATUS_IGNORE));
    }
  }

 private:
  void allreduce(float* buf, size_t n, MPI_Op op) {
    if (size_ == 1) return;
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, op, comm_));
    }
    bytes_sent_ += 2.0 * double(size_ - 1) / size_ * double(n) * sizeof(float);
  }
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, std::string name) {
  return std::make_unique<MpiComm>(comm, std::move(name));
}

}  // namespace pentad
