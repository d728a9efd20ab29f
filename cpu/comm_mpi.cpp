// Collectives over MPI on host memory (the CPU backend's communication).
// Large buffers are split into calls of at most 2^30 elements (MPI counts are int).
#include <algorithm>
#include <climits>
#include <numeric>
#include <vector>

#include "cpu.hpp"
#include "comm/capability.hpp"
#include "comm/comm.hpp"
#include "comm/host.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"

namespace pentad {
namespace {

constexpr size_t kMaxCount = size_t(1) << 30;

// Adds the wall time of a scope to a counter (time blocked in MPI) and arms
// the watchdog for it (a peer that never comes ends the job, named).
struct Blocked {
  Blocked(double& acc, const std::string& group, const char* op) : acc_(acc), t0_(MPI_Wtime()), watch_(group, op) {}
  ~Blocked() { acc_ += MPI_Wtime() - t0_; }
  double& acc_;
  double t0_;
  WatchScope watch_;
};

class MpiComm final : public Comm {
 public:
  using Comm::Comm;

  bool supports(CommOp op) const override { return comm_supports(CommImpl::mpi, op); }
  void allreduce_sum(float* buf, size_t n) override { allreduce(buf, n, MPI_SUM); }
  void allreduce_max(float* buf, size_t n) override { allreduce(buf, n, MPI_MAX); }

  void allgather(const float* send, float* recv, size_t n_per_rank) override {
    const Blocked timer(seconds_, name_, "allgather");
    if (n_per_rank > size_t(INT_MAX)) PENTAD_FATAL("allgather: shard too large for MPI");
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallgather(send, int(n_per_rank), MPI_FLOAT, recv, int(n_per_rank), MPI_FLOAT, comm_, &req));
    complete(req);
    bytes_sent_ += double(size_ - 1) * double(n_per_rank) * sizeof(float);
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t n_per_rank) override {
    const Blocked timer(seconds_, name_, "reduce_scatter_sum");
    if (n_per_rank > size_t(INT_MAX)) PENTAD_FATAL("reduce_scatter: shard too large for MPI");
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ireduce_scatter_block(send, recv, int(n_per_rank), MPI_FLOAT, MPI_SUM, comm_, &req));
    complete(req);
    bytes_sent_ += double(size_ - 1) * double(n_per_rank) * sizeof(float);
  }

