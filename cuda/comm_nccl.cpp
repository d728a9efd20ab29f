// Collectives on NCCL, one communicator per group (axis), created from the
// group's MPI communicator: rank 0 makes the unique id, MPI_Bcast, then
// ncclCommInitRank (as nccl-tests do). Operations run on the group's own
// communication stream: it first waits (event) for the compute stream's work
// so far; completion is an event the compute stream waits on, so compute
// launched after a non-blocking call overlaps the transfer. Waiting on the
// host polls the event and ncclCommGetAsyncError: an NCCL error, or a
// collective unfinished after parallel.comm_timeout_s, aborts the
// communicator and ends the job with a message (no silent hang).
// Unequal pieces (reduce-scatter-v, all-gather-v) are grouped ncclReduce /
// ncclBroadcast calls, one per root. Point-to-point comes grouped: the cp
// ring's send and receive as one group (isendrecv), the all-to-all as one
// group of a send and a receive per peer, the pipeline's messages as the
// groups of its plan (start_group, parallel/pp/p2p_plan.hpp). Lone
// non-blocking sends and receives are not offered: two of them on one
// stream would wait on each other. Tags are not used: NCCL keeps messages
// between two ranks in order.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "cuda.hpp"
#include "comm/capability.hpp"
#include "comm/comm.hpp"
#include "cuda_backend.hpp"

#define NCCL_CHECK(call)                                                                  \
  do {                                                                                    \
    const ncclResult_t nccl_rc_ = (call);                                                 \
    if (nccl_rc_ != ncclSuccess && nccl_rc_ != ncclInProgress)                            \
      ::pentad::cuda_fail(__FILE__, __LINE__, #call, "NCCL",                              \
                          std::string(ncclGetErrorString(nccl_rc_)) + " (" +              \
                              ncclGetLastError(nullptr) + ")");                           \
  } while (0)

namespace pentad {
namespace {

using Clock = std::chrono::steady_clock;

class NcclComm final : public Comm {
 public:
  NcclComm(MPI_Comm comm, std::string name, CudaBackend& be, double timeout_s)
      : Comm(comm, std::move(name)), be_(be), timeout_s_(timeout_s) {
    ncclUniqueId id{};
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_));
    CUDA_CHECK(cudaSetDevice(be_.device()));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    const ncclResult_t rc = ncclCommInitRank(&nccl_, size_, id, rank_);
    if (rc != ncclSuccess)
      cuda_fail(__FILE__, __LINE__, "ncclCommInitRank", "NCCL",
                std::string(ncclGetErrorString(rc)) + " (" + ncclGetLastError(nullptr) +
                    ") creating the communicator of group '" + name_ +
                    "'; NCCL needs one GPU per rank: to share GPUs set parallel.comm = mpi");
  }

