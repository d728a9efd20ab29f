// Host-staged MPI collectives on device buffers (parallel.comm = mpi with the
// cuda backend): each call copies its device input to host memory, runs the
// CPU build's MPI collective (cpu/comm_mpi.cpp) there and copies the result
// back. Slow, but any number of ranks can share one GPU, which lets the
// multi-rank tests run on a single device. Non-blocking calls stage at
// launch and copy back in wait().
#include <numeric>
#include <vector>

#include "cpu.hpp"
#include "comm/comm.hpp"
#include "cuda.hpp"
#include "cuda_backend.hpp"

namespace pentad {
namespace {

class StagedMpiComm final : public Comm {
 public:
  StagedMpiComm(MPI_Comm comm, std::string name, Backend& be)
      : Comm(comm, name), be_(be), host_(make_mpi_comm(comm, name)) {}

  // Host-staged: whatever the host MPI comm does (everything).
  bool supports(CommOp op) const override { return host_->supports(op); }

  void allreduce_sum(float* buf, size_t n) override {
    track([&] { in_place(buf, n, [&](float* h) { host_->allreduce_sum(h, n); }); });
  }
  void allreduce_max(float* buf, size_t n) override {
    track([&] { in_place(buf, n, [&](float* h) { host_->allreduce_max(h, n); }); });
  }
  void allgather(const float* send, float* recv, size_t n_per_rank) override {
    track([&] {
      std::vector<float> s(n_per_rank), r(n_per_rank * size_t(size_));
      be_.to_host(s.data(), send, s.size() * sizeof(float));
      host_->allgather(s.data(), r.data(), n_per_rank);
      be_.from_host(recv, r.data(), r.size() * sizeof(float));
    });
  }
  void reduce_scatter_sum(const float* send, float* recv, size_t n_per_rank) override {
    track([&] {
      std::vector<float> s(n_per_rank * size_t(size_)), r(n_per_rank);
      be_.to_host(s.data(), send, s.size() * sizeof(float));
      host_->reduce_scatter_sum(s.data(), r.data(), n_per_rank);
      be_.from_host(recv, r.data(), r.size() * sizeof(float));
    });
  }
  void broadcast(float* buf, size_t n, int root) override {
    track([&] { in_place(buf, n, [&](float* h) { host_->broadcast(h, n, root); }); });
  }
  void send(const float* buf, size_t n, int peer, int tag) override {
    track([&] {
      std::vector<float> h(n);
      be_.to_host(h.data(), buf, n * sizeof(float));
      host_->send(h.data(), n, peer, tag);
    });
  }
  void recv(float* buf, size_t n, int peer, int tag) override {
    track([&] {
      std::vector<float> h(n);
      host_->recv(h.data(), n, peer, tag);
      be_.from_host(buf, h.data(), n * sizeof(float));
    });
  }

  Request iallreduce_sum(float* buf, size_t n) override {
    Pending p;
    p.host.resize(n);
    be_.to_host(p.host.data(), buf, n * sizeof(float));
    p.dev = buf;
    Request r = 0;
    track([&] { r = push(std::move(p), [&](Pending& q) { return host_->iallreduce_sum(q.host.data(), n); }); });
    return r;
  }

  Request ireduce_scatter_sum(const float* send, float* recv, const std::vector<int>& counts) override {
    const size_t total = size_t(std::accumulate(counts.begin(), counts.end(), 0L));
    Pending p;
    p.in.resize(total);
    be_.to_host(p.in.data(), send, total * sizeof(float));
    p.host.resize(size_t(counts[size_t(rank_)]));
    p.dev = recv;
    Request r = 0;
    track([&] {
      r = push(std::move(p), [&](Pending& q) { return host_->ireduce_scatter_sum(q.in.data(), q.host.data(), counts); });
    });
    return r;
  }

  Request iallgatherv(const float* send, float* recv, const std::vector<int>& counts) override {
    const size_t total = size_t(std::accumulate(counts.begin(), counts.end(), 0L));
    size_t mine = 0;
    for (int q = 0; q < rank_; ++q) mine += size_t(counts[size_t(q)]);
    Pending p;
    p.host.resize(total);
    const size_t n_mine = size_t(counts[size_t(rank_)]);
    be_.to_host(p.host.data() + mine, send ? send : recv + mine, n_mine * sizeof(float));
    p.dev = recv;
    Request r = 0;
    track([&] {
      r = push(std::move(p), [&](Pending& q) { return host_->iallgatherv(nullptr, q.host.data(), counts); });
    });
    return r;
  }