  void broadcast(float* buf, size_t n, int root) override {
    const Blocked timer(seconds_, name_, "broadcast");
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Ibcast(buf + off, c, MPI_FLOAT, root, comm_, &req));
      complete(req);
    }
    if (rank_ == root) bytes_sent_ += double(n) * sizeof(float);
  }

  void send(const float* buf, size_t n, int peer, int tag) override {
    const Blocked timer(seconds_, name_, "send");
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Isend(buf + off, c, MPI_FLOAT, peer, tag, comm_, &req));
      complete(req);
    }
    bytes_sent_ += double(n) * sizeof(float);
  }

  void recv(float* buf, size_t n, int peer, int tag) override {
    const Blocked timer(seconds_, name_, "recv");
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Irecv(buf + off, c, MPI_FLOAT, peer, tag, comm_, &req));
      complete(req);
    }
  }

  void alltoallv(const float* send, const std::vector<int>& send_counts, float* recv,
                 const std::vector<int>& recv_counts) override {
    const Blocked timer(seconds_, name_, "alltoallv");
    std::vector<int> sd(static_cast<size_t>(size_)), rd(static_cast<size_t>(size_));
    std::exclusive_scan(send_counts.begin(), send_counts.end(), sd.begin(), 0);
    std::exclusive_scan(recv_counts.begin(), recv_counts.end(), rd.begin(), 0);
    // MPI wants valid addresses even for empty pieces.
    float dummy = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ialltoallv(send ? send : &dummy, send_counts.data(), sd.data(), MPI_FLOAT,
                             recv ? recv : &dummy, recv_counts.data(), rd.data(), MPI_FLOAT, comm_, &req));
    complete(req);
    for (int q = 0; q < size_; ++q)
      if (q != rank_) bytes_sent_ += double(send_counts[size_t(q)]) * sizeof(float);
  }

  Request iallreduce_sum(float* buf, size_t n) override {
    if (n > size_t(INT_MAX)) PENTAD_FATAL("iallreduce: buffer too large for one MPI call");
    const Request r = slot("wait for iallreduce_sum");
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, int(n), MPI_FLOAT, MPI_SUM, comm_, &reqs_[size_t(r)]));
    bytes_sent_ += 2.0 * double(size_ - 1) / size_ * double(n) * sizeof(float);
    return r;
  }

  Request ireduce_scatter_sum(const float* send, float* recv, const std::vector<int>& counts) override {
    const Request r = slot("wait for ireduce_scatter_sum");
    MPI_CHECK(MPI_Ireduce_scatter(send, recv, counts.data(), MPI_FLOAT, MPI_SUM, comm_, &reqs_[size_t(r)]));
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    bytes_sent_ += double(size_ - 1) / size_ * total * sizeof(float);
    return r;
  }

  Request iallgatherv(const float* send, float* recv, const std::vector<int>& counts) override {
    const Request r = slot("wait for iallgatherv");
    counts_[size_t(r)] = counts;
    displs_[size_t(r)].resize(counts.size());
    std::exclusive_scan(counts.begin(), counts.end(), displs_[size_t(r)].begin(), 0);
    // send == nullptr: in place (this rank's piece already sits in recv).
    MPI_CHECK(MPI_Iallgatherv(send ? send : MPI_IN_PLACE, counts[size_t(rank_)], MPI_FLOAT, recv, counts_[size_t(r)].data(),
                              displs_[size_t(r)].data(), MPI_FLOAT, comm_, &reqs_[size_t(r)]));
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    bytes_sent_ += double(size_ - 1) / size_ * total * sizeof(float);
    return r;
  }

  Request isend(const float* buf, size_t n, int peer, int tag) override {
    if (n > size_t(INT_MAX)) PENTAD_FATAL("isend: buffer too large for one MPI call");
    const Request r = slot("wait for isend");
    MPI_CHECK(MPI_Isend(buf, int(n), MPI_FLOAT, peer, tag, comm_, &reqs_[size_t(r)]));
    bytes_sent_ += double(n) * sizeof(float);
    return r;
  }

  Request irecv(float* buf, size_t n, int peer, int tag) override {
    if (n > size_t(INT_MAX)) PENTAD_FATAL("irecv: buffer too large for one MPI call");
    const Request r = slot("wait for irecv");
    MPI_CHECK(MPI_Irecv(buf, int(n), MPI_FLOAT, peer, tag, comm_, &reqs_[size_t(r)]));
    return r;
  }

  void wait(Request r) override {
    const Blocked timer(seconds_, name_, ops_[size_t(r)]);
    complete(reqs_[size_t(r)]);
    free_.push_back(r);
  }

  bool test(Request r) override {
    int done = 0;
    MPI_CHECK(MPI_Test(&reqs_[size_t(r)], &done, MPI_STATUS_IGNORE));
    return done != 0;  // the slot is released by wait()
  }

  void progress() override {
    for (MPI_Request& q : reqs_) {
      if (q == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_CHECK(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
    }
  }

 private:
  // Every blocking operation waits here: yields the core between polls (see
  // host::complete); the caller's Blocked scope names the operation.
  void complete(MPI_Request& req) { host::complete(req, comm_, "MPI request"); }

  // Request slots; the count/displacement arrays must outlive the operation.
  // ops_ names the call behind each request, for the watchdog's message.
  std::vector<MPI_Request> reqs_;
  std::vector<std::vector<int>> counts_, displs_;
  std::vector<const char*> ops_;
  std::vector<Request> free_;
  Request slot(const char* op) {
    Request r;
    if (free_.empty()) {
      reqs_.push_back(MPI_REQUEST_NULL);
      counts_.emplace_back();
      displs_.emplace_back();
      ops_.push_back(nullptr);
      r = Request(reqs_.size() - 1);
    } else {
      r = free_.back();
      free_.pop_back();
    }
    ops_[size_t(r)] = op;
    return r;
  }

  void allreduce(float* buf, size_t n, MPI_Op op) {
    const Blocked timer(seconds_, name_, "allreduce");
    if (size_ == 1) return;
    for (size_t off = 0; off < n; off += kMaxCount) {
      const int c = int(std::min(kMaxCount, n - off));
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, op, comm_, &req));
      complete(req);
    }
    bytes_sent_ += 2.0 * double(size_ - 1) / size_ * double(n) * sizeof(float);
  }
};

}  // namespace

std::unique_ptr<Comm> make_mpi_comm(MPI_Comm comm, std::string name) {
  return std::make_unique<MpiComm>(comm, std::move(name));
}

}  // namespace pentad