  ~NcclComm() override {
    cudaStreamSynchronize(stream_);
    if (nccl_) ncclCommDestroy(nccl_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  // Collectives, the paired exchange and the all-to-all; no lone isend /
  // irecv (the host-staged MPI comm has them).
  bool supports(CommOp op) const override { return comm_supports(CommImpl::nccl, op); }

  void allreduce_sum(float* buf, size_t n) override { blocking([&] { all_reduce(buf, n, ncclSum); }, 2.0 * (size_ - 1) / size_ * n); }
  void allreduce_max(float* buf, size_t n) override { blocking([&] { all_reduce(buf, n, ncclMax); }, 2.0 * (size_ - 1) / size_ * n); }

  void allgather(const float* send, float* recv, size_t n_per_rank) override {
    blocking([&] { NCCL_CHECK(ncclAllGather(send, recv, n_per_rank, ncclFloat, nccl_, stream_)); },
             double(size_ - 1) * n_per_rank);
  }

  void reduce_scatter_sum(const float* send, float* recv, size_t n_per_rank) override {
    blocking([&] { NCCL_CHECK(ncclReduceScatter(send, recv, n_per_rank, ncclFloat, ncclSum, nccl_, stream_)); },
             double(size_ - 1) * n_per_rank);
  }

  void broadcast(float* buf, size_t n, int root) override {
    blocking([&] { NCCL_CHECK(ncclBroadcast(buf, buf, n, ncclFloat, root, nccl_, stream_)); },
             rank_ == root ? double(n) : 0.0);
  }

  void send(const float* buf, size_t n, int peer, int tag) override {
    blocking([&] { NCCL_CHECK(ncclSend(buf, n, ncclFloat, peer, nccl_, stream_)); }, double(n));
  }

  void recv(float* buf, size_t n, int peer, int tag) override {
    blocking([&] { NCCL_CHECK(ncclRecv(buf, n, ncclFloat, peer, nccl_, stream_)); }, 0.0);
  }

  // Both as one group on the communication stream; one request, completed
  // by wait_exchange (base) through wait().
  Exchange isendrecv(const float* send, float* recv, size_t n, int to, int from, int tag) override {
    Exchange x;
    x.send = start([&] {
      NCCL_CHECK(ncclGroupStart());
      NCCL_CHECK(ncclSend(send, n, ncclFloat, to, nccl_, stream_));
      NCCL_CHECK(ncclRecv(recv, n, ncclFloat, from, nccl_, stream_));
      NCCL_CHECK(ncclGroupEnd());
    }, double(n));
    return x;
  }

  // The pipeline's grouped messages: one NCCL group, one request. NCCL
  // pairs the messages between two ranks in the order they are posted. A
  // message to this rank itself (zbv's turn of the V) is a device copy on
  // the same stream, before the group, as alltoallv's own piece: its two
  // halves must be in the group, in the same order (the plan puts them so).
  Group start_group(const std::vector<P2pOp>& ops) override {
    if (ops.empty()) return {};
    std::vector<const P2pOp*> self_sends, self_recvs;
    double sent = 0;
    for (const P2pOp& o : ops) {
      if (o.peer == rank_) (o.send ? self_sends : self_recvs).push_back(&o);
      else if (o.send) sent += double(o.n);
    }
    if (self_sends.size() != self_recvs.size())
      PENTAD_FATAL("group in comm '" + name_ + "': " + std::to_string(self_sends.size()) + " messages to this rank itself and " +
                   std::to_string(self_recvs.size()) + " receives of them (both halves belong in one group)");
    return {start([&] {
      for (size_t k = 0; k < self_sends.size(); ++k)
        CUDA_CHECK(cudaMemcpyAsync(self_recvs[k]->recv, self_sends[k]->send, self_sends[k]->n * sizeof(float),
                                   cudaMemcpyDeviceToDevice, stream_));
      NCCL_CHECK(ncclGroupStart());
      for (const P2pOp& o : ops) {
        if (o.peer == rank_) continue;
        if (o.send)
          NCCL_CHECK(ncclSend(o.send, o.n, ncclFloat, o.peer, nccl_, stream_));
        else
          NCCL_CHECK(ncclRecv(o.recv, o.n, ncclFloat, o.peer, nccl_, stream_));
      }
      NCCL_CHECK(ncclGroupEnd());
    }, sent)};
  }

  // One group of a send and a receive per other rank (NCCL's all-to-all
  // pattern); this rank's own piece is a device copy on the same stream,
  // before the group.
  void alltoallv(const float* send, const std::vector<int>& send_counts, float* recv,
                 const std::vector<int>& recv_counts) override {
    if (send_counts[size_t(rank_)] != recv_counts[size_t(rank_)])
      PENTAD_FATAL("alltoallv in group '" + name_ + "': this rank's piece for itself has " +
                   std::to_string(send_counts[size_t(rank_)]) + " elements to send and " +
                   std::to_string(recv_counts[size_t(rank_)]) + " to receive");
    double sent = 0;
    for (int q = 0; q < size_; ++q)
      if (q != rank_) sent += send_counts[size_t(q)];
    blocking([&] {
      size_t so = 0, ro = 0;
      for (int q = 0; q < rank_; ++q) {
        so += size_t(send_counts[size_t(q)]);
        ro += size_t(recv_counts[size_t(q)]);
      }
      const size_t mine = size_t(send_counts[size_t(rank_)]);
      if (mine > 0)
        CUDA_CHECK(cudaMemcpyAsync(recv + ro, send + so, mine * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
      so = ro = 0;
      NCCL_CHECK(ncclGroupStart());
      for (int q = 0; q < size_; ++q) {
        const size_t ns = size_t(send_counts[size_t(q)]), nr = size_t(recv_counts[size_t(q)]);
        if (q != rank_) {
          if (ns > 0) NCCL_CHECK(ncclSend(send + so, ns, ncclFloat, q, nccl_, stream_));
          if (nr > 0) NCCL_CHECK(ncclRecv(recv + ro, nr, ncclFloat, q, nccl_, stream_));
        }
        so += ns;
        ro += nr;
      }
      NCCL_CHECK(ncclGroupEnd());
    }, sent);
  }

  Request iallreduce_sum(float* buf, size_t n) override {
    return start([&] { all_reduce(buf, n, ncclSum); }, 2.0 * (size_ - 1) / size_ * n);
  }

  Request ireduce_scatter_sum(const float* send, float* recv, const std::vector<int>& counts) override {
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    return start([&] {
      if (std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts[0]; })) {
        NCCL_CHECK(ncclReduceScatter(send, recv, size_t(counts[0]), ncclFloat, ncclSum, nccl_, stream_));
        return;
      }
      NCCL_CHECK(ncclGroupStart());
      size_t off = 0;
      for (int q = 0; q < size_; ++q) {
        if (counts[size_t(q)] > 0)
          NCCL_CHECK(ncclReduce(send + off, recv, size_t(counts[size_t(q)]), ncclFloat, ncclSum, q, nccl_, stream_));
        off += size_t(counts[size_t(q)]);
      }
      NCCL_CHECK(ncclGroupEnd());
    }, double(size_ - 1) / size_ * total);
  }

  Request iallgatherv(const float* send, float* recv, const std::vector<int>& counts) override {
    const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
    return start([&] {
      std::vector<size_t> displ(counts.size());
      size_t off = 0;
      for (size_t q = 0; q < counts.size(); ++q) {
        displ[q] = off;
        off += size_t(counts[q]);
      }
      const float* mine = send ? send : recv + displ[size_t(rank_)];
      if (std::all_of(counts.begin(), counts.end(), [&](int c) { return c == counts[0]; })) {
        NCCL_CHECK(ncclAllGather(mine, recv, size_t(counts[0]), ncclFloat, nccl_, stream_));
        return;
      }
      NCCL_CHECK(ncclGroupStart());
      for (int q = 0; q < size_; ++q) {
        if (counts[size_t(q)] == 0) continue;
        const float* src = q == rank_ ? mine : recv + displ[size_t(q)];
        NCCL_CHECK(ncclBroadcast(src, recv + displ[size_t(q)], size_t(counts[size_t(q)]), ncclFloat, q, nccl_, stream_));
      }
      NCCL_CHECK(ncclGroupEnd());
    }, double(size_ - 1) / size_ * total);
  }

  void wait(Request r) override {
    const auto t0 = Clock::now();
    wait_event(events_[size_t(r)]);
    CUDA_CHECK(cudaStreamWaitEvent(be_.stream(), events_[size_t(r)], 0));
    busy_[size_t(r)] = false;
    seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }

  bool test(Request r) override {
    const cudaError_t q = cudaEventQuery(events_[size_t(r)]);
    if (q == cudaErrorNotReady) return false;
    CUDA_CHECK(q);
    return true;
  }

  void progress() override { check_async(); }

 private:
  void all_reduce(float* buf, size_t n, ncclRedOp_t op) {
    if (size_ == 1) return;
    NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, op, nccl_, stream_));
  }