  void alltoallv(const float* send, const std::vector<int>& send_counts, float* recv,
                 const std::vector<int>& recv_counts) override {
    track([&] {
      const size_t ns = size_t(std::accumulate(send_counts.begin(), send_counts.end(), 0L));
      const size_t nr = size_t(std::accumulate(recv_counts.begin(), recv_counts.end(), 0L));
      std::vector<float> s(ns), r(nr);
      if (ns) be_.to_host(s.data(), send, ns * sizeof(float));
      host_->alltoallv(s.data(), send_counts, r.data(), recv_counts);
      if (nr) be_.from_host(recv, r.data(), nr * sizeof(float));
    });
  }

  // Point-to-point (pipeline stages, the cp ring): a send stages its buffer
  // now, a receive lands on the host and is copied to the device in wait().
  Request isend(const float* buf, size_t n, int peer, int tag) override {
    Pending p;
    p.host.resize(n);
    be_.to_host(p.host.data(), buf, n * sizeof(float));
    Request r = 0;
    track([&] { r = push(std::move(p), [&](Pending& q) { return host_->isend(q.host.data(), n, peer, tag); }); });
    return r;
  }

  Request irecv(float* buf, size_t n, int peer, int tag) override {
    Pending p;
    p.host.resize(n);
    p.dev = buf;
    Request r = 0;
    track([&] { r = push(std::move(p), [&](Pending& q) { return host_->irecv(q.host.data(), n, peer, tag); }); });
    return r;
  }

  void wait(Request r) override {
    track([&] {
      Pending& p = pending_[size_t(r)];
      host_->wait(p.inner);
      if (p.dev) be_.from_host(p.dev, p.host.data(), p.host.size() * sizeof(float));
      p = Pending{};
      free_.push_back(r);
    });
  }
  bool test(Request r) override { return host_->test(pending_[size_t(r)].inner); }
  void progress() override { host_->progress(); }

 private:
  struct Pending {
    std::vector<float> in, host;  // staged input (if separate) and the result
    float* dev = nullptr;         // where the result goes on the device (null: a send)
    Request inner = -1;
  };

  // Runs f and adds the host communicator's counters to this one's.
  template <class F>
  void track(F f) {
    const double b0 = host_->bytes_sent(), s0 = host_->seconds_blocked();
    f();
    bytes_sent_ += host_->bytes_sent() - b0;
    seconds_ += host_->seconds_blocked() - s0;
  }

  template <class F>
  void in_place(float* buf, size_t n, F op) {
    std::vector<float> h(n);
    be_.to_host(h.data(), buf, n * sizeof(float));
    op(h.data());
    be_.from_host(buf, h.data(), n * sizeof(float));
  }

  // The host buffers must not move while MPI uses them: a Pending keeps its
  // vectors, and the slot vector holds them by index (moving a std::vector
  // keeps its heap storage).
  template <class Start>
  Request push(Pending&& p, Start start) {
    Request r;
    if (free_.empty()) {
      pending_.push_back(std::move(p));
      r = Request(pending_.size() - 1);
    } else {
      r = free_.back();
      free_.pop_back();
      pending_[size_t(r)] = std::move(p);
    }
    pending_[size_t(r)].inner = start(pending_[size_t(r)]);
    return r;
  }

  Backend& be_;
  std::unique_ptr<Comm> host_;
  std::vector<Pending> pending_;
  std::vector<Request> free_;
};

}  // namespace

std::unique_ptr<Comm> make_staged_mpi_comm(MPI_Comm comm, std::string name, Backend& be) {
  if (!dynamic_cast<CudaBackend*>(&be)) PENTAD_FATAL("staged MPI communicator '" + name + "' needs the cuda backend");
  return std::make_unique<StagedMpiComm>(comm, std::move(name), be);
}

}  // namespace pentad