  // The communication stream waits for the compute stream's work so far.
  void follow_compute() {
    CUDA_CHECK(cudaEventRecord(ready_, be_.stream()));
    CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  }

  template <class Launch>
  Request start(Launch launch, double elems_sent) {
    follow_compute();
    launch();
    const Request r = slot();
    CUDA_CHECK(cudaEventRecord(events_[size_t(r)], stream_));
    bytes_sent_ += elems_sent * sizeof(float);
    return r;
  }

  template <class Launch>
  void blocking(Launch launch, double elems_sent) {
    wait(start(launch, elems_sent));
  }

  Request slot() {
    for (size_t i = 0; i < busy_.size(); ++i)
      if (!busy_[i]) {
        busy_[i] = true;
        return Request(i);
      }
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
    busy_.push_back(true);
    return Request(events_.size() - 1);
  }

  void check_async() {
    ncclResult_t err = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(nccl_, &err));
    if (err != ncclSuccess && err != ncclInProgress) {
      ncclCommAbort(nccl_);
      nccl_ = nullptr;
      PENTAD_FATAL("NCCL asynchronous error in group '" + name_ + "': " + ncclGetErrorString(err));
    }
  }

  // Host wait with the watchdog.
  void wait_event(cudaEvent_t e) {
    const auto t0 = Clock::now();
    int spins = 0;
    for (;;) {
      const cudaError_t q = cudaEventQuery(e);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) CUDA_CHECK(q);
      check_async();
      const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
      if (waited > timeout_s_) {
        ncclCommAbort(nccl_);
        nccl_ = nullptr;
        PENTAD_FATAL("collective in group '" + name_ + "' did not finish within parallel.comm_timeout_s = " +
                     std::to_string(timeout_s_) + " s (a peer rank died or hangs); communicator aborted");
      }
      if (++spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  CudaBackend& be_;
  double timeout_s_;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::vector<bool> busy_;
};

CudaBackend& cuda_backend_of(Backend& be, const std::string& name) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  if (!cuda) PENTAD_FATAL("communicator '" + name + "': NCCL and staged MPI need the cuda backend");
  return *cuda;
}

}  // namespace

std::unique_ptr<Comm> make_nccl_comm(MPI_Comm comm, std::string name, Backend& be, double timeout_s) {
  CudaBackend& cuda = cuda_backend_of(be, name);
  return std::make_unique<NcclComm>(comm, std::move(name), cuda, timeout_s);
}

}  // namespace pentad
